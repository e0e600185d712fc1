"""Smoothing and robust baselines over whole series, vectorised with numpy.

`ema` is TensorBoard's scalar smoothing, point for point (tensorboard/webapp/widgets/line_chart_v2/
data_transformer.ts `classicSmoothing`): a first-order IIR filter started at 0 and debiased by
1 - w^k, where k counts the finite points seen so far; non-finite points are drawn as they are and do not
update the average; a constant series is returned as is (TensorBoard issue #786). Users trust those curves,
so ours must be the same ones.

The recurrence y_k = w·y_{k-1} + (1-w)·x_k is solved in blocks of `_BLOCK` points: inside a block by one
matrix product with the lower-triangular matrix of powers of w (each output is the same weighted sum the
loop computes, in a different order: equal to the loop within a few ulps of the largest |x|), and the
state carried between blocks is the same recurrence with weight w^_BLOCK over one value per block, solved
the same way (recursion depth log_64 n). No weight ever exceeds 1, so nothing overflows, for any w in
[0, 0.999]. One million points take a few tens of milliseconds.

The robust helpers (`mad_sigma`, `diff_noise`, `bucket_medians`, `local_baseline`) are what features and
detectors measure noise and levels with: medians and MADs, so a spike or a NaN does not move the baseline
it is judged against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

#: TensorBoard's default smoothing weight, and the largest its slider allows.
DEFAULT_WEIGHT = 0.6
MAX_WEIGHT = 0.999
#: Points per block of the blocked recurrence: a 64×64 matrix product per block keeps BLAS busy and the
#: per-block Python overhead negligible.
_BLOCK = 64
#: Scale factor making the median absolute deviation estimate a normal distribution's sigma.
MAD_TO_SIGMA = 1.4826


def _linear_recurrence(u: np.ndarray, a: float) -> np.ndarray:
    """y_k = a·y_{k-1} + u_k with y_{-1} = 0, for 0 <= a <= 1, in blocks of `_BLOCK`."""
    n = u.size
    lags = np.arange(_BLOCK)
    lag_matrix = lags[:, None] - lags[None, :]
    powers = np.where(lag_matrix >= 0, np.power(a, np.maximum(lag_matrix, 0)), 0.0)  # powers[j, i] = a^(j-i)
    if n <= _BLOCK:
        return powers[:n, :n] @ u
    blocks = -(-n // _BLOCK)
    padded = np.zeros(blocks * _BLOCK)
    padded[:n] = u
    local = padded.reshape(blocks, _BLOCK) @ np.ascontiguousarray(powers.T)  # each block from a zero state
    # State after each block: the same recurrence over the blocks' last values, with weight a^_BLOCK.
    after = _linear_recurrence(local[:, -1].copy(), a**_BLOCK)
    entering = np.concatenate(([0.0], after[:-1]))
    local += entering[:, None] * np.power(a, lags + 1)[None, :]
    return local.ravel()[:n]


def ema(values, weight: float = DEFAULT_WEIGHT) -> np.ndarray:
    """TensorBoard's debiased exponential moving average of `values` (float64, same length)."""
    x = np.asarray(values, dtype=np.float64)
    out = x.copy()
    if x.size == 0 or np.all(x == x[0]):
        return out
    w = float(weight) if np.isfinite(weight) else 0.0
    w = min(max(w, 0.0), MAX_WEIGHT)
    finite = np.isfinite(x)
    count = int(finite.sum())
    if count == 0:
        return out
    state = _linear_recurrence((1.0 - w) * x[finite], w)
    # 1 - w^k is exactly 1.0 in float64 once w^k < 2^-54; only the first terms need Math.pow's values
    # (np.power with array exponents is slow: ~150 ms for a million).
    needed = count if w <= 0.0 else min(count, int(np.ceil(-54 * np.log(2) / np.log(w))) + 1)
    state[:needed] /= 1.0 - np.power(w, np.arange(1, needed + 1, dtype=np.float64))
    out[finite] = state
    return out


# ---- robust statistics --------------------------------------------------------------------------------


