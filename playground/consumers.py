"""Live execution over a websocket: ``/ws/playground/executions/<id>/``.

The consumer follows the execution row (the worker saves the partial answer every ~120 ms,
whichever process it runs in) and pushes only what is new: ``delta`` messages carry the
offset they start at, so the page appends exactly once and asks for a ``resync`` when it sees a
gap. ``status`` reports pending -> processing; ``done`` carries the final state and the rendered
assistant message. Members of the execution's workspace only (others: closed with 4404).
"""

from __future__ import annotations

import asyncio
import uuid

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.template.loader import render_to_string

from playground import execute
from playground.models import Execution
from runs.models import Membership

POLL_ACTIVE = 0.08
POLL_IDLE = 0.25


class ExecutionConsumer(AsyncJsonWebsocketConsumer):
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
        self.task = asyncio.ensure_future(self._follow())

    @database_sync_to_async
    def _visible(self, user_id: int) -> bool:
        ex = Execution.objects.filter(pk=self.execution_id).values("workspace_id").first()
        return (
            bool(ex) and Membership.objects.filter(user_id=user_id, workspace_id=ex["workspace_id"]).exists()
        )

    @database_sync_to_async
    def _snapshot(self) -> dict | None:
        ex = Execution.objects.select_related("model").filter(pk=self.execution_id).first()
        if ex is None:
            return None
        ex = execute.heal(ex)
        out = {"status": ex.status, "text": ex.partial_text, "thinking": ex.partial_thinking}
        if ex.is_finished:
            from playground.views import message_context, state_with_context

            out["state"] = state_with_context(ex)
            out["html"] = render_to_string("playground/_assistant.html", message_context(ex))
        return out

    async def _follow(self) -> None:
        try:
            while True:
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
                if snap["status"] != self.status:
                    self.status = snap["status"]
                    await self.send_json({"type": "status", "status": self.status})
                if "state" in snap:
                    await self.send_json({"type": "done", "state": snap["state"], "html": snap["html"]})
                    return
                await asyncio.sleep(POLL_ACTIVE if snap["status"] == "processing" else POLL_IDLE)
        except asyncio.CancelledError:
            raise

    async def receive_json(self, content, **kwargs) -> None:
        if isinstance(content, dict) and content.get("type") == "resync":
            # the page lost track: start again from offset 0 (it replaces what it shows)
            self.sent = {"text": 0, "thinking": 0}
            self.status = None

    async def disconnect(self, code) -> None:
        if self.task is not None:
            self.task.cancel()
