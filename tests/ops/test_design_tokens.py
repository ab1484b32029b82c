"""One stylesheet of design tokens (issue 52): static/workbench/tokens.css is the only stylesheet of
the project that names a colour or a radius; the others (the API docs' and the charts' included)
use them through var(--…)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

STATIC = Path(__file__).resolve().parents[2] / "static" / "workbench"
SHEETS = sorted(p for p in STATIC.glob("*.css") if p.name != "tokens.css")
COLOUR = re.compile(r"#[0-9a-fA-F]{3,8}\b|\b(?:rgb|rgba|hsl|hsla)\(")
RADIUS = re.compile(r"border-radius:(?!\s*var\()(?!\s*50%)[^;}]+")


def declarations(sheet: Path) -> str:
    return re.sub(r"/\*.*?\*/", "", sheet.read_text(), flags=re.DOTALL)


def test_the_sheets_are_found():
    assert {"api-docs.css", "charts.css", "workbench.css"} <= {p.name for p in SHEETS}


@pytest.mark.parametrize("sheet", SHEETS, ids=lambda p: p.name)
def test_no_colour_or_radius_outside_the_tokens(sheet):
    text = declarations(sheet)
    assert COLOUR.findall(text) == [], f"{sheet.name} names a colour: use a token of tokens.css"
    assert RADIUS.findall(text) == [], (
        f"{sheet.name} names a radius: use --radius-sm, --radius or --radius-pill"
    )


def test_the_series_and_the_api_docs_have_a_dark_set():
    tokens = (STATIC / "tokens.css").read_text()
    light, dark = tokens.split("@media (prefers-color-scheme: dark)")
    for n in range(7):
        assert f"--series-{n}:" in light and f"--series-{n}:" in dark
    assert "prefers-color-scheme: dark" in (STATIC / "api-docs.css").read_text()


def test_the_api_docs_page_reads_the_tokens(client):
    html = client.get("/api/docs").content.decode()
    assert html.index("workbench/tokens.css") < html.index("workbench/api-docs.css")
