"""Inter-rater agreement (pure): Cohen's kappa for two raters, Krippendorff's alpha for more.

    cohen_kappa([("yes", "yes"), ("yes", "no"), ...])        # one pair of ratings per item
    krippendorff_alpha([[1, 2, None], [3, 3, 3], ...])       # one list per item, None: not rated
    krippendorff_alpha(units, level="interval")              # numbers: squared differences

Both return None when agreement is undefined (too few ratings, or a single value everywhere
with nothing to disagree about under chance).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from typing import Literal

Level = Literal["nominal", "interval"]
MIN_OVERLAP = 20  # items rated by the same raters before agreement is shown


def cohen_kappa(pairs: Sequence[tuple[Hashable, Hashable]]) -> float | None:
    """Cohen's kappa of two raters over the items both rated: (p_o - p_e) / (1 - p_e)."""
    n = len(pairs)
    if n == 0:
        return None
    observed = sum(1 for a, b in pairs if a == b) / n
    first = Counter(a for a, _ in pairs)
    second = Counter(b for _, b in pairs)
    expected = sum(first[c] * second[c] for c in first) / (n * n)
    if expected == 1:
        return 1.0 if observed == 1 else None
    return (observed - expected) / (1 - expected)


def _distance(level: Level, a: Hashable, b: Hashable) -> float:
    if level == "interval":
        return (float(a) - float(b)) ** 2  # type: ignore[arg-type]
    return 0.0 if a == b else 1.0


def krippendorff_alpha(
    units: Sequence[Sequence[Hashable | None]], *, level: Level = "nominal"
) -> float | None:
    """Krippendorff's alpha from the coincidence matrix: 1 - D_o / D_e. Units with fewer than two
    ratings are not pairable and are left out; any number of raters, missing ratings allowed."""
    coincidences: defaultdict[tuple[Hashable, Hashable], float] = defaultdict(float)
    for unit in units:
        values = [v for v in unit if v is not None]
        m = len(values)
        if m < 2:
            continue
        for i, a in enumerate(values):
            for j, b in enumerate(values):
                if i != j:
                    coincidences[(a, b)] += 1 / (m - 1)
    totals: defaultdict[Hashable, float] = defaultdict(float)
    for (a, _), weight in coincidences.items():
        totals[a] += weight
    n = sum(totals.values())
    if n <= 1:
        return None
    observed = sum(w * _distance(level, a, b) for (a, b), w in coincidences.items())
    expected = sum(totals[a] * totals[b] * _distance(level, a, b) for a in totals for b in totals) / (n - 1)
    if expected == 0:
        return 1.0 if observed == 0 else None
    return 1 - observed / expected


def agreement(
    ratings: dict[Hashable, dict[Hashable, Hashable]],
    *,
    level: Level = "nominal",
    min_overlap: int = MIN_OVERLAP,
) -> dict[str, object] | None:
    """Agreement over ``ratings`` ({item: {rater: value}}) once ``min_overlap`` items have two or
    more ratings: Cohen's kappa when exactly two raters rated, Krippendorff's alpha otherwise."""
    overlapping = {item: by for item, by in ratings.items() if len(by) >= 2}
    if len(overlapping) < min_overlap:
        return None
    raters = sorted({r for by in overlapping.values() for r in by}, key=str)
    if len(raters) == 2 and level == "nominal":
        a, b = raters
        pairs = [(by[a], by[b]) for by in overlapping.values()]
        return {"method": "cohen_kappa", "value": cohen_kappa(pairs), "items": len(pairs), "raters": 2}
    units = [[by.get(r) for r in raters] for by in overlapping.values()]
    value = krippendorff_alpha(units, level=level)
    return {"method": "krippendorff_alpha", "value": value, "items": len(units), "raters": len(raters)}
