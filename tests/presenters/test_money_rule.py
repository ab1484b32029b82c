"""One rule for money on every page (runs.presenters.numbers.money): amounts to the currency's
minor unit, tiny amounts to 2 significant digits, never a float's artifacts, never a fixed count
of decimals. The timeline's summaries follow it, and no template or presenter formats money by
hand (``floatformat`` on a cost, ``quantize`` to 6 places, a raw ``{{ cost.amount }}`` in a cell)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runs.presenters.numbers import money
from runs.presenters.timeline import summarize

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("amount", "currency", "shown"),
    [
        (0.1 + 0.2, "USD", "0.30"),  # 0.30000000000000004: a host's float sum
        (1234.5, "JPY", "1,235"),  # no minor unit
        (2.0005, "KWD", "2.001"),  # three decimals
        (0.000123456, "USD", "0.00012"),  # below a cent: 2 significant digits, never 0
        (12.3456789, "EUR", "12.35"),
    ],
)
def test_the_timeline_writes_costs_by_the_money_rule(amount, currency, shown):
    text = summarize(
        {"type": "model_io", "direction": "response", "cost": {"amount": amount, "currency": currency}}
    )
    assert f"{shown} {currency}" in text
    assert "0000000" not in text and "e-" not in text


HAND_FORMATTED = [
    # a cost through floatformat (a fixed number of decimals, not the currency's)
    re.compile(r"\{\{[^}]*(cost|amount|price|spend)[^}|]*\|floatformat[^}]*\}\}", re.I),
]
# a stored amount shown as it is (cells of presenter-made text, such as ``call.cost``, are fine)
RAW_AMOUNT_CELL = re.compile(r">\s*\{\{\s*[\w.]*\.(amount|cost_amount|costDelta)\s*\}\}\s*<", re.I)


def test_no_template_formats_money_by_hand():
    found = []
    for path in sorted((REPO / "templates").rglob("*.html")):
        text = path.read_text()
        for pattern in (*HAND_FORMATTED, RAW_AMOUNT_CELL):
            found += [f"{path.relative_to(REPO)}: {m.group(0)}" for m in pattern.finditer(text)]
    assert found == [], "format money with |amount:currency, |money or |cost (runs.presenters.numbers)"


def test_no_presenter_quantizes_money_to_fixed_decimals():
    found = []
    for package in ("runs", "playground", "evals", "review"):
        for path in sorted((REPO / package).rglob("*.py")):
            if not re.search(r"presenter|pages|templatetags|web", str(path.relative_to(REPO))):
                continue  # prices stored to 6 places (playground.actions) are data, not display
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"quantize\(Decimal\(\"0\.0+1\"\)\)|quantize\(Decimal\('0\.0+1'\)\)", line):
                    found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert found == []


def test_the_rule_itself():
    assert money(0.1 + 0.2) == "0.30" and money("3.50058") == "3.50" and money(0) == "0"
    assert money(None) == "unknown"
