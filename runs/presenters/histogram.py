"""Latency histograms with fixed logarithmic buckets: what the rollups store per day (one count per
bucket), merged over any period and turned into percentiles here, without reading the events.

Bucket 0 holds durations under 1 ms; bucket ``i`` (1 .. ``LAST``) holds [10^((i-1)/10), 10^(i/10))
ms, ten buckets per decade (each about 26% wider than the one before) up to 10^8 ms (about 28 h);
the last bucket also holds anything longer. A percentile read from merged buckets is interpolated
log-linearly inside its bucket, so it is within one bucket's ratio (x1.26) of the exact value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

PER_DECADE = 10
DECADES = 8
LAST = PER_DECADE * DECADES  # the highest bucket index


def bucket_of(ms: float) -> int:
    """The bucket of a duration in milliseconds."""
    if not ms >= 1:  # also NaN
        return 0
    index = math.floor(math.log10(ms) * PER_DECADE) + 1
    # floating error at exact decade bounds (log10(1000) * 10 = 29.999...): the bound opens its bucket
    if ms >= bucket_bounds(index + 1)[0]:
        index += 1
    return min(index, LAST)


def bucket_bounds(index: int) -> tuple[float, float]:
    """[low, high) of a bucket in milliseconds (bucket 0 is [0, 1))."""
    if index <= 0:
        return 0.0, 1.0
    return 10 ** ((index - 1) / PER_DECADE), 10 ** (index / PER_DECADE)


def merge(histograms: Iterable[Mapping[int, int]]) -> dict[int, int]:
    """The sum of several histograms ({bucket: count})."""
    out: dict[int, int] = {}
    for histogram in histograms:
        for bucket, count in histogram.items():
            out[bucket] = out.get(bucket, 0) + count
    return {bucket: count for bucket, count in out.items() if count}


def total(histogram: Mapping[int, int]) -> int:
    return sum(count for count in histogram.values() if count > 0)


def percentile(histogram: Mapping[int, int], q: float) -> float | None:
    """The ``q``-th percentile (0 < q <= 100) of the durations a histogram counts, in ms, or None
    when it counts nothing. The nearest rank (ceil(q/100 * n)) is found in its bucket, and placed
    inside the bucket log-linearly by its position among the bucket's counts."""
    n = total(histogram)
    if n == 0:
        return None
    rank = max(1, math.ceil(q / 100 * n))
    seen = 0
    for bucket in sorted(histogram):
        count = histogram[bucket]
        if count <= 0:
            continue
        if seen + count >= rank:
            low, high = bucket_bounds(bucket)
            fraction = (rank - seen - 0.5) / count
            if bucket == 0:
                return float(high * fraction)
            return float(low * (high / low) ** fraction)
        seen += count
    return bucket_bounds(max(histogram))[1]  # pragma: no cover - rank <= n always lands above


def percentiles(
    histogram: Mapping[int, int], qs: Iterable[float] = (50, 95, 99)
) -> dict[float, float | None]:
    return {q: percentile(histogram, q) for q in qs}


def exact_percentile(values: Iterable[float], q: float) -> float | None:
    """The nearest-rank percentile of plain values (what :func:`percentile` approximates)."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]
