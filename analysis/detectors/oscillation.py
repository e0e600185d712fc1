"""oscillation: the training loss keeps bouncing with an amplitude that is large against its trend.

Judged on the main training loss after its first SKIP_FRAC (the fast initial fall), resampled to
SWING_BUCKETS bucket medians. The trend is a running median of TREND_BUCKETS buckets: a median filter
follows monotone falls and keeps step-decay drops as steps, so neither leaves a residual; what it removes
is back-and-forth motion shorter than its window. Two signatures:

- swings: the residual's amplitude is at least SWING_REL of the loss level, at least SWING_RANGE of the
  run's whole range (a loss hovering near 0 has large relative wiggles that mean nothing), at least
  SWING_NOISE_K times what bucket medians of this noise would show by chance, the residual changes sign
  (with hysteresis) at least MIN_REVERSALS times (several full cycles, not one bump), and the motion is
  coherent: at least PEAK_SHARE of the residual's power sits in one narrow band of frequencies and the
  half-cycles are regular (interval spread at most RHYTHM_CV). Noise that was averaged before logging (a
  running-mean loss) wanders too, but its power spreads over many frequencies and its reversals come at
  random; an optimizer bouncing in a valley comes back at a rhythm.
- bouncing: consecutive points alternate (lag-1 autocorrelation of the deviations from the local level
  below BOUNCE_RHO) with a spread of at least BOUNCE_REL of the level: the optimizer overshoots from one
  side of a valley to the other every step. White minibatch noise has no such correlation.
- scatter: through the run's second half the logged loss scatters by at least SCATTER_REL of its own local
  level (robust sigma of the relative deviations from a running median of SCATTER_WINDOW points) at an lr
  that did not decay. Healthy per-batch losses of the real-run corpus scatter by 0.1-0.32 of their level
  (batches of 4 to 64, Adam or SGD, RNNs with clipping included). A batch of a few samples scatters this
  much too, a log does not say the batch size, and a loss memorising noisy labels scatters widely around its
  low level, so this pattern is information, never a warning.
- above the untrained model: through both quarters of its second half the training loss (a running median of
  SCATTER_WINDOW points) sits at least UNTRAINED_RATIO times its first logged value, the loss of the untrained
  model (logged within divergence's INIT_FRAC of the run), and scatters by at least UNTRAINED_SCATTER of that
  level. Training is meant to lower the loss below where it started, and any run that learned anything ends
  below it; one that keeps bouncing above it has an lr too high to settle anywhere (a smooth climb that stays
  up, or one that ends blown up from the start, is `divergence`'s). Not judged on reinforcement-learning runs,
  whose losses chase a moving target.
- against a twin (`against_twin`, called by `twins.attach_twins` once every run is judged): from one run,
  an lr too high to settle cannot be told from healthy noise (a small-batch, RNN or transformer loss jumps as
  much), but a healthy sibling that differs ONLY in a lower lr can tell it: through the second half this
  run's loss sits at least TWIN_LEVEL_RATIO times the twin's level, in its third quarter and in its last
  (a run still catching up closes the gap; this one does not), and scatters around its running median at least TWIN_SCATTER_RATIO
  times as much as the twin's does (relative to each level). Same model, same data, same everything but the
  lr: the extra loss and the extra bouncing are the lr's. A warning; the one finding that depends on which
  other runs were loaded, which its evidence says (`twin`).
Not judged: adversarial (GAN) losses, which oscillate by design, and runs whose lr itself cycles up and
down (cyclic/triangular schedules, short warm restarts), whose loss follows the lr.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..datamodel import Finding, Series
from ..smoothing import bucket_medians, diff_noise, mad_sigma, median, percentile, running_median
from .base import MIN_CONFIDENT_POINTS, RunData, adversarial, confident, finding, fmt, num
from .divergence import INIT_FRAC, blown_up_from, final_stretch, rl_run

#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("oscillation",)

SKIP_FRAC = 0.1
SWING_BUCKETS = 120
TREND_BUCKETS = 15
SWING_REL = 0.1
SWING_RANGE = 0.05
SWING_NOISE_K = 5.0
MIN_REVERSALS = 6
PEAK_SHARE = 0.55
#: ...and the half-cycles are regular: the spread (std/mean) of the intervals between reversals at most this.
RHYTHM_CV = 0.35
#: Width (in frequency bins) of the band PEAK_SHARE is measured in: a slightly irregular rhythm spreads over
#: neighbouring bins.
PEAK_BINS = 3
BOUNCE_RHO = -0.4
BOUNCE_REL = 0.15
SCATTER_REL = 0.4
SCATTER_WINDOW = 9
#: The lr at the end of the run at least this share of its value at mid-run (a decaying lr calms the noise).
SCATTER_LR_KEEP = 0.5
#: Against a twin differing only in a lower lr: this run's second-half level at least this many times the twin's...
TWIN_LEVEL_RATIO = 1.5
#: ...its relative scatter at least this many times the twin's...
TWIN_SCATTER_RATIO = 1.5
#: Above the untrained model: the second half's level (each quarter's) at least this many times the first logged
#: loss. A run that learned anything ends below its start: real runs of every healthy shape in the corpus and the
#: held-out set end at most at 1.0x it, SGD runs at 25-40x too high an lr bounce at 1.3-1.9x.
UNTRAINED_RATIO = 1.2
#: ...scattering by at least this share of that level (relative to a running median of SCATTER_WINDOW points).
UNTRAINED_SCATTER = 0.15
#: A scatter below this share of the level is a smooth curve (a loss averaged over an epoch or a window): the
#: twin's scatter counts as at least this much, so a run bouncing beside a smooth twin is compared with it.
SMOOTH_SCATTER = 0.02
#: The fewest points a second half is judged on (a Keras run logs 20 epochs: 10).
SECOND_HALF_POINTS = 8
#: Bucket medians of white noise with sigma s over b points scatter by about 1.2533·s/sqrt(b).
_MEDIAN_EFFICIENCY = 1.2533


def _running_median(values: np.ndarray, width: int) -> np.ndarray:
    return running_median(values, width)


def _peak_share(residual: np.ndarray) -> float:
    """Share of the residual's power (DC excluded) in the strongest band of PEAK_BINS adjacent frequencies."""
    power = np.abs(np.fft.rfft(residual - residual.mean()))[1:] ** 2
    total = float(power.sum())
    if total <= 0 or power.size < PEAK_BINS:
        return 0.0
    band = np.convolve(power, np.ones(PEAK_BINS), mode="valid")
    return float(band.max()) / total


