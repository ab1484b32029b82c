"""A loopback fake of the OpenAI Chat Completions API (``POST /v1/chat/completions``), JSON and SSE.

Answers like an OpenAI-compatible server would: ``Echo: <prompt>`` text, a JSON document that
satisfies ``response_format.json_schema`` when one is given, tool calls when the prompt asks to
use a defined tool (one call per defined tool it names after "use" or "call", in the order of
``tools``; a scripted ``{"tool": name, "input": ...}`` asks for one), ``reasoning_content`` deltas plus ``reasoning_tokens`` when
``reasoning_effort`` is set (the llama.cpp/vLLM convention), automatic prefix caching reported
as ``prompt_tokens_details.cached_tokens``, usage in a final chunk when
``stream_options.include_usage`` is set (a scripted ``{"no_usage": True}`` leaves it out, as
some compatible servers do). Errors, rate limits and misbehaviours as in
:mod:`tests.fakes.anthropic_api` (``script`` or ``[[error:429]]`` in the prompt).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from collections.abc import Iterator

from tests.fakes.anthropic_api import count_tokens
from tests.fakes.loopback import Received, Reply, ScriptedFake, cut_or_garble, misbehave, sse
from tests.fakes.schema_example import example_for

GARBAGE = (
    b'data: {"id": "chatcmpl-garbage", "object": "chat.completion.chunk", "choices": [{"delta": {"con\n\n'
)

ERRORS = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}


KNOWN_FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "stop",
        "stream",
        "stream_options",
        "tools",
        "tool_choice",
        "response_format",
        "reasoning_effort",
        "seed",
        "n",
        "user",
        "metadata",
        "parallel_tool_calls",
        "presence_penalty",
        "frequency_penalty",
    }
)


class FakeOpenAI(ScriptedFake):
    def __init__(self, *, api_key: str | None = "test-openai-key", min_cache_tokens: int = 0) -> None:
        super().__init__(api_key=api_key, min_cache_tokens=min_cache_tokens)
        self.prefixes: set[str] = set()

    def handle(self, req: Received) -> Reply:
        path = req.path.split("?")[0].rstrip("/")
        if req.method != "POST" or not path.endswith("/chat/completions"):
            return self._error(404, f"Unknown request URL: {req.method} {req.path}")
        if self.api_key is not None and req.headers.get("authorization") != f"Bearer {self.api_key}":
            return self._error(401, "Incorrect API key provided")
        body = req.json
        if not isinstance(body, dict):
            return self._error(400, "We could not parse the JSON body of your request.")
        self.requests.append(body)
        with self._lock:
            scripted = self._script.pop(0) if self._script else None
        prompt = self._last_prompt(body)
        if scripted is None:
            magic = re.search(r"\[\[error:(\d{3})\]\]", prompt)
            if magic:
                scripted = {"error": (int(magic.group(1)), f"simulated error {magic.group(1)}")}
        if scripted and "error" in scripted:
            status, message = scripted["error"]
            return self._error(status, message)
        problem = self._validate(body)
        if problem:
            return self._error(400, problem)
        completion = self._answer(body, scripted or {}, prompt)
        if scripted and "usage" in scripted:  # the usage a test wants reported (None: none at all)
            if scripted["usage"] is None:
                completion.pop("usage")
                scripted = {**scripted, "no_usage": True}
            else:
                completion["usage"] = dict(scripted["usage"])
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            include_usage = include_usage and not (scripted or {}).get("no_usage")
            delay = 0.15 if "[[slow]]" in prompt else self.chunk_delay
            frames = self._stream(completion, include_usage, delay)
            # the role chunk and three content chunks, then the misbehaviour (no finish_reason, no [DONE])
            frames = cut_or_garble(frames, scripted, keep=4, garbage=GARBAGE)
            return misbehave(Reply(stream=frames), scripted)
        return Reply(body=completion)

    def _error(self, status: int, message: str) -> Reply:
        kind, code = ERRORS.get(status, ("server_error", None))
        headers = {"x-request-id": f"req_{uuid.uuid4().hex[:12]}"}
        if status == 429:
            headers["retry-after"] = "0"
        return Reply(
            status=status,
            body={"error": {"message": message, "type": kind, "param": None, "code": code}},
            headers=headers,
        )

    @staticmethod
    def _validate(body: dict) -> str | None:
        if not body.get("model"):
            return "you must provide a model parameter"
        unknown = sorted(set(body) - KNOWN_FIELDS)
        if unknown:
            return f"Unrecognized request argument supplied: {unknown[0]}"
        for name, low, high in (("temperature", 0, 2), ("top_p", 0, 1)):
            value = body.get(name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high
            ):
                return f"Invalid '{name}': expected a number between {low} and {high}"
        stop = body.get("stop")
        if stop is not None and not (
            isinstance(stop, str)
            or (isinstance(stop, list) and len(stop) <= 4 and all(isinstance(s, str) for s in stop))
        ):
            return "Invalid 'stop': a string or at most 4 strings"
        for name in ("max_tokens", "max_completion_tokens"):
            value = body.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                return f"Invalid '{name}': expected an integer of at least 1"
        effort = body.get("reasoning_effort")
        if effort is not None and effort not in ("minimal", "low", "medium", "high"):
            return f"Invalid 'reasoning_effort': {effort!r}"
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return "'messages' must contain at least one message"
        open_calls: set[str] = set()
        for i, msg in enumerate(messages):
            role = msg.get("role")
            if role == "tool":
                if msg.get("tool_call_id") not in open_calls:
                    return f"messages[{i}]: role 'tool' must be a response to a preceding message with 'tool_calls'"
                open_calls.discard(msg["tool_call_id"])
            else:
                if open_calls:
                    return "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'"
                if role == "assistant":
                    open_calls = {c["id"] for c in msg.get("tool_calls") or []}
        if "max_tokens" in body and "max_completion_tokens" in body:
            return "max_tokens and max_completion_tokens cannot both be set"
        return None

    @staticmethod
    def _last_prompt(body: dict) -> str:
        for msg in reversed(body.get("messages") or []):
            if msg.get("role") == "user":
                content = msg.get("content")
                if isinstance(content, str):
                    return content
                return " ".join(p.get("text", "") for p in content or [] if p.get("type") == "text")
        return ""

    def _cached_tokens(self, body: dict) -> int:
        messages = body.get("messages") or []
        best = 0
        tokens = 0
        keys = []
        for i in range(len(messages)):
            tokens += count_tokens(messages[i].get("content") or "")
            key = hashlib.sha256(
                json.dumps([body["model"], messages[: i + 1]], sort_keys=True).encode()
            ).hexdigest()
            keys.append(key)
            if key in self.prefixes and tokens >= self.min_cache_tokens:
                best = tokens
        with self._lock:
            self.prefixes.update(keys)
        return best

    def _answer(self, body: dict, scripted: dict, prompt: str) -> dict:
        message: dict = {"role": "assistant", "content": None}
        finish = "stop"
        tools = {t["function"]["name"]: t["function"] for t in body.get("tools") or []}
        names = [scripted["tool"]] if scripted.get("tool") is not None else []
        if not names:
            names = [
                name
                for name in tools
                if re.search(rf"\b(use|call)\b.*\b{re.escape(name)}\b", prompt, re.IGNORECASE)
            ]
        fmt = (body.get("response_format") or {}).get("json_schema")
        if names:
            message["tool_calls"] = [
                {
                    "id": f"call_{uuid.uuid4().hex[:16]}",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": json.dumps(
                            scripted.get("input", example_for(tools.get(name, {}).get("parameters", {})))
                        ),
                    },
                }
                for name in names
            ]
            finish = "tool_calls"
        elif fmt:
            value = scripted.get("json", example_for(fmt.get("schema", {})))
            message["content"] = json.dumps(value)
        else:
            message["content"] = scripted.get("text") or f"Echo: {prompt}"
            for stop in body.get("stop") or []:
                if stop in message["content"]:
                    message["content"] = message["content"].split(stop)[0]
                    break
        reasoning = None
        if body.get("reasoning_effort"):
            reasoning = f"Reasoning ({body['reasoning_effort']}) about: {prompt[:60]}"
            message["reasoning_content"] = reasoning
        prompt_tokens = count_tokens([m.get("content") or "" for m in body["messages"]])
        cached = self._cached_tokens(body)
        out_text = (message.get("content") or "") + json.dumps(message.get("tool_calls") or "")
        reasoning_tokens = count_tokens(reasoning or "")
        completion_tokens = max(1, count_tokens(out_text)) + reasoning_tokens
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:20]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": cached},
                "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
            },
        }

    def _stream(self, completion: dict, include_usage: bool, delay: float) -> Iterator[bytes]:
        base = {k: completion[k] for k in ("id", "created", "model")}
        base["object"] = "chat.completion.chunk"
        message = completion["choices"][0]["message"]

        def chunk(delta: dict, finish: str | None = None) -> bytes:
            return sse(None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

        yield chunk({"role": "assistant", "content": ""})
        for piece in re.findall(r"\S+\s*|\s+", message.get("reasoning_content") or ""):
            if delay:
                time.sleep(delay)
            yield chunk({"reasoning_content": piece})
        for piece in re.findall(r"\S+\s*|\s+", message.get("content") or ""):
            if delay:
                time.sleep(delay)
            yield chunk({"content": piece})
        for i, call in enumerate(message.get("tool_calls") or []):
            yield chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            )
            raw = call["function"]["arguments"]
            for j in range(0, len(raw), 10):
                yield chunk({"tool_calls": [{"index": i, "function": {"arguments": raw[j : j + 10]}}]})
        yield chunk({}, completion["choices"][0]["finish_reason"])
        if include_usage:
            yield sse(None, {**base, "choices": [], "usage": completion["usage"]})
        yield b"data: [DONE]\n\n"