#: From this many values `median` selects one order statistic and reads its neighbour and the NaN test off
#: the two halves; below it a sort (SIMD: cheaper there than numpy's selection of two order statistics, whose
#: set-up alone costs more) gives them all.
_ONE_SELECTION = 1024


def median(values: np.ndarray, repeats: bool = False) -> float:
    """np.median's value (NaN when any value is NaN), by selection without np.median's set-up: 3-5× faster
    on the short arrays the engine measures. (Every way below gives the same value: the order statistics do
    not depend on how a selection or a sort arranges equal values, and the sum from +0.0, as np.median's mean
    starts it, makes a median of zeros +0.0 whichever zero came first.)

    `repeats`: the values take few distinct values (the gaps between a logger's wall-clock stamps): a sort,
    which handles repeats in a fraction of the time numpy's selection spends on them (~15× on 3,600 gaps).
    """
    return _median_in_place(np.array(values, dtype=np.float64).ravel(), repeats)


def _median_in_place(x: np.ndarray, repeats: bool = False, finite: bool = False) -> float:
    """`median` of a 1-D float64 array the caller owns and no longer needs in its order: selected in place
    (the intermediate arrays of a noise estimate: a copy each saved). `finite`: the caller knows `x` holds
    no NaN, and the test for one is left out."""
    n = x.size
    if n == 0:
        return math.nan
    k = n // 2
    if n >= _ONE_SELECTION and not repeats:
        x.partition(k)
        if not finite and math.isnan(x[k:].max()):  # NaN sorts last
            return math.nan
        return (0.0 + float(x[k])) if n % 2 else (0.0 + float(x[:k].max()) + float(x[k])) / 2
    x.sort()
    if math.isnan(x[-1]):  # NaN sorts last
        return math.nan
    return (0.0 + float(x[k])) if n % 2 else (0.0 + float(x[k - 1]) + float(x[k])) / 2


