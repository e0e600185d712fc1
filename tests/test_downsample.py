"""Min/max bucketing: a chart of a million points still shows every spike and every NaN."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tbtriage.analysis.downsample import minmax_downsample


def test_a_single_spike_in_a_million_points_survives_downsampling_to_80_columns():
    steps = np.arange(1_000_000, dtype=np.float64)
    loss = np.full(steps.size, 1.0)
    loss[654_321] = 40.0
    loss[111_111] = -3.0

    shrunk = minmax_downsample(steps, loss, 80)

    assert len(shrunk) <= 160
    assert shrunk.y.max() == 40.0 and 654_321 in shrunk.x
    assert shrunk.y.min() == -3.0 and 111_111 in shrunk.x
    assert np.all(np.diff(shrunk.x) >= 0)


def test_nan_and_inf_points_come_back_as_markers_one_per_bucket_and_kind():
    steps = np.arange(1000, dtype=np.float64)
    loss = np.linspace(2.0, 1.0, 1000)
    loss[600:] = np.nan  # a run that diverged at 600
    loss[300] = np.inf
    loss[301] = -np.inf

    shrunk = minmax_downsample(steps, loss, 10)

    assert shrunk.nan_x.tolist() == [600.0, 700.0, 800.0, 900.0]
    assert shrunk.posinf_x.tolist() == [300.0]
    assert shrunk.neginf_x.tolist() == [301.0]
    assert np.isfinite(shrunk.y).all() and shrunk.x.max() < 600


def test_a_short_series_is_kept_whole_and_unsorted_wall_times_are_sorted():
    wall = np.array([5.0, 1.0, 3.0])
    values = np.array([0.5, 0.1, 0.3])

    shrunk = minmax_downsample(wall, values, 80)

    assert shrunk.x.tolist() == [1.0, 3.0, 5.0]
    assert shrunk.y.tolist() == [0.1, 0.3, 0.5]


def test_an_empty_or_single_step_series_downsamples_without_error():
    assert len(minmax_downsample(np.array([]), np.array([]), 10)) == 0
    one = minmax_downsample(np.zeros(5), np.array([1.0, 2.0, 0.0, 2.0, 1.0]), 1)
    assert sorted(one.y.tolist()) == [0.0, 2.0]


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(
        st.one_of(st.floats(min_value=-1e6, max_value=1e6), st.sampled_from([np.nan, np.inf, -np.inf])),
        min_size=1,
        max_size=400,
    ),
    buckets=st.integers(min_value=1, max_value=50),
)
def test_every_buckets_extremes_are_kept_and_nothing_is_invented(values, buckets):
    y = np.array(values, dtype=np.float64)
    x = np.arange(y.size, dtype=np.float64)

    shrunk = minmax_downsample(x, y, buckets)

    finite = np.isfinite(y)
    assert len(shrunk) <= max(2 * buckets, int(finite.sum()))
    assert np.all(y[shrunk.x.astype(int)] == shrunk.y)  # every kept point is a real point
    if finite.any():
        assert shrunk.y.max() == y[finite].max() and shrunk.y.min() == y[finite].min()
    assert bool(np.isnan(y).any()) == bool(shrunk.nan_x.size)
    assert bool((y == np.inf).any()) == bool(shrunk.posinf_x.size)
