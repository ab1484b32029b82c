"""A run bundle read from a file in bounded memory: a streamed parse and a streamed hash.

:func:`runs.protocol.bundle.check_bundle` parses the whole document into one tree (its peak is
about 6x the file). A ten-million-event bundle is ~10 GB of text, so the large-import path reads
it here instead: the top-level members one by one, and the ``trace`` array in batches of events
(a few MB of text each), never the whole document.

How the trace is cut: a window of text starting at an element boundary is cut after a ``}``
followed by ``,`` or ``]``, and ``{"t":[`` + window + ``]}`` is parsed. If that parses, the cut
was at a real element boundary (JSON parsing is deterministic from the window's start, so the
parser was at depth one, outside any string, exactly as it is in the whole document); if it does
not (a ``}`` inside a string, an element larger than the window), an earlier cut is tried, then a
single element is delimited exactly by :meth:`BundleReader._value_end`. The wrapper keeps each
event at the depth it has in the document (nesting limits apply the same way).

How the hash is computed: the integrity hash is SHA-256 over the canonical form of ``{artifacts,
engine?, ruleSets, run, trace}``, whose members are in that (sorted) order, ``trace`` last. Each
member is canonicalized from its own text (the C accelerator, as ``check_bundle`` does); the
trace's canonical text goes straight into the hash when the four members before it were already
read, else into a temporary file that is hashed once the document ends (the reference's
``JSON.stringify`` order puts ``artifacts`` and ``ruleSets`` after ``trace``).

Errors are :class:`~runs.protocol.errors.ProtocolError` with the codes ``check_bundle`` uses
(``INVALID_JSON``; ``INVALID_RUN_BUNDLE`` for text that has no canonical form, a top-level key
given twice or a document that is not an object; ``UNSUPPORTED_PROTOCOL_VERSION`` for an array).
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from runs.protocol.canonical import (
    UnrepresentableJSON,
    canonical_form,
    canonical_text,
    has_text_accelerator,
    load_json_exact,
    round_unsafe_integers,
)
from runs.protocol.errors import ErrorCode, ProtocolError

# Text read per trace batch (a batch holds ~4,000 events of ~1 KB).
CHUNK_BYTES = 4 << 20
# Members covered by the hash other than the trace, in canonical (UTF-16 sorted) order.
BEFORE_TRACE = ("artifacts", "engine", "ruleSets", "run")
HASHED = (*BEFORE_TRACE, "trace")
# Array members read in batches (the others, small, are read whole).
STREAMED = ("trace", "artifacts")

_WS = re.compile(rb"[ \t\r\n]*")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|["\[\]{}]')
_SCALAR = re.compile(rb"[^,\]}\s]*")
# A batch is parsed as ``[`` + text + ``]`` (only a run of whole elements parses so: nothing may
# follow the closing bracket) and canonicalized as ``[[`` + text + ``]]``, which puts each event
# at the depth it has in the document (array in an object), so nesting limits apply the same.
_PARSE_OPEN, _PARSE_CLOSE = b"[", b"]"
_WRAP_OPEN, _WRAP_CLOSE = b"[[", b"]]"
_WRAP_MEMBER = b'{"t":'


def _invalid_json(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_JSON, f"not valid JSON: {message}")


def _no_canonical_form(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_RUN_BUNDLE, message)


def _parse(text: bytes) -> Any:
    """Parse a wrapped piece of text (``UnrepresentableJSON`` as check_bundle reports it)."""
    try:
        return load_json_exact(text)
    except UnrepresentableJSON as exc:
        raise _no_canonical_form(exc.message) from None


def _canonical(wrapped: bytes, value: Any, prefix: int, suffix: int) -> tuple[bytes, bool]:
    """Canonical text of a wrapped piece (the wrapper stripped) and whether it held unsafe integers."""
    if has_text_accelerator():
        result = canonical_text(wrapped)
        if result is None:  # a non-finite number, a lone surrogate, nesting beyond the limit
            raise _no_canonical_form("the trace holds a value that has no canonical (RFC 8785) form")
        view, unsafe = result
        return bytes(view[prefix : len(view) - suffix]), unsafe
    try:
        text, unsafe = canonical_form(value)
    except ProtocolError as exc:
        raise _no_canonical_form(exc.message) from None
    return text[prefix : len(text) - suffix], unsafe


@dataclass
class TraceBatch:
    """Consecutive events of the trace: ``first`` is the index of ``events[0]`` in the trace."""

    first: int
    events: list[Any]


class StreamDigest:
    """SHA-256 of the canonical ``hash_input`` fed member by member, the arrays in batches.

    The hash takes the members in canonical order (``artifacts, engine, ruleSets, run, trace``).
    ``artifacts`` comes first, so its items always go straight into the hash; the small members
    wait as bytes; the trace goes straight in when the four members before it are complete by
    the time it starts, else into a temporary file hashed at the end.
    """

    def __init__(self) -> None:
        self.members: dict[str, bytes] = {}
        self._hash = hashlib.sha256()
        self._written: set[str] = set()  # members already in the hash (in canonical order)
        self._open: str | None = None  # the array member being fed straight into the hash
        self._spool: Any = None
        self._items: dict[str, int] = {}

    def member(self, key: str, canonical: bytes) -> None:
        self.members[key] = canonical

    def _put(self, text: bytes, key: str) -> None:
        self._hash.update((b"," if self._written else b"{") + b'"%s":' % key.encode() + text)
        self._written.add(key)

    def _put_waiting(self, until: str) -> None:
        """Put the complete members that come before ``until`` and are not in the hash yet."""
        for key in HASHED[: HASHED.index(until)]:
            if key in self.members and key not in self._written:
                self._put(self.members[key], key)

    def start_array(self, key: str) -> None:
        self._items[key] = 0
        before = HASHED[: HASHED.index(key)]
        if all(k in self._written or k in self.members for k in before):
            self._put_waiting(key)
            self._put(b"[", key)
            self._open = key
        else:
            self._spool = tempfile.TemporaryFile(prefix="workbench-trace-")  # noqa: SIM115 (closed in hexdigest)

    def array_items(self, key: str, canonical: bytes, count: int) -> None:
        """Canonical text of ``count`` consecutive items of the array ``key``, comma-separated."""
        if count == 0:
            return
        piece = (b"," if self._items[key] else b"") + canonical
        self._items[key] += count
        if self._open == key:
            self._hash.update(piece)
        else:
            self._spool.write(piece)

    def end_array(self, key: str) -> None:
        if self._open == key:
            self._hash.update(b"]")
            self._open = None

    def hexdigest(self) -> str:
        if self._spool is not None:  # the trace, kept until what comes before it was complete
            self._put_waiting("trace")
            self._put(b"[", "trace")
            spool, self._spool = self._spool, None
            try:
                spool.seek(0)
                while block := spool.read(1 << 20):
                    self._hash.update(block)
            finally:
                spool.close()
            self._hash.update(b"]")
        self._put_waiting("trace")
        if "trace" in self.members:
            self._put(self.members["trace"], "trace")
        self._hash.update(b"}" if self._written else b"{}")
        return self._hash.hexdigest()

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None


class BundleReader:
    """Reads a bundle's top-level members from a binary file; the trace comes in batches.

    :meth:`items` yields ``(key, value)`` for each member, ``value`` a :class:`TraceBatch` for
    each batch of the ``trace`` array (``("trace", None)`` once the array ends); ``digest``
    holds the integrity hash of what was read; ``offset`` is how many bytes were consumed.
    Values carry JavaScript number semantics (integers beyond +-(2**53 - 1) rounded), as
    ``check_bundle``'s do.
    """

    def __init__(self, file: BinaryIO, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.file = file
        self.chunk = chunk_bytes
        self.buf = b""
        self.pos = 0
        self.base = 0  # file offset of buf[0]
        self.eof = False
        self.digest = StreamDigest()
        self.keys: list[str] = []

    @property
    def offset(self) -> int:
        return self.base + self.pos

    # ------------------------------------------------------------------ buffer

    def _fill(self, need: int) -> bool:
        """Make at least ``need`` bytes available after ``pos`` (False at the end of the file)."""
        while len(self.buf) - self.pos < need and not self.eof:
            block = self.file.read(max(self.chunk, need))
            if not block:
                self.eof = True
                break
            self.base += self.pos
            self.buf = self.buf[self.pos :] + block
            self.pos = 0
        return len(self.buf) - self.pos >= need

    def _skip_ws(self) -> None:
        while True:
            match = _WS.match(self.buf, self.pos)
            self.pos = match.end() if match else self.pos
            if self.pos < len(self.buf) or not self._fill(1):
                return

    def _peek(self) -> bytes:
        self._skip_ws()
        return self.buf[self.pos : self.pos + 1]

    def _expect(self, char: bytes, what: str) -> None:
        if self._peek() != char:
            found = self.buf[self.pos : self.pos + 20]
            raise _invalid_json(f"expected {what} at byte {self.offset}, found {found!r}")
        self.pos += 1

    def _value_end(self) -> int:
        """End (index in ``buf``) of the JSON value at ``pos``, reading more of the file as needed.
        The value's syntax is checked by the parser afterwards; this only delimits it."""
        self._skip_ws()
        start = self.pos
        scan = start
        depth = 0
        while True:
            if scan >= len(self.buf):
                if not self._fill(len(self.buf) - self.pos + self.chunk):
                    raise _invalid_json(f"the document ends inside a value (byte {self.base + start})")
                scan, start = scan - (start - self.pos), self.pos
                continue
            first = self.buf[scan : scan + 1]
            if depth == 0 and first not in (b"{", b"[", b'"'):
                match = _SCALAR.match(self.buf, scan)
                end = match.end() if match else scan
                if end == len(self.buf) and not self.eof:
                    if not self._fill(len(self.buf) - self.pos + self.chunk):
                        return len(self.buf)
                    scan, start = scan - (start - self.pos), self.pos
                    continue
                return end
            token = _TOKEN.search(self.buf, scan)
            if token is None or token.group() == b'"':  # no structure left, or a string cut off
                if self.eof:
                    raise _invalid_json(f"the document ends inside a value (byte {self.base + start})")
                scan = token.start() if token is not None else len(self.buf)
                self._fill(len(self.buf) - self.pos + self.chunk)
                scan, start = scan - (start - self.pos), self.pos
                continue
            text = token.group()
            scan = token.end()
            if text[:1] == b'"':
                if depth == 0:
                    return scan
                continue
            depth += 1 if text in (b"{", b"[") else -1
            if depth <= 0:
                return scan

    # ------------------------------------------------------------------ members

    def items(self) -> Iterator[tuple[str, Any]]:
        first = self._peek()
        if first == b"":
            raise _invalid_json("the document is empty")
        if first == b"[":
            raise ProtocolError(
                ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
                "run bundle is an array, not an object: it has no `protocolVersion` and cannot be migrated",
                "protocolVersion",
            )
        if first != b"{":
            end = self._value_end()
            _parse(self.buf[self.pos : end])  # INVALID_JSON if it is not JSON at all
            raise ProtocolError(ErrorCode.INVALID_RUN_BUNDLE, "run bundle must be a JSON object")
        self.pos += 1
        if self._peek() == b"}":
            self.pos += 1
        else:
            while True:
                key = self._key()
                self._expect(b":", "':'")
                if key in STREAMED and self._peek() == b"[":
                    self.pos += 1
                    yield from self._array(key)
                    yield key, None
                else:
                    yield key, self._member(key)
                separator = self._peek()
                if separator == b"}":
                    self.pos += 1
                    break
                self._expect(b",", "',' or '}'")
        if self._peek() != b"":
            raise _invalid_json(f"unexpected text after the document at byte {self.offset}")

    def _key(self) -> str:
        if self._peek() != b'"':
            raise _invalid_json(f"expected a member name at byte {self.offset}")
        end = self._value_end()
        key = _parse(self.buf[self.pos : end])
        self.pos = end
        if key in self.keys:
            raise ProtocolError(ErrorCode.INVALID_RUN_BUNDLE, f"member {key!r} is given twice", key)
        self.keys.append(key)
        return str(key)

    def _member(self, key: str) -> Any:
        end = self._value_end()
        wrapped = _WRAP_MEMBER + self.buf[self.pos : end] + b"}"
        self.pos = end
        value = _parse(wrapped)
        canonical, unsafe = _canonical(wrapped, value, len(_WRAP_MEMBER), 1)
        if key in HASHED:
            self.digest.member(key, canonical)
        member = value["t"]
        return round_unsafe_integers(member) if unsafe else member

    # ------------------------------------------------------------------ trace

    def _array(self, key: str) -> Iterator[tuple[str, TraceBatch]]:
        index = 0
        self.digest.start_array(key)
        if self._peek() == b"]":
            self.pos += 1
            self.digest.end_array(key)
            return
        closer = b"}"
        while True:
            if len(self.buf) - self.pos < self.chunk:
                self._fill(self.chunk)
            found = self._batch(closer) if index else None
            if found is None:
                found = self._one_element()
                if index == 0:
                    closer = self._closer_after(found[0])
            events, canonical, closed = found
            self.digest.array_items(key, canonical, len(events))
            yield key, TraceBatch(index, events)
            index += len(events)
            if closed:
                self.digest.end_array(key)
                return

    def _closer_after(self, first: list[Any]) -> bytes:
        """How the first element's text ends (``"\n  }"`` in an indented document): cuts are
        looked for there first. Only a hint: a cut is accepted when its text parses."""
        if not first or type(first[0]) is not dict:
            return b"}"
        text = self.buf[: self.pos]
        brace = text.rfind(b"}")
        start = brace
        while start > 0 and text[start - 1 : start] in (b" ", b"\n", b"\r", b"\t"):
            start -= 1
        return text[start : brace + 1] if brace >= 0 else b"}"

    def _batch(self, closer: bytes) -> tuple[list[Any], bytes, bool] | None:
        """Events from ``pos`` up to a cut, or ``None`` when no cut in the window parsed."""
        buf, start = self.buf, self.pos
        end = min(len(buf), start + self.chunk)
        tries = 0
        while tries < 3:
            found = buf.rfind(closer, start, end)
            if found < 0:
                return None
            brace = found + len(closer) - 1
            end = found
            after = _WS.match(buf, brace + 1)
            follow = after.end() if after else brace + 1
            if follow >= len(buf) or buf[follow : follow + 1] not in (b",", b"]"):
                continue
            tries += 1
            piece = buf[start : brace + 1]
            try:
                events = orjson.loads(_PARSE_OPEN + piece + _PARSE_CLOSE)
            except orjson.JSONDecodeError as exc:
                # the text parsed fine up to the error, so a cut, if any, is before it (at the
                # trace's end, the error is the member that follows its closing bracket)
                end = min(end, start + max(exc.pos - len(_PARSE_OPEN), 0))
                continue
            canonical, unsafe = _canonical(_WRAP_OPEN + piece + _WRAP_CLOSE, [events], 2, 2)
            if unsafe:
                round_unsafe_integers(events)
            closed = buf[follow : follow + 1] == b"]"
            self.pos = follow + 1
            return events, canonical, closed
        return None

    def _one_element(self) -> tuple[list[Any], bytes, bool]:
        end = self._value_end()
        wrapped = _WRAP_OPEN + self.buf[self.pos : end] + _WRAP_CLOSE
        self.pos = end
        value = _parse(wrapped)
        canonical, unsafe = _canonical(wrapped, value, 2, 2)
        events = value[0]
        if unsafe:
            round_unsafe_integers(events)
        separator = self._peek()
        if separator not in (b",", b"]"):
            raise _invalid_json(f"expected ',' or ']' in the trace at byte {self.offset}")
        self.pos += 1
        return events, canonical, separator == b"]"