def _reversals(residual: np.ndarray, amplitude: float) -> tuple[int, int | None, float]:
    """Sign changes of the residual beyond ±amplitude/2, the bucket index of the first swing that took
    part in them (the oscillation's onset), and the spread (std/mean) of the intervals between changes."""
    state = np.where(residual > 0.5 * amplitude, 1, np.where(residual < -0.5 * amplitude, -1, 0))
    index = np.flatnonzero(state)
    if index.size < 2:
        return 0, None, float("inf")
    changes = np.flatnonzero(np.diff(state[index]) != 0)
    if not changes.size:
        return 0, None, float("inf")
    intervals = np.diff(index[changes + 1])
    spread = float(intervals.std() / intervals.mean()) if intervals.size > 1 and intervals.mean() > 0 else float("inf")
    # The first swing: the first bucket of the run of equal states that ends at the first change.
    first_change = int(changes[0])
    same = np.flatnonzero(state[index[: first_change + 1]] != state[index[first_change]])
    start = int(same[-1]) + 1 if same.size else 0
    return int(changes.size), int(index[start]), spread


def _lr_cycles(data: RunData) -> bool:
    """The lr itself goes up and down repeatedly (cyclic / triangular / short warm restarts): loss swings that
    follow it are the schedule's."""
    if data.primary.lr is None:
        return False
    steps, lr = data.finite(data.primary.lr)
    if lr.size < 10:
        return False
    buckets = bucket_medians(steps, lr, SWING_BUCKETS)
    rises = np.diff(buckets.medians) > 1e-3 * max(float(np.max(np.abs(buckets.medians))), 1e-30)
    return int(np.sum(np.diff(rises.astype(np.int8)) != 0)) >= 4