def percentile(values: np.ndarray, q):
    """np.percentile(values, q) (its default linear method), value for value: the order statistics it needs
    and numpy's own interpolation arithmetic, without np.percentile's ~30 µs of set-up (the engine asks for
    a few percentiles of short arrays per series: the set-up was most of it).

    `q`: a number (gives a numpy float) or a sequence of them (gives an array); NaN in `values` gives NaN.
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    n = x.size
    single = not isinstance(q, (list, tuple)) and np.ndim(q) == 0  # np.ndim makes an array of a list first
    if n == 0:
        return np.percentile(x, q)  # numpy's own answer (NaN) and warning
    spots = []
    for p in [q] if single else q:
        virtual = (n - 1) * (float(p) / 100)
        # Past the last index numpy reads the last value (index -1) with weight virtual + 1.
        below = math.floor(virtual) if virtual < n - 1 else -1
        spots.append((virtual, below, below + 1 if below >= 0 else -1))
    # A sort (SIMD) is faster than numpy's selection of several order statistics and gives the same values;
    # only where a zero is read does numpy's own selection decide which of -0.0 and 0.0 comes out.
    at = [i for _, lo, hi in spots for i in (lo, hi)]
    part = np.sort(x)
    read = part[at].tolist()
    if 0.0 in read:  # == also finds -0.0
        part = np.partition(x, sorted({0, -1, *at}))
        read = part[at].tolist()
    if math.isnan(part[-1]):  # NaN sorts last
        out = [math.nan] * len(spots)
    else:
        out = []
        for j, (virtual, lo, _) in enumerate(spots):
            a, b = read[2 * j], read[2 * j + 1]
            gamma = virtual - lo
            diff = b - a
            out.append(b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma)
    return np.float64(out[0]) if single else np.array(out)


#: From this many rows, rows of 2 to 5 values take their medians by min/max over the columns (a selection
#: network: a handful of whole-array operations) instead of one selection per row, 3-8× slower there.
_NETWORK_ROWS = 256


#: Rows of this many values (the widths of blocks and buckets), this many values in all, take their medians
#: from a sort of every row (SIMD sorting networks: ~20-30 % less than one selection per row; on fewer values
#: the saving is below the cost of checking zeros), the order statistics the selection gives.
_SORTED_WIDTHS = (8, 256)
_SORTED_SIZE = 2048


def _median3(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))


def _network_medians(rows: np.ndarray, exact: bool) -> np.ndarray | None:
    """`row_medians` of rows of 2 to 5 values by a selection network; None where it might differ from the
    selection: a NaN (the selection sorts it last) or a zero (which of -0.0 and 0.0 comes out) in the result."""
    columns = [rows[:, i] for i in range(rows.shape[1])]
    if len(columns) == 2:
        upper = np.maximum(*columns)
        out = 0.5 * (np.minimum(*columns) + upper) if exact else upper
    elif len(columns) == 3:
        out = _median3(*columns)
    else:
        # Of a, b, c, d: the larger of the pairs' minima and the smaller of their maxima are the middle two
        # (each of the others has three values on one side of it, so it cannot be a median of 4 or 5 either).
        low = np.maximum(np.minimum(columns[0], columns[1]), np.minimum(columns[2], columns[3]))
        high = np.minimum(np.maximum(columns[0], columns[1]), np.maximum(columns[2], columns[3]))
        if len(columns) == 5:
            out = _median3(low, high, columns[4])
        else:
            upper = np.maximum(low, high)
            out = 0.5 * (np.minimum(low, high) + upper) if exact else upper
    # A NaN anywhere in a row reaches its result (min and max propagate it, and so does the result's min).
    return out if out.all() and not math.isnan(out.min()) else None


def row_medians(rows: np.ndarray, exact: bool = True) -> np.ndarray:
    """The median of every row of a 2-D array, by one selection per row (see `median`).

    `exact=False` takes the upper middle value of even-width rows instead of averaging the two middle ones.
    """
    width = rows.shape[1]
    if rows.shape[0] == 0 or width == 0:
        return np.full(rows.shape[0], np.nan)
    if width == 1:
        return rows[:, 0].copy()  # what a selection in each row of one value gives, without one per row
    if 2 <= width <= 5 and rows.shape[0] >= _NETWORK_ROWS:
        found = _network_medians(rows, exact)
        if found is not None:
            return found
    k = width // 2
    if _SORTED_WIDTHS[0] <= width <= _SORTED_WIDTHS[1] and rows.size >= _SORTED_SIZE:
        ordered = np.sort(rows, axis=1)
        out = ordered[:, k].copy() if width % 2 or not exact else 0.5 * (ordered[:, k - 1] + ordered[:, k])
        # The same values as the selection's (both sort a NaN last); only the sign of a zero result depends
        # on how each arranges the equal -0.0 and 0.0, so a row of those values with a -0.0 is selected.
        if out.all():
            return out
        zeros = ordered[out == 0]
        if not np.signbit(zeros[zeros == 0]).any():
            return out
    part = np.partition(rows, k, axis=1)
    if width % 2 or not exact:
        return part[:, k].copy()
    return 0.5 * (part[:, :k].max(axis=1) + part[:, k])


def windows(values: np.ndarray, width: int) -> np.ndarray:
    """Every run of `width` consecutive values, as rows of a read-only view (no copy): what
    np.lib.stride_tricks.sliding_window_view gives for a 1-D array, for a fifth of its overhead."""
    x = np.ascontiguousarray(values)
    step = x.strides[0]
    # The view made directly (as_strided builds it through __array_interface__, ~3× the cost).
    out = np.ndarray((max(x.size - width + 1, 0), width), x.dtype, x, 0, (step, step))
    out.flags.writeable = False
    return out


def true_stretches(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first index, last index) of every stretch of consecutive True values of the 1-D `mask`."""
    padded = np.zeros(mask.size + 2, dtype=np.int8)
    padded[1:-1] = mask
    edges = padded[1:] - padded[:-1]
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1


