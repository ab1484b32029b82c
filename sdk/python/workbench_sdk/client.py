"""A small Python client for the Workbench REST API, for host applications in other processes.

    from workbench_sdk import WorkbenchClient, make_event

    with WorkbenchClient("http://127.0.0.1:8000", token="wbt_...") as wb:  # or WorkbenchClient()
        started = wb.start_run(workflow=WORKFLOW, tags=["nightly"])
        run_id = started["runId"]
        wb.append_events(run_id, [make_event(run_id, "step_started", stepId="parse")])
        wb.resolve_gate(run_id, step_id="review", gate="PAUSE_BEFORE", decision="approved")
        bundle = wb.export_bundle(run_id)          # signed canonical bytes

Behaviour (as the reference client): a 15 s timeout; up to 3 retries with exponential backoff
(0.25 s x 2^n, at most 4 s; a server's Retry-After is honoured up to that cap) on network errors
and on 408/425/429/5xx only, never on other 4xx. Every write carries an ``Idempotency-Key``
(generated unless given) that is reused on its retries, so a retried write is applied once.
Errors raise :class:`WorkbenchAPIError` with the server's ``code``. Depends on httpx only.

Configuration: ``base_url`` defaults to ``$WORKBENCH_URL``, ``token`` to ``$WORKBENCH_TOKEN``
and ``workspace`` to ``$WORKBENCH_WORKSPACE`` when they are not given.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import httpx

from workbench_sdk.cachekey import llm_cache_key, request_from_wire
from workbench_sdk.events import RecordedAnswer, make_event, now_iso, recorded_answer

__all__ = [
    "ENV_TOKEN",
    "ENV_URL",
    "ENV_WORKSPACE",
    "WorkbenchAPIError",
    "WorkbenchClient",
    "WorkbenchTransportError",
    "make_event",
    "now_iso",
]

ENV_URL = "WORKBENCH_URL"
ENV_TOKEN = "WORKBENCH_TOKEN"
ENV_WORKSPACE = "WORKBENCH_WORKSPACE"

RETRY_STATUSES = frozenset({408, 425, 429})
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class WorkbenchAPIError(Exception):
    """The server refused a request (or it kept failing): ``status``, ``code`` and ``message``."""

    def __init__(self, status: int, code: str, message: str, response: httpx.Response | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.response = response


class WorkbenchTransportError(WorkbenchAPIError):
    """The server could not be reached (after the retries)."""

    def __init__(self, message: str, cause: Exception) -> None:
        super().__init__(0, "NETWORK_ERROR", message)
        self.__cause__ = cause


def should_retry(status: int) -> bool:
    return status in RETRY_STATUSES or status >= 500


class WorkbenchClient:
    """The Workbench REST API. ``base_url`` and ``token`` (and ``workspace``) default to the
    environment's ``WORKBENCH_URL`` and ``WORKBENCH_TOKEN`` (and ``WORKBENCH_WORKSPACE``)."""

    PRICES_TTL = 300.0

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 15.0,
        retries: int = 3,
        backoff: float = 0.25,
        max_backoff: float = 4.0,
        workspace: str | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        headers: dict[str, str] | None = None,
    ) -> None:
        base_url = base_url or os.environ.get(ENV_URL)
        if not base_url:
            raise ValueError(f"WorkbenchClient needs a base_url (or the {ENV_URL} environment variable)")
        token = token if token is not None else os.environ.get(ENV_TOKEN)
        workspace = workspace if workspace is not None else os.environ.get(ENV_WORKSPACE)
        all_headers = {"Accept": "application/json", "User-Agent": "workbench-client/1"}
        if token:
            all_headers["Authorization"] = f"Bearer {token}"
        if workspace:
            all_headers["X-Workspace"] = workspace
        all_headers.update(headers or {})
        self._prices: dict[tuple[str, ...], tuple[float, dict[str, Any]]] = {}
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), timeout=timeout, headers=all_headers, transport=transport
        )

    # -- plumbing ---------------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> WorkbenchClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        delay: float = min(self.max_backoff, self.backoff * (2**attempt))
        if response is not None:
            retry_after = response.headers.get("Retry-After")
            if retry_after and retry_after.strip().isdigit():
                delay = min(self.max_backoff, max(delay, float(retry_after)))
        return delay

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        content: bytes | None = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        """Send a request with retries; return the (2xx) response or raise WorkbenchAPIError.
        ``timeout``: this request's own timeout in seconds (a long poll waits longer than most)."""
        method = method.upper()
        send_headers = dict(headers or {})
        if method in WRITE_METHODS:
            send_headers["Idempotency-Key"] = idempotency_key or str(uuid.uuid4())
        if content is not None:
            send_headers.setdefault("Content-Type", "application/json")
        attempt = 0
        while True:
            response: httpx.Response | None = None
            try:
                extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
                response = self._http.request(
                    method,
                    "/api" + path,
                    json=json,
                    content=content,
                    params=params,
                    headers=send_headers,
                    **extra,
                )
            except httpx.TransportError as exc:
                if attempt >= self.retries:
                    raise WorkbenchTransportError(f"{method} {path}: {exc}", exc) from exc
            else:
                if response.is_success:
                    return response
                if not should_retry(response.status_code) or attempt >= self.retries:
                    raise _api_error(response)
            self._sleep(self._delay(attempt, response))
            attempt += 1

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        return response.json() if response.content else None

    def _object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """:meth:`_json` of an endpoint that answers a JSON object (not checked here)."""
        body: dict[str, Any] = self._json(method, path, **kwargs)
        return body

    # -- endpoints --------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        return self._object("GET", "/health")

    def prices(self, models: list[str] | None = None, *, refresh: bool = False) -> dict[str, Any]:
        """The workspace's effective price table (``GET /api/prices``): ``{model: row}``, rows per
        million tokens with their ``source`` (``workspace``, ``genai-prices`` or ``catalogue``).
        ``models`` (``"provider:model"`` or ``"model"``) asks for rows the workspace has not listed.
        Cached for :attr:`PRICES_TTL` seconds per set of models asked (``refresh`` reads again)."""
        key = tuple(sorted(models or ()))
        cached = self._prices.get(key)
        if cached is not None and not refresh and time.monotonic() - cached[0] < self.PRICES_TTL:
            return cached[1]
        table: dict[str, Any] = self._json("GET", "/prices", params={"model": list(key)} if key else None)[
            "prices"
        ]
        self._prices[key] = (time.monotonic(), table)
        return table

    def get_prompt(
        self, name: str, *, label: str | None = None, version: int | None = None
    ) -> dict[str, Any]:
        """A prompt version (``GET /api/prompts/{name}``): by ``label`` (``production`` when neither
        is given) or by ``version`` number. Uncached: :func:`workbench_sdk.prompt` caches."""
        params = _drop_none({"label": label, "version": version})
        return self._object("GET", "/prompts/" + quote(name, safe="/"), params=params or None)

    def list_runs(self, limit: int = 100, **filters: str) -> list[dict[str, Any]]:
        """The first page of runs, newest first (``filters``: status, workflow, tag, startedAfter,
        startedBefore, traceId); :meth:`iter_runs` follows the pages."""
        runs: list[dict[str, Any]] = self._json("GET", "/runs", params={"limit": limit, **filters})
        return runs

    def iter_runs(self, page_size: int = 100, **filters: str) -> Iterator[dict[str, Any]]:
        """Every run the filters match, newest first, page after page (the ``Link`` header's next
        page, until there is none)."""
        params: dict[str, Any] = {"limit": page_size, **filters}
        while True:
            response = self.request("GET", "/runs", params=params)
            yield from response.json()
            following = response.links.get("next", {}).get("url")
            if not following:
                return
            params = dict(parse_qsl(urlsplit(following).query))

    def get_run_state(self, run_id: str) -> tuple[dict[str, Any], str]:
        """The run's RunStoreState and its ETag (pass it as ``if_match`` to put_run_state)."""
        response = self.request("GET", f"/runs/{_q(run_id)}")
        return response.json(), response.headers.get("ETag", "")

    def put_run_state(
        self, run_id: str, state: dict[str, Any], *, if_match: str | int | None = None, **kw: Any
    ) -> dict[str, Any]:
        headers = {}
        if if_match is not None:
            headers["If-Match"] = if_match if isinstance(if_match, str) else f'"{if_match}"'
        return self._object("PUT", f"/runs/{_q(run_id)}", json=state, headers=headers, **kw)

    def delete_run(self, run_id: str, **kw: Any) -> None:
        self.request("DELETE", f"/runs/{_q(run_id)}", **kw)

    def start_run(
        self,
        *,
        workflow: dict[str, Any],
        run_id: str | None = None,
        subject: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        tags: list[str] | None = None,
        context: dict[str, Any] | None = None,
        title: str | None = None,
        **kw: Any,
    ) -> dict[str, Any]:
        body = _drop_none(
            {
                "workflow": workflow,
                "runId": run_id,
                "title": title,
                "subject": subject,
                "metadata": metadata,
                "tags": tags,
                "context": context,
            }
        )
        return self._object("POST", "/runs", json=body, **kw)

    def set_title(self, run_id: str, title: str, **kw: Any) -> dict[str, Any]:
        """Name a run (``run.metadata["workbench.title"]``): what lists show to tell runs apart."""
        return self._object("PATCH", f"/runs/{_q(run_id)}", json={"title": title}, **kw)

    def append_events(self, run_id: str, events: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
        return self._object("POST", f"/runs/{_q(run_id)}/events", json={"events": events}, **kw)

    def resolve_gate(
        self,
        run_id: str,
        *,
        step_id: str,
        gate: str,
        decision: str,
        note: str | None = None,
        checkpoint: str | None = None,
        edit: dict[str, Any] | None = None,
        **kw: Any,
    ) -> dict[str, Any]:
        body = _drop_none(
            {
                "stepId": step_id,
                "gate": gate,
                "decision": decision,
                "note": note,
                "checkpoint": checkpoint,
                "edit": edit,
            }
        )
        return self._object("POST", f"/runs/{_q(run_id)}/gates/resolve", json=body, **kw)

    def check_budget(self, run_id: str, step_id: str | None = None) -> dict[str, Any]:
        """Before a model call (``POST /runs/{id}/budget/check``): ``{"allowed": true, ...}``, or the
        run paused at its ``budget`` gate: ``{"allowed": false, "gate": {stepId, gate, checkpoint,
        afterSeq}, "message"}`` (``gate`` None: refused outright)."""
        return self._object("POST", f"/runs/{_q(run_id)}/budget/check", json=_drop_none({"stepId": step_id}))

    def wait_for_gate(
        self,
        run_id: str,
        *,
        step_id: str,
        gate: str,
        after_seq: int,
        checkpoint: str | None = None,
        timeout: float = 25.0,
    ) -> dict[str, Any]:
        """One long poll (``GET /runs/{id}/gates/wait``): answered as soon as a reviewer decides the
        gate requested at seq ``after_seq`` (``status: decided``), when the run ends (``closed``),
        or after ``timeout`` seconds (``pending``: ask again). See :class:`workbench_sdk.run.GateHandle`."""
        params = _drop_none(
            {
                "stepId": step_id,
                "gate": gate,
                "checkpoint": checkpoint,
                "afterSeq": after_seq,
                "timeout": max(0.0, min(timeout, 60.0)),
            }
        )
        return self._object(
            "GET", f"/runs/{_q(run_id)}/gates/wait", params=params, timeout=params["timeout"] + 15.0
        )

    def write_artifact(
        self,
        run_id: str,
        *,
        key: str,
        type_id: str,
        data: Any,
        artifact_idempotency_key: str | None = None,
        step_id: str | None = None,
        **kw: Any,
    ) -> dict[str, Any]:
        body = _drop_none(
            {
                "artifactKey": key,
                "typeId": type_id,
                "idempotencyKey": artifact_idempotency_key,
                "stepId": step_id,
            }
        )
        body["data"] = data
        return self._object("POST", f"/runs/{_q(run_id)}/artifacts", json=body, **kw)

    def patch_artifact(
        self,
        run_id: str,
        *,
        key: str,
        from_version: int,
        patch: list[dict[str, Any]],
        step_id: str | None = None,
        **kw: Any,
    ) -> dict[str, Any]:
        body = _drop_none({"fromVersion": from_version, "patch": patch, "stepId": step_id})
        return self._object("POST", f"/runs/{_q(run_id)}/artifacts/{_q(key)}/patch", json=body, **kw)

    def annotate(self, run_id: str, text: str, *, tags: list[str] | None = None, **kw: Any) -> dict[str, Any]:
        return self._object(
            "POST", f"/runs/{_q(run_id)}/annotations", json=_drop_none({"text": text, "tags": tags}), **kw
        )

    def cancel(
        self, run_id: str, *, reason: str | None = None, cascade: bool = False, **kw: Any
    ) -> dict[str, Any]:
        body = _drop_none({"reason": reason, "cascade": cascade})
        return self._object("POST", f"/runs/{_q(run_id)}/cancel", json=body, **kw)

    def events(self, run_id: str, *, after_seq: int = 0, limit: int = 1000) -> dict[str, Any]:
        return self._object(
            "GET", f"/runs/{_q(run_id)}/events", params={"after_seq": after_seq, "limit": limit}
        )

    def iter_events(
        self, run_id: str, *, after_seq: int = 0, page_size: int = 1000
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """Every event after ``after_seq`` as (seq, event), page by page."""
        while True:
            page = self.events(run_id, after_seq=after_seq, limit=page_size)
            for item in page["events"]:
                yield item["seq"], item["event"]
            after_seq = page["nextAfterSeq"]
            if not page["hasMore"]:
                return

    def export_bundle(self, run_id: str) -> bytes:
        """The signed bundle as canonical JSON bytes: its integrity hash verifies with any protocol 1.0.0
        implementation, its signature with the server's /.well-known/jwks.json (workbench-verify --keys)."""
        return self.request("GET", f"/runs/{_q(run_id)}/bundle").content

    def import_bundle(self, data: bytes, *, as_new_id: bool = False, **kw: Any) -> dict[str, Any]:
        params = {"as_new_id": "true"} if as_new_id else None
        return self._object("POST", "/bundles", content=data, params=params, **kw)

    def verify_bundle(self, data: bytes) -> dict[str, Any]:
        return self._object("POST", "/bundles/verify", content=data)

    # -- fork and replay (seed 002) -------------------------------------------------------------

    def fork(
        self,
        run_id: str,
        *,
        mode: str = "replay",
        from_seq: int | None = None,
        overlay: dict[str, Any] | None = None,
        **kw: Any,
    ) -> dict[str, Any]:
        """``POST /runs/{id}:fork``: ``{runId, sourceRunId, fromSeq, mode, status, eventsUrl}``.

        ``status`` is ``pending`` when the workbench re-executes the fork itself (it has the
        workflow's step code) and ``external`` when the host replays it: run the pipeline again
        against the new run id, asking :meth:`cached_response` (or :meth:`replay_fn`) first."""
        body = _drop_none({"mode": mode, "fromSeq": from_seq, "runOptionsOverlay": overlay})
        return self._object("POST", f"/runs/{_q(run_id)}:fork", json=body, **kw)

    def replay(self, run_id: str, *, from_seq: int = 0, **kw: Any) -> dict[str, Any]:
        return self.fork(run_id, mode="replay", from_seq=from_seq, **kw)

    def branch(
        self, run_id: str, *, from_seq: int, overlay: dict[str, Any] | None = None, **kw: Any
    ) -> dict[str, Any]:
        return self.fork(run_id, mode="branch", from_seq=from_seq, overlay=overlay, **kw)

    def determinism(self, replay_run_id: str) -> dict[str, Any]:
        """The determinism report of a replay (seed 002)."""
        return self._object("GET", f"/runs/{_q(replay_run_id)}/determinism")

    def cached_response(
        self, provider: str, model: str | None, request: dict[str, Any], *, prefer_run_id: str | None = None
    ) -> dict[str, Any] | None:
        """The workspace's cached answer to this provider request body (None on a miss).

        The key is computed here (:mod:`workbench_sdk.cachekey`, pure Python) exactly as the
        server computes it from a recorded ``model_io`` request, so nothing but the key is sent."""
        key = llm_cache_key(request_from_wire(provider, model, request))
        params = {"preferRunId": prefer_run_id} if prefer_run_id else None
        try:
            return self._object("GET", f"/cache/{key}", params=params)
        except WorkbenchAPIError as exc:
            if exc.status == 404:
                return None
            raise

    def replay_fn(
        self, *, prefer_run_id: str | None = None
    ) -> Callable[[str, str, dict[str, Any]], RecordedAnswer | None]:
        """A ``replay`` callable for :class:`workbench_sdk.traced.Tracer`: ``(provider, model,
        request) -> the recorded answer (response body and stream chunks) or None``, asking this
        server's response cache."""

        def replay(provider: str, model: str, request: dict[str, Any]) -> RecordedAnswer | None:
            found = self.cached_response(provider, model, request, prefer_run_id=prefer_run_id)
            if found is None:
                return None
            payload = found["response"].get("payload")
            if not isinstance(payload, dict):
                return None
            return recorded_answer(payload, found.get("chunks") or [])

        return replay


def _q(segment: str) -> str:
    return quote(segment, safe="")


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _api_error(response: httpx.Response) -> WorkbenchAPIError:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "code" in body:
        return WorkbenchAPIError(
            response.status_code, str(body["code"]), str(body.get("error", "")), response
        )
    return WorkbenchAPIError(
        response.status_code, f"HTTP_{response.status_code}", response.text[:500], response
    )
