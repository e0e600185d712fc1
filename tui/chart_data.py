"""What a chart draws, computed without a terminal: x axis, zoom window, smoothing, log-y, y range.

The chart widget only turns a `PreparedChart` into plotext calls, so everything that decides
what the user sees (which points survive downsampling, where NaN markers and finding onsets
go, the outlier-ignoring range) is a pure function tested here on numbers.

Log-y is done here, not with plotext's `yscale("log")`: plotext transforms its stored data in
place on every build, so a second build (any resize or refresh) takes the log of a log and
raises `ValueError: math domain error` (textual-plotext's documented known issue). Plotting
log10 values with our own decade ticks makes every rebuild identical.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np

from tbtriage.analysis.axes import series_step
from tbtriage.analysis.datamodel import Series
from tbtriage.analysis.downsample import (
    Downsampled,
    Pyramid,
    build_pyramid,
    minmax_downsample,
    minmax_downsample_sorted,
)
from tbtriage.analysis.smoothing import ema
from tbtriage.analysis.text import tick
from tbtriage.tui.chart_options import (  # noqa: F401 - imported from here by the chart's users
    SMOOTHING_WEIGHTS,
    X_AXES,
    X_AXIS_TITLES,
    ChartOptions,
    SeriesRequest,
)

#: The outlier-ignoring y range keeps the 5th to 95th percentile, as TensorBoard's option does.
OUTLIER_PERCENTILES = (5.0, 95.0)

#: Fraction of the y span added above and below, so extremes and markers do not sit on the frame.
Y_MARGIN = 0.05

#: Min/max buckets per chart cell. One: each cell still spans its bucket's lowest to highest point
#: (so no spike is lost), and plotext, whose build time grows with the points it connects, draws
#: half as many as with one bucket per braille dot column (measured: 134 -> 70 ms for 5 runs).
BUCKETS_PER_CELL = 1


@dataclass(frozen=True, eq=False)
class ChartLine:
    run: str
    slot: int
    raw: Downsampled  # y already log10 when log-y
    smooth: Downsampled | None


@dataclass(frozen=True)
class Onset:
    x: float
    severity: str
    kind: str


@dataclass(frozen=True, eq=False)
class PreparedChart:
    lines: tuple[ChartLine, ...]
    onsets: tuple[Onset, ...]
    x_range: tuple[float, float] | None
    y_range: tuple[float, float] | None
    x_label: str
    x_ticks: tuple[tuple[float, ...], tuple[str, ...]] | None = None
    y_ticks: tuple[tuple[float, ...], tuple[str, ...]] | None = None

    @property
    def empty(self) -> bool:
        return not any(len(line.raw) or line.raw.nan_x.size for line in self.lines)


Smoother = Callable[[SeriesRequest, float], np.ndarray]


def x_column(series: Series, axis: str) -> np.ndarray:
    """The x values of `series` on `axis`: steps, seconds since the first event, or wall seconds."""
    if axis == "step":
        return series.steps.astype(np.float64)
    if axis == "relative":
        return series.wall_times - (series.wall_times[0] if len(series) else 0.0)
    return np.asarray(series.wall_times, dtype=np.float64)


def full_x_range(requests: Sequence[SeriesRequest], axis: str) -> tuple[float, float] | None:
    """The x extent of all requested series on `axis` (what zoom and pan are bounded by)."""
    lows, highs = [], []
    for request in requests:
        if len(request.series):
            x = x_column(request.series, axis)
            lows.append(float(x.min()))
            highs.append(float(x.max()))
    return (min(lows), max(highs)) if lows else None


@dataclass(frozen=True, eq=False)
class BucketedLines:
    """The expensive half of a chart: windowed, smoothed, min/max-bucketed lines on a linear y axis.

    It depends on the x axis, zoom window, smoothing and width only, so toggling log-y or the outlier
    range reuses it (a widget keeps a few); the outlier range is computed on first use and kept.
    """

    lines: tuple[ChartLine, ...]
    onsets: tuple[Onset, ...]
    x_range: tuple[float, float] | None
    #: Per line, its raw values inside the window (computed when first asked): the finite ones in ascending order
    #: (True), or all of them, as they come or block-sorted (False).
    window_values: tuple[Callable[[], tuple[np.ndarray | BlockedWindow, bool]], ...] = ()
    _percentiles: dict[bool, tuple[float, float] | None] = field(default_factory=dict, repr=False)

    def percentile_range(self, log_y: bool) -> tuple[float, float] | None:
        """The OUTLIER_PERCENTILES of every finite raw value in the window (of log10 of the positive ones)."""
        if log_y not in self._percentiles:
            found = [values() for values in self.window_values]
            transform = np.log10 if log_y else None
            if all(ascending for _, ascending in found):
                parts = [v for v, _ in found if isinstance(v, np.ndarray)]
                if log_y:  # the positive tail; log10 keeps the order, so it is applied to the chosen values only
                    parts = [v[np.searchsorted(v, 0.0, side="right") :] for v in parts]
                parts = [v for v in parts if v.size]
                self._percentiles[log_y] = sorted_percentiles(parts, OUTLIER_PERCENTILES, transform)
            else:
                floor = 0.0 if log_y else -math.inf
                self._percentiles[log_y] = window_percentiles(
                    [v for v, _ in found], OUTLIER_PERCENTILES, floor, transform
                )
        return self._percentiles[log_y]


def bucket_lines(
    requests: Sequence[SeriesRequest], options: ChartOptions, width: int, smoother: Smoother
) -> BucketedLines:
    """Window, smooth and min/max-bucket `requests` for a chart `width` cells wide (log-y and range not applied).

    The direct way: every point is scanned again. `bucket_lines_cached` draws the same from caches.
    """
    buckets = max(width, 1) * BUCKETS_PER_CELL
    lines, window_values = [], []
    for request in requests:
        x = x_column(request.series, options.x_axis)
        raw = request.series.values
        smooth = smoother(request, options.smoothing) if options.smoothing > 0 and len(raw) else None
        line, inside = _direct_line(request, x, raw, smooth, options.window, buckets)
        lines.append(line)
        window_values.append(partial(_sorted_finite, inside))
    return _bucketed(requests, options, lines, window_values, partial(full_x_range, requests))


def _direct_line(request: SeriesRequest, x: np.ndarray, raw: np.ndarray, smooth: np.ndarray | None,
                 window: tuple[float, float] | None, buckets: int) -> tuple[ChartLine, np.ndarray]:  # fmt: skip
    """One request's line by scanning its points, and its raw values inside the window."""
    if window is not None:
        inside = (x >= window[0]) & (x <= window[1])
        x, raw = x[inside], raw[inside]
        smooth = smooth[inside] if smooth is not None else None
    smoothed = minmax_downsample(x, smooth, buckets) if smooth is not None else None
    return ChartLine(request.run, request.slot, minmax_downsample(x, raw, buckets), smoothed), raw


