"""Live execution over a websocket: ``/ws/playground/executions/<id>/``.

The consumer joins the execution's hub (``runs.live.consumers.hub_for``: one channel-layer
subscription per process and execution, shared by its sockets) and reads the row only when a
committed change is announced (``playground.live``), so an idle socket costs no queries and a
worker in another process reaches it through the Redis layer. A slow safety read (every
``SAFETY_SECONDS``) covers a lost notification and heals an execution whose worker died.

It pushes only what is new: ``delta`` messages carry the offset they start at, so the page
appends exactly once and asks for a ``resync`` when it sees a gap. ``status`` reports pending ->
processing; ``done`` carries the final state and the rendered assistant message. Members of the
execution's workspace only (others: closed with 4404).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer
from django.template.loader import render_to_string

from playground.live import execution_key
from playground.models import Execution
from playground.presenters import message_context, state_with_context
from runs.live.consumers import hub_for
from runs.live.publisher import publisher
from runs.models import Membership
from runs.web.wire import wire_json

SAFETY_SECONDS = 5.0
log = logging.getLogger(__name__)


def load_execution(execution_id: uuid.UUID | str) -> Execution | None:
    """One read of the execution's row (the socket reads it once per announced change)."""
    return Execution.objects.select_related("model").filter(pk=execution_id).first()


class ExecutionConsumer(AsyncJsonWebsocketConsumer):
    # No channel of its own: the execution's hub holds the one subscription of this process.
    channel_layer_alias = "__live_pages_use_the_run_hub__"
    hub = None

    @classmethod
    async def encode_json(cls, content) -> str:
        return wire_json(content).decode()  # numbers as JavaScript writes them (runs.web.wire)

    async def connect(self) -> None:
        user = self.scope.get("user")
        self.task: asyncio.Task | None = None
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        try:
            self.execution_id = uuid.UUID(self.scope["url_route"]["kwargs"]["execution_id"])
        except ValueError:
            await self.close(code=4404)
            return
        if not await self._visible(user.pk):
            await self.close(code=4404)
            return
        await self.accept()
        self.sent = {"text": 0, "thinking": 0}
        self.status: str | None = None
        self.wake = asyncio.Event()
        publisher.attach_loop(asyncio.get_running_loop())
        self.hub = hub_for(execution_key(self.execution_id))
        await self.hub.add(self, get_channel_layer())  # joined: nothing committed from now on is missed
        self.task = asyncio.ensure_future(self._follow())

    @database_sync_to_async
    def _visible(self, user_id: int) -> bool:
        ex = Execution.objects.filter(pk=self.execution_id).values("workspace_id").first()
        return (
            ex is not None
            and Membership.objects.filter(user_id=user_id, workspace_id=ex["workspace_id"]).exists()
        )

    @database_sync_to_async
    def _snapshot(self) -> dict | None:
        ex = load_execution(self.execution_id)
        if ex is None:
            return None
        out: dict[str, Any] = {"status": ex.status, "text": ex.partial_text, "thinking": ex.partial_thinking}
        if ex.is_finished:
            out["state"] = state_with_context(ex)
            out["html"] = render_to_string("playground/_assistant.html", message_context(ex))
        return out

    # -- from the hub: O(1), never reads or waits
    def on_change(self, message: dict) -> None:
        self.wake.set()

    async def _follow(self) -> None:
        try:
            await self._follow_until_done()
        except asyncio.CancelledError:
            raise
        except Exception:  # never die silently: the page falls back to polling the JSON endpoint
            log.exception("playground socket for %s failed", self.execution_id)
            await self.close(code=1011)

    async def _follow_until_done(self) -> None:
        while True:
            self.wake.clear()
            snap = await self._snapshot()
            if snap is None:
                await self.send_json({"type": "gone"})
                await self.close(code=4404)
                return
            for kind in ("thinking", "text"):
                full = snap[kind]
                if len(full) > self.sent[kind]:
                    await self.send_json(
                        {
                            "type": "delta",
                            "kind": kind,
                            "offset": self.sent[kind],
                            "text": full[self.sent[kind] :],
                        }
                    )
                    self.sent[kind] = len(full)
            if snap["status"] != self.status and "state" not in snap:  # a final status comes with done
                self.status = snap["status"]
                await self.send_json({"type": "status", "status": self.status})
            if "state" in snap:
                await self.send_json({"type": "done", "state": snap["state"], "html": snap["html"]})
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), SAFETY_SECONDS)

    async def receive_json(self, content, **kwargs) -> None:
        if isinstance(content, dict) and content.get("type") == "resync":
            # the page lost track: start again from offset 0 (it replaces what it shows)
            self.sent = {"text": 0, "thinking": 0}
            self.status = None
            self.wake.set()

    async def disconnect(self, code) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
        if self.hub is not None:
            await self.hub.remove(self)
