"""A loopback fake of the Anthropic Messages API (``POST /v1/messages``), JSON and SSE.

It checks requests the way the real service does where the playground can get it wrong (role
order, tool_use/tool_result pairing, thinking budget, temperature with thinking, at most four
cache breakpoints), keeps a prompt cache keyed by the exact prefix up to each breakpoint (so
cache writes and reads show up in ``usage`` as they would), and answers deterministically:
thinking blocks when thinking is on, citations when a document asks for them, a forced or
requested tool call with an input built from the tool's schema, otherwise ``Echo: <prompt>``.

Scripting: ``fake.script(reply)`` queues replies (``{"error": (status, type, message)}``,
``{"text": ...}``, ``{"tool": name, "input": {...}}``, ``{"usage": {...}}``: the usage reported); magic words in the prompt do the same
from a browser: ``[[error:429]]``, ``[[error:500]]``, ``[[error:529]]``, ``[[stream-error]]``,
``[[slow]]``. Misbehaviours (``{"misbehave": "cut" | "cut_chunked" | "garbage" | "html" | "slow"}``,
see :func:`tests.fakes.loopback.misbehave`) cut the stream before ``message_stop``, send an
event that is not JSON, answer a 200 with an HTML page, or wait before the first byte.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from tests.fakes.loopback import Received, Reply, ScriptedFake, cut_or_garble, misbehave, sse
from tests.fakes.schema_example import example_for

GARBAGE = b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, "delta": {"te\n\n'

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def count_tokens(value: Any) -> int:
    """A stable stand-in for a tokenizer: about four characters per token."""
    if isinstance(value, str):
        return max(1, len(value) // 4) if value else 0
    if isinstance(value, dict):
        return sum(count_tokens(v) for k, v in value.items() if k not in ("cache_control", "type"))
    if isinstance(value, list):
        return sum(count_tokens(v) for v in value)
    return 0


def _strip_markers(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_markers(v) for v in value]
    return value


KNOWN_FIELDS = frozenset(
    {
        "model",
        "max_tokens",
        "messages",
        "system",
        "stream",
        "thinking",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "tools",
        "tool_choice",
        "metadata",
        "service_tier",
    }
)


class BadRequest(Exception):
    pass


class FakeAnthropic(ScriptedFake):
    def __init__(self, *, api_key: str | None = "test-anthropic-key", min_cache_tokens: int = 0) -> None:
        super().__init__(api_key=api_key, min_cache_tokens=min_cache_tokens)
        self.cache: set[str] = set()
        self.headers: list[dict] = []
        # A test that must see a stream half-way clears this: every stream then stops after its first
        # delta until the test sets it again (no timing guess about how fast a loaded machine reads).
        self.gate = threading.Event()
        self.gate.set()

    # -- HTTP ----------------------------------------------------------------------------
    def handle(self, req: Received) -> Reply:
        if req.method != "POST" or req.path.split("?")[0].rstrip("/") != "/v1/messages":
            return self._error(404, f"no route {req.method} {req.path}")
        if self.api_key is not None and self.api_key not in (
            req.headers.get("x-api-key"),
            req.headers.get("authorization", "").removeprefix("Bearer "),
        ):
            return self._error(401, "invalid x-api-key")
        body = req.json
        if not isinstance(body, dict):
            return self._error(400, "the body must be a JSON object")
        self.requests.append(body)
        self.headers.append(req.headers)
        with self._lock:
            scripted = self._script.pop(0) if self._script else None
        prompt = self._last_prompt(body)
        if scripted is None:
            magic = re.search(r"\[\[error:(\d{3})\]\]", prompt)
            if magic:
                scripted = {"error": (int(magic.group(1)), None, f"simulated error {magic.group(1)}")}
        if scripted and "error" in scripted:
            status, kind, message = scripted["error"]
            return self._error(status, message, kind, retry_after=scripted.get("retry_after", "0"))
        try:
            self._validate(body)
        except BadRequest as exc:
            return self._error(400, str(exc))
        message = self._answer(body, scripted or {}, prompt)
        if scripted and "usage" in scripted:  # the usage a test wants reported (the cost suite)
            message["usage"] = dict(scripted["usage"])
        if body.get("stream"):
            delay = 0.15 if "[[slow]]" in prompt else self.chunk_delay
            frames = self._stream(message, delay, fail="[[stream-error]]" in prompt)
            # message_start, ping, content_block_start and three text deltas, then the misbehaviour
            frames = cut_or_garble(frames, scripted, keep=6, garbage=GARBAGE)
            return misbehave(Reply(stream=frames), scripted)
        return Reply(body=message, headers={"request-id": f"req_{uuid.uuid4().hex[:12]}"})

    def _error(self, status: int, message: str, kind: str | None = None, retry_after: str = "0") -> Reply:
        headers = {"request-id": f"req_{uuid.uuid4().hex[:12]}"}
        if status == 429:
            headers["retry-after"] = retry_after
        return Reply(
            status=status,
            body={
                "type": "error",
                "error": {"type": kind or ERROR_TYPES.get(status, "api_error"), "message": message},
            },
            headers=headers,
        )

    # -- validation (the parts a composer can get wrong) ----------------------------------
    def _validate(self, body: dict) -> None:
        if not isinstance(body.get("model"), str) or not body["model"]:
            raise BadRequest("model: Field required")
        max_tokens = body.get("max_tokens")
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise BadRequest("max_tokens: Field required")
        unknown = sorted(set(body) - KNOWN_FIELDS)
        if unknown:
            raise BadRequest(f"{unknown[0]}: Extra inputs are not permitted")
        for name in ("temperature", "top_p"):
            value = body.get(name)
            if name in body and (
                isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1
            ):
                raise BadRequest(f"{name}: Input should be a number between 0 and 1")
        if "top_k" in body and (
            isinstance(body["top_k"], bool) or not isinstance(body["top_k"], int) or body["top_k"] < 0
        ):
            raise BadRequest("top_k: Input should be a non-negative integer")
        stops = body.get("stop_sequences")
        if stops is not None and not (
            isinstance(stops, list) and all(isinstance(x, str) and x for x in stops)
        ):
            raise BadRequest("stop_sequences: Input should be a list of non-empty strings")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages: at least one message is required")
        if messages[0].get("role") != "user":
            raise BadRequest("messages: first message must use the 'user' role")
        for prev, cur in zip(messages, messages[1:], strict=False):
            if prev.get("role") == cur.get("role"):
                raise BadRequest("messages: roles must alternate between 'user' and 'assistant'")
        for i, msg in enumerate(messages):
            if msg.get("role") != "assistant" or not isinstance(msg.get("content"), list):
                continue
            ids = [b["id"] for b in msg["content"] if b.get("type") == "tool_use"]
            if not ids:
                continue
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            results = (
                [
                    b.get("tool_use_id")
                    for b in nxt["content"]
                    if isinstance(b, dict) and b.get("type") == "tool_result"
                ]
                if nxt and isinstance(nxt.get("content"), list)
                else []
            )
            if sorted(results) != sorted(ids):
                raise BadRequest(
                    f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks immediately after"
                )
        thinking = body.get("thinking")
        if thinking and thinking.get("type") == "enabled":
            budget = thinking.get("budget_tokens")
            if not isinstance(budget, int) or budget < 1024:
                raise BadRequest(
                    "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
                )
            if budget >= max_tokens:
                raise BadRequest("`max_tokens` must be greater than `thinking.budget_tokens`")
            if "temperature" in body:
                raise BadRequest("`temperature` may only be set to 1 when thinking is enabled")
            if "top_k" in body:
                raise BadRequest("`top_k` must be unset when thinking is enabled")
            if (body.get("tool_choice") or {}).get("type") in ("tool", "any"):
                raise BadRequest("Thinking may not be enabled when tool_choice forces tool use.")
        marks = sum(1 for _ in self._marked_blocks(body))
        if marks > 4:
            raise BadRequest(f"A maximum of 4 blocks with cache_control may be provided. Found {marks}.")
        tool_names = {t.get("name") for t in body.get("tools") or []}
        choice = body.get("tool_choice") or {}
        if choice.get("type") == "tool" and choice.get("name") not in tool_names:
            raise BadRequest(f"tool_choice: tool {choice.get('name')!r} not found in tools")
        for msg in messages:
            if isinstance(msg.get("content"), list):
                for block in msg["content"]:
                    if block.get("type") == "document":
                        src = block.get("source") or {}
                        if src.get("type") not in ("text", "base64", "url", "content"):
                            raise BadRequest("document.source.type is invalid")

    def _marked_blocks(self, body: dict) -> Iterator[dict]:
        for tool in body.get("tools") or []:
            if "cache_control" in tool:
                yield tool
        system = body.get("system")
        if isinstance(system, list):
            yield from (b for b in system if "cache_control" in b)
        for msg in body.get("messages") or []:
            if isinstance(msg.get("content"), list):
                yield from (b for b in msg["content"] if isinstance(b, dict) and "cache_control" in b)

    # -- answering -----------------------------------------------------------------------
    @staticmethod
    def _last_prompt(body: dict) -> str:
        messages = body.get("messages") or []
        if not messages:
            return ""
        content = messages[-1].get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return " ".join(
                b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
            )
        return ""

    def _cache_usage(self, body: dict) -> tuple[int, int, int]:
        """(uncached input, cache read, cache write) for the request, updating the cache."""
        sequence: list[tuple[Any, bool]] = []
        for tool in body.get("tools") or []:
            sequence.append((tool, "cache_control" in tool))
        system = body.get("system")
        if isinstance(system, str):
            sequence.append((system, False))
        elif isinstance(system, list):
            sequence.extend((b, "cache_control" in b) for b in system)
        for msg in body.get("messages") or []:
            content = msg.get("content")
            if isinstance(content, str):
                sequence.append(({"role": msg["role"], "text": content}, False))
            else:
                for b in content or []:
                    sequence.append(
                        ({"role": msg["role"], "block": b}, isinstance(b, dict) and "cache_control" in b)
                    )
        total = sum(count_tokens(item) for item, _ in sequence)
        prefix: list[Any] = []
        prefix_tokens = 0
        breakpoints: list[tuple[str, int]] = []
        for item, marked in sequence:
            prefix.append(_strip_markers(item))
            prefix_tokens += count_tokens(item)
            if marked:
                key = hashlib.sha256(
                    json.dumps([body.get("model"), prefix], sort_keys=True).encode()
                ).hexdigest()
                breakpoints.append((key, prefix_tokens))
        read = 0
        for key, tokens in breakpoints:
            if key in self.cache:
                read = max(read, tokens)
        write = 0
        with self._lock:
            for key, tokens in breakpoints:
                if tokens > read and tokens >= self.min_cache_tokens and key not in self.cache:
                    self.cache.add(key)
                    write = max(write, tokens - read)
        return total - read - write, read, write

    def _answer(self, body: dict, scripted: dict, prompt: str) -> dict:
        content: list[dict] = []
        thinking = (body.get("thinking") or {}).get("type") == "enabled"
        if thinking:
            content.append(
                {
                    "type": "thinking",
                    "thinking": f"The user asks: {prompt[:60]}. I will reason step by step before answering.",
                    "signature": "sig_" + hashlib.sha256(prompt.encode()).hexdigest()[:32],
                }
            )
        tools = {t["name"]: t for t in body.get("tools") or []}
        choice = body.get("tool_choice") or {}
        tool_name = scripted.get("tool")
        if tool_name is None and choice.get("type") == "tool":
            tool_name = choice["name"]
        if tool_name is None:
            record = [n for n in tools if n.startswith("record_")]
            if record and choice.get("type") in (None, "auto", "any"):
                tool_name = record[0]
        if tool_name is None:
            for name in tools:
                if re.search(rf"\b(use|call)\b.*\b{re.escape(name)}\b", prompt, re.IGNORECASE):
                    tool_name = name
        stop_reason = "end_turn"
        if tool_name is not None:
            tool = tools.get(tool_name, {"input_schema": {"type": "object"}})
            payload = scripted.get("input", example_for(tool.get("input_schema", {})))
            if tool_name == "record_validation" and "input" not in scripted:
                payload = {"result": "fail" not in prompt.lower(), "comment": f"Checked: {prompt[:60]}"}
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{uuid.uuid4().hex[:20]}",
                    "name": tool_name,
                    "input": payload,
                }
            )
            stop_reason = "tool_use"
        else:
            text = scripted.get("text") or f"Echo: {prompt}"
            doc = self._cited_document(body)
            if doc is not None:
                index, block = doc
                source_text = block["source"].get("data", "") if block["source"].get("type") == "text" else ""
                cited = (source_text.split(".")[0] + ".") if source_text else "the document"
                start = 0
                content.append({"type": "text", "text": "According to the document, "})
                content.append(
                    {
                        "type": "text",
                        "text": text,
                        "citations": [
                            {
                                "type": "char_location",
                                "cited_text": cited,
                                "document_index": index,
                                "document_title": block.get("title"),
                                "start_char_index": start,
                                "end_char_index": start + len(cited),
                            }
                        ],
                    }
                )
            else:
                content.append({"type": "text", "text": text})
            stops = body.get("stop_sequences") or []
            for stop in stops:
                last = content[-1]
                if stop in last["text"]:
                    last["text"] = last["text"].split(stop)[0]
                    stop_reason = "stop_sequence"
                    break
        uncached, read, write = self._cache_usage(body)
        output = count_tokens(
            [b.get("text") or b.get("thinking") or json.dumps(b.get("input")) for b in content]
        )
        output = max(1, output)
        usage: dict = {
            "input_tokens": uncached,
            "output_tokens": output,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
        }
        if thinking:
            usage["output_tokens_details"] = {"thinking_tokens": count_tokens(content[0]["thinking"])}
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }

    @staticmethod
    def _cited_document(body: dict) -> tuple[int, dict] | None:
        index = 0
        found = None
        for msg in body.get("messages") or []:
            if msg.get("role") != "user" or not isinstance(msg.get("content"), list):
                continue
            for block in msg["content"]:
                if block.get("type") == "document":
                    if (block.get("citations") or {}).get("enabled"):
                        found = (index, block)
                    index += 1
        return found

    # -- SSE -----------------------------------------------------------------------------
    def _stream(self, message: dict, delay: float, *, fail: bool) -> Iterator[bytes]:
        start = dict(message, content=[], stop_reason=None)
        start["usage"] = dict(message["usage"], output_tokens=1)
        start["usage"].pop("output_tokens_details", None)
        yield sse("message_start", {"type": "message_start", "message": start})
        yield sse("ping", {"type": "ping"})
        for index, block in enumerate(message["content"]):
            kind = block["type"]
            if kind == "text":
                first = {"type": "text", "text": ""}
                if "citations" in block:
                    first["citations"] = []
                yield sse(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": first},
                )
                for piece in re.findall(r"\S+\s*|\s+", block["text"]):
                    if delay:
                        time.sleep(delay)
                    yield sse(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": piece},
                        },
                    )
                    if fail:
                        yield sse(
                            "error",
                            {
                                "type": "error",
                                "error": {"type": "overloaded_error", "message": "Overloaded mid-stream"},
                            },
                        )
                        return
                for citation in block.get("citations") or []:
                    yield sse(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "citations_delta", "citation": citation},
                        },
                    )
            elif kind == "thinking":
                yield sse(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                    },
                )
                for number, piece in enumerate(re.findall(r"\S+\s*|\s+", block["thinking"])):
                    if delay:
                        time.sleep(delay)
                    yield sse(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "thinking_delta", "thinking": piece},
                        },
                    )
                    if number == 0:
                        self.gate.wait(timeout=120)
                yield sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "signature_delta", "signature": block["signature"]},
                    },
                )
            elif kind == "tool_use":
                yield sse(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {
                            "type": "tool_use",
                            "id": block["id"],
                            "name": block["name"],
                            "input": {},
                        },
                    },
                )
                raw = json.dumps(block["input"])
                for i in range(0, len(raw), 12):
                    yield sse(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": raw[i : i + 12]},
                        },
                    )
            yield sse("content_block_stop", {"type": "content_block_stop", "index": index})
        usage = {"output_tokens": message["usage"]["output_tokens"]}
        for key in (
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "cache_creation",
            "output_tokens_details",
        ):
            if key in message["usage"]:
                usage[key] = message["usage"][key]
        yield sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": usage,
            },
        )
        yield sse("message_stop", {"type": "message_stop"})
