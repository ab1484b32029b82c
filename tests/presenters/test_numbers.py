"""runs.presenters.numbers (pure): one way to write counts, durations and money on every page."""

from __future__ import annotations

from decimal import Decimal

import pytest

from runs.presenters import numbers as n


def test_counts_have_thousands_separators_zero_is_zero_and_none_is_unknown():
    assert n.count(2917500) == "2,917,500" and n.count(0) == "0" and n.count(None) == "unknown"
    assert n.count(2001.0) == "2,001" and n.count(Decimal("12.345")) == "12.35" and n.count(True) == "True"


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0 ms"),
        (0.4, "0.4 ms"),
        (850, "850 ms"),
        (1234, "1.2 s"),
        (2_617_400, "43 min 37 s"),
        (2_600_800, "43 min 20 s"),
        (7_500_000, "2 h 5 min"),
        (None, ""),
    ],
)
def test_durations_are_humanised(ms, text):
    assert n.duration_ms(ms) == text


def test_the_exact_duration_is_there_for_a_title():
    assert n.exact_ms(2_600_800) == "2,600,800 ms" and n.exact_ms(0.25) == "0.25 ms"
    assert n.duration_s(2.5) == "2.5 s"


@pytest.mark.parametrize(
    ("amount", "currency", "text"),
    [
        ("3.50058", "USD", "3.50"),  # totals to the cent
        ("1234.5", "usd", "1,234.50"),
        ("0.0035", "USD", "0.0035"),  # below a cent: 2 significant digits, never 0
        ("0.001", "USD", "0.001"),
        ("0.000123456", "USD", "0.00012"),
        ("0.000000000001", "USD", "0.000000000001"),
        ("-0.0035", "USD", "-0.0035"),
        ("0.0100", "USD", "0.01"),
        ("0", "USD", "0"),
        (0.0, "EUR", "0"),
        (None, "USD", "unknown"),
        ("1500", "JPY", "1,500"),
        ("0.4", "JPY", "0.4"),
    ],
)
def test_one_money_rule_per_currency(amount, currency, text):
    assert n.money(amount, currency) == text


def test_money_totals_and_their_exact_amounts():
    totals = {"USD": "3.500580000000", "EUR": "0.002"}
    assert n.money_text(totals) == "USD 3.50, EUR 0.002"
    assert n.exact_money(totals) == "USD 3.50058, EUR 0.002"
    assert n.money_text({}) == "" and n.money_text(None) == ""


def test_a_cost_cell_is_never_empty():
    from runs.presenters.numbers import cost_text

    assert cost_text({"USD": "3.50058"}, 2) == "USD 3.50"
    assert cost_text({"USD": "0"}, 2) == "USD 0"
    assert cost_text({}, 0) == "USD 0"
    assert cost_text({}, 3) == "unknown"
    assert cost_text(None, None) == "USD 0"


def test_compare_deltas_write_money_by_the_one_rule():
    from decimal import Decimal

    from runs.presenters.compare import delta

    assert delta("3.50058", "4.2", "USD").text == "+0.70 (+20.0%)"
    assert delta("0.004", "0.001", "USD").text == "\u22120.003 (\u221275.0%)"
    assert delta(0, "1234.5", "USD").text == "+1,234.50 (new)"
    assert delta(Decimal(1000), Decimal(3500)).text == "+2,500 (+250.0%)"
    assert delta("1", "1", "USD").text == "0"
