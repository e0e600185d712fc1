"""The shortcuts `series_features` takes give what the long way gives: every one is exact, value for value."""

from __future__ import annotations

import math
import pickle
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tbtriage.analysis.datamodel import Run, Series
from tbtriage.analysis.engine import analyze_run
from tbtriage.analysis.features import (
    LEVEL_BUCKETS,
    MIN_POINTS_NOISE,
    PLATEAU_BUCKETS,
    PLATEAU_MIN_FRAC,
    PLATEAU_NOISE_K,
    PLATEAU_RANGE_FRAC,
    PLATEAU_ROLES,
    SPIKE_SCALES,
    Spike,
    _judged_buckets,
    _spikes_at,
    _trend,
    find_plateaus,
    find_spikes,
    series_features,
)
from tbtriage.analysis.smoothing import Baseline, bucket_medians, scale_noise

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


# ---- fields worked out when first read ------------------------------------------------------------------------


def _series_cases() -> list[tuple[np.ndarray, str]]:
    """Values and roles whose deferred features take every branch: noisy and flat losses, NaN and inf among the
    points, values near DBL_MAX (their differences overflow), metrics, an lr, too few points for a noise."""
    cases = []
    for n in (3600, 901, 257, 40, 9, 5):
        loss = _noisy_loss(n, n + 2)
        flat = np.where(np.arange(n) < n // 3, 2.303, loss)
        with_nan = loss.copy()
        with_nan[:: max(2, n // 30)] = np.nan
        with_nan[n // 2] = np.inf
        cases += [(loss, "train_loss"), (flat, "val_loss"), (with_nan, "metric"), (loss * 1e-4, "lr")]
        cases += [(loss / loss.max() * 1.5e308, "loss_component"), (-loss, "grad_norm")]
    return cases


def test_deferred_features_are_what_the_same_work_gives_at_once():
    for values, role in _series_cases():
        steps = np.arange(values.size, dtype=np.int64) * 5
        features = series_features("x", Series(steps, np.zeros(values.size), values), role, -1)
        finite = values[np.isfinite(values)]
        level = features.extra["level"]
        with np.errstate(all="ignore"):
            noise = float(scale_noise(finite)) if finite.size >= MIN_POINTS_NOISE else None
            plateaus = find_plateaus(level) if role in PLATEAU_ROLES else ()
            scale = max(abs(features.extra["recent_median"]), 0.05 * features.extra["scale"], 1e-12)
            trend = _trend(level, scale)
        assert _same_value(features.noise, noise), (role, values.size)
        assert features.plateaus == plateaus, (role, values.size)
        assert _same_value(features.trend, trend), (role, values.size)


def _same_value(a, b) -> bool:
    return a is b or (a is not None and b is not None and (a == b or (math.isnan(a) and math.isnan(b))))


def test_judging_a_run_leaves_the_fields_no_detector_read_for_later():
    # The point of deferring: an evaluated accuracy's flat stretches and noise are read by no detector.
    steps = np.arange(0, 9000, 10, dtype=np.int64)
    run = Run("r", path=None)
    loss = _noisy_loss(steps.size, 3)
    run.scalars = {
        "train/loss": Series(steps, steps * 1.0, loss),
        "eval/accuracy": Series(steps, steps * 1.0, 0.9 - 0.3 * loss / loss[0]),
    }
    features = analyze_run(run).features["eval/accuracy"]
    assert {"noise", "plateaus", "trend"} <= set(features.__dict__["_later"])
    assert "noise" not in features.__dict__
    assert features.noise == float(scale_noise(features_values(run, "eval/accuracy")))
    assert "noise" in features.__dict__ and "noise" not in features.__dict__["_later"]


def features_values(run: Run, tag: str) -> np.ndarray:
    values = run.scalars[tag].values
    return values[np.isfinite(values)]


def test_a_deferred_field_is_in_the_repr_a_copy_and_a_pickle_and_only_its_value_travels():
    steps = np.arange(0, 3000, 10, dtype=np.int64)
    values = _noisy_loss(steps.size, 4)
    made = lambda: series_features("loss", Series(steps, steps * 1.0, values), "train_loss", -1)  # noqa: E731
    whole = made()
    expected = (whole.noise, whole.plateaus, whole.trend)
    text = repr(whole)
    for name in ("noise", "plateaus", "trend"):
        assert f"{name}=" in text
    assert repr(made()) == text  # repr works the deferred fields out itself
    again = pickle.loads(pickle.dumps(made()))
    assert "_later" not in again.__dict__ and (again.noise, again.plateaus, again.trend) == expected
    assert repr(again) == text
    copied = replace(made(), extra={})
    assert (copied.noise, copied.plateaus, copied.trend) == expected
    assert "_later" not in made().without_curves().__dict__
    with pytest.raises(AttributeError):
        made().no_such_field  # noqa: B018


def test_a_deferred_field_read_after_the_engine_returned_raises_no_numpy_warning():
    steps = np.arange(0, 3000, 10, dtype=np.int64)
    loss = _noisy_loss(steps.size, 5)
    huge = loss / loss.max() * 1.5e308  # sums of two overflow to inf
    features = series_features("loss", Series(steps, steps * 1.0, huge), "loss_component", -1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        features.noise, features.plateaus, features.trend  # noqa: B018


def test_threads_reading_one_deferred_field_all_get_its_value():
    steps = np.arange(0, 30000, 10, dtype=np.int64)
    values = _noisy_loss(steps.size, 6)
    expected = series_features("loss", Series(steps, steps * 1.0, values), "train_loss", -1).noise
    for _ in range(20):
        features = series_features("loss", Series(steps, steps * 1.0, values), "train_loss", -1)
        with ThreadPoolExecutor(4) as pool:
            assert set(pool.map(lambda f: f.noise, [features] * 8)) == {expected}


def _plateaus_the_long_way(level) -> tuple[tuple[int, int], ...]:
    """find_plateaus as it was written first: every window's drift by index arrays, the covered points by a
    convolution of the flat windows with a window of ones."""
    if len(level) < 20:
        return ()
    y = level.medians
    if y.size > PLATEAU_BUCKETS:
        coarse = bucket_medians(level.steps, y, PLATEAU_BUCKETS)
        y, centres = coarse.medians, bucket_medians(level.steps, level.steps, PLATEAU_BUCKETS).medians
    else:
        centres = level.steps
    m = y.size
    width = max(8, int(np.ceil(PLATEAU_MIN_FRAC * m)))
    if m < width + 2:
        return ()
    quarter = max(2, width // 4)
    quarter_medians = np.median(np.lib.stride_tricks.sliding_window_view(y, quarter), axis=1)
    starts = np.arange(m - width + 1)
    drift = np.abs(quarter_medians[starts + width - quarter] - quarter_medians[starts])
    drift_noise = 1.2533 * scale_noise(y) * np.sqrt(2.0 / quarter)
    lo, hi = np.percentile(y, [5, 95])
    band = max(PLATEAU_NOISE_K * drift_noise, PLATEAU_RANGE_FRAC * (hi - lo), 1e-12 * max(abs(hi), abs(lo)))
    flat = drift <= band
    if not flat.any():
        return ()
    covered = np.convolve(flat.astype(np.int64), np.ones(width, dtype=np.int64))[:m] > 0
    edges = np.diff(np.concatenate(([0], covered.astype(np.int8), [0])))
    return tuple(
        (int(centres[b]), int(centres[f])) for b, f in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1)
    )


@settings(max_examples=300, deadline=None)
@given(st.integers(18, 1400), st.integers(0, 7), st.integers(0, 10_000))
@example(300, 6, 0)  # flat stretches a few points apart: their covered points touch
@example(40, 4, 1)  # a constant
def test_flat_stretches_are_what_the_long_way_finds(n, shape, seed):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, n)
    values = [
        2.0 + 3.0 * np.exp(-6 * t) * np.exp(rng.normal(0, 0.05, n)),  # a falling loss: flat at its end
        np.where(t < 0.4, 2.303, 0.3 + 2.0 * np.exp(-(t - 0.4) * 8)) + rng.normal(0, 0.01, n),  # flat, then a fall
        np.round(rng.normal(size=n), 1),  # noise with ties
        np.cumsum(rng.normal(size=n)),  # a random walk
        np.full(n, 1.5),
        np.repeat(rng.normal(size=n // 10 + 1), 10)[:n],  # steps
        np.where((np.arange(n) // max(1, n // 12)) % 2 == 0, 1.0, 1.0 + rng.normal(0, 0.3, n)),  # flat, noisy, ...
        np.where(rng.random(n) < 0.5, 0.0, -0.0),  # signed zeros
    ][shape]
    steps = np.cumsum(rng.integers(1, 4, n))
    level = bucket_medians(steps, values, LEVEL_BUCKETS)
    assert find_plateaus(level) == _plateaus_the_long_way(level)
