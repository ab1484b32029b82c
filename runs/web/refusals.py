"""A refused action as a page says it: a sentence, the code as a small tag beside it
(runs.presenters.errors), safe to hand to ``django.contrib.messages`` (its storage keeps SafeData)."""

from __future__ import annotations

from typing import Any

from django.utils.html import format_html
from django.utils.safestring import SafeString

from runs.presenters.errors import sentence


def refusal(exc: Any) -> SafeString:
    """``ActionError("SELF_APPROVAL", "someone else approves ...")`` ->
    ``Someone else approves ... <code class="error-code">SELF_APPROVAL</code>``."""
    code = str(getattr(exc, "code", "") or "")
    words = sentence(str(getattr(exc, "message", "") or exc))
    if not code:
        return format_html("{}", words)
    return format_html('{} <code class="error-code">{}</code>', words, code)
