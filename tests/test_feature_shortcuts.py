"""The shortcuts `series_features` takes give what the long way gives: every one is exact, value for value."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tbtriage.analysis.datamodel import Series
from tbtriage.analysis.features import (
    LEVEL_BUCKETS,
    SPIKE_SCALES,
    Spike,
    _judged_buckets,
    _spikes_at,
    find_spikes,
    series_features,
)
from tbtriage.analysis.smoothing import Baseline, bucket_medians

# Values with many ties (a logger's rounding) and both signs, up to magnitudes where a mean of two could overflow.
tied_values = st.lists(
    st.one_of(st.integers(-5, 5).map(float), st.floats(-1e6, 1e6, allow_nan=False), st.sampled_from([1e306, -1e306])),
    min_size=16,
    max_size=700,
)


def _stress_baseline(y: np.ndarray, seed: int) -> Baseline:
    """A baseline that makes scattered points candidates (far above a level just below them), so that every
    check after the candidates (clusters, the levels before and after, recovery) runs."""
    rng = np.random.default_rng(seed)
    sigma = rng.uniform(1e-9, 1.0, y.size)
    level = y - np.where(rng.random(y.size) < 0.2, 100.0, 0.0) * sigma
    return Baseline(level, sigma, 8)


def _long_way(steps: np.ndarray, y: np.ndarray, scale: int, base: Baseline | None = None) -> list[Spike]:
    """What one scale of find_spikes examines, without any shortcut: its own buckets and baseline."""
    if scale == 1:
        return _spikes_at(steps, y, False, base)
    buckets = bucket_medians(steps, y, -(-y.size // scale))
    return _spikes_at(buckets.steps.astype(np.int64), buckets.medians, False)


@settings(max_examples=150, deadline=None)
@given(tied_values, st.booleans(), st.integers(0, 1000))
def test_a_monotone_curve_has_no_spike_at_any_scale_whatever_its_baseline(values, rising, seed):
    y = np.sort(np.array(values))
    y = y if rising else y[::-1].copy()
    steps = np.arange(y.size, dtype=np.int64) * 3
    with np.errstate(over="ignore"):  # 1e306 over a sigma of 1e-9 or 1e-300: z is +inf, a candidate like any other
        assert _spikes_at(steps, y, False, _stress_baseline(y, seed)) == []
        for scale in (1, 4, 16):
            assert _long_way(steps, y, scale) == []
    assert find_spikes(steps, y, scales=(1, 4, 16)) == ()


def test_the_stress_baseline_does_find_the_bump_of_a_curve_that_is_not_monotone():
    # The check above can fail: the same baseline finds the one point that breaks a falling curve's order.
    y = np.linspace(10.0, 0.0, 200)
    y[120] = 50.0
    found = _spikes_at(
        np.arange(200), y, False, Baseline(y - np.where(np.arange(200) == 120, 100.0, 0.0), np.ones(200), 8)
    )
    assert [s.peak_step for s in found] == [120]


@settings(max_examples=150, deadline=None)
@given(st.integers(16, 6000), st.booleans(), st.integers(0, 1000))
@example(3602, True, 0)  # level buckets of 4 = the scale-4 buckets, the last one of two points (a mean of logs)
@example(16002, True, 1)  # level buckets of 16 = the scale-16 buckets, the last one of two points
@example(16010, False, 2)
def test_spike_buckets_read_off_the_level_are_the_judged_values_own_buckets(n, log_scale, seed):
    rng = np.random.default_rng(seed)
    steps = np.cumsum(rng.integers(1, 4, n))
    x = np.round(np.exp(rng.normal(0, 1, n)), int(rng.integers(1, 6)))  # rounded: ties inside buckets
    x[x <= 0] = 0.5
    y = np.log10(x) if log_scale else x
    level = bucket_medians(steps, x, LEVEL_BUCKETS)
    for scale in SPIKE_SCALES[1:]:
        count = -(-n // scale)
        expected = bucket_medians(steps, y, count)
        got = _judged_buckets(steps, y, count, level, log_scale)
        assert got.size == expected.size
        np.testing.assert_array_equal(got.steps, expected.steps)
        np.testing.assert_array_equal(got.first, expected.first)
        np.testing.assert_array_equal(got.medians, expected.medians)


def _noisy_loss(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, n)
    loss = (1.5 + 2.5 * np.exp(-6 * t)) * np.exp(rng.normal(0, 0.03, n))
    loss[n // 3 : n // 3 + 10] *= 1.6  # a bump of ten points: found at scale 4
    loss[2 * n // 3 : 2 * n // 3 + 40] *= 1.4  # forty points: found at scale 16
    loss[rng.integers(0, n, 3)] *= 5.0  # single points
    return loss


def test_find_spikes_with_the_level_finds_what_it_finds_without():
    for n in (3600, 3601, 3602, 3603, 4096, 4097, 1000, 300):
        steps = np.arange(n, dtype=np.int64) * 10
        loss = _noisy_loss(n, n)
        level = bucket_medians(steps, loss, LEVEL_BUCKETS)
        spikes = find_spikes(steps, loss, log_scale=True, level=level)
        assert spikes == find_spikes(steps, loss, log_scale=True)
        if n >= 3600:  # the planted bumps are there (scale 4 reads the level off for 3072 < n <= 4096)
            assert sum(s.end_step - s.start_step >= 50 for s in spikes) >= 2


def test_series_features_find_the_spikes_the_long_way_finds():
    # NaN (the level then has fewer points than the series), non-positive values on log roles (a loss judged
    # linear, a gradient norm whose zeros leave the log), short series, lengths that do not divide evenly.
    cases = []
    for n in (3600, 3601, 2049, 257, 40, 17):
        loss = _noisy_loss(n, n + 1)
        with_nan = loss.copy()
        with_nan[:: max(2, n // 50)] = np.nan
        with_zeros = loss.copy()
        with_zeros[n // 2 :: 7] = 0.0
        cases += [(loss, "train_loss", True), (with_nan, "val_loss", True), (with_zeros, "train_loss", False)]
        cases += [(with_zeros, "grad_norm", True), (-loss, "loss_component", False)]
    for values, role, log_scale in cases:
        steps = np.arange(values.size, dtype=np.int64) * 5
        features = series_features("x", Series(steps, np.zeros(values.size), values), role, -1)
        finite = np.isfinite(values)
        scales = SPIKE_SCALES if role != "grad_norm" else SPIKE_SCALES[:1]
        expected = find_spikes(steps[finite], values[finite], log_scale=log_scale, scales=scales)
        assert features.extra.get("spikes", ()) == expected, (role, values.size)