def running_median(values: np.ndarray, width: int) -> np.ndarray:
    """The median of the `width` values centred on each value (an even width: one more before than after),
    the ends padded with the edge values: what np.median gives over the windows of
    np.pad(values, width // 2, mode="edge") (for an odd width and values without NaN), value for value."""
    x = np.asarray(values)
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    half = width // 2
    if x.size == 0 or half == 0:
        return x.copy()
    padded = np.concatenate((np.full(half, x[0]), x, np.full(half, x[-1])))
    # + 0.0: np.median's mean starts its sum at +0.0, so a median of zeros is never -0.0
    return row_medians(windows(padded, width))[: x.size] + 0.0


def _deviations(x: np.ndarray, own: bool = False, finite: bool = False) -> np.ndarray:
    """|x - median(x)|: what a median absolute deviation is the median of (in no particular order).

    `own`: `x` is a float64 temporary of the caller's, reordered and overwritten in place (no copies).
    `finite`: the caller knows `x` holds no NaN (see `_median_in_place`)."""
    if not own:
        x = np.array(x, dtype=np.float64)
    np.subtract(x, _median_in_place(x, finite=finite), out=x)
    return np.abs(x, out=x)


def mad_sigma(values: np.ndarray) -> float:
    """Robust standard deviation: 1.4826 × median absolute deviation (0.0 for no values)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return 0.0
    return float(MAD_TO_SIGMA * _median_in_place(_deviations(x)))


#: Residuals a noise estimate looks at: beyond this many, an even sample of them (the MAD of 4096 residuals
#: is within ~2 % of the MAD of all of them, and a million-point series costs no more than a 4k one).
NOISE_SAMPLE = 4096


def _second_differences(x: np.ndarray, lag: int) -> np.ndarray:
    """x_i - (x_{i-lag} + x_{i+lag}) / 2, over at most NOISE_SAMPLE evenly spread i (none when 2·lag ≥ n)."""
    count = x.size - 2 * lag
    if count <= 0:
        return np.empty(0)
    stride = max(1, count // NOISE_SAMPLE)  # strided views: no copies of the whole series
    middle = x[lag : x.size - lag : stride]
    out = np.add(x[: x.size - 2 * lag : stride][: middle.size], x[2 * lag :: stride][: middle.size])
    out *= 0.5
    return np.subtract(middle, out, out=out)  # middle - 0.5 * (before + after), in one array


def _mad_noise(mad: float) -> float:
    """The noise sigma of the second differences whose MAD is `mad` (white noise s gives s·sqrt(1.5))."""
    return float(MAD_TO_SIGMA * mad) / np.sqrt(1.5)


def diff_noise(values: np.ndarray) -> float:
    """Point-to-point noise sigma that ignores trends: MAD of each point's distance to its neighbours' mean.

    r_i = x_i - (x_{i-1} + x_{i+1}) / 2 is zero on any straight line, so a falling loss does not count as
    noise; for white noise of sigma s, r has sigma s·sqrt(1.5). Needs at least 3 finite values.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size < 3:
        return 0.0
    return _mad_noise(_median_in_place(_deviations(_second_differences(x, 1), own=True)))


#: From this many values `scale_noise` first tries to settle a lag by counting its residuals alone (on fewer, a
#: selection costs about what that count does).
_QUICK_SETTLE = 1024
#: Lags (in points) at which `scale_noise` measures the noise: up to 32, beyond the windows loggers average
#: over (detectron2's 20, HF's logging_steps), and never beyond a 16th of the series.
NOISE_LAGS = (1, 2, 4, 8, 16, 32)


#: Series of this many points measure every lag at once (`_all_lags_noise`): one selection over all the lags'
#: residuals, then one over their deviations, instead of a dozen small operations per lag. Shorter series have
#: one or two lags; on longer ones the counting tests below skip most selections, which all-at-once cannot.
_ALL_LAGS_AT_ONCE = (128, 1024)


