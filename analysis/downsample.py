"""Min/max bucketing: shrink a curve to a chart's width without losing its spikes.

A chart a few hundred cells wide cannot show a million points; averaging them (as many
viewers do) hides exactly the spikes a triage tool exists to show. Each bucket of equal x
width keeps its lowest and its highest finite point, in x order, so the drawn line still
reaches every extreme. Non-finite points (NaN, +Inf, -Inf) are returned apart, one per
bucket and kind, so a chart can draw them as markers instead of silently dropping them.

Pure numpy, vectorised over points: 1M points take about ten milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_EMPTY = np.empty(0, np.float64)


@dataclass(frozen=True, eq=False)
class Downsampled:
    """A curve reduced to at most two finite points per bucket, plus its non-finite markers."""

    x: np.ndarray  # float64, finite points in x order
    y: np.ndarray  # float64, finite
    nan_x: np.ndarray  # float64: x of the first NaN in each bucket that has one
    posinf_x: np.ndarray  # float64: same for +Inf
    neginf_x: np.ndarray  # float64: same for -Inf

    def __len__(self) -> int:
        return int(self.x.shape[0])


def minmax_downsample(x: np.ndarray, y: np.ndarray, buckets: int) -> Downsampled:
    """Keep each equal-width x bucket's min and max finite point; report non-finite points per bucket.

    `x` need not be sorted (wall times can step back after a restart); it is sorted stably
    when it is not. With no more points than `2 * buckets`, every finite point is kept.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"x and y differ in length: {x.shape[0]} vs {y.shape[0]}")
    if x.size == 0:
        return Downsampled(_EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY)
    if np.any(x[1:] < x[:-1]):
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
    starts = _bucket_starts(x, max(int(buckets), 1))

    finite = np.isfinite(y)
    all_finite = bool(finite.all())
    if all_finite:
        markers: tuple[np.ndarray, ...] = (_EMPTY, _EMPTY, _EMPTY)
    else:
        markers = tuple(_first_per_bucket(x, starts, kind) for kind in (np.isnan(y), y == np.inf, y == -np.inf))

    if (y.size if all_finite else int(finite.sum())) <= 2 * starts.size:
        return Downsampled(x[finite], y[finite], *markers) if not all_finite else Downsampled(x, y, *markers)

    # NaN is what fmin/fmax skip, so non-finite points become NaN (a copy, only when there are any).
    values = y if all_finite else np.where(finite, y, np.nan)
    counts = np.diff(np.r_[starts, values.size])
    keep = np.union1d(  # sorted, so x order; a flat bucket (min == max) collapses to one point
        _first_match_per_bucket(values, np.fmin.reduceat(values, starts), starts, counts),
        _first_match_per_bucket(values, np.fmax.reduceat(values, starts), starts, counts),
    )
    return Downsampled(x[keep], y[keep], *markers)


def _bucket_starts(x: np.ndarray, buckets: int) -> np.ndarray:
    """Index where each non-empty equal-width bucket of sorted `x` begins."""
    lo, hi = float(x[0]), float(x[-1])
    if not hi > lo:
        return np.zeros(1, np.int64)
    edges = lo + (hi - lo) * (np.arange(buckets) / buckets)
    return np.unique(np.searchsorted(x, edges, side="left"))


def _first_match_per_bucket(
    values: np.ndarray, extremes: np.ndarray, starts: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    """Index of the first point equal to its bucket's extreme (buckets with no finite point have none)."""
    hits = np.flatnonzero(values == np.repeat(extremes, counts))
    return _first_of_each(hits, np.searchsorted(starts, hits, side="right"))


def _first_per_bucket(x: np.ndarray, starts: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """x of the first point of `mask` in each bucket."""
    hits = np.flatnonzero(mask)
    return x[_first_of_each(hits, np.searchsorted(starts, hits, side="right"))]


def _first_of_each(positions: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """The first of `positions` in each group; `groups` is non-decreasing along them."""
    if positions.size == 0:
        return positions
    return positions[np.r_[True, groups[1:] != groups[:-1]]]
