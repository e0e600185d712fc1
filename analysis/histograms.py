"""Numbers read off histogram summaries, and what a histogram tag holds.

A histogram point is a list of buckets: right edges (`limits`) and counts, with the point's min and max.
The left edge of a bucket is the right edge of the one before; the first starts at the min. Edges are
clipped to [min, max], because TensorFlow's default buckets end at ±DBL_MAX and PyTorch's start with an
empty bucket whose left edge is the previous limit. Inside a bucket the values are taken as spread evenly
(the only assumption a bucket allows), except for a point mass: a ReLU's zeros and a saturated tanh's ±1
pile up in the bucket holding 0 or the end, beyond what its neighbours' density would put there.

Every function here is pure and works on `Buckets`: the points of a series as rows of one array, so a whole
series (a thousand points) is judged in a few array operations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from weakref import WeakKeyDictionary

import numpy as np

from .datamodel import HistogramSeries, Series

#: TensorBoard's distribution bands, in basis points: the normal distribution's ±0, 0.5, 1, 1.5, σ and the
#: min/max (shown rounded as 0/7/16/31/50/69/84/93/100 %).
DISTRIBUTION_BASIS_POINTS = (0, 668, 1587, 3085, 5000, 6915, 8413, 9332, 10000)
DISTRIBUTION_PERCENTILES = tuple(bp / 100.0 for bp in DISTRIBUTION_BASIS_POINTS)

#: Values within this share of the histogram's largest |x| of 0 count as "at zero": a ReLU's exact zeros sit
#: in the bucket holding 0 whatever its width; a narrow band around it catches TensorFlow's fine buckets.
ZERO_BAND = 0.02
#: Values within this distance of a saturation end (±1 for tanh, 0 and 1 for sigmoid) count as saturated:
#: |tanh(z)| > 0.95 means |z| > 1.8, where the local gradient is below 0.1.
SATURATION_BAND = 0.05


@dataclass(frozen=True, eq=False)
class Buckets:
    """Histogram points as rows of equal length: bucket edges clipped to each point's [min, max], and counts.

    Points with fewer buckets are padded with empty buckets of zero width at their max, which change nothing.
    """

    left: np.ndarray  # (points, buckets) float64
    right: np.ndarray  # (points, buckets) float64
    counts: np.ndarray  # (points, buckets) float64, 0 in padding
    total: np.ndarray  # (points,) float64: the sum of each row's counts

    def __len__(self) -> int:
        return int(self.counts.shape[0])


def buckets(
    limits: tuple[np.ndarray, ...] | list[np.ndarray], counts: tuple[np.ndarray, ...] | list[np.ndarray],
    mins: np.ndarray, maxs: np.ndarray,
) -> Buckets:  # fmt: skip
    """Points (each its right edges and counts, as `HistogramSeries` holds them) as `Buckets`.

    A point without a usable min/max (NaN, inverted) is bounded by its own finite edges instead.
    """
    n = len(limits)
    # A point's buckets are the first k of its edges and counts (a hostile file may give more of one).
    edge_count = np.fromiter((len(e) for e in limits), dtype=np.int64, count=n)
    bucket_count = np.fromiter((len(c) for c in counts), dtype=np.int64, count=n)
    k = np.minimum(edge_count, bucket_count)
    width = int(k.max()) if n and k.max() > 0 else 1
    if np.array_equal(edge_count, bucket_count):  # the usual case: nothing to cut
        same, weights = list(limits), list(counts)
    else:
        same = [np.asarray(e, np.float64)[:m] for e, m in zip(limits, k.tolist())]
        weights = [np.asarray(c, np.float64)[:m] for c, m in zip(counts, k.tolist())]
    # Scatter every point's buckets into its row at once (one concatenation, no per-point arithmetic).
    rows = np.repeat(np.arange(n), k)
    cols = np.arange(int(k.sum())) - np.repeat(np.cumsum(k) - k, k)
    inside = np.zeros((n, width), bool)
    inside[rows, cols] = True
    right = np.zeros((n, width))
    weight = np.zeros((n, width))
    if rows.size:
        right[rows, cols] = np.concatenate(same).astype(np.float64, copy=False)
        weight[rows, cols] = np.nan_to_num(
            np.concatenate(weights).astype(np.float64, copy=False), nan=0.0, posinf=0.0, neginf=0.0
        )
    lo = np.asarray(mins, dtype=np.float64).copy()
    hi = np.asarray(maxs, dtype=np.float64).copy()
    usable = np.isfinite(lo) & np.isfinite(hi) & (hi >= lo)
    if not usable.all():  # bounded by the point's own finite edges instead (0, 0 when it has none)
        finite = inside & np.isfinite(right)
        own_lo = np.where(finite, right, np.inf).min(axis=1)
        own_hi = np.where(finite, right, -np.inf).max(axis=1)
        has = finite.any(axis=1)
        lo = np.where(usable, lo, np.where(has, own_lo, 0.0))
        hi = np.where(usable, hi, np.where(has, own_hi, 0.0))
    right = np.where(inside, right, hi[:, None])  # padding: empty buckets of no width at the max
    lo2, hi2 = lo[:, None], hi[:, None]
    left = np.concatenate((lo2, right[:, :-1]), axis=1)
    weight = np.clip(weight, 0.0, None)
    return Buckets(np.clip(left, lo2, hi2), np.clip(right, lo2, hi2), weight, weight.sum(axis=1))


def series_buckets(series: HistogramSeries) -> Buckets:
    """All points of one histogram tag as `Buckets`."""
    return buckets(series.limits, series.counts, series.mins, series.maxs)


def _share(values: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Row sums of `values` over each row's total; NaN for an empty point."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, values.sum(axis=1) / np.where(total > 0, total, 1.0), np.nan)


def percentiles(b: Buckets, qs: tuple[float, ...] = DISTRIBUTION_PERCENTILES) -> np.ndarray:
    """(points, len(qs)): each point's values at percentiles `qs` (0-100), interpolated linearly inside the
    bucket that holds each one (TensorBoard's `compress_histogram` rule); 0 and 100 are the first and last
    non-empty bucket's outer edges. NaN rows for empty points."""
    n, k = b.counts.shape
    cumulative = np.cumsum(b.counts, axis=1)
    targets = np.asarray(qs, dtype=np.float64)[None, :] / 100.0 * b.total[:, None]
    # Per point, the first bucket whose cumulative share reaches each q: one sorted search over all points,
    # each point's shares lifted into its own interval [2i, 2i + 1] so the rows stay apart and in order.
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(b.total[:, None] > 0, cumulative / np.where(b.total > 0, b.total, 1.0)[:, None], 0.0)
    rows = np.arange(n)[:, None]
    lifted = (share + 2.0 * rows).ravel()
    wanted = (np.asarray(qs, dtype=np.float64)[None, :] / 100.0 + 2.0 * rows).ravel()
    found = np.searchsorted(lifted, wanted, side="left").reshape(n, len(qs))
    index = np.clip(found - rows * k, 0, k - 1)
    before = np.where(index > 0, cumulative[rows, np.maximum(index - 1, 0)], 0.0)
    inside = b.counts[rows, index]
    with np.errstate(invalid="ignore", divide="ignore"):
        fraction = np.where(inside > 0, (targets - before) / np.where(inside > 0, inside, 1.0), 0.0)
    values = b.left[rows, index] + np.clip(fraction, 0.0, 1.0) * (b.right[rows, index] - b.left[rows, index])
    occupied = b.counts > 0
    first = np.argmax(occupied, axis=1)
    last = k - 1 - np.argmax(occupied[:, ::-1], axis=1)
    q = np.asarray(qs)
    values[:, q <= 0] = b.left[np.arange(n), first][:, None]
    values[:, q >= 100] = b.right[np.arange(n), last][:, None]
    values[b.total <= 0] = np.nan
    return values


def mean_abs(b: Buckets) -> np.ndarray:
    """Per point, mean |x|: |centre| for a bucket on one side of 0, (a² + b²) / 2(b - a) for one across it."""
    a, z = b.left, b.right
    across = (a < 0) & (z > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = np.where(across, (a * a + z * z) / (2 * np.where(across, z - a, 1.0)), np.abs(a + z) / 2)
    return _share(b.counts * expected, b.total)


def l2_norm(b: Buckets) -> np.ndarray:
    """Per point, sqrt(Σ x²) estimated from the buckets (E[x²] over [a, z] is (a² + az + z²) / 3): a layer's
    norm when the histogram holds its weights or gradients. NaN for an empty point."""
    a, z = b.left, b.right
    squares = (b.counts * (a * a + a * z + z * z) / 3).sum(axis=1)
    return np.where(b.total > 0, np.sqrt(squares), np.nan)


def mass_near(b: Buckets, value: np.ndarray | float, band: np.ndarray | float) -> np.ndarray:
    """Per point, the share of values within `band` of `value` (each per point, or one for all).

    A bucket counts by how much of it lies inside the band, except the bucket holding `value`: a point mass
    there (a ReLU's zeros, a saturated tanh's ±1) is its count beyond the spread its neighbours' density
    predicts for its width, and counts whole; the spread part counts by its overlap like any bucket.
    """
    a, z = b.left, b.right
    n, k = b.counts.shape
    value = np.broadcast_to(np.asarray(value, dtype=np.float64), (n,))[:, None]
    band = np.broadcast_to(np.asarray(band, dtype=np.float64), (n,))[:, None]
    overlap = np.clip(np.minimum(z, value + band) - np.maximum(a, value - band), 0.0, None)
    width = z - a
    with np.errstate(invalid="ignore", divide="ignore"):
        inside = np.where(width > 0, overlap / width, (a >= value - band) & (z <= value + band))
    counted = (b.counts * inside).sum(axis=1)
    # The holding buckets (two when `value` is an edge between them): add back their point mass's outside part.
    holds = (a <= value) & (z >= value)
    held = holds.any(axis=1)
    first, last = np.argmax(holds, axis=1), k - 1 - np.argmax(holds[:, ::-1], axis=1)
    for j, rows in ((first, held), (last, held & (last != first))):
        counted += np.where(rows, _point_mass(b, j) * (1.0 - inside[np.arange(n), j]), 0.0)
    return np.where(b.total > 0, counted / np.where(b.total > 0, b.total, 1.0), np.nan)


def _point_mass(b: Buckets, j: np.ndarray) -> np.ndarray:
    """Per point, bucket j's count beyond the spread its neighbours' mean density puts in its width."""
    n, k = b.counts.shape
    rows = np.arange(n)
    width = b.right - b.left

    def density(at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ok = (at >= 0) & (at < k)
        at = np.clip(at, 0, k - 1)
        w = width[rows, at]
        usable = ok & (w > 0)
        return np.where(usable, b.counts[rows, at] / np.where(usable, w, 1.0), 0.0), usable

    before, has_before = density(j - 1)
    after, has_after = density(j + 1)
    neighbours = has_before.astype(np.float64) + has_after
    mean_density = np.where(neighbours > 0, (before + after) / np.maximum(neighbours, 1.0), 0.0)
    count = b.counts[rows, j]
    return count - np.minimum(mean_density * width[rows, j], count)


def mass_at_zero(b: Buckets) -> np.ndarray:
    """Per point, the share of values at 0: within ZERO_BAND × the point's largest |x|, or in the bucket holding 0."""
    scale = np.maximum(np.abs(b.left[:, 0]), np.abs(b.right[:, -1]))
    return mass_near(b, 0.0, ZERO_BAND * scale)


#: A point whose min (max) lies this close to a saturation end has values piled against it: its outermost
#: bucket holds the end (tanh(z) never quite reaches 1, so its max is 0.99999, not 1).
END_REACH = SATURATION_BAND / 5


def mass_at_ends(b: Buckets, ends: tuple[float, float]) -> np.ndarray:
    """Per point, the share of values within SATURATION_BAND of either saturation end (e.g. (-1, 1) for tanh)."""
    lo, hi = b.left[:, 0], b.right[:, -1]
    low_end = np.where(lo <= ends[0] + END_REACH, np.maximum(lo, ends[0]), ends[0])
    high_end = np.where(hi >= ends[1] - END_REACH, np.minimum(hi, ends[1]), ends[1])
    return mass_near(b, low_end, SATURATION_BAND) + mass_near(b, high_end, SATURATION_BAND)


# ---- a whole series ---------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class HistogramSummary:
    """Per point of one histogram tag: the distribution bands and the numbers detectors judge."""

    steps: np.ndarray  # int64
    bands: np.ndarray  # (points, len(DISTRIBUTION_PERCENTILES)): values at those percentiles
    mean_abs: np.ndarray  # float64 per point
    norm: np.ndarray  # float64 per point: the L2 norm estimate
    zero_mass: np.ndarray  # float64 per point: share at zero
    mins: np.ndarray  # float64 per point: the lowest bucket edge
    maxs: np.ndarray  # float64 per point: the highest bucket edge

    def __len__(self) -> int:
        return int(self.steps.shape[0])


#: Summaries and layer numbers already computed, per series object: `HistogramSeries` is immutable (live tailing
#: replaces it rather than appending), so a series seen again is answered at once and a replaced one is forgotten.
_SUMMARIES: WeakKeyDictionary[HistogramSeries, HistogramSummary] = WeakKeyDictionary()
_LAYER_VALUES: WeakKeyDictionary[HistogramSeries, dict[str, Series | None]] = WeakKeyDictionary()


def summarise(series: HistogramSeries) -> HistogramSummary:
    """Every point's bands, mean |x|, norm and mass at zero, vectorised over the points."""
    cached = _SUMMARIES.get(series)
    if cached is not None:
        return cached
    b = series_buckets(series)
    summary = HistogramSummary(
        steps=np.asarray(series.steps, dtype=np.int64),
        bands=percentiles(b),
        mean_abs=mean_abs(b),
        norm=l2_norm(b),
        zero_mass=mass_at_zero(b),
        mins=b.left[:, 0] if len(b) else np.empty(0),
        maxs=b.right[:, -1] if len(b) else np.empty(0),
    )
    _SUMMARIES[series] = summary
    return summary


# ---- what a histogram tag holds ---------------------------------------------------------------------------

#: The kinds of histogram a training loop logs, as the views and detectors name them.
HISTOGRAM_KINDS = ("gradient", "weight", "activation")

_GRADIENT = re.compile(r"(^|[^a-z])(grad|grads|gradient|gradients)([^a-z]|$)")
_WEIGHT = re.compile(r"(^|[^a-z])(weight|weights|kernel|kernel_\d+|bias|bias_\d+|params?|parameters?)([^a-z]|$)")
_ACTIVATION = re.compile(
    r"(^|[^a-z])(act|acts|activation|activations|relu\w*|gelu|silu|tanh|sigmoid|hidden|outputs?|features?)([^a-z]|$)"
)
#: Words of a tag that name what is logged, not the layer (`weight` and `bias` stay: they name the parameter).
_KIND_WORDS = re.compile(
    r"(^|[/._-])(grad|grads|gradient|gradients|acts?|activations?|weights|params|parameters|histograms?|hist)"
    r"(?=$|[/._-])"
)


def histogram_kind(tag: str) -> str | None:
    """'gradient', 'weight' or 'activation' from the tag's words; None when it says none of them.

    A gradient's tag usually names its weight too (`fc1.weight.grad`), and a weight's may name its layer
    after the activation (`relu_block.weight`): gradient wins over weight, weight over activation.
    """
    text = tag.lower()
    if _GRADIENT.search(text):
        return "gradient"
    if _WEIGHT.search(text):
        return "weight"
    if _ACTIVATION.search(text):
        return "activation"
    return None


def layer_name(tag: str) -> str:
    """The layer a histogram tag is about: the tag without its words naming the kind of histogram
    (`grads/fc1.weight` and `fc1.weight.grad` -> `fc1.weight`, `activations/relu1` -> `relu1`)."""
    name = _KIND_WORDS.sub(r"\1", tag)
    name = re.sub(r"[/._-]{2,}", lambda m: m.group(0)[0], name).strip("/._-")
    return name or tag


def tags_of_kind(histograms: dict[str, HistogramSeries], kind: str) -> list[str]:
    """The histogram tags of one kind that hold at least one point, sorted."""
    return sorted(tag for tag, series in histograms.items() if len(series) and histogram_kind(tag) == kind)


def saturation_ends(tag: str, lo: float, hi: float) -> tuple[float, float] | None:
    """The saturation ends of a bounded activation the tag names: (-1, 1) for tanh, (0, 1) for sigmoid."""
    text = tag.lower()
    if "tanh" in text and lo >= -1.0 and hi <= 1.0:
        return (-1.0, 1.0)
    if ("sigmoid" in text or "logistic" in text) and lo >= 0.0 and hi <= 1.0:
        return (0.0, 1.0)
    return None


def _is_bias(tag: str) -> bool:
    name = layer_name(tag).lower()
    return name.endswith(("bias", "bias_0")) or "/bias" in name or ".bias" in name


def layer_series(histograms: dict[str, HistogramSeries], kind: str) -> dict[str, Series]:
    """Per histogram tag of `kind`, one number per point as a scalar series:

    - gradients and weights: the L2 norm estimate (biases left out of weights: they start at 0, so any
      growth looks fast);
    - activations: the mass at zero, for ReLU-like ones only (nothing below 0, no tanh/sigmoid range).
    """
    out = {}
    for tag, hist in histograms.items():
        if not len(hist) or histogram_kind(tag) != kind or (kind == "weight" and _is_bias(tag)):
            continue
        known = _LAYER_VALUES.setdefault(hist, {})
        if kind not in known:
            known[kind] = _layer_values(tag, hist, kind)
        if (values := known[kind]) is not None:
            out[tag] = values
    return out


def _layer_values(tag: str, hist: HistogramSeries, kind: str) -> Series | None:
    b = series_buckets(hist)
    if kind == "activation":
        lo, hi = float(np.nanmin(b.left[:, 0])), float(np.nanmax(b.right[:, -1]))
        if lo < 0 or saturation_ends(tag, lo, hi):
            return None  # not ReLU-like: zeros mean nothing special there
        return Series(hist.steps, hist.wall_times, mass_at_zero(b))
    return Series(hist.steps, hist.wall_times, l2_norm(b))


def gradient_layers(
    scalars: dict[str, Series], histograms: dict[str, HistogramSeries], roles: dict[str, str | None]
) -> tuple[dict[str, Series], str | None]:
    """Per-layer gradient magnitudes over time and where they come from: the run's per-layer gradient-norm
    scalars ("scalars") when it logs them, else the norms of its gradient histograms ("histograms")."""
    logged = {tag: s for tag, s in scalars.items() if roles.get(tag) == "grad_norm_layer" and len(s)}
    if logged:
        return logged, "scalars"
    estimated = layer_series(histograms, "gradient")
    return (estimated, "histograms") if estimated else ({}, None)
