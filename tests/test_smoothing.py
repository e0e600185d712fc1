"""The shared window helpers give, value for value, what the numpy idioms they replace give."""

from __future__ import annotations

import numpy as np
import pytest

from tbtriage.analysis.smoothing import (
    LOCAL_SIGMA_FLOOR,
    MAD_TO_SIGMA,
    local_baseline,
    row_medians,
    running_median,
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
