"""The shared window helpers give, value for value, what the numpy idioms they replace give."""

from __future__ import annotations

import numpy as np
import pytest

from tbtriage.analysis import smoothing
from tbtriage.analysis.smoothing import (
    LOCAL_SIGMA_FLOOR,
    MAD_TO_SIGMA,
    NOISE_LAGS,
    _block_grid,
    _grid_interp,
    _indexed_medians,
    bucket_medians,
    local_baseline,
    mad_sigma,
    median,
    medians_around,
    percentile,
    row_medians,
    running_median,
    scale_noise,
    true_stretches,
    windows,
)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("width", [1, 2, 3, 4, 5, 19, 21])
def test_a_running_median_is_numpys_over_edge_padded_windows(dtype, width):
    rng = np.random.default_rng(width)
    for n in (1, 2, 3, 7, 50, 901):
        values = np.round(rng.normal(size=n), 1).astype(dtype)  # ties, as bucket medians have
        if n > 4:
            values[1], values[-2] = np.inf, -np.inf  # causes and twins pass ±inf for non-finite points
        padded = np.pad(values, width // 2, mode="edge")
        expected = row_medians(np.lib.stride_tricks.sliding_window_view(padded, width))[:n]
        if width % 2:
            numpy_median = np.median(np.lib.stride_tricks.sliding_window_view(padded, width), axis=1)
            assert np.array_equal(expected, numpy_median)
        got = running_median(values, width)
        assert got.dtype == expected.dtype and np.array_equal(got, expected)


def test_windows_are_numpys_sliding_windows_and_read_only():
    values = np.arange(10.0)
    got = windows(values, 4)
    assert np.array_equal(got, np.lib.stride_tricks.sliding_window_view(values, 4))
    with pytest.raises(ValueError):
        got[0, 0] = 1.0
    assert windows(values, 11).shape == (0, 11)


def test_the_local_baseline_pools_block_noise_over_reflected_ends():
    """The block sigmas are pooled over 5 neighbours with np.pad's 'reflect' ends (the edge not repeated)."""
    rng = np.random.default_rng(0)
    values = np.cumsum(rng.normal(size=2000)) + rng.normal(0, 3, 2000)
    base = local_baseline(values, 32)
    assert base.level.shape == values.shape and np.all(base.sigma > 0)
    # The same pooling written with np.pad, as the baseline did before.
    block = 32
    full = values.size // block
    starts = np.arange(0, values.size, block)
    centres = 0.5 * (starts + np.minimum(starts + block - 1, values.size - 1))
    medians = row_medians(values[: full * block].reshape(full, block), exact=False)
    medians = np.append(medians, np.median(values[full * block :])) if full * block < values.size else medians
    level = np.interp(np.arange(values.size, dtype=np.float64), centres, medians)
    deviation = np.abs(values - level)
    sigma = row_medians(deviation[: full * block].reshape(full, block), exact=False)
    if full * block < values.size:
        sigma = np.append(sigma, np.median(deviation[full * block :]))
    pooled = row_medians(np.lib.stride_tricks.sliding_window_view(np.pad(MAD_TO_SIGMA * sigma, 2, mode="reflect"), 5))
    floor = max(LOCAL_SIGMA_FLOOR * float(np.median(pooled)), 1e-9 * float(np.median(np.abs(medians))), 1e-300)
    assert np.array_equal(
        base.sigma, np.maximum(np.interp(np.arange(values.size, dtype=np.float64), centres, pooled), floor)
    )


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_the_baselines_interpolation_is_numpys_value_for_value():
    """`_grid_interp` (the whole-gap arithmetic, and its hand-over to np.interp) gives np.interp's every bit:
    even and odd blocks, with and without a short last block, zeros of both signs, NaN, ±inf, huge slopes."""
    rng = np.random.default_rng(13)
    for n in (2048, 2049, 3600, 3601, 4000, 4096, 5003):
        for block in (5, 6, 19, 22, 31, 32):
            grid = _block_grid(n, block)
            for case in range(12):
                fp = _awkward(rng, grid.centres.size, case)
                if case == 11:
                    fp[::2] = 1e308  # differences that overflow
                    fp[1::2] = -1e308
                assert _same(_grid_interp(grid, fp), np.interp(grid.index, grid.centres, fp)), (n, block, case)


def _awkward(rng: np.random.Generator, n: int, case: int) -> np.ndarray:
    """Values the engine meets: noise, many ties, zeros of both signs, a NaN, ±inf."""
    values = rng.normal(size=n) * 10.0 ** rng.integers(-3, 4)
    if case % 4 == 1:
        values = np.round(values)  # ties
    elif case % 4 == 2:
        values = np.round(values) * rng.choice([-0.0, 0.0, 1.0], size=n)  # zeros of both signs among ties
    if case % 5 == 3 and n > 2:
        values[rng.integers(0, n)] = np.nan
    if case % 7 == 4 and n > 2:
        values[rng.integers(0, n)] = rng.choice([np.inf, -np.inf])
    return values


def _same(a, b) -> bool:
    """Equal value for value, NaN for NaN, and even the sign of every zero."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=True) and bool((np.signbit(a) == np.signbit(b)).all())


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_median_and_percentile_are_numpys_value_for_value():
    rng = np.random.default_rng(5)
    for case in range(400):
        for n in (1, 2, 3, 10, 101, 1023, 1024, 1025, 3600):
            values = _awkward(rng, n, case)
            for repeats in (False, True):
                got = median(values, repeats=repeats)
                assert type(got) is float and _same(got, np.median(values)), (case, n, repeats)
            for q in (95, 2.5, [5, 50, 95], [10, 90], [0, 100], 99.9):
                expected = np.percentile(values, q)
                got = percentile(values, q)
                assert type(got) is type(expected) and _same(got, expected), (case, n, q)


@pytest.mark.parametrize("width", [1, 2, 3, 4, 5, 8, 9, 16, 22, 32, 255, 256, 257])
@pytest.mark.parametrize("exact", [True, False])
def test_row_medians_are_the_selections_value(width, exact):
    rng = np.random.default_rng(width)
    k = width // 2
    for case in range(60):
        rows = _awkward(rng, 600 * width, case).reshape(600, width)
        if case % 6 == 5:
            rows = rows[:7]  # few rows: neither the selection network nor the sort
        part = np.partition(rows, k, axis=1)
        expected = part[:, k] if width % 2 or not exact else 0.5 * (part[:, :k].max(axis=1) + part[:, k])
        assert _same(row_medians(rows, exact=exact), expected), case


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_scale_noise_is_the_largest_lags_mad_sigma():
    rng = np.random.default_rng(3)
    for case in range(300):
        n = int(rng.integers(3, 5000))
        values = np.cumsum(rng.normal(size=n)) * 0.01 + _awkward(rng, n, case)
        if case % 3 == 0:
            values = np.repeat(values[: n // 8 + 1], 8)[:n]  # a curve logged as a running value: long lags see more
        if case % 11 == 5:
            values = values * 1e-310  # subnormal differences (their MADs are not halved exactly)
        elif case % 11 == 6:
            values = np.round(values * 4)  # flat stretches: MADs of 0
        elif case % 11 == 7:
            values = values * 1e299
        elif case % 11 in (8, 9):  # curves whose longest lags see the curvature: most lags settled by counting
            n = max(n, 1024 + int(rng.integers(0, 3000)))
            noise = rng.normal(size=n) * 10.0 ** rng.integers(-9, -2)
            values = np.exp(-np.linspace(0, 6, n)) + (
                noise if case % 11 == 8 else np.exp(-np.linspace(0, 6, n)) * noise
            )
            if case % 4 == 3:
                values[rng.integers(0, n)] = rng.choice([np.nan, np.inf])
        estimates = []
        for lag in NOISE_LAGS:
            if lag > 1 and lag > n // 16:
                break
            stride = max(1, (n - 2 * lag) // 4096)
            middle = values[lag : n - lag : stride]
            residual = middle - 0.5 * (
                values[: n - 2 * lag : stride][: middle.size] + values[2 * lag :: stride][: middle.size]
            )
            estimates.append(mad_sigma(residual) / np.sqrt(1.5))
        expected = estimates[0]
        for estimate in estimates[1:]:
            expected = max(expected, estimate)
        got = scale_noise(values)
        assert type(got) is type(expected) and _same(got, expected), case


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("n", [128, 129, 225, 226, 511, 512, 900, 901, 1023, 1024])
def test_every_lag_at_once_gives_the_noise_each_lag_in_turn_gives(n, monkeypatch):
    rng = np.random.default_rng(n)
    cases = []
    for case in range(48):
        values = np.cumsum(rng.normal(size=n)) * 0.01 + _awkward(rng, n, case)
        if case % 3 == 0:
            values = np.repeat(values[: n // 8 + 1], 8)[:n]  # logged as a running value: the long lags see more
        if case % 5 == 4:
            values = np.exp(-np.linspace(0, 6, n)) + rng.normal(size=n) * 10.0 ** rng.integers(-9, -2)  # curvature
        if case % 7 == 6:
            values = values * 1e-310  # subnormal residuals
        cases.append(values)
    at_once = [scale_noise(values) for values in cases]
    monkeypatch.setattr(smoothing, "_ALL_LAGS_AT_ONCE", (1, 0))  # each lag in turn, with the counting tests
    for values, noise in zip(cases, at_once):
        expected = scale_noise(values)
        assert type(noise) is type(expected) and _same(noise, expected)


def test_bucket_medians_of_long_series_match_the_selection_per_bucket():
    rng = np.random.default_rng(8)
    for n in (1000, 2048, 3600, 5000, 8191):
        values = np.round(rng.normal(size=n), 1)
        steps = np.arange(n, dtype=np.int64) * 10
        buckets = bucket_medians(steps, values, 1024)
        full = n // buckets.size
        rows = values[: full * buckets.size].reshape(full, buckets.size)
        expected = np.partition(rows, buckets.size // 2, axis=1)[:, buckets.size // 2]
        assert np.array_equal(buckets.medians[:full], expected)
        assert np.array_equal(buckets.first, np.arange(0, n, buckets.size))
        last = np.minimum(buckets.first + buckets.size - 1, n - 1)  # the last bucket may end early
        assert np.array_equal(buckets.steps, 0.5 * (steps[buckets.first] + steps[last]).astype(np.float64))


def test_true_stretches_are_the_runs_of_true_values():
    mask = np.array([True, True, False, True, False, False, True])
    starts, ends = true_stretches(mask)
    assert starts.tolist() == [0, 3, 6] and ends.tolist() == [1, 3, 6]
    assert [a.size for a in true_stretches(np.zeros(4, dtype=bool))] == [0, 0]
    assert [a.tolist() for a in true_stretches(np.ones(3, dtype=bool))] == [[0], [2]]


def test_medians_around_are_the_medians_of_the_clipped_windows_either_side():
    rng = np.random.default_rng(11)
    for case in range(200):
        n = int(rng.integers(1, 300))
        values = np.round(rng.normal(size=n), 1) * 10.0 ** rng.integers(-3, 4)  # ties, as bucket medians have
        width = int(rng.integers(1, 40))
        starts = np.sort(rng.integers(0, n + 1, size=int(rng.integers(1, 12))))
        stops = starts + rng.integers(0, 6, size=starts.size)
        before, after = medians_around(values, starts, stops, width)
        for k, (start, stop) in enumerate(zip(starts, stops)):
            left, right = values[max(start - width, 0) : start], values[stop : stop + width]
            for got, window in ((before[k], left), (after[k], right)):
                expected = np.median(window) if window.size else np.nan
                assert np.array_equal(got, expected, equal_nan=True), (case, k)  # a zero's sign aside


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_medians_around_few_windows_are_the_all_at_once_medians_bit_for_bit():
    """A few excursions take their windows one slice at a time: the same medians, NaN and zero signs included,
    as the index arithmetic that handles many at once."""
    rng = np.random.default_rng(17)
    for case in range(300):
        n = int(rng.integers(1, 400))
        values = _awkward(rng, n, case)
        width = int(rng.integers(1, 40))
        starts = np.sort(rng.integers(-2, n + 3, size=int(rng.integers(1, 7))))
        stops = starts + rng.integers(0, 6, size=starts.size)
        offsets = np.arange(width)
        expected = _indexed_medians(
            values, np.concatenate((starts[:, None] - width + offsets, stops[:, None] + offsets))
        )
        before, after = medians_around(values, starts, stops, width)
        assert _same(before, expected[: starts.size]) and _same(after, expected[starts.size :]), case
