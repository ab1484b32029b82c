"""review.agreement against published figures (pure: no database)."""

from __future__ import annotations

import pytest

from review.agreement import agreement, cohen_kappa, krippendorff_alpha

# Krippendorff, "Computing Krippendorff's Alpha-Reliability" (2011), the 4 coders x 12 units example
# with missing values: nominal alpha 0.743, interval alpha 0.849.
K = [
    [1, 1, None, 1],
    [2, 2, 3, 2],
    [3, 3, 3, 3],
    [3, 3, 3, 3],
    [2, 2, 2, 2],
    [1, 2, 3, 4],
    [4, 4, 4, 4],
    [1, 1, 2, 1],
    [2, 2, 2, 2],
    [None, 5, 5, 5],
    [None, None, 1, 1],
    [None, 3, None, None],
]


def test_krippendorff_published_example_nominal_and_interval():
    assert krippendorff_alpha(K) == pytest.approx(0.743, abs=0.001)
    assert krippendorff_alpha(K, level="interval") == pytest.approx(0.849, abs=0.001)


def test_cohen_kappa_textbook_example():
    # 50 items: yes/yes 20, yes/no 5, no/yes 10, no/no 15 -> kappa 0.4
    pairs = [("y", "y")] * 20 + [("y", "n")] * 5 + [("n", "y")] * 10 + [("n", "n")] * 15
    assert cohen_kappa(pairs) == pytest.approx(0.4)


def test_perfect_and_undefined_agreement():
    assert cohen_kappa([("a", "a"), ("b", "b")]) == 1.0
    assert cohen_kappa([]) is None
    assert cohen_kappa([("a", "a")] * 3) == 1.0  # one value everywhere, all agree
    assert krippendorff_alpha([[1], [2]]) is None  # nothing pairable
    assert krippendorff_alpha([[1, 1], [2, 2]]) == 1.0


def test_agreement_waits_for_twenty_overlapping_items_and_picks_the_method():
    two = {i: {"ann": i % 2, "bob": i % 2} for i in range(19)}
    assert agreement(two) is None  # 19 overlapping items: not yet
    two[19] = {"ann": 0, "bob": 1}
    two[20] = {"ann": 1}  # rated once: not overlapping
    result = agreement(two)
    assert result["method"] == "cohen_kappa" and result["items"] == 20 and result["raters"] == 2
    assert 0.8 < result["value"] < 1
    three = {i: {"ann": i % 3, "bob": i % 3, "cy": i % 3} for i in range(20)}
    result = agreement(three)
    assert result == {"method": "krippendorff_alpha", "value": 1.0, "items": 20, "raters": 3}
