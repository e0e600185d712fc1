"""Per-series features: a few structured numbers instead of thousands of points.

Every series gets its extent, best and final values (respecting direction), the first non-finite step,
a robust noise sigma and a recent trend. Curves whose shape detectors judge (losses, metrics, gradient
norms) also get a local robust baseline, the points beyond OUTLIER_K sigma of it, upward spikes found at
several resolutions (each with the level before and after it), the largest single-step jump, and (for
losses and metrics) flat stretches. The noise, the flat stretches and the trend are worked out when first
read (`SeriesFeatures.deferred`: few detectors read them). Everything is numpy over whole arrays; expensive
shape work runs on at most LEVEL_BUCKETS bucket medians, which keeps 1/1000 of the run's resolution, finer
than any onset a detector reports (they promise 2 %).

`extra` holds (documented here because the LLM prompt and the report read it):
  start_level, end_level   median of the first / last EDGE_FRAC of the finite points
  recent_median            median of the last RECENT_FRAC of the run (by step)
  scale                    the magnitude relative thresholds are taken against (see `series_scale`)
  spikes                   tuple of `Spike` (upward excursions that came back down), worst first
  max_jump                 dict: the largest one-step rise against local noise (from/to steps and values, z)
  level                    `Buckets` of the finite values (≤ LEVEL_BUCKETS medians), for detectors
  tail_z95                 95th percentile of the points' distance above the local level, in local sigmas
                           (about 1.6 for Gaussian noise; larger when the noise is heavy-tailed)
  nonfinite                count of NaN/Inf points
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import numpy as np

from .datamodel import Run, Series, SeriesFeatures
from .smoothing import (
    Baseline,
    Buckets,
    bucket_medians,
    local_baseline,
    median,
    medians_around,
    percentile,
    row_medians,
    scale_noise,
    true_stretches,
    windows,
)

#: Bucket medians kept for shape work: 1/1000 of the run is far below the 2 % onset accuracy we promise,
#: and it bounds plateau/trend/oscillation work per series whatever the number of points.
LEVEL_BUCKETS = 1024
#: Fewer finite points than this: no noise estimate, no baseline, no spikes (nothing is "unusual" in 7 points).
MIN_POINTS_NOISE = 8
#: Points per block of the local median baseline: at least 5 for a median worth the name, at most 32 so the
#: baseline follows the fast early fall of a loss; n/40 in between keeps ~40 blocks on short series.
BASELINE_BLOCK_MIN, BASELINE_BLOCK_MAX, BASELINE_BLOCKS = 5, 32, 40
#: Beyond this many local sigmas a point is an outlier (the 3σ rule of thumb; a feature, not a finding).
OUTLIER_K = 3.0
#: Upward excursions kept as spike candidates: at least this many local sigmas above the level before them.
#: Detectors apply their own, stricter bars; a normal minibatch loss exceeds 5σ of a robust sigma rarely.
SPIKE_Z = 5.0
#: A spike has recovered when the level after it is back below pre + RECOVER_FRAC × (peak - pre).
RECOVER_FRAC = 0.5
#: Candidate points closer than this many points belong to one spike.
SPIKE_CLUSTER_GAP = 2
#: At most this many candidate points are examined per resolution (the largest z first): a series with
#: more "spikes" than this is simply noisy, and the detectors judge it by its noise instead.
MAX_SPIKE_CANDIDATES = 512
#: Resolutions (points per bucket) at which spikes are searched: single points, then excursions lasting
#: several, tens and hundreds of points (a median of 16 ignores a 3-point spike and a 10-point bump that
#: straddles two buckets; a median of 4 sees the bump a bad shard of 10 batches makes).
SPIKE_SCALES = (1, 4, 16, 256)
#: Share of the finite points whose median is the start / end level.
EDGE_FRAC = 0.05
#: The "recent" part of a run for trend and recent level: its last 20 % of steps.
RECENT_FRAC = 0.2
#: Flat stretches: at least PLATEAU_MIN_FRAC of the run, drifting less than PLATEAU_NOISE_K sigmas (of the
#: drift's own noise) or PLATEAU_RANGE_FRAC of the run's whole range, whichever is larger.
PLATEAU_MIN_FRAC = 0.1
PLATEAU_NOISE_K = 4.0
PLATEAU_RANGE_FRAC = 0.03
PLATEAU_BUCKETS = 256

#: Roles whose wide bumps (coarse spike scales) matter: a loss that rises for 300 steps and comes back is a
#: spike worth reporting; gradient norms explode point by point, so their single-point scale is enough.
SPIKE_BUMP_ROLES = frozenset({"train_loss", "val_loss", "loss_component"})
#: Roles whose shape matters (spikes, outliers); the others get the cheap features only.
SHAPE_ROLES = frozenset({"train_loss", "val_loss", "loss_component", "metric", "grad_norm", "grad_norm_layer"})
#: Roles judged on a log scale: gradient norms are multiplicative (a ×10 jump means the same at 0.1 and 100).
LOG_ROLES = frozenset({"grad_norm", "grad_norm_layer"})
#: Losses are judged on a log scale too when every value is positive: minibatch losses scatter in proportion
#: to their size (lognormal-like), so a noisy loss's upper tail is long in linear units and ordinary in log.
POSITIVE_LOG_ROLES = frozenset({"train_loss", "val_loss", "loss_component"})
PLATEAU_ROLES = frozenset({"train_loss", "val_loss", "loss_component", "metric"})

_T = TypeVar("_T")


@dataclass(frozen=True)
class Spike:
    """One upward excursion of a series that came back down (values in the series' own units)."""

    start_step: int
    peak_step: int
    end_step: int
    before: float  # median level just before the excursion
    peak: float
    after: float  # median level just after it
    z: float  # (peak - before) in local noise sigmas (log10 units for gradient norms)
    prev_step: int  # the step of the point before the excursion (for "a → b between steps s1 and s2")
    prev_value: float


def finite_view(series: Series) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of the finite points only."""
    finite = np.isfinite(series.values)
    if finite.all():
        return series.steps, series.values
    return series.steps[finite], series.values[finite]


def series_scale(values: np.ndarray) -> float:
    """The magnitude "relative" means for this series: its typical |value|, or its spread when it hovers at 0.

    Pass the bucket medians of a long series: the same answer for a fraction of the cost.
    """
    if values.size == 0:
        return 0.0
    lo, mid, hi = percentile(values, [5, 50, 95])
    return float(max(abs(mid), 0.5 * (hi - lo), 1e-12))


def _edge_median(values: np.ndarray, last: bool) -> float:
    count = max(3, int(np.ceil(EDGE_FRAC * values.size)))
    part = values[-count:] if last else values[:count]
    return median(part)


def baseline_block(n: int) -> int:
    """Points per block of the local baseline for a series of n points."""
    return min(max(n // BASELINE_BLOCKS, BASELINE_BLOCK_MIN), BASELINE_BLOCK_MAX)


def _judged(steps: np.ndarray, values: np.ndarray, log_scale: bool) -> tuple[np.ndarray, np.ndarray]:
    """The points a shape is judged on: log10 of the positive values for multiplicative series."""
    if not log_scale:
        return steps, values
    positive = values > 0
    if not positive.all():
        steps, values = steps[positive], values[positive]
    return steps, np.log10(values)


def _spikes_at(steps: np.ndarray, y: np.ndarray, log_scale: bool, base: Baseline | None = None) -> list[Spike]:
    """Upward excursions of one resolution: candidates above the local baseline, checked against the
    medians just before and after them (so a step-decay drop, which has no "after" back at the old level,
    is never a spike). `y` is already on the judged scale (log10 for gradient norms)."""
    n = y.size
    if n < 2 * MIN_POINTS_NOISE:
        return []
    block = baseline_block(n)
    if base is None:
        base = local_baseline(y, block)
    z = (y - base.level) / base.sigma
    candidates = np.flatnonzero(z > SPIKE_Z)
    if candidates.size == 0:
        return []
    if candidates.size > MAX_SPIKE_CANDIDATES:
        top = np.argpartition(z[candidates], -MAX_SPIKE_CANDIDATES)[-MAX_SPIKE_CANDIDATES:]
        candidates = np.sort(candidates[top])
    breaks = np.flatnonzero(candidates[1:] - candidates[:-1] > SPIKE_CLUSTER_GAP)  # np.diff, without its set-up
    starts = candidates[np.concatenate(([0], breaks + 1))]
    ends = candidates[np.concatenate((breaks, (candidates.size - 1,)))]
    max_width = max(3, block // 2)
    narrow = (ends - starts + 1) <= max_width
    starts, ends = starts[narrow], ends[narrow]
    if starts.size == 0:
        return []
    window = max(MIN_POINTS_NOISE, block)
    before, after = medians_around(y, starts, ends + 1, window)
    # Each cluster's peak and its index, the first point reaching it (np.max and np.argmax over each cluster's
    # points, all clusters at once: rows padded with -inf after their last point).
    offsets = np.arange(int((ends - starts).max()) + 1)
    index = starts[:, None] + offsets[None, :]
    inside = index <= ends[:, None]
    rows = np.where(inside, y[np.minimum(index, n - 1)], -np.inf)
    peaks = rows.max(axis=1)
    peak_index = starts + np.argmax(rows, axis=1)
    excess = peaks - before
    zpeak = excess / base.sigma[peak_index]
    recovered = (after - before) < RECOVER_FRAC * excess  # NaN after (spike at the very end): not recovered
    keep = np.isfinite(before) & (zpeak > SPIKE_Z) & recovered
    out = []
    to_values = (lambda a: np.power(10.0, a)) if log_scale else (lambda a: a)
    for k in np.flatnonzero(keep):
        s, e, p = int(starts[k]), int(ends[k]), int(peak_index[k])
        prev = max(s - 1, 0)
        out.append(
            Spike(
                start_step=int(steps[s]),
                peak_step=int(steps[p]),
                end_step=int(steps[e]),
                before=float(to_values(before[k])),
                peak=float(to_values(peaks[k])),
                after=float(to_values(after[k])),
                z=float(zpeak[k]),
                prev_step=int(steps[prev]),
                prev_value=float(to_values(y[prev])),
            )
        )
    return out


def _monotone(y: np.ndarray) -> bool:
    """Whether `y` never rises or never falls (its first and last values say which to test)."""
    if y.size < 2:
        return True
    return bool((y[1:] >= y[:-1]).all() if y[-1] >= y[0] else (y[1:] <= y[:-1]).all())


def _no_spikes(y: np.ndarray) -> bool:
    """True when `_spikes_at` finds nothing in `y` at any baseline, and nor does any scale of `find_spikes`.

    A monotone curve has no spike. Never rising: a cluster's peak is its first point, and every point before it
    (so the median `before`) is at least as high: the excess is ≤ 0. Never falling: the peak is its last point
    and every point after it (so `after`) is at least as high: after - before ≥ excess, never "recovered"
    (and excess ≤ 0 is no spike either). A sigma is always > 0, so z follows the sign of the excess, and a
    NaN level (at an edge) keeps nothing. Bucket medians of a monotone curve are monotone too (each is one of
    its bucket's values, or the mean of two, which stays between them while |y| < 1e307: no overflow).
    """
    return _monotone(y) and (y.size == 0 or max(abs(float(y[0])), abs(float(y[-1]))) < 1e307)


def _judged_buckets(
    steps: np.ndarray, y: np.ndarray, max_buckets: int, level: Buckets | None, log_scale: bool
) -> Buckets:
    """bucket_medians(steps, y, max_buckets), read off `level` when those are the same buckets.

    `level` is bucket_medians(steps, x, LEVEL_BUCKETS) of the same points, with y = x or y = log10(x). Same
    count and size: the same buckets, the same middle steps, and each full bucket's median is its upper middle
    value, which log10 keeps (monotone: the k-th smallest of the logs is the log of the k-th smallest). The
    short last bucket, whose median may be a mean of two, is taken again from `y`.
    """
    n = y.size
    size = max(1, -(-n // max(1, max_buckets)))
    if level is None or level.size != size or len(level) != -(-n // size) or n == 0:
        return bucket_medians(steps, y, max_buckets)
    if not log_scale:
        return level
    medians = np.log10(level.medians)
    full = n // size
    if full < medians.size:
        medians[-1] = median(y[full * size :])
    return Buckets(level.steps, level.first, size, medians)


def find_spikes(
    steps: np.ndarray,
    values: np.ndarray,
    log_scale: bool = False,
    base: Baseline | None = None,
    judged: tuple[np.ndarray, np.ndarray] | None = None,
    scales: tuple[int, ...] = SPIKE_SCALES,
    level: Buckets | None = None,
) -> tuple[Spike, ...]:
    """Upward excursions that recover, at every resolution of SPIKE_SCALES, overlaps merged, worst first.

    `base` and `judged`: the local baseline of the judged values and those (steps, values) themselves
    (log10 of the positive points for `log_scale`), when the caller has them already. `level`:
    bucket_medians(steps, values, LEVEL_BUCKETS), when the caller has it and the judged points are all the
    points of `values` (nothing left out of the log): a scale whose buckets are the level's reads them off it.
    """
    steps, y = judged if judged is not None else _judged(steps, values, log_scale)
    if _no_spikes(y):
        return ()
    value_at = (lambda i: float(10.0 ** y[i])) if log_scale else (lambda i: float(y[i]))
    found: list[Spike] = []
    for scale in scales:
        if scale == 1:
            found.extend(_spikes_at(steps, y, log_scale, base))
            continue
        if y.size < scale * 4 * MIN_POINTS_NOISE:
            break
        buckets = _judged_buckets(steps, y, -(-y.size // scale), level, log_scale)
        if _no_spikes(buckets.medians):  # the baseline, the costly part, would find nothing
            continue
        # int() of a float step truncates as astype(np.int64) does: the bucket's steps stay float here.
        coarse = _spikes_at(buckets.steps, buckets.medians, log_scale)
        # Report bucket spikes with the real first/last steps of the buckets they cover.
        for spike in coarse:
            i0 = int(np.searchsorted(buckets.steps, spike.start_step))
            i1 = int(np.searchsorted(buckets.steps, spike.end_step))
            first = buckets.first[i0]
            last = min(buckets.first[i1] + buckets.size - 1, y.size - 1)
            peak_at = first + int(np.argmax(y[first : last + 1]))
            found.append(
                Spike(
                    start_step=int(steps[first]),
                    peak_step=int(steps[peak_at]),
                    end_step=int(steps[last]),
                    before=spike.before,
                    peak=value_at(peak_at),
                    after=spike.after,
                    z=spike.z,
                    prev_step=int(steps[max(first - 1, 0)]),
                    prev_value=value_at(max(first - 1, 0)),
                )
            )
    if not found:
        return ()
    # Merge spikes that overlap (the same event seen at two resolutions): keep the finest (first found).
    kept: list[Spike] = []
    for spike in found:
        if not any(spike.start_step <= k.end_step and k.start_step <= spike.end_step for k in kept):
            kept.append(spike)
    return tuple(sorted(kept, key=lambda s: -s.z))


def _step_medians(steps: np.ndarray, buckets: Buckets, max_buckets: int) -> np.ndarray:
    """bucket_medians(steps, steps, max_buckets).medians, where `buckets` is bucket_medians(steps, _, max_buckets):
    read off directly when the steps are in order (each bucket's upper middle value, the last one's median)."""
    if steps.size < 2 or not (steps[1:] >= steps[:-1]).all():
        return bucket_medians(steps, steps, max_buckets).medians
    full = steps.size // buckets.size
    medians = steps[buckets.first[:full] + buckets.size // 2]
    if full < len(buckets):
        medians = np.concatenate((medians, (median(steps[full * buckets.size :]),)))
    return medians


def find_plateaus(level: Buckets) -> tuple[tuple[int, int], ...]:
    """(start_step, end_step) of stretches of at least PLATEAU_MIN_FRAC of the run where the level is flat.

    Flat: over every window of that length inside the stretch, the median of its first quarter and of its
    last quarter differ by less than PLATEAU_NOISE_K sigmas of that difference's own noise, or than
    PLATEAU_RANGE_FRAC of the run's range (whichever is larger). Net drift, not wiggle, is what makes a
    curve not flat, and medians of quarters keep one odd bucket from breaking a plateau in two.
    """
    if len(level) < 20:
        return ()
    y = level.medians
    if y.size > PLATEAU_BUCKETS:  # coarser still: flatness over ≥10 % of a run needs no finer view
        coarse = bucket_medians(level.steps, y, PLATEAU_BUCKETS)
        y, centres = coarse.medians, _step_medians(level.steps, coarse, PLATEAU_BUCKETS)
    else:
        centres = level.steps
    m = y.size
    width = max(8, math.ceil(PLATEAU_MIN_FRAC * m))
    if m < width + 2:
        return ()
    quarter = max(2, width // 4)
    quarter_medians = row_medians(windows(y, quarter))
    # The window starting at each of the `count` first points: its first quarter's median against its last's.
    count, shift = m - width + 1, width - quarter
    drift = np.abs(quarter_medians[shift : shift + count] - quarter_medians[:count])
    drift_noise = 1.2533 * scale_noise(y) * math.sqrt(2.0 / quarter)
    lo, hi = percentile(y, [5, 95])
    band = max(PLATEAU_NOISE_K * drift_noise, PLATEAU_RANGE_FRAC * (hi - lo), 1e-12 * max(abs(hi), abs(lo)))
    flat = drift <= band
    if not flat.any():
        return ()
    # A flat window covers its `width` points: stretches of flat windows [b, f] cover [b, f + width - 1] (never past
    # the last point), and covered stretches less than a window apart touch.
    stretches: list[list[int]] = []
    for b, f in zip(*(part.tolist() for part in true_stretches(flat))):
        if stretches and b <= stretches[-1][1] + 1:
            stretches[-1][1] = f + width - 1
        else:
            stretches.append([b, f + width - 1])
    return tuple((int(centres[b]), int(centres[f])) for b, f in stretches)


def _trend(level: Buckets, scale: float) -> float | None:
    """Relative slope over the last RECENT_FRAC of the run: change per 1 % of the run, as a fraction of `scale`."""
    if len(level) < 5 or scale <= 0:
        return None
    first, last = float(level.steps[0]), float(level.steps[-1])
    span = last - first
    if span <= 0:
        return None
    recent = level.steps >= last - RECENT_FRAC * span
    if np.count_nonzero(recent) < 3:
        recent = np.zeros(len(level), dtype=bool)
        recent[-3:] = True
    x, y = level.steps[recent], level.medians[recent]
    # sum / size is np.mean's own arithmetic (the same pairwise sum, one division) without its dispatch.
    x = x - x.sum() / x.size
    denominator = float((x * x).sum())
    if denominator <= 0:
        return None
    slope = float((x * (y - y.sum() / y.size)).sum()) / denominator
    return slope * (span / 100.0) / scale


def _max_jump(steps: np.ndarray, y: np.ndarray, sigma: np.ndarray, log_scale: bool) -> dict | None:
    if y.size < 2:
        return None
    rise = (y[1:] - y[:-1]) / sigma[1:]
    k = int(np.argmax(rise))
    value = (lambda a: float(10.0**a)) if log_scale else float
    return {
        "from_step": int(steps[k]),
        "to_step": int(steps[k + 1]),
        "from": value(y[k]),
        "to": value(y[k + 1]),
        "z": float(rise[k]),
    }


def _noise(finite: np.ndarray) -> float:
    return float(scale_noise(finite))


def _quietly(work: Callable[..., _T], *args: Any) -> _T:
    """`work(*args)` with numpy's warnings off, as the engine judges a run (values near DBL_MAX overflow to inf,
    which the features read as "no evidence"): a deferred feature is worked out after the engine has returned."""
    with np.errstate(all="ignore"):
        return work(*args)


def series_features(tag: str, series: Series, role: str | None, direction: int) -> SeriesFeatures:
    """Describe one series (see the module docstring for what `extra` holds)."""
    values = series.values
    finite_mask = np.isfinite(values)
    nonfinite = values.size - int(np.count_nonzero(finite_mask))
    steps, finite = (series.steps, values) if nonfinite == 0 else (series.steps[finite_mask], values[finite_mask])
    first_nonfinite = int(series.steps[np.argmin(finite_mask)]) if nonfinite else None
    extra: dict = {"nonfinite": nonfinite}
    empty = np.empty(0, dtype=np.int64)
    if finite.size == 0:
        return SeriesFeatures(
            tag,
            role,
            direction,
            len(series),
            int(series.steps[0]) if len(series) else None,
            int(series.steps[-1]) if len(series) else None,
            None,
            None,
            None,
            None,
            first_nonfinite,
            None,
            empty,
            (),
            None,
            None,
            extra,
        )
    best = best_step = None
    if direction != 0:
        k = int(np.argmax(finite) if direction > 0 else np.argmin(finite))
        best, best_step = float(finite[k]), int(steps[k])
    level = bucket_medians(steps, finite, LEVEL_BUCKETS)
    scale = series_scale(level.medians)
    extra.update(
        start_level=_edge_median(finite, last=False),
        end_level=_edge_median(finite, last=True),
        scale=scale,
        level=level,
    )
    recent = steps >= steps[-1] - RECENT_FRAC * (steps[-1] - steps[0])
    extra["recent_median"] = median(finite[recent])
    outliers = empty
    spike_period = None
    if role in SHAPE_ROLES and finite.size >= 2 * MIN_POINTS_NOISE:
        positive = role in POSITIVE_LOG_ROLES and bool(finite.min() > 0)
        log_scale = role in LOG_ROLES or positive
        # Every value positive: what _judged gives, without testing each value again.
        judged_steps, judged = (steps, np.log10(finite)) if positive else _judged(steps, finite, log_scale)
        if judged.size >= 2 * MIN_POINTS_NOISE:
            base = local_baseline(judged, baseline_block(judged.size))
            z = (judged - base.level) / base.sigma
            outliers = judged_steps[np.abs(z) > OUTLIER_K].astype(np.int64, copy=False)
            # How heavy the upper tail of this series' own noise is: spikes must stand out against it. The
            # 95th percentile, not the 99th: in a 400-point run the few spike points would be the top 1 %.
            at = int(0.95 * (z.size - 1))
            z.partition(at)  # z is this function's own: selected in place
            extra["tail_z95"] = float(z[at])
            spikes = find_spikes(
                steps,
                finite,
                log_scale=log_scale,
                base=base,
                judged=(judged_steps, judged),
                scales=SPIKE_SCALES if role in SPIKE_BUMP_ROLES else SPIKE_SCALES[:1],
                level=level if judged.size == finite.size else None,
            )
            extra["spikes"] = spikes
            extra["max_jump"] = _max_jump(judged_steps, judged, base.sigma, log_scale)
            spike_period = periodicity([s.peak_step for s in spikes]) if len(spikes) >= PERIOD_MIN_EVENTS else None
    # Worked out when first read (`SeriesFeatures.deferred`): few detectors read them (task balance the noise,
    # convergence the main loss's flat stretches), and most runs' views never do.
    later: dict[str, Callable[[], Any]] = {
        "trend": partial(_quietly, _trend, level, max(abs(extra["recent_median"]), 0.05 * scale, 1e-12))
    }
    now: dict[str, Any] = {}
    if finite.size >= MIN_POINTS_NOISE:
        later["noise"] = partial(_quietly, _noise, finite)
    else:
        now["noise"] = None
    if role in PLATEAU_ROLES:
        later["plateaus"] = partial(_quietly, find_plateaus, level)
    else:
        now["plateaus"] = ()
    return SeriesFeatures.deferred(
        later,
        **now,
        tag=tag,
        role=role,
        direction=direction,
        points=len(series),
        first_step=int(series.steps[0]),
        last_step=int(series.steps[-1]),
        best=best,
        best_step=best_step,
        final=float(finite[-1]),
        final_step=int(steps[-1]),
        first_nonfinite_step=first_nonfinite,
        outlier_steps=outliers,
        spike_period=spike_period,
        extra=extra,
    )


#: Periodicity: at least this many events, and this share of the gaps within PERIOD_TOLERANCE of a multiple
#: of the period. Gaps between random events are exponential: four of five landing within ±10 % of one
#: value happens by chance well under 1 % of the time.
PERIOD_MIN_EVENTS = 4
PERIOD_MIN_SHARE = 0.75
PERIOD_TOLERANCE = 0.1


def periodicity(event_steps) -> int | None:
    """The period in steps of recurring events, when their gaps are (multiples of) one period; else None."""
    steps = np.sort(np.asarray(event_steps, dtype=np.int64))
    if steps.size < PERIOD_MIN_EVENTS:
        return None
    gaps = np.diff(steps).astype(np.float64)
    gaps = gaps[gaps > 0]
    if gaps.size < PERIOD_MIN_EVENTS - 1:
        return None
    # The period is the smallest gap that most other gaps are multiples of; try the smaller gaps as bases.
    for base in np.unique(np.sort(gaps)[: max(1, gaps.size // 2 + 1)]):
        multiple = np.round(gaps / base)
        near = (multiple >= 1) & (np.abs(gaps - multiple * base) <= PERIOD_TOLERANCE * base)
        if near.mean() >= PERIOD_MIN_SHARE and (multiple[near] == 1).sum() >= (PERIOD_MIN_EVENTS - 1) // 2 + 1:
            period = np.median(gaps[near] / multiple[near])
            return int(round(period))
    return None


# ---- context around a critical point ------------------------------------------------------------------

#: Roles whose neighbourhood explains a critical point: the lr schedule, the gradient norm, device memory.
CONTEXT_ROLES = ("lr", "grad_norm", "gpu_mem")


def context_windows(run: Run, roles, step: int, k: int = 5) -> dict[str, list[tuple[int, float]]]:
    """The ±k points of lr, grad_norm and gpu_mem around `step`, keyed by role (the tag is in `context_tags`).

    `roles` maps tag -> (role, direction) or tag -> role. Where several tags share a role, the one with the
    most points is used (the global grad norm rather than a layer's; `lr/pg0` ties broken by name).
    """
    return {role: points for role, (_, points) in _context(run, roles, step, k).items()}


def context_tags(run: Run, roles) -> dict[str, str]:
    """Which tag `context_windows` reads for each role."""
    return {role: tag for role, (tag, _) in _context(run, roles, None, 0).items()}


def _context(run: Run, roles, step: int | None, k: int) -> dict[str, tuple[str, list[tuple[int, float]]]]:
    out: dict[str, tuple[str, list[tuple[int, float]]]] = {}
    for role in CONTEXT_ROLES:
        tags = [t for t, r in roles.items() if (r[0] if isinstance(r, tuple) else r) == role and t in run.scalars]
        if not tags:
            continue
        tag = max(tags, key=lambda t: (len(run.scalars[t]), -len(t), t))
        series = run.scalars[tag]
        if step is None or len(series) == 0:
            out[role] = (tag, [])
            continue
        at = int(np.searchsorted(series.steps, step))
        lo, hi = max(at - k, 0), min(at + k + 1, len(series))
        out[role] = (tag, [(int(s), float(v)) for s, v in zip(series.steps[lo:hi], series.values[lo:hi])])
    return out
