"""Latency histograms (runs.presenters.histogram): percentiles read from merged fixed log buckets
agree with the exact nearest-rank percentile of the values within one bucket's ratio."""

from __future__ import annotations

import random

import pytest

from runs.presenters import histogram

RATIO = 10 ** (1 / histogram.PER_DECADE)


def _hist(values):
    out: dict[int, int] = {}
    for v in values:
        b = histogram.bucket_of(v)
        out[b] = out.get(b, 0) + 1
    return out


@pytest.mark.parametrize("ms", [0, 0.5, 1, 1.2, 9.99, 10, 100, 999.9, 1000, 12_345, 10**8, 10**10])
def test_a_value_falls_in_the_bucket_that_bounds_it(ms):
    bucket = histogram.bucket_of(ms)
    low, high = histogram.bucket_bounds(bucket)
    if bucket == histogram.LAST:
        assert ms >= low
    else:
        assert low <= ms < high


def test_decade_bounds_open_their_own_bucket():
    assert histogram.bucket_of(1000) == histogram.bucket_of(1000.0001) == 31
    assert histogram.bucket_of(999.999) == 30


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("q", [50, 95, 99])
def test_percentiles_from_buckets_are_within_one_bucket_of_exact(seed, q):
    rng = random.Random(seed)
    values = [rng.lognormvariate(6, 1.5) for _ in range(rng.randint(1, 60))]
    exact = histogram.exact_percentile(values, q)
    approx = histogram.percentile(_hist(values), q)
    assert exact is not None and approx is not None
    assert exact / RATIO <= approx <= exact * RATIO


def test_merged_histograms_give_the_percentiles_of_all_values():
    days = [[120, 130, 5000], [80, 90, 100, 110, 60_000], [1]]
    merged = histogram.merge(_hist(d) for d in days)
    every = [v for d in days for v in d]
    assert histogram.total(merged) == len(every)
    for q in (50, 95, 99):
        exact = histogram.exact_percentile(every, q)
        assert exact / RATIO <= histogram.percentile(merged, q) <= exact * RATIO


def test_small_exact_cases():
    # nearest rank on 4 values: p50 is the 2nd, p95 and p99 the 4th
    values = [10, 20, 30, 40_000]
    h = _hist(values)
    assert histogram.exact_percentile(values, 50) == 20
    assert 20 / RATIO <= histogram.percentile(h, 50) <= 20 * RATIO
    assert 40_000 / RATIO <= histogram.percentile(h, 95) <= 40_000 * RATIO
    assert histogram.percentile({}, 50) is None and histogram.exact_percentile([], 50) is None
    assert histogram.percentile({0: 3}, 50) < 1  # sub-millisecond values stay below 1 ms
