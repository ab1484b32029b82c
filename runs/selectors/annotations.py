"""A run's annotations as pages show them: bounded in number and in length, whatever was recorded.

Two kinds exist: the run document's ``annotations`` (``[{at, text}]``, from an imported bundle or
a stored run state; the "header" annotations) and ``annotation`` events in the trace. Both come
from hosts and other implementations and are kept verbatim (a bundle's hash covers them), so a
single one may be megabytes long. The run page shows the first :data:`HEADER_SHOWN` header
annotations and the latest :data:`NOTES_SHOWN` notes, each cut to :data:`PREVIEW_CHARS`; the
annotations page lists them all, :data:`PAGE_SIZE` a page, each cut to :data:`LIST_CHARS`, and
serves any single one in full as plain text. Long event bodies are never loaded whole for a
preview: the database returns their first :data:`BODY_PREFIX` characters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.db.models.functions import Length, Substr

from runs.models import Event, Run
from runs.presenters.review_text import review_words
from runs.protocol.canonical import parse_json

HEADER_SHOWN = 10
NOTES_SHOWN = 10
PREVIEW_CHARS = 500
LIST_CHARS = 4000
PAGE_SIZE = 50
BODY_PREFIX = 16_384
TAGS_SHOWN = 10
TAG_CHARS = 60

_TEXT_KEY = '"text":"'


def clip(text: object, limit: int) -> tuple[str, bool]:
    """``text`` cut to ``limit`` characters (with an ellipsis), and whether it was cut."""
    text = text if isinstance(text, str) else ""
    if len(text) <= limit:
        return text, False
    return text[:limit].rstrip() + "…", True


def text_in_json_prefix(prefix: str) -> str:
    """The start of the ``text`` member of a JSON object of which only ``prefix`` is at hand.

    The stored body is compact JSON (no spaces), so the member reads ``"text":"...``; the string
    is decoded up to its closing quote or the end of the prefix (a cut escape is dropped)."""
    start = prefix.find(_TEXT_KEY)
    if start < 0:
        return ""
    rest = prefix[start + len(_TEXT_KEY) :]
    end, escaped = len(rest), False
    for i, ch in enumerate(rest):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            end = i
            break
    fragment, text = rest[:end], ""
    for cut in range(7):  # a cut escape (at most "\\uXXX") is dropped
        try:
            text = json.loads(f'"{fragment[: len(fragment) - cut]}"')
            break
        except ValueError:
            continue
    # a surrogate pair cut in half leaves a lone surrogate, which cannot be written as UTF-8
    return text.encode("utf-8", "replace").decode("utf-8")


@dataclass
class Shown:
    """One annotation as a page shows it."""

    text: str
    cut: bool
    length: int
    at: str = ""
    seq: int | None = None
    actor: str = ""
    tags: list[str] = field(default_factory=list)
    index: int | None = None  # position among the header annotations


def _header(item: object, index: int, limit: int) -> Shown:
    item = item if isinstance(item, dict) else {}
    raw = item.get("text")
    raw = raw if isinstance(raw, str) else ""
    text, cut = clip(review_words(raw) or raw, limit)
    at = item.get("at")
    at = at if isinstance(at, str) else ""
    return Shown(text=text, cut=cut, length=len(raw), at=at[:40], index=index)


def header_annotations(doc: dict[str, Any]) -> list:
    value = doc.get("annotations")
    return value if isinstance(value, list) else []


def _notes(
    run: Run,
    *,
    newest_first: bool,
    offset: int,
    limit: int,
    chars: int,
    after: int | None = None,
    before: int | None = None,
) -> list[Shown]:
    """``limit`` notes by seq: after seq ``after`` or before seq ``before`` (a keyset range of the
    (run, type, seq) index, what the pager's links carry), else from ``offset`` (a page typed in)."""
    qs = Event.objects.filter(run=run, type="annotation")
    if after is not None:
        qs, newest_first, offset = qs.filter(seq__gt=after), False, 0
    elif before is not None:
        qs, newest_first, offset = qs.filter(seq__lt=before), True, 0
    rows = list(
        qs.order_by("-seq" if newest_first else "seq")
        .annotate(size=Length("body"), head=Substr("body", 1, BODY_PREFIX))
        .values_list("seq", "ts", "actor", "head", "size")[offset : offset + limit]
    )
    if before is not None:
        rows.reverse()
    shown = []
    for seq, ts, actor, head, size in rows:
        if size <= BODY_PREFIX:
            data = parse_json(head)
            raw = data.get("text") if isinstance(data.get("text"), str) else ""
            raw = review_words(raw) or raw  # a queue review's JSON as a sentence
            tags = [t for t in data.get("tags") or [] if isinstance(t, str)]
            length, complete = len(raw), True
        else:
            raw, tags, length, complete = text_in_json_prefix(head), [], size, False
        text, cut = clip(raw, chars)
        shown.append(
            Shown(
                text=text,
                cut=cut or not complete,
                length=length,
                at=ts,
                seq=seq,
                actor=actor,
                tags=[clip(t, TAG_CHARS)[0] for t in tags[:TAGS_SHOWN]],
            )
        )
    return shown


def note_count(run: Run) -> int:
    return Event.objects.filter(run=run, type="annotation").count()


@dataclass
class RunPagePreview:
    header: list[Shown]
    notes: list[Shown]
    header_total: int
    more_notes: bool  # notes beyond those shown (not counted: the run page spends no query on it)

    @property
    def total(self) -> int:
        """The annotations known to exist (at least; see ``more_notes``)."""
        return self.header_total + len(self.notes)

    @property
    def more(self) -> bool:
        return (
            self.more_notes
            or self.header_total > len(self.header)
            or any(a.cut for a in self.header + self.notes)
        )


def run_page_preview(run: Run, doc: dict[str, Any]) -> RunPagePreview:
    """What the run page's header shows: the first header annotations and the latest notes, cut."""
    header = header_annotations(doc)
    notes = _notes(run, newest_first=True, offset=0, limit=NOTES_SHOWN + 1, chars=PREVIEW_CHARS)
    return RunPagePreview(
        header=[_header(item, i, PREVIEW_CHARS) for i, item in enumerate(header[:HEADER_SHOWN])],
        notes=notes[:NOTES_SHOWN],
        header_total=len(header),
        more_notes=len(notes) > NOTES_SHOWN,
    )


@dataclass
class AnnotationsPage:
    header: list[Shown]
    notes: list[Shown]
    page: int
    pages: int
    total: int

    @property
    def first_note_seq(self) -> int | None:
        """The pager's ``before`` (the previous page's notes end below it)."""
        return self.notes[0].seq if self.notes else None

    @property
    def last_note_seq(self) -> int | None:
        """The pager's ``after`` (the next page's notes start above it)."""
        return self.notes[-1].seq if self.notes else None


def annotations_page(
    run: Run, doc: dict[str, Any], *, page: int, after: int | None = None, before: int | None = None
) -> AnnotationsPage:
    """Page ``page`` (from 1) of all annotations: the header ones in order, then the notes by seq.
    The pager's links carry ``after`` (the last note's seq, to the next page) or ``before`` (the
    first note's seq, to the previous one): their notes are a keyset range, never an OFFSET."""
    header = header_annotations(doc)
    total = len(header) + note_count(run)
    pages = max(1, -(-total // PAGE_SIZE))
    page = min(max(page, 1), pages)
    lo, hi = (page - 1) * PAGE_SIZE, page * PAGE_SIZE
    shown_header = [_header(header[i], i, LIST_CHARS) for i in range(lo, min(hi, len(header)))]
    note_lo = max(lo - len(header), 0)
    note_limit = max(hi - len(header), 0) - note_lo
    notes = (
        _notes(
            run,
            newest_first=False,
            offset=note_lo,
            limit=note_limit,
            chars=LIST_CHARS,
            after=after if note_lo else None,
            before=before,
        )
        if note_limit
        else []
    )
    return AnnotationsPage(header=shown_header, notes=notes, page=page, pages=pages, total=total)


def full_text(
    run: Run, doc: dict[str, Any], *, index: int | None = None, seq: int | None = None
) -> str | None:
    """One annotation's whole text: header annotation ``index`` or the note at ``seq`` (None: none)."""
    if index is not None:
        header = header_annotations(doc)
        if 0 <= index < len(header) and isinstance(header[index], dict):
            text = header[index].get("text")
            return text if isinstance(text, str) else ""
        return None
    if seq is not None:
        body = (
            Event.objects.filter(run=run, type="annotation", seq=seq).values_list("body", flat=True).first()
        )
        if body is None:
            return None
        text = parse_json(body).get("text")
        return text if isinstance(text, str) else ""
    return None