@lru_cache(maxsize=16)
def _lag_layout(n: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """For a series of n points padded with `pad` values at each end: where each lag's two neighbours of every
    point sit in it (rows: the lags of NOISE_LAGS up to n/16), and which points have none before them."""
    lags = np.array([lag for lag in NOISE_LAGS if lag == 1 or lag <= n // 16])
    pad = int(lags[-1])
    index = np.arange(n)
    before = index[None, :] - lags[:, None] + pad
    after = index[None, :] + lags[:, None] + pad
    first = index[None, :] < lags[:, None]
    for array in (before, after, first):
        array.flags.writeable = False
    return pad, before, after, first


def _row_middles(rows: np.ndarray) -> np.ndarray:
    """Each row's median as `_median_in_place` computes it, from rows partitioned at their middle index."""
    k = rows.shape[1] // 2
    if rows.shape[1] % 2:
        return 0.0 + rows[:, k]
    return (0.0 + rows[:, :k].max(axis=1) + rows[:, k]) / 2


def _all_lags_noise(x: np.ndarray) -> float:
    """`scale_noise` of finite values within ±1e300, every lag at once: the same medians and the same largest one.

    Row j holds lag j's residual at every point; the lag's points with no neighbour before them get -inf (x minus
    half of +inf) and those with none after them +inf, as many of each, so the middle of the row is the middle of
    the lag's own residuals. Their deviations from that median: the -inf ones are set to 0, below every deviation,
    and the +inf ones stay +inf, above: the middle is again the lag's own. The estimate of the largest MAD is the
    largest estimate (`_mad_noise` never decreases)."""
    n = x.size
    pad, before, after, first = _lag_layout(n)
    padded = np.empty(n + 2 * pad)
    padded[:pad] = np.inf
    padded[pad : pad + n] = x
    padded[pad + n :] = -np.inf
    residual = padded[before]
    residual += padded[after]
    residual *= 0.5
    np.subtract(x, residual, out=residual)  # x - (before + after) / 2, as `_second_differences` forms it
    middle = _row_middles(np.partition(residual, n // 2, axis=1))
    np.subtract(residual, middle[:, None], out=residual)
    deviation = np.abs(residual, out=residual)
    np.copyto(deviation, 0.0, where=first)
    deviation.partition(n // 2, axis=1)
    return _mad_noise(float(_row_middles(deviation).max()))


def scale_noise(values: np.ndarray) -> float:
    """Noise sigma that also sees noise averaged before logging: the largest second-difference estimate
    over the lags in NOISE_LAGS (up to n/16).

    A loss logged as a running mean hides its noise from neighbouring differences (consecutive points share
    most of their window) but not from differences across the window; for white noise every lag gives the
    same sigma. Second differences cancel straight trends at every lag, and medians ignore the curved
    stretches (a fast initial fall) as long as they are a minority of the points.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size < 3:
        return 0.0
    # Each lag's differences and deviations are temporaries: selected and overwritten in place. Values within
    # ±1e300 make finite differences and deviations (each at most 4e300): their medians need no NaN test.
    finite = bool(-1e300 < x.min() and x.max() < 1e300)  # False for a NaN or an inf
    if finite and _ALL_LAGS_AT_ONCE[0] <= x.size <= _ALL_LAGS_AT_ONCE[1]:
        return _all_lags_noise(x)
    best_mad = _median_in_place(_deviations(_second_differences(x, 1), own=True, finite=finite), finite=finite)
    best = _mad_noise(best_mad)
    # A first test by counting alone (below) is tried once a longer lag's MAD has doubled lag 1's (a curve:
    # curvature, not noise, sets the estimate, and the shorter lags see much less of it), on long series,
    # until it fails on a lag the second test then settles (the lags' MADs are alike there).
    quick = False
    curve = 2.0 * best_mad if x.size >= _QUICK_SETTLE else math.inf
    magnitude = np.empty(0)
    # The longest lags first: on a curve they usually see the most (trend curvature as well as noise), and
    # then the shorter ones are settled by counting (the largest of the lags' estimates, in any order).
    for lag in reversed([lag for lag in NOISE_LAGS[1:] if lag <= x.size // 16]):
        residual = _second_differences(x, lag)
        tried = False
        if quick:
            # More than half the residuals within ±b/2: so is their median m (fewer than half lie on either
            # side of that band), and those residuals are within b of m, so the MAD is at most b, the best
            # MAD: no selection at all. (b/2 exact: b is not subnormal.)
            half = 0.5 * best_mad
            tried = half + half == best_mad
            if (
                tried
                and np.count_nonzero(np.abs(residual, out=magnitude[: residual.size]) <= half) > residual.size // 2
            ):
                continue
        deviation = _deviations(residual, own=True, finite=finite)
        # More than half the deviations within the best MAD: this lag's MAD (their median) is no larger and
        # cannot raise the estimate, which counting tells without a second selection.
        if np.count_nonzero(deviation <= best_mad) > deviation.size // 2:
            quick = quick and not tried
            continue
        mad = _median_in_place(deviation, finite=finite)
        if _mad_noise(mad) > best:  # what max(best, ...) did: the first of equals stays
            best, best_mad = _mad_noise(mad), mad
        if not quick and mad >= curve:
            quick, magnitude = True, np.empty(x.size - 2)
    return best


@dataclass(frozen=True, eq=False)
class Buckets:
    """A long series cut into consecutive equal-count buckets: one robust point (the median) per bucket."""

    steps: np.ndarray  # float64: middle step of each bucket
    first: np.ndarray  # int64: index of each bucket's first point in the source arrays
    size: int  # points per bucket (the last bucket may hold fewer)
    medians: np.ndarray

    def __len__(self) -> int:
        return int(self.medians.size)


def bucket_medians(steps: np.ndarray, values: np.ndarray, max_buckets: int) -> Buckets:
    """Medians of consecutive buckets of ceil(n / max_buckets) points (finite values only).

    A bucket of an even number of points takes its upper middle value: one selection per bucket instead of
    two, and for a level or a baseline the half-point difference is far below the noise.
    """
    n = values.size
    size = max(1, -(-n // max(1, max_buckets)))
    full = n // size
    medians = row_medians(values[: full * size].reshape(full, size), exact=False) if full else np.empty(0)
    if full * size < n:  # the short last bucket
        medians = np.concatenate((medians, (median(values[full * size :]),)))  # np.append's result, less set-up
    first = np.arange(0, n, size, dtype=np.int64)
    # Each bucket's first and last step, read as strided views (the last bucket may end early, at n - 1).
    last = steps[size - 1 :: size]
    if last.size < first.size:
        last = np.concatenate((last, steps[-1:]))
    middle = np.add(steps[::size], last, dtype=np.float64)  # both cast to float64, then added
    middle *= 0.5
    return Buckets(middle, first, size, medians)


@dataclass(frozen=True, eq=False)
class Baseline:
    """A local robust level and noise for every point, from block medians and block MADs."""

    level: np.ndarray  # the series' local median level, interpolated between block centres
    sigma: np.ndarray  # local noise sigma around that level (floored, never 0)
    block: int  # points per block


#: Local noise is never taken below this fraction of the series' typical noise: a block of identical
#: values (MAD 0) would otherwise make the next tiny wiggle infinitely significant.
LOCAL_SIGMA_FLOOR = 0.25
#: Neighbouring blocks whose MADs are pooled (median) into one block's local sigma.
SIGMA_POOL_BLOCKS = 5


def _block_medians(values: np.ndarray, block: int) -> np.ndarray:
    """Medians of consecutive blocks of `block` points (the last block may be shorter)."""
    full = values.size // block
    medians = row_medians(values[: full * block].reshape(full, block), exact=False)
    if full * block < values.size:
        medians = np.concatenate((medians, (median(values[full * block :]),)))
    return medians


#: Series lengths up to this many points keep their baseline grid (`_block_grid`) for the next series.
_GRID_CACHED = 1 << 16


#: From this many points the baseline computes what np.interp does itself (`_Gaps`; on fewer, np.interp's
#: search costs less than the dozen array operations that replace it).
_GRID_INTERP = 2048


@dataclass(frozen=True, eq=False)
class _Gaps:
    """Where every point of a series sits between the centres of its blocks: what np.interp(index, centres, fp)
    looks up for each point, worked out once (every array read-only).

    Points before the first centre take the first block's value and points from the last centre on the last
    one's; in between, the gaps between the centres of two whole blocks hold `block` points each, at the same
    offsets `pattern` past their left centre (a block's centre is its middle: centres of whole blocks are
    `block` apart), and the last gap (to the centre of a short last block) holds the points at offsets `rest`.
    """

    widths: np.ndarray  # centres[1:] - centres[:-1]
    left: int  # points before the first centre
    right: int  # the first point at or after the last centre
    rows: int  # whole gaps of `block` points from `left` on
    pattern: np.ndarray  # each point's distance from its gap's left centre, in every whole gap
    rest: np.ndarray  # the distances in the gap after those (to the short last block's centre), if any
    hits: bool  # some points lie on a centre (odd blocks)


@dataclass(frozen=True, eq=False)
class _Grid:
    """A series of n points cut into blocks: every point's index and each block's centre (read-only float64),
    and for long series where each point sits between the centres."""

    index: np.ndarray
    centres: np.ndarray
    gaps: _Gaps | None


@lru_cache(maxsize=16)
def _block_grid(n: int, block: int) -> _Grid:
    """The grid of a series of n points cut into blocks of `block` (n >= 2·block): a run's curves, and the runs of
    a sweep, share a few lengths, so it is built once for them."""
    index = np.arange(n, dtype=np.float64)
    starts = np.arange(0, n, block)
    centres = 0.5 * (starts + np.minimum(starts + block - 1, n - 1))
    index.flags.writeable = centres.flags.writeable = False
    if n < _GRID_INTERP:
        return _Grid(index, centres, None)
    left, right = math.ceil(centres[0]), math.ceil(centres[-1])
    rows = n // block - 1  # the gaps between the centres of consecutive whole blocks
    offsets = index[left:right] - np.repeat(centres[:-1], np.diff(np.ceil(centres).astype(np.int64)))
    gaps = _Gaps(
        np.diff(centres),
        left,
        right,
        rows,
        offsets[:block].copy(),
        offsets[rows * block :].copy(),
        bool((offsets == 0).any()),
    )
    for array in (gaps.widths, gaps.pattern, gaps.rest):
        array.flags.writeable = False
    return _Grid(index, centres, gaps)


def _grid_interp(grid: _Grid, fp: np.ndarray) -> np.ndarray:
    """np.interp(grid.index, grid.centres, fp), value for value; on a long series in a few whole-array
    operations (np.interp searches for every point's gap: most of its cost on the grids of a baseline).

    For a point between centres c_j and c_j+1 numpy computes slope_j·(x - c_j) + fp_j with slope_j =
    (fp_j+1 - fp_j) / (c_j+1 - c_j): the same operations here, on all the points of all the whole gaps at once
    (rows of `block` points). Where numpy would take another branch (a slope or value that is not finite, and
    its NaN retries; a point on a centre whose value is a zero, whose sign numpy keeps), np.interp itself."""
    gaps = grid.gaps
    if gaps is None:
        return np.interp(grid.index, grid.centres, fp)
    slopes = np.subtract(fp[1:], fp[:-1])
    slopes /= gaps.widths
    if not np.isfinite(slopes).all() or (gaps.hits and not fp.all()):
        return np.interp(grid.index, grid.centres, fp)
    out = np.empty(grid.index.size)
    out[: gaps.left] = fp[0]
    out[gaps.right :] = fp[-1]
    width = gaps.pattern.size
    body = out[gaps.left : gaps.left + gaps.rows * width].reshape(gaps.rows, width)
    np.multiply(slopes[: gaps.rows, None], gaps.pattern, out=body)
    body += fp[: gaps.rows, None]
    if gaps.rest.size:
        tail = out[gaps.left + gaps.rows * width : gaps.right]
        np.multiply(gaps.rest, slopes[gaps.rows], out=tail)
        tail += fp[gaps.rows]
    return out


def local_baseline(values: np.ndarray, block: int) -> Baseline:
    """Median level and MAD noise of blocks of `block` points, interpolated back to every point."""
    n = values.size
    if n < 2 * block:
        level = np.full(n, median(values)) if n else np.empty(0)
        sigma_value = max(diff_noise(values), 1e-12 * max(abs(float(level[0])) if n else 0.0, 1e-300))
        return Baseline(level, np.full(n, sigma_value), block)
    grid = _block_grid(n, block) if n <= _GRID_CACHED else _block_grid.__wrapped__(n, block)
    block_level = _block_medians(values, block)
    level = _grid_interp(grid, block_level)
    deviation = values - level
    block_sigma = MAD_TO_SIGMA * _block_medians(np.abs(deviation, out=deviation), block)
    if block_sigma.size >= SIGMA_POOL_BLOCKS:
        half = SIGMA_POOL_BLOCKS // 2  # reflected ends (np.pad's "reflect": the edge value not repeated)
        padded = np.concatenate((block_sigma[half:0:-1], block_sigma, block_sigma[-2 : -half - 2 : -1]))
        block_sigma = row_medians(windows(padded, SIGMA_POOL_BLOCKS))
    typical = median(block_sigma)
    scale = median(np.abs(block_level))
    floor = max(LOCAL_SIGMA_FLOOR * typical, 1e-9 * scale, 1e-300)
    sigma = _grid_interp(grid, block_sigma)
    return Baseline(level, np.maximum(sigma, floor, out=sigma), block)


def medians_around(
    values: np.ndarray, starts: np.ndarray, stops: np.ndarray, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """(median of the `width` points before index `starts[k]` (exclusive), median of the `width` points from index
    `stops[k]` (inclusive)) per k: the levels before and after each of a few excursions, one sort for both sides.

    Windows are clipped at the array's edges (shorter windows near them); an empty window gives NaN.
    Costs O(len(starts) · width), for the few candidate points a detector checks, not for every point.
    """
    starts, stops = np.asarray(starts, dtype=np.int64), np.asarray(stops, dtype=np.int64)
    if starts.size <= _FEW_WINDOWS and values.dtype == np.float64:
        sides = _window_medians(values, starts, stops, width)
        if sides is not None:
            return sides
    offsets = np.arange(width)
    found = _indexed_medians(values, np.concatenate((starts[:, None] - width + offsets, stops[:, None] + offsets)))
    return found[: starts.size], found[starts.size :]


#: Up to this many excursions `medians_around` takes each window's median from a sort of its slice (a
#: detector checks one or two, where the index arithmetic for all windows at once was most of the cost).
_FEW_WINDOWS = 4


def _window_medians(
    values: np.ndarray, starts: np.ndarray, stops: np.ndarray, width: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """`medians_around`, one window at a time: the middle of each clipped window's sorted values, as
    `_indexed_medians` reads it off its sorted row (a NaN sorts last in both); None where a zero comes out, whose
    sign depends on how each sort arranged the window's -0.0 and 0.0."""
    n = values.size
    found = []
    for lo, hi in [*((start - width, start) for start in starts.tolist()), *((s, s + width) for s in stops.tolist())]:
        window = np.sort(values[min(max(lo, 0), n) : min(max(hi, 0), n)])
        count = window.size
        found.append(0.5 * (window[(count - 1) // 2] + window[count // 2]) if count else math.nan)
    out = np.array(found, dtype=np.float64)
    if not out.all():
        return None
    return out[: starts.size], out[starts.size :]


def _indexed_medians(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """The median of `values` at each row of indices `index`, leaving out indices outside the array (NaN for a
    row with none inside)."""
    n = values.size
    width = index.shape[1]
    valid = (index >= 0) & (index < n)
    # NaN sorts last, so each row's median sits at the middle of its valid (leading) entries.
    gathered = np.sort(np.where(valid, values[np.minimum(np.maximum(index, 0), max(n - 1, 0))], np.nan), axis=1)
    count = np.count_nonzero(valid, axis=1)
    rows = np.arange(index.shape[0])
    low = gathered[rows, np.maximum(count - 1, 0) // 2]
    high = gathered[rows, np.minimum(count // 2, width - 1)]
    return np.where(count > 0, 0.5 * (low + high), np.nan)