def _bucketed(requests, options, lines, window_values, full_range: Callable[[str], tuple[float, float] | None]):
    onsets = [onset for request in requests for onset in _onsets(request, options)]
    x_range = options.window or full_range(options.x_axis)
    onsets = [o for o in onsets if x_range is None or x_range[0] <= o.x <= x_range[1]]
    return BucketedLines(tuple(lines), tuple(onsets), x_range, tuple(window_values))


def _sorted_finite(values: np.ndarray) -> tuple[np.ndarray, bool]:
    return np.sort(values[np.isfinite(values)]), True


def sorted_percentiles(
    parts: Sequence[np.ndarray], percentiles: Sequence[float], transform: Callable[[np.float64], float] | None = None
) -> tuple[float, float] | None:
    """`np.percentile(transform(np.concatenate(parts)), percentiles)` (linear method) for non-empty ascending
    `parts` and an increasing `transform`, read from the two order statistics each percentile needs instead of
    transforming and partitioning every value."""
    count = sum(int(v.size) for v in parts)
    if not count:
        return None
    ks = _order_statistics(count, percentiles)
    return _interpolated({k: _kth(parts, k) for k in ks}, count, percentiles, transform)


def window_percentiles(
    windows: Sequence[np.ndarray | BlockedWindow],
    percentiles: Sequence[float],
    floor: float = -math.inf,
    transform: Callable[[np.float64], float] | None = None,
) -> tuple[float, float] | None:
    """`sorted_percentiles` of the finite values above `floor` in `windows`, arrays in no order or `BlockedWindow`s:
    each order statistic is bracketed from a sample of the windows, the values below the bracket are counted and the
    few inside it partitioned, so a window of millions of points is read a few times instead of filtered and sorted
    (a blocked window is not read at all: it is counted and gathered by binary searches in its sorted blocks)."""
    parts = [w if isinstance(w, BlockedWindow) else _ScannedWindow(w) for w in windows]
    # Finite and above the floor, as a closed range: the values from `bottom` to `top`.
    bottom, top = math.nextafter(floor, math.inf), math.nextafter(math.inf, 0.0)
    count = sum(w.count_in(bottom, top) for w in parts)
    if not count:
        return None
    ks = _order_statistics(count, percentiles)
    sample = np.sort(np.concatenate([w.sample(max(w.size // WINDOW_SAMPLE, 1)) for w in parts]))
    sample = sample[(sample >= bottom) & (sample <= top)]
    found: dict[int, np.float64] = {}
    for k in ks:
        if k in found:
            continue
        wanted = [j for j in ks if k <= j <= k + 1]  # the two neighbours a percentile interpolates between
        q = min(max((k + 0.5) / count, 0.0), 1.0)
        spread = 4.0 * math.sqrt(sample.size * q * (1 - q)) + 16.0  # sample ranks either side: 4 standard errors
        while True:
            at = (k + 0.5) / count * sample.size
            low = int(at - spread)
            high = int(at + spread) + 1
            low_value = float(sample[low]) if 0 <= low < sample.size else bottom
            high_value = float(sample[high]) if 0 <= high < sample.size else top
            below_bracket = math.nextafter(low_value, -math.inf)
            counted = [w.count_and_gather((bottom, below_bracket), (low_value, high_value)) for w in parts]
            below = sum(n for n, _ in counted)
            bracket = np.concatenate([inside for _, inside in counted])
            if below <= min(wanted) and max(wanted) < below + bracket.size:
                chosen = np.partition(bracket, [j - below for j in wanted])
                found.update({j: chosen[j - below] for j in wanted})
                break
            spread *= 8  # the sample misled (a window much unlike its sample): widen, at worst to every value
    return _interpolated(found, count, percentiles, transform)


class _ScannedWindow:
    """Values in no order, counted and gathered by reading them all."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values
        self.size = values.size

    def sample(self, step: int) -> np.ndarray:
        return self.values[::step]

    def count_in(self, low: float, high: float) -> int:
        """How many values lie in [low, high] (NaN never does)."""
        return int(np.count_nonzero((self.values >= low) & (self.values <= high)))

    def count_and_gather(self, counted: tuple[float, float], gathered: tuple[float, float]) -> tuple[int, np.ndarray]:
        """How many values lie in the range `counted`, and the values in the range `gathered` (in no order)."""
        return self.count_in(*counted), self.values[(self.values >= gathered[0]) & (self.values <= gathered[1])]


#: Points per block of a curve's block-sorted copy (`SortedBlocks`): a window reads its whole blocks by binary search
#: (12 steps, all blocks at once) and scans the at most two partial blocks at its ends.
SORTED_BLOCK = 4096


@dataclass(frozen=True, eq=False)
class SortedBlocks:
    """A curve, and each aligned block of `block` points of it sorted (NaN last): built once per curve (a sort of
    short rows), it answers how many of a window's values lie in a range, and which, without reading the window."""

    values: np.ndarray
    rows: np.ndarray  # (len(values) // block, block)
    block: int

    @classmethod
    def of(cls, values: np.ndarray, block: int = SORTED_BLOCK) -> SortedBlocks:
        whole = values.size // block
        return cls(values, np.sort(values[: whole * block].reshape(whole, block), axis=1), block)

    def window(self, lo: int, hi: int) -> BlockedWindow:
        """The values at positions [lo, hi)."""
        return BlockedWindow(self, lo, hi)


class BlockedWindow:
    """Positions [lo, hi) of a `SortedBlocks` curve: its whole blocks searched, its partial ends scanned."""

    def __init__(self, blocks: SortedBlocks, lo: int, hi: int) -> None:
        self.blocks = blocks
        self.lo, self.hi = lo, hi
        self.size = max(hi - lo, 0)
        first, end = -(-lo // blocks.block), hi // blocks.block
        if first >= end:  # no whole block: all scanned
            first = end = 0
            self._ends = [_ScannedWindow(blocks.values[lo:hi])]
        else:
            self._ends = [_ScannedWindow(blocks.values[lo : first * blocks.block]),
                          _ScannedWindow(blocks.values[end * blocks.block : hi])]  # fmt: skip
        self._rows = blocks.rows[first:end]

    def sample(self, step: int) -> np.ndarray:
        return self.blocks.values[self.lo : self.hi : step]

    def count_in(self, low: float, high: float) -> int:
        """How many values lie in [low, high] (NaN never does)."""
        return self.count_and_gather((low, high), (1.0, 0.0))[0]

    def count_and_gather(self, counted: tuple[float, float], gathered: tuple[float, float]) -> tuple[int, np.ndarray]:
        """How many values lie in the range `counted`, and the values in the range `gathered` (in no order)."""
        ends = [e.count_and_gather(counted, gathered) for e in self._ends]
        count, inside = sum(n for n, _ in ends), [v for _, v in ends]
        if not len(self._rows):
            return count, np.concatenate(inside)
        # Per row, where each range starts (the first entry not below it) and ends (the first above it).
        starts, stops = _row_counts(self._rows, np.array([counted[0], gathered[0], counted[1], gathered[1]]), 2)
        lengths = np.maximum(stops - starts, 0)  # an empty range (low > high) has none
        count += int(lengths[:, 0].sum())
        row = np.repeat(np.arange(len(self._rows)), lengths[:, 1])
        offset = np.arange(row.size) - np.repeat(np.cumsum(lengths[:, 1]) - lengths[:, 1], lengths[:, 1])
        return count, np.concatenate([self._rows[row, starts[row, 1] + offset], *inside])


def _row_counts(rows: np.ndarray, values: np.ndarray, strict: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ascending `rows` (NaN last) and per value, how many entries are below it (the first `strict`
    values) or at most it (the others): the branchless binary search, every row and value at once. Returns the two
    groups' columns apart."""
    width = rows.shape[1]
    at = np.arange(len(rows))[:, None]
    count = np.zeros((len(rows), values.size), np.int64)
    strictly = np.arange(values.size) < strict
    step = 1 << max(width - 1, 0).bit_length()
    while step:
        candidate = count + step
        probe = rows[at, np.minimum(candidate, width) - 1]
        below = np.where(strictly, probe < values, probe <= values)  # NaN compares False: never counted
        count = np.where((candidate <= width) & below, candidate, count)
        step >>= 1
    return count[:, :strict], count[:, strict:]


#: Points sampled from each window to bracket an order statistic.
WINDOW_SAMPLE = 4096


def _order_statistics(count: int, percentiles: Sequence[float]) -> list[int]:
    """The ranks (from 0) `_interpolated` reads for `percentiles` of `count` values."""
    ks = []
    for at in _virtual(count, percentiles):
        if at >= count - 1 or at < 0:
            ks.append(count - 1 if at >= 0 else 0)
        else:
            ks += [int(np.floor(at)), int(np.floor(at)) + 1]
    return sorted(set(ks))


def _virtual(count: int, percentiles: Sequence[float]) -> np.ndarray:
    """numpy's virtual index of each percentile among `count` values (the linear method)."""
    return (count - 1) * (np.asarray(percentiles, dtype=np.float64) / 100)


def _interpolated(
    kth: dict[int, np.float64], count: int, percentiles: Sequence[float], transform: Callable | None
) -> tuple[float, float]:
    """numpy's linear-method percentiles from the order statistics `kth` (rank -> value) of `count` values."""
    order = (lambda k: transform(kth[k])) if transform is not None else (lambda k: kth[k])
    found = []
    for at in _virtual(count, percentiles):
        if at >= count - 1 or at < 0:
            found.append(float(order(count - 1 if at >= 0 else 0)))
            continue
        below = int(np.floor(at))
        a, b, t = order(below), order(below + 1), at - np.floor(at)
        diff = b - a  # numpy's _lerp: the nearer end is the anchor, so t near 1 gives exactly b
        found.append(float(b - diff * (1 - t) if t >= 0.5 else a + diff * t))
    return found[0], found[1]


_SIGN = np.int64(-(2**63))
_MAGNITUDE = np.int64(2**63 - 1)


def _kth(parts: Sequence[np.ndarray], k: int) -> np.float64:
    """The k-th smallest (from 0) value of the union of ascending `parts`, by bisection on the ordered
    float64 bit patterns: 64 rounds of one binary search per part."""
    if len(parts) == 1:
        return parts[0][k]

    def key(v) -> int:
        bits = int(np.float64(v).view(np.int64))
        return bits if bits >= 0 else ~(bits & int(_MAGNITUDE))

    def value(k_: int) -> np.float64:
        bits = k_ if k_ >= 0 else (~k_) | int(_SIGN)
        return np.int64(bits).view(np.float64)

    low, high = key(min(v[0] for v in parts)), key(max(v[-1] for v in parts))
    while low < high:
        middle = (low + high) // 2
        if sum(int(np.searchsorted(v, value(middle), side="right")) for v in parts) > k:
            high = middle
        else:
            low = middle + 1
    return value(low)


# ---- per-series caches: what every key press reuses -----------------------------------------------------


class SeriesCache:
    """What charts derive from one series, computed once (in a chart's worker thread) and reused by every
    key press: x columns per axis, the EMA per smoothing weight, a bucket pyramid per curve, the finite
    values sorted for the outlier range. Thread-safe: the UI thread reads x ranges while a worker fills it.
    """

    def __init__(self, series: Series, grown: bool = False) -> None:
        self.series = series
        #: The series is a longer version of one already cached (a live run): it is replaced again at the next
        #: follow pass, so only what is drawn is computed, nothing ahead (`warm` does nothing).
        self.grown = grown
        self._lock = threading.RLock()
        self._columns: dict[str, tuple[np.ndarray, np.ndarray | None, bool]] = {}
        self._curves: dict[float, np.ndarray] = {}
        self._pyramids: dict[tuple[float, str | None], tuple[np.ndarray, Pyramid]] = {}
        self._ranked: dict[None, np.ndarray] = {}
        self._blocks: dict[str | None, SortedBlocks] = {}

    def _remember(self, store: dict, key, make):
        found = store.get(key)
        if found is None:
            with self._lock:
                found = store.get(key)
                if found is None:
                    found = store[key] = make()
        return found

    def column(self, axis: str) -> tuple[np.ndarray, np.ndarray | None, bool]:
        """x on `axis` in ascending order, the stable order that sorts it (None if already sorted), and whether
        every x is finite (the cached path needs that; a hostile file's NaN times take the direct path)."""

        def make():
            x = x_column(self.series, axis)
            if not np.isfinite(x).all():
                return x, None, False
            if np.any(x[1:] < x[:-1]):
                order = np.argsort(x, kind="stable")
                return x[order], order, True
            return x, None, True

        return self._remember(self._columns, axis, make)

    def _order_key(self, axis: str) -> str | None:
        """Axes already in ascending order (steps; wall times without restarts) share their pyramids."""
        return axis if self.column(axis)[1] is not None else None

    def curve(self, weight: float) -> np.ndarray:
        """The raw values (weight 0) or their EMA at `weight`, in step order."""
        if weight <= 0:
            return self.series.values
        return self._remember(self._curves, weight, lambda: ema(self.series.values, weight))

    def pyramid(self, weight: float, axis: str) -> tuple[np.ndarray, Pyramid]:
        """The curve at `weight` in `axis` order, and its bucket pyramid."""

        def make():
            order = self.column(axis)[1]
            y = self.curve(weight) if order is None else self.curve(weight)[order]
            return y, build_pyramid(y)

        return self._remember(self._pyramids, (weight, self._order_key(axis)), make)

    def ranked(self) -> np.ndarray:
        """The finite raw values in ascending order (the outlier range of the whole series)."""

        def make():
            y = self.series.values
            return np.sort(y[np.isfinite(y)])

        return self._remember(self._ranked, None, make)

    def sorted_blocks(self, axis: str) -> SortedBlocks:
        """The raw values in `axis` order, block-sorted (the outlier range of a zoomed window)."""
        return self._remember(self._blocks, self._order_key(axis), lambda: SortedBlocks.of(self.pyramid(0.0, axis)[0]))

    def window_values(self, axis: str, lo: int, hi: int) -> tuple[np.ndarray | BlockedWindow, bool]:
        """The raw values at positions [lo, hi) of `axis` order: every finite one in ascending order (True) when that
        is all of them (the ranking), else the window of the block-sorted values (False: for `window_percentiles`)."""
        if lo <= 0 and hi >= len(self.series):
            return self.ranked(), True
        return self.sorted_blocks(axis).window(lo, hi), False

    def x_range(self, axis: str) -> tuple[float, float] | None:
        if not len(self.series):
            return None
        x, _, finite = self.column(axis)
        return (float(x[0]), float(x[-1])) if finite else (float(x.min()), float(x.max()))

    def warm(self, axis: str, cancelled: Callable[[], bool] = lambda: False) -> None:
        """Compute now what the keys will ask for, cheapest first: every smoothing weight's pyramid on `axis`,
        the other axes' columns, then the outlier ranking (a sort of every value) and the block-sorted values (the
        outlier range of a zoomed window). Stops when `cancelled()`."""
        steps: list[Callable[[], object]] = [partial(self.pyramid, w, axis) for w in SMOOTHING_WEIGHTS if w > 0]
        steps += [partial(self.column, other) for other in X_AXES]
        steps += [self.ranked, partial(self.sorted_blocks, axis)]
        for step in steps:
            if self.grown or cancelled() or not self.column(axis)[2]:
                return
            step()


#: Series whose caches a chart keeps (least recently used dropped first): a few selections' worth...
SERIES_CACHE_SIZE = 32
#: ...and at most this many points in all (a warmed cache holds ~70 bytes per point: EMAs, x columns, ranking,
#: sorted blocks); the series asked for last is always kept, however long.
SERIES_CACHE_POINTS = 8_000_000


class ChartCaches:
    """`SeriesCache`s by series identity, least recently used dropped first."""

    def __init__(self, size: int = SERIES_CACHE_SIZE, points: int = SERIES_CACHE_POINTS) -> None:
        self.size = size
        self.points = points
        self._entries: dict[int, SeriesCache] = {}
        self._lock = threading.Lock()

    def __call__(self, series: Series) -> SeriesCache:
        with self._lock:
            entry = self._entries.pop(id(series), None)
            # The series is kept in its entry, so its id cannot be reused by another series meanwhile.
            if entry is None or entry.series is not series:
                entry = SeriesCache(series, any(_grown_from(e.series, series) for e in self._entries.values()))
            held = sum(len(e.series) for e in self._entries.values()) + len(series)
            while self._entries and (len(self._entries) >= self.size or held > self.points):
                held -= len(self._entries.pop(next(iter(self._entries))).series)
            self._entries[id(series)] = entry
            return entry

    def full_x_range(self, requests: Sequence[SeriesRequest], axis: str) -> tuple[float, float] | None:
        """`full_x_range`, from the cached columns."""
        ranges = [r for r in (self(request.series).x_range(axis) for request in requests) if r is not None]
        return (min(r[0] for r in ranges), max(r[1] for r in ranges)) if ranges else None


def _grown_from(old: Series, new: Series) -> bool:
    """Whether `new` is `old` with points appended (a live run's next read), judged by both ends of `old`."""
    n = len(old)
    if not 0 < n < len(new):
        return False
    return bool(
        new.steps[0] == old.steps[0]
        and new.steps[n - 1] == old.steps[n - 1]
        and new.wall_times[n - 1] == old.wall_times[n - 1]
        and (new.values[n - 1] == old.values[n - 1] or (np.isnan(new.values[n - 1]) and np.isnan(old.values[n - 1])))
    )


def bucket_lines_cached(
    requests: Sequence[SeriesRequest], options: ChartOptions, width: int, caches: ChartCaches
) -> BucketedLines:
    """`bucket_lines`, the same lines, from per-series caches: pyramids instead of scanning every point."""
    buckets = max(width, 1) * BUCKETS_PER_CELL
    lines: list[ChartLine] = []
    window_values: list[Callable[[], tuple[np.ndarray | BlockedWindow, bool]]] = []
    for request in requests:
        cache = caches(request.series)
        x, _, finite = cache.column(options.x_axis)
        weight = options.smoothing if options.smoothing > 0 and len(x) else 0.0
        if not finite:  # the direct way, on this series alone
            x = x_column(request.series, options.x_axis)
            curve = cache.curve(weight) if weight else None
            line, inside = _direct_line(request, x, request.series.values, curve, options.window, buckets)
            lines.append(line)
            window_values.append(partial(_sorted_finite, inside))
            continue
        lo, hi = 0, len(x)
        if options.window is not None:
            lo = int(np.searchsorted(x, options.window[0], side="left"))
            hi = int(np.searchsorted(x, options.window[1], side="right"))
        raw = minmax_downsample_sorted(x, *cache.pyramid(0.0, options.x_axis), lo, hi, buckets)
        smooth = (
            minmax_downsample_sorted(x, *cache.pyramid(weight, options.x_axis), lo, hi, buckets) if weight else None
        )
        lines.append(ChartLine(request.run, request.slot, raw, smooth))
        window_values.append(partial(cache.window_values, options.x_axis, lo, hi))
    return _bucketed(requests, options, lines, window_values, partial(caches.full_x_range, requests))


def finish_chart(bucketed: BucketedLines, options: ChartOptions) -> PreparedChart:
    """The cheap half: log-y, the y range, axis units and ticks."""
    lines = [ChartLine(line.run, line.slot, _clamped(_scaled(line.raw, options.log_y)),
                       _clamped(_scaled(line.smooth, options.log_y)) if line.smooth is not None else None)
             for line in bucketed.lines]  # fmt: skip
    onsets, x_range = list(bucketed.onsets), bucketed.x_range
    outliers = bucketed.percentile_range(options.log_y) if options.ignore_outliers else None
    extent = (_clip(outliers[0]), _clip(outliers[1])) if outliers is not None else _extent(lines)
    # A series that never goes below zero (a learning rate, a loss) gets no axis below zero either.
    floor = 0.0 if not options.log_y and extent is not None and extent[0] >= 0 else None
    y_range = _padded(extent, floor)
    x_label, divisor, x_ticks = _x_presentation(x_range, options.x_axis)
    if divisor != 1.0 and x_range is not None:
        lines = [_rescale_x(line, divisor) for line in lines]
        onsets = [replace(o, x=o.x / divisor) for o in onsets]
        x_range = (x_range[0] / divisor, x_range[1] / divisor)
    return PreparedChart(
        lines=tuple(lines),
        onsets=tuple(onsets),
        x_range=x_range,
        y_range=y_range,
        x_label=x_label,
        x_ticks=x_ticks,
        y_ticks=log_ticks(*y_range) if options.log_y and y_range is not None else None,
    )


def prepare_chart(
    requests: Sequence[SeriesRequest], options: ChartOptions, width: int, smoother: Smoother
) -> PreparedChart:
    """Everything a chart `width` cells wide draws for `requests` under `options`."""
    return finish_chart(bucket_lines(requests, options, width, smoother), options)


Box = tuple[float, float, float, float]  # x_lo, x_hi, y_lo, y_hi


def drawing_box(chart: PreparedChart, columns: int, rows: int) -> Box | None:
    """What of `chart` can show on a plot whose canvas is at least `columns` x `rows` cells: its x and y ranges,
    each widened by one cell on both sides (plotext puts a point up to half a dot beyond a limit on the edge dot,
    and a dot is at most a cell). None when there is no y range."""
    if chart.y_range is None:
        return None
    y_lo, y_hi = chart.y_range
    y_pad = (y_hi - y_lo) / max(rows, 1)
    if chart.x_range is None or not chart.x_range[1] > chart.x_range[0]:
        return (-math.inf, math.inf, y_lo - y_pad, y_hi + y_pad)
    x_lo, x_hi = chart.x_range
    x_pad = (x_hi - x_lo) / max(columns, 1)
    return (x_lo - x_pad, x_hi + x_pad, y_lo - y_pad, y_hi + y_pad)


def inside(x: np.ndarray, y: np.ndarray, box: Box) -> np.ndarray:
    """Which points lie in `box` (edges included)."""
    return (x >= box[0]) & (x <= box[1]) & (y >= box[2]) & (y <= box[3])


def clip_polyline(x: np.ndarray, y: np.ndarray, box: Box) -> tuple[np.ndarray, np.ndarray]:
    """The parts of the line through (`x`, `y`) that lie in `box` (a NaN point breaks the line), for a plotter that
    draws every segment dot by dot however far it runs outside the plot (plotext): each segment is cut where it
    crosses the box (Liang–Barsky, over all segments at once), points outside are dropped, and the pieces that
    remain are separated by a NaN point, which plotext does not join across. Points kept are the originals, bit for
    bit; a line wholly inside comes back as it is."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    kept = inside(x, y, box)
    if kept.all():
        return x, y
    if x.size < 2:
        return x[kept], y[kept]
    x0, y0, dx, dy = x[:-1], y[:-1], np.diff(x), np.diff(y)
    t0, t1 = np.zeros(dx.size), np.ones(dx.size)
    visible = np.isfinite(dx) & np.isfinite(dy)  # a NaN point already separates pieces
    with np.errstate(divide="ignore", invalid="ignore"):
        for p, q in ((-dx, x0 - box[0]), (dx, box[1] - x0), (-dy, y0 - box[2]), (dy, box[3] - y0)):
            visible &= (p != 0) | (q >= 0)  # parallel to this edge and outside it: nothing shows
            ratio = q / p
            t0 = np.where(p < 0, np.maximum(t0, ratio), t0)
            t1 = np.where(p > 0, np.minimum(t1, ratio), t1)
    visible &= t0 <= t1
    # A vertex in the box ends one visible segment and starts the next: exact there, whatever the division gave.
    t0[kept[:-1]], t1[kept[1:]] = 0.0, 1.0
    segments = np.flatnonzero(visible)
    # A point in the box between two NaN points has no segment: plotext draws it as a dot, so it is a piece alone.
    alone = np.flatnonzero(kept & ~np.r_[False, visible] & ~np.r_[visible, False])
    ax = np.where(t0 == 0, x0, x0 + t0 * dx)[segments]
    ay = np.where(t0 == 0, y0, y0 + t0 * dy)[segments]
    bx = np.where(t1 == 1, x[1:], x0 + t1 * dx)[segments]
    by = np.where(t1 == 1, y[1:], y0 + t1 * dy)[segments]
    if alone.size:  # in line order: segment i sits between point i and point i + 1
        order = np.argsort(np.r_[2 * segments + 1, 2 * alone], kind="stable")
        ax, ay = np.r_[ax, x[alone]][order], np.r_[ay, y[alone]][order]
        bx, by = np.r_[bx, x[alone]][order], np.r_[by, y[alone]][order]
        segments = np.r_[segments, -2 - alone][order]  # a lone point never continues a piece, nor is continued
    if not segments.size:
        return x[:0], y[:0]
    follows = (segments[1:] == segments[:-1] + 1) & (segments[1:] >= 0)
    starts_piece = np.r_[True, ~follows | ~kept[np.maximum(segments[1:], 0)]]
    # Per visible segment: [NaN, start] when it starts a piece (no NaN before the first), then its end.
    emitted = 1 + starts_piece * 2
    emitted[0] -= 1
    end_at = np.cumsum(emitted) - 1
    out_x, out_y = np.full(int(end_at[-1]) + 1, np.nan), np.full(int(end_at[-1]) + 1, np.nan)
    out_x[end_at], out_y[end_at] = bx, by
    start_at = end_at[starts_piece] - 1
    out_x[start_at], out_y[start_at] = ax[starts_piece], ay[starts_piece]
    return out_x, out_y


#: Values beyond ±this are drawn at it. A hostile or corrupt file can hold values up to DBL_MAX, whose range,
#: margin and tick arithmetic overflow to inf and NaN inside plotext; no real curve comes near 1e150.
PLOT_LIMIT = 1e150


def _clip(value: float) -> float:
    return float(min(max(value, -PLOT_LIMIT), PLOT_LIMIT))


def _clamped(d: Downsampled) -> Downsampled:
    finite = d.y[np.isfinite(d.y)]
    if not finite.size or float(np.max(np.abs(finite))) <= PLOT_LIMIT:
        return d
    return replace(d, y=np.clip(d.y, -PLOT_LIMIT, PLOT_LIMIT))


def _scaled(d: Downsampled, log_y: bool) -> Downsampled:
    """log10 of the positive points (zero and negatives have no place on a log axis)."""
    if not log_y:
        return d
    positive = d.y > 0
    return replace(d, x=d.x[positive], y=np.log10(d.y[positive]))


def _onsets(request: SeriesRequest, options: ChartOptions) -> list[Onset]:
    """x positions of this run's findings that name the charted tag (or no tag at all)."""
    series = request.series
    found = []
    for finding in request.findings:
        step = series_step(finding, request.tag, series.steps)
        if step is None or not len(series):
            continue
        if options.x_axis == "step":
            x = float(step)
        else:
            at = min(int(np.searchsorted(series.steps, step)), len(series) - 1)
            x = float(series.wall_times[at] - (series.wall_times[0] if options.x_axis == "relative" else 0.0))
        found.append(Onset(x, finding.severity, finding.kind))
    return found


def _extent(lines: list[ChartLine]) -> tuple[float, float] | None:
    """Lowest and highest point drawn (raw or smoothed)."""
    ys = [d.y for line in lines for d in (line.raw, line.smooth) if d is not None and len(d)]
    if not ys:
        return None
    return min(float(y.min()) for y in ys), max(float(y.max()) for y in ys)


def _padded(extent: tuple[float, float] | None, floor: float | None = None) -> tuple[float, float] | None:
    """`extent` with Y_MARGIN on each side (a flat line gets a band around it), never below `floor`."""
    if extent is None:
        return None
    lo, hi = extent
    pad = (abs(lo) * 0.1 or 0.5) if hi <= lo else (hi - lo) * Y_MARGIN
    low = lo - pad if floor is None else max(lo - pad, floor)
    return low, hi + pad


#: Mantissas tried for log-axis ticks, coarsest first: whole decades, then 1-2-5, then every digit.
_LOG_MANTISSAS = ((1,), (1, 2, 5), tuple(range(1, 10)))
#: Fewest and most ticks a log axis gets.
MIN_LOG_TICKS, MAX_LOG_TICKS = 3, 8


def log_ticks(lo: float, hi: float) -> tuple[tuple[float, ...], tuple[str, ...]]:
    """Ticks for a log10 axis spanning [lo, hi]: decades when there are enough, else 1-2-5 steps, else every digit."""
    decades = range(math.floor(lo), math.ceil(hi) + 1)
    chosen: list[float] = []
    for mantissas in _LOG_MANTISSAS:
        chosen = [d + math.log10(m) for d in decades for m in mantissas if lo <= d + math.log10(m) <= hi]
        if len(chosen) >= MIN_LOG_TICKS:
            break
    if len(chosen) > MAX_LOG_TICKS:
        chosen = chosen[:: math.ceil(len(chosen) / MAX_LOG_TICKS)]
    if len(chosen) < 2:
        chosen = [lo, hi]
    return tuple(chosen), tuple(f"{10**v:.3g}" for v in chosen)


#: (upper bound of the span in seconds, unit label, seconds per unit) for the relative-time axis.
_TIME_UNITS = ((120.0, "s", 1.0), (7200.0, "min", 60.0), (172800.0, "h", 3600.0), (math.inf, "d", 86400.0))


def _time_unit(span: float) -> tuple[str, float]:
    for bound, label, divisor in _TIME_UNITS:
        if span <= bound:
            return label, divisor
    return _TIME_UNITS[-1][1], _TIME_UNITS[-1][2]


def _x_presentation(x_range: tuple[float, float] | None, axis: str):
    """Axis label, the divisor that turns seconds into the label's unit, and the ticks (in that unit)."""
    if x_range is None:
        return X_AXIS_TITLES[axis], 1.0, None
    if axis == "step":
        return X_AXIS_TITLES[axis], 1.0, labelled(nice_ticks(*x_range, integer=True))
    if axis == "relative":
        label, divisor = _time_unit(x_range[1] - x_range[0])
        return f"relative time ({label})", divisor, labelled(nice_ticks(x_range[0] / divisor, x_range[1] / divisor))
    return "wall time", 1.0, wall_ticks(*x_range)


#: Ticks a linear axis aims for: enough to read a value off, few enough that labels never collide.
AXIS_TICKS = 5
#: Gaps between ticks, times a power of ten: 1-2-2.5-5, as a person would rule an axis.
_NICE_MANTISSAS = (1.0, 2.0, 2.5, 5.0, 10.0)


def nice_ticks(lo: float, hi: float, count: int = AXIS_TICKS, integer: bool = False) -> tuple[float, ...]:
    """Round positions covering [lo, hi], about `count` of them, 1, 2, 2.5 or 5 times a power of ten apart
    (never less than 1 apart for an `integer` axis such as steps)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return (lo,) if math.isfinite(lo) else ()
    raw = (hi - lo) / max(count - 1, 1)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    gap = next(m * magnitude for m in _NICE_MANTISSAS if m * magnitude >= raw * (1 - 1e-9))
    if integer:
        gap = max(1.0, float(math.ceil(gap)))
    first = math.ceil(lo / gap - 1e-9) * gap
    n = int(math.floor((hi - first) / gap + 1e-9)) + 1
    return tuple(first + i * gap for i in range(max(n, 0)))


def labelled(positions: tuple[float, ...]) -> tuple[tuple[float, ...], tuple[str, ...]] | None:
    """Tick positions with their labels (`text.tick`: `2k`, `1.5M`); None with too few to rule an axis."""
    return (positions, tuple(tick(p) for p in positions)) if len(positions) >= 2 else None


def _rescale_x(line: ChartLine, divisor: float) -> ChartLine:
    def scale(d: Downsampled) -> Downsampled:
        return replace(
            d, x=d.x / divisor, nan_x=d.nan_x / divisor, posinf_x=d.posinf_x / divisor, neginf_x=d.neginf_x / divisor
        )

    return ChartLine(line.run, line.slot, scale(line.raw), None if line.smooth is None else scale(line.smooth))


#: Wall-time ticks on a chart: about this many.
WALL_TICKS = 4
#: Gaps between wall-clock ticks, in seconds: the round clock intervals a person reads a clock in.
CLOCK_GAPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
              172800, 604800)  # fmt: skip


def wall_ticks(lo: float, hi: float, tz: Callable[[float], time.struct_time] = time.localtime):
    """Wall-clock ticks at round clock times (every 20 min on the hour, every 6 h from midnight ...), as HH:MM
    (HH:MM:SS under a minute apart, with the date when the range spans days)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        if not math.isfinite(lo):
            return (), ()
        return (lo,), (time.strftime("%H:%M", tz(lo)),)
    want = (hi - lo) / (WALL_TICKS - 1)
    gap = next((g for g in CLOCK_GAPS if g >= want), math.ceil(want / CLOCK_GAPS[-1]) * CLOCK_GAPS[-1])
    offset = tz(lo).tm_gmtoff or 0  # round in local clock time: ticks fall on the hour where the user lives
    first = math.ceil((lo + offset) / gap) * gap - offset
    positions = tuple(float(p) for p in np.arange(first, hi + 1e-6, gap))
    fmt = "%m-%d %H:%M" if hi - lo > 86400 else "%H:%M:%S" if gap < 60 else "%H:%M"
    return positions, tuple(time.strftime(fmt, tz(p)) for p in positions)