def detect(data: RunData) -> list:
    tag = data.primary.train_loss
    if tag is None or adversarial(tag):
        return []
    steps, values = data.finite(tag)
    feats = data.features[tag]
    n = values.size
    if n < 2 * MIN_CONFIDENT_POINTS:
        return []
    start = int(SKIP_FRAC * n)
    steps, values = steps[start:], values[start:]
    whole = data.finite(tag)[1]
    level = _Once(lambda: median(values))
    scale = _Once(lambda: max(abs(level()), 1e-12))
    whole_range = _Once(lambda: _spread(whole))
    found = _swings(steps, values, level, scale, whole_range)
    if found is None:
        found = _bouncing(steps, values, scale, whole_range)
    if found is None:
        found = _above_untrained(data, tag)
    if found is None:
        found = _scatter(data, tag, whole_range)
    # A cyclic lr explains any pattern: asked only once there is one (most runs have none), the same verdict.
    if found is None or _lr_cycles(data):
        return []
    onset, evidence = found
    evidence["tag"] = tag
    amplitude_rel = evidence["amplitude"] / scale()
    if evidence["pattern"] == "swings":
        message = f"{tag} oscillates with an amplitude of {amplitude_rel:.0%} of its level from step {onset}"
    elif evidence["pattern"] == "bouncing":
        message = f"{tag} bounces up and down every step from step {onset} (spread {amplitude_rel:.0%} of its level)"
    elif evidence["pattern"] == "above_untrained":
        message = (
            f"{tag} rose above the untrained model's loss {fmt(evidence['untrained'])} at step {onset} and through its "
            f"second half bounces around {fmt(evidence['level'])} ({evidence['ratio']:.1f}x it, "
            f"±{evidence['relative_scatter']:.0%}): training made the model worse than it started"
        )
    else:
        message = (
            f"{tag} keeps bouncing by ±{evidence['relative_scatter']:.0%} of its level from one logged point to "
            f"the next from step {onset}, at an lr that does not decay"
        )
    lr_tag = data.primary.lr
    lr_note = ""
    if lr_tag is not None:
        lr_values = data.finite(lr_tag)[1]
        if lr_values.size:
            lr_note = f" (from {fmt(float(np.max(lr_values)))} to {fmt(float(np.max(lr_values)) * 0.3)})"
    suggestion = (
        f"Lower the learning rate ×0.3{lr_note} or decay it; a larger batch (or gradient "
        "accumulation ×4) averages the noisy directions; with momentum/Adam keep beta1≈0.9"
    )
    if evidence["pattern"] == "scatter":
        suggestion += "; unless the batch holds only a few samples, whose losses scatter this much at any lr"
    severity = (
        "info" if evidence["pattern"] == "scatter" else confident("warning", feats.points, 2 * MIN_CONFIDENT_POINTS)
    )
    return [finding(data, "oscillation", severity, [tag], onset, int(steps[-1]), evidence, message, suggestion)]


class _Once:
    """A number measured when first asked: the loss's level, its scale and its whole spread; most runs are
    dismissed by tests that need none of them, or only a bound on them."""

    def __init__(self, measure: Callable[[], float]) -> None:
        self.measure = measure
        self.value: float | None = None

    def __call__(self) -> float:
        if self.value is None:
            self.value = self.measure()
        return self.value


def _spread(values: np.ndarray) -> float:
    """The whole spread of `values`: 2nd to 98th percentile."""
    high, low = percentile(values, [98, 2])
    return float(high - low)


def _swings(steps, values, level: _Once, scale: _Once, whole_range: _Once):
    buckets = bucket_medians(steps, values, SWING_BUCKETS)
    if len(buckets) < 3 * TREND_BUCKETS:
        return None
    trend = _running_median(buckets.medians, TREND_BUCKETS)
    residual = buckets.medians - trend
    # The amplitude is at most half the residual's whole range: when even that is too small, so is it.
    most = 0.5 * (residual.max() - residual.min())
    # ...and the level (a median) is at least the lowest value: for a positive loss, a bound without the median.
    lowest = float(values.min())
    if lowest > 0 and not most >= SWING_REL * lowest:
        return None
    if not (most >= SWING_REL * scale() and most >= SWING_RANGE * whole_range()):
        return None
    p10, p90 = percentile(residual, [10, 90])
    amplitude = 0.5 * (p90 - p10)
    if not (amplitude >= SWING_REL * scale() and amplitude >= SWING_RANGE * whole_range()):
        return None  # before the noise estimate, the costlier test
    # Point-to-point noise (lag 1): what bucket medians of white minibatch noise scatter by. Noise averaged
    # before logging wanders more than this predicts; the rhythm test (PEAK_SHARE) is what tells it apart.
    chance = _MEDIAN_EFFICIENCY * diff_noise(values) / np.sqrt(max(buckets.size, 1))
    if not amplitude >= SWING_NOISE_K * chance:
        return None
    count, first, spread = _reversals(residual, amplitude)
    if count < MIN_REVERSALS or first is None or spread > RHYTHM_CV:
        return None
    share = _peak_share(residual)
    if share < PEAK_SHARE:
        return None
    onset = int(steps[buckets.first[first]])
    cycles = count / 2
    period = (steps[-1] - onset) / cycles if cycles else None
    return onset, {
        "pattern": "swings",
        "amplitude": float(amplitude),
        "level": level(),
        "reversals": count,
        "period_steps": None if period is None else int(period),
        "noise_expected": float(chance),
        "rhythm_power_share": share,
        "summary": (
            f"swings of ±{fmt(amplitude)} around a level of {fmt(level())} ({amplitude / scale():.0%}), "
            f"{count} reversals from step {onset}" + (f", every ~{int(period)} steps" if period else "")
        ),
    }


