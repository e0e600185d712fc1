"""Chart caches: pyramids, cached EMAs and the sorted outlier ranking draw exactly what the direct path draws."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tbtriage.analysis import downsample
from tbtriage.analysis.datamodel import Series
from tbtriage.analysis.downsample import Downsampled, build_pyramid, minmax_downsample, minmax_downsample_sorted
from tbtriage.analysis.smoothing import ema
from tbtriage.tui.chart_data import (
    OUTLIER_PERCENTILES,
    X_AXES,
    ChartCaches,
    ChartOptions,
    PreparedChart,
    SeriesRequest,
    SortedBlocks,
    bucket_lines,
    bucket_lines_cached,
    finish_chart,
    full_x_range,
    sorted_percentiles,
    window_percentiles,
)

FIELDS = ("x", "y", "nan_x", "posinf_x", "neginf_x")


def _assert_same(a: Downsampled, b: Downsampled) -> None:
    for name in FIELDS:
        left, right = getattr(a, name), getattr(b, name)
        assert left.shape == right.shape, name
        assert np.array_equal(left, right), name


def _assert_same_chart(a: PreparedChart, b: PreparedChart) -> None:
    assert a.x_range == b.x_range and a.y_range == b.y_range and a.y_ticks == b.y_ticks
    assert a.onsets == b.onsets and len(a.lines) == len(b.lines)
    for left, right in zip(a.lines, b.lines):
        assert (left.run, left.slot) == (right.run, right.slot)
        _assert_same(left.raw, right.raw)
        assert (left.smooth is None) == (right.smooth is None)
        if left.smooth is not None:
            _assert_same(left.smooth, right.smooth)


def _smoother(request: SeriesRequest, weight: float) -> np.ndarray:
    return ema(request.series.values, weight)


# ---- pyramids -----------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 3000),
    seed=st.integers(0, 2**32 - 1),
    decimals=st.integers(0, 2),
    nonfinite=st.floats(0.0, 0.5),
    buckets=st.integers(1, 90),
)
def test_pyramid_buckets_equal_scanning_every_point_for_any_range(n, seed, decimals, nonfinite, buckets):
    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.integers(0, 3, n)).astype(np.float64)  # repeated x too
    y = np.round(rng.standard_normal(n), decimals)  # few decimals: many equal extremes, the first must win
    kinds = rng.random(n)
    y[kinds < nonfinite] = np.nan
    y[kinds < nonfinite / 4] = np.inf
    y[kinds < nonfinite / 8] = -np.inf
    pyramid = build_pyramid(y)
    lo = int(rng.integers(0, n))
    hi = int(rng.integers(lo, n + 1))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(downsample, "DIRECT_POINTS", 0)  # the pyramid path even for small ranges
        for start, stop in ((0, n), (lo, hi)):
            _assert_same(
                minmax_downsample_sorted(x, y, pyramid, start, stop, buckets),
                minmax_downsample(x[start:stop], y[start:stop], buckets),
            )


def test_a_spike_in_a_million_points_survives_the_pyramid_at_every_zoom():
    x = np.arange(1_000_000, dtype=np.float64)
    y = np.sin(x / 5000.0)
    y[654_321] = 40.0
    y[900_000:] = np.nan
    pyramid = build_pyramid(y)
    for lo, hi in ((0, 1_000_000), (600_000, 700_000), (654_000, 655_000), (123_457, 901_235)):
        got = minmax_downsample_sorted(x, y, pyramid, lo, hi, 94)
        _assert_same(got, minmax_downsample(x[lo:hi], y[lo:hi], 94))
        assert (40.0 in got.y) == (lo <= 654_321 < hi)


# ---- the outlier range --------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(
            st.sampled_from([-2.5, -1.0, -0.0, 0.0, 1e-300, 0.5, 1.0, 3.0, 1e300]) | st.floats(-1e6, 1e6), min_size=1
        ),
        min_size=1,
        max_size=5,
    )
)
def test_sorted_percentiles_equal_numpy_percentile_of_all_the_values(parts):
    arrays = [np.sort(np.asarray(p, dtype=np.float64)) for p in parts]
    expected = np.percentile(np.concatenate(arrays), OUTLIER_PERCENTILES)
    got = sorted_percentiles(arrays, OUTLIER_PERCENTILES)
    assert got is not None
    assert got[0] == expected[0] and got[1] == expected[1]


def test_sorted_percentiles_of_nothing_is_none():
    assert sorted_percentiles([], OUTLIER_PERCENTILES) is None


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 30_000), min_size=1, max_size=4),
    seed=st.integers(0, 2**32 - 1),
    shape=st.sampled_from(["noise", "ascending", "steps", "few distinct", "spiky"]),
    nonfinite=st.floats(0.0, 0.9),
    log_y=st.booleans(),
    percentiles=st.sampled_from([OUTLIER_PERCENTILES, (0.0, 100.0), (49.9, 50.1), (1.0, 99.0)]),
    block=st.sampled_from([None, 1, 7, 64, 4096]),
)
def test_window_percentiles_equal_numpy_percentile_of_the_finite_values(
    sizes, seed, shape, nonfinite, log_y, percentiles, block
):
    """Unsorted windows of every shape a sample could misjudge: trends, plateaus, few values, rare huge spikes; read
    as they are, or as windows of a block-sorted curve (`block` points a block), starting and ending anywhere."""
    rng = np.random.default_rng(seed)
    windows: list = []
    for n in sizes:
        values = {
            "noise": rng.standard_normal(n),
            "ascending": np.linspace(-5, 5, n),
            "steps": np.repeat(rng.standard_normal(n // 1000 + 1), 1000)[:n],
            "few distinct": rng.integers(-2, 3, n).astype(np.float64),
            "spiky": np.where(rng.random(n) < 0.002, 1e9, rng.random(n)),
        }[shape]
        holes = rng.random(n) < nonfinite
        values[holes] = rng.choice([np.nan, np.inf, -np.inf], int(holes.sum()))
        windows.append(values)
    floor = 0.0 if log_y else -np.inf
    chosen = np.concatenate([w[np.isfinite(w) & (w > floor)] for w in windows])
    if block is not None:  # each window inside a longer curve, whose other values must not count
        before, after = rng.integers(0, 3 * block, 2)
        curves = [np.r_[rng.standard_normal(before) * 1e3, w, np.full(after, -7.0)] for w in windows]
        windows = [SortedBlocks.of(c, block).window(before, before + w.size) for c, w in zip(curves, windows)]
    got = window_percentiles(windows, percentiles, floor, np.log10 if log_y else None)
    if not chosen.size:
        assert got is None
        return
    expected = np.percentile(np.log10(chosen) if log_y else chosen, percentiles)
    assert got == (expected[0], expected[1])


# ---- the whole chart ----------------------------------------------------------------------------------


def _series(n: int, seed: int, restart: bool = False, broken: bool = False, nan_time: bool = False) -> Series:
    rng = np.random.default_rng(seed)
    steps = np.arange(n, dtype=np.int64) * 2
    wall = 1.7e9 + 0.05 * np.arange(n)
    if restart:  # the clock stepped back: wall time is not sorted
        wall[n // 2 :] -= 600.0
    if nan_time:
        wall[n // 3] = np.nan
    values = 0.3 + 2.0 * np.exp(-np.arange(n) / (n / 4)) + 0.05 * rng.standard_normal(n)
    if broken:
        values[int(n * 0.9) :] = np.nan
        values[7], values[n // 3] = np.inf, -np.inf
        values[: n // 10] *= -1  # negatives: left out on a log axis
    return Series(steps, wall, values)


@pytest.fixture(scope="module")
def requests_():
    return [
        SeriesRequest("plain", 0, _series(120_000, 1)),
        SeriesRequest("restarted", 1, _series(90_000, 2, restart=True)),
        SeriesRequest("broken", 2, _series(150_000, 3, broken=True)),
        SeriesRequest("nan-time", 3, _series(5_000, 4, nan_time=True)),  # falls back to the direct path
        SeriesRequest("empty", 4, Series.empty()),
    ]


def test_cached_charts_equal_direct_charts_for_every_key_combination(requests_):
    caches = ChartCaches()
    for weight, log_y, axis, outliers, window in itertools.product(
        (0.6, 0.0, 0.99), (False, True), X_AXES, (False, True), (None, 0.4, 0.0005)
    ):
        options = ChartOptions(smoothing=weight, log_y=log_y, x_axis=axis, ignore_outliers=outliers)
        if window is not None:
            full = full_x_range(requests_[:3], axis)
            assert full is not None
            span = full[1] - full[0]
            options = replace(options, window=(full[0] + 0.3 * span, full[0] + (0.3 + window) * span))
        direct = finish_chart(bucket_lines(requests_, options, 94, _smoother), options)
        cached = finish_chart(bucket_lines_cached(requests_, options, 94, caches), options)
        _assert_same_chart(cached, direct)
        assert caches.full_x_range(requests_, axis) == full_x_range(requests_, axis)


def test_a_series_is_smoothed_and_ranked_once_and_new_data_gets_a_new_cache():
    caches = ChartCaches(size=2)
    series = _series(10_000, 5)
    cache = caches(series)
    assert caches(series) is cache
    assert cache.curve(0.9) is cache.curve(0.9)
    assert cache.pyramid(0.9, "step") is cache.pyramid(0.9, "step")
    assert cache.pyramid(0.9, "wall") is cache.pyramid(0.9, "step")  # both axes in the same order: shared
    assert cache.ranked() is cache.ranked()
    appended = Series(series.steps[:-1], series.wall_times[:-1], series.values[:-1])
    assert caches(appended) is not cache
    caches(_series(10, 6))
    assert caches(series) is not cache  # evicted: at most two series kept


def test_caches_keep_a_bounded_number_of_points_but_always_the_latest_series():
    caches = ChartCaches(size=10, points=25_000)
    first, second, big = _series(10_000, 7), _series(10_000, 8), _series(30_000, 9)
    kept = caches(first)
    caches(second)
    assert caches(first) is kept  # 20,000 points: both fit
    caches(big)  # 30,000 alone exceeds the budget: only it stays
    assert caches(big) is caches(big)
    assert caches(first) is not kept


def test_a_growing_live_series_is_not_warmed_ahead_but_a_new_one_is():
    caches = ChartCaches()
    old = _series(20_000, 10)
    caches(old).warm("step")
    assert caches(old).ranked() is caches(old).ranked()
    more = _series(1_000, 12)
    grown = Series(  # the same curve with 1,000 points appended
        np.r_[old.steps, old.steps[-1] + 2 + more.steps],
        np.r_[old.wall_times, old.wall_times[-1] + 1 + more.wall_times - more.wall_times[0]],
        np.r_[old.values, more.values],
    )
    live = caches(grown)
    live.warm("step")
    assert live.grown and not live._ranked and not live._curves  # nothing computed ahead
    other = caches(_series(21_000, 11))  # another curve: warmed as usual
    other.warm("step")
    assert not other.grown and other._ranked and set(other._curves) == {0.6, 0.9, 0.99}
    # What a grown series draws is still the direct computation.
    options = ChartOptions(smoothing=0.9, ignore_outliers=True)
    request = [SeriesRequest("live", 0, grown)]
    _assert_same_chart(
        finish_chart(bucket_lines_cached(request, options, 80, caches), options),
        finish_chart(bucket_lines(request, options, 80, _smoother), options),
    )