def _bouncing(steps, values, scale: _Once, whole_range: _Once):
    # Deviations from the bucket-median level: alternation lives between neighbouring points, far below a
    # bucket's width, so a coarse level (buckets of at least 5 points, at most SWING_BUCKETS × 8 of them) is
    # all the baseline it needs.
    buckets = bucket_medians(steps, values, min(8 * SWING_BUCKETS, max(1, values.size // 5)))
    deviation = values - np.interp(steps, buckets.steps, buckets.medians)
    block = max(5, buckets.size)
    if deviation.size < 3 or not np.count_nonzero(deviation):
        return None
    a, b = deviation[:-1], deviation[1:]
    denominator = float(np.sqrt(float((a * a).sum()) * float((b * b).sum())))
    if denominator <= 0:
        return None
    rho = float(((a * b).sum()) / denominator)
    if rho > BOUNCE_RHO:
        return None  # before the spread, the costlier test
    spread = mad_sigma(deviation)
    if spread < BOUNCE_REL * scale() or spread < SWING_RANGE * whole_range():
        return None
    # Onset: the first block where the alternation (deviation × next deviation < 0, large) is sustained.
    alternating = (a * b < 0) & (np.abs(a) > 0.5 * spread)
    window = max(5, block)
    dense = np.convolve(alternating.astype(float), np.ones(window) / window, mode="valid") >= 0.6
    onset_index = int(np.argmax(dense)) if dense.any() else 0
    return int(steps[onset_index]), {
        "pattern": "bouncing",
        "amplitude": float(spread),
        "lag1_autocorrelation": rho,
        "summary": f"consecutive points alternate (lag-1 autocorrelation {rho:.2f}), spread {fmt(spread)} "
        f"({spread / scale():.0%} of the level)",
    }


def _above_untrained(data: RunData, tag: str):
    """The training loss bounces above the untrained model's through its second half (see the module docstring)."""
    if data.features[tag].role != "train_loss":
        return None
    steps, values = data.finite(tag)
    if steps[0] - (data.first_step or 0) > INIT_FRAC * data.span:
        return None  # logged first after training began (a resumed run): not the untrained model's loss
    first = float(values[0])
    # Each level of the second half is a median of points from SCATTER_WINDOW // 2 before it on, so none is above
    # their largest: a bound before the running medians that settles nearly every run (a loss that fell).
    if first <= 0 or not values[max(values.size // 2 - SCATTER_WINDOW // 2, 0) :].max() >= UNTRAINED_RATIO * first:
        return None
    if rl_run(data):
        return None
    found = _second_half(steps, values)
    if found is None:
        return None
    half, level = found
    if min(half.quarters) < UNTRAINED_RATIO * first or half.scatter < UNTRAINED_SCATTER:
        return None
    tail = final_stretch(values)
    if blown_up_from(first, tail, median(tail)):
        return None  # it blew up from the start and stayed up: divergence's finding, not a second story
    # The onset: where the running level first rose above the untrained loss (the second half shows it stayed up).
    onset_index = int(np.argmax(level > first))
    return int(steps[onset_index]), {
        "pattern": "above_untrained",
        "amplitude": half.scatter * half.level,
        "level": half.level,
        "untrained": first,
        "ratio": half.level / first,
        "relative_scatter": half.scatter,
        "summary": (
            f"through its second half the loss sits at {fmt(half.level)}, {half.level / first:.1f}x its first "
            f"logged value {fmt(first)} (step {int(steps[0])}, the untrained model), and scatters by "
            f"±{half.scatter:.0%} of that level"
        ),
    }


def _relative_deviations(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The local level (running median of SCATTER_WINDOW points) and each point's deviation from it, relative."""
    level = _running_median(values, SCATTER_WINDOW)
    return level, (values - level) / np.maximum(level, 1e-300)


def _scatter(data: RunData, tag: str, whole_range: _Once):
    """The logged loss scatters by SCATTER_REL of its local level through the second half, the lr not decaying."""
    steps, values = data.finite(tag)
    half = values.size // 2
    if values.size - half < MIN_CONFIDENT_POINTS or values[half:].min() <= 0:
        return None
    if data.primary.lr is not None:
        lr_steps, lr = data.finite(data.primary.lr)
        if lr.size and float(lr[-1]) < SCATTER_LR_KEEP * float(np.interp(steps[half], lr_steps, lr)):
            return None
    level, relative = _relative_deviations(values)
    if level[half:].min() <= 0:
        return None
    scatter = mad_sigma(relative[half:])
    amplitude = mad_sigma((values - level)[half:])
    if scatter < SCATTER_REL or amplitude < SWING_RANGE * whole_range():
        return None
    # Onset: the earliest tenth of the run from which the scatter to the end is that large.
    stride = max(1, values.size // 10)
    start = next((i for i in range(0, half + 1, stride) if mad_sigma(relative[i:]) >= SCATTER_REL), half)
    return int(steps[start]), {
        "pattern": "scatter",
        "amplitude": amplitude,
        "level": median(level[half:]),
        "relative_scatter": scatter,
        "summary": f"through the second half the loss scatters by ±{fmt(amplitude)} around a local level of "
        f"{fmt(median(level[half:]))} ({scatter:.0%}), at an lr that does not decay",
    }


@dataclass(frozen=True)
class SecondHalf:
    """A training loss through its second half: where it sits and how much it scatters around that."""

    level: float  # median of the running median (SCATTER_WINDOW points)
    quarters: tuple[float, float]  # the same in the third quarter and in the last
    scatter: float  # robust sigma of the deviations from that running median, relative to it
    whole_range: float  # the whole run's spread (2nd to 98th percentile)
    start: int  # first step of the second half
    end: int  # last step


def second_half(series: Series) -> SecondHalf | None:
    """`series`'s second half as `SecondHalf`, or None when it is too short or not a positive loss."""
    finite = np.isfinite(series.values)
    found = _second_half(series.steps[finite], series.values[finite])
    return None if found is None else found[0]


def _second_half(steps: np.ndarray, values: np.ndarray) -> tuple[SecondHalf, np.ndarray] | None:
    """`second_half` of finite (steps, values), and the running level (every point's) it was measured on."""
    half = values.size // 2
    if values.size - half < SECOND_HALF_POINTS or values[half:].min() <= 0:
        return None
    level, relative = _relative_deviations(values)
    quarter = half + (values.size - half) // 2
    found = SecondHalf(
        level=median(level[half:]),
        quarters=(median(level[half:quarter]), median(level[quarter:])),
        scatter=mad_sigma(relative[half:]),
        whole_range=_spread(values),
        start=int(steps[half]),
        end=int(steps[-1]),
    )
    return found, level


def against_twin(
    run: str, tag: str, mine: Series, twin: str, theirs: Series, lrs: tuple[float, float]
) -> Finding | None:
    """`oscillation` on `run` when its loss `tag` bounces on a higher level than the healthy `twin`'s, which
    differs from it only in a lower lr (`lrs`: this run's, the twin's); None otherwise."""
    lr, twin_lr = lrs
    if not lr > twin_lr > 0:
        return None
    here, there = second_half(mine), second_half(theirs)
    if here is None or there is None:
        return None
    level_ratio, scatter_ratio = here.level / there.level, here.scatter / max(there.scatter, SMOOTH_SCATTER)
    gaps = [a / b for a, b in zip(here.quarters, there.quarters)]
    if min(level_ratio, *gaps) < TWIN_LEVEL_RATIO or scatter_ratio < TWIN_SCATTER_RATIO:
        return None
    if here.level - there.level < SWING_RANGE * here.whole_range:  # two losses near 0: ratios of crumbs
        return None
    evidence = {
        "pattern": "twin",
        "twin": twin,
        "lr": num(lr),
        "twin_lr": num(twin_lr),
        "level": num(here.level),
        "twin_level": num(there.level),
        "relative_scatter": num(here.scatter),
        "twin_relative_scatter": num(there.scatter),
        "tag": tag,
        "summary": (
            f"through its second half {tag} sits at {fmt(here.level)} (the twin: {fmt(there.level)}, "
            f"{level_ratio:.1f}x) and scatters by ±{here.scatter:.0%} of its level (the twin: "
            f"±{there.scatter:.0%}), at lr {fmt(lr)} vs the twin's {fmt(twin_lr)}"
        ),
    }
    message = (
        f"{tag} keeps bouncing at {level_ratio:.1f}x the level of its healthy twin {twin}, which differs only in "
        f"a lower lr ({fmt(twin_lr)} vs {fmt(lr)} here), and scatters {scatter_ratio:.1f}x as much"
    )
    suggestion = (
        f"Lower the learning rate toward the twin's ({fmt(twin_lr)}; a few times below {fmt(lr)} may be enough) "
        "or decay it; the twin shows that at a lower lr this model settles lower and calmer"
    )
    return Finding("oscillation", "warning", run, (tag,), here.start, here.end, evidence, message, suggestion)
