"""loss_spike and periodic_spikes: sudden upward jumps of a training loss that come back down.

The features already list every upward excursion that recovered (the level after it is back near the
level before it), at several resolutions. Here they must also be big, by three bars at once:
- at least SPIKE_Z local noise sigmas above the level before them (a Gaussian minibatch loss does not
  reach 6σ in a million points),
- at least SPIKE_TAIL_MULT times the 95th percentile of the series' own upward deviations (a loss whose
  noise is heavy-tailed has its own, higher bar), unless another signal jumped over the same steps (the
  gradient norm, or another training loss tag such as the epoch mean): then the tail cannot explain it,
- at least SPIKE_REL of the level before them (a 3 % blip on a very smooth curve is not a spike anyone
  would act on).
Spikes in the first EARLY_FRAC of the run belong to `warmup_instability`; a spike right after the lr
jumps up is a scheduled warm restart, not a fault.

Spikes recurring at a fixed period (gaps within 10 % of multiples of one period, at least
PERIODIC_MIN_SPIKES of them, in at least PERIODIC_COVERAGE of the periods they span) are reported once as
`periodic_spikes`, with the epoch length when the
validation cadence or the epoch tag gives it: a bad shard or an unshuffled dataset shows once per epoch.
Periodic spikes may be smaller (PERIODIC_Z, PERIODIC_REL): regularity itself is the evidence.

When the run says how long an epoch is and its logged points land on enough different offsets within the
epoch, the epoch profile is read as well (`_epoch_profile`): with the same data order every epoch (no
shuffling, a bad shard, data sorted by class) the loss is high at the same offsets of every epoch, from the
first epoch on, even where each bump is too small to be a spike; shuffled batches make every offset alike.
That is one `periodic_spikes` finding too, dated from the first epoch from which the epochs follow the profile
(the sign of each epoch's agreement with it; an epoch the trend passes through point for point, as a 3-point
running median does on a monotone fall, is read against the line through its low-offset points). A loss logged
more coarsely than the epoch's structure still shows it when its logging interval does not divide the epoch:
every 10 steps over 32-step epochs visits 16 offsets, each once every 5 epochs, so the profile is read on the
offsets the logging actually samples. The gradient norm's jumps on the pattern's steps, and an early rise that
is its first bump, are this finding's evidence, not `exploding_gradients` or `warmup_instability`
(`recurring_batches`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..datamodel import Finding
from ..features import Spike, periodicity
from ..smoothing import median, row_medians, windows
from .base import MIN_CONFIDENT_POINTS, RunData, clip_advice, confident, finding, fmt, position, sentence

#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("loss_spike", "periodic_spikes")

SPIKE_Z = 8.0
SPIKE_TAIL_MULT = 5.0
SPIKE_REL = 0.25
#: A spike at least doubling the loss is a warning, and so are WARN_COUNT spikes of at least WARN_COUNT_RATIO;
#: fewer or smaller ones are info (a heavy-tailed but healthy loss can throw a rare ×1.4).
WARN_RATIO = 2.0
WARN_COUNT = 3
WARN_COUNT_RATIO = 1.5
#: A spike another signal confirms (the gradient norm ×CORROBORATE_RATIO over the same steps, or another
#: training loss tag spiking there) needs only SPIKE_Z: the series' own heavy tail cannot explain two.
CORROBORATE_RATIO = 3.0
#: The start of a run where instabilities are `warmup_instability`'s to report.
EARLY_FRAC = 0.1
#: lr rising by this factor within a few points before a spike marks a scheduled restart.
LR_RESTART_FACTOR = 2.0
PERIODIC_Z = 5.0
PERIODIC_REL = 0.1
PERIODIC_MIN_SPIKES = 4
#: A pattern covers at least this share of the periods between its first and last spike: a bad shard hits
#: every epoch, while chance (or a noisy first batch of a running-average logger) hits about half of them.
PERIODIC_COVERAGE = 0.7
#: A period within this share of the epoch length is "once per epoch".
EPOCH_MATCH = 0.1
#: Epoch profile: at least PROFILE_EPOCHS epochs whose logged points land on at least PROFILE_RESOLUTION
#: different offsets within the epoch (over the whole run: a coarse interval that does not divide the epoch
#: visits more offsets epoch after epoch), cut into at most PROFILE_BINS bins of the offset, each holding
#: PROFILE_MIN_COUNT points.
PROFILE_EPOCHS = 6
PROFILE_RESOLUTION = 4
PROFILE_BINS = 16
PROFILE_MIN_COUNT = 3
#: Periods tried around the reported epoch length (at most; evenly spaced).
PROFILE_PERIODS = 11
#: The offsets' means differ beyond chance: a one-way ANOVA F at least PROFILE_F (p well below 1e-6 for the
#: hundreds of points and ≤16 bins it is computed on)...
PROFILE_F = 8.0
#: ...and the highest offset sits at least PERIODIC_REL above the run's level (×1.1 in log units).
#: Share of the epochs from the onset on whose highest offset sits above the trend.
PROFILE_SIGN = 0.9
#: The epoch length a run reports is searched within ±EPOCH_MATCH for the period that fits best.


def _relative(spike: Spike, scale: float) -> float:
    base = abs(spike.before) if spike.before > 0 else scale
    return (spike.peak - spike.before) / max(base, 1e-12)


def _lr_restart(data: RunData, spike: Spike) -> bool:
    """The lr jumped up just before or during the excursion: a scheduled (warm) restart, not a fault."""
    tag = data.primary.lr
    if tag is None:
        return False
    steps, lr = data.finite(tag)
    duration = max(spike.end_step - spike.start_step, 1)
    before = lr[(steps < spike.start_step) & (steps >= spike.start_step - 2 * duration - 1)]
    during = lr[(steps >= spike.start_step - duration) & (steps <= spike.peak_step)]
    if before.size == 0:
        at = int(np.searchsorted(steps, spike.start_step))
        before = lr[max(at - 3, 0) : at]
    if before.size == 0 or during.size == 0:
        return False
    return bool(np.median(before) > 0 and during.max() >= LR_RESTART_FACTOR * np.median(before))


def _fold_bins(bins: np.ndarray, resid: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """(one-way ANOVA F of `resid` grouped by its points' offset bins, bin means, bin counts)."""
    count = np.bincount(bins)
    total = np.bincount(bins, weights=resid)
    used = count > 0
    means = np.zeros(count.size)
    means[used] = total[used] / count[used]
    groups = int(used.sum())
    # Sums of squares from the bin totals: between = Σ n·mean² - N·grand², within = Σ r² - Σ n·mean².
    explained = float((total[used] * means[used]).sum())
    between = explained - resid.size * float(np.add.reduce(resid) / resid.size) ** 2  # np.mean's value
    within = float((resid * resid).sum()) - explained
    if groups < 2 or resid.size <= groups or within <= 0:
        return 0.0, means, count
    return (between / (groups - 1)) / (within / (resid.size - groups)), means, count


def _width_of(folded: np.ndarray, period: int) -> int | None:
    """Width of the offset bins for folding the steps by `period` (`folded`: their offsets within it): the
    spacing of the offsets within the period that the logged steps visit (a point every 10 steps over 32-step
    epochs visits every second offset), at least period/PROFILE_BINS. None when they visit fewer than PROFILE_RESOLUTION offsets (a point per epoch,
    or an interval that divides the epoch coarsely): there is no profile to compare."""
    if period <= 16 * folded.size:  # the offsets visited, in order: a mark per offset costs less than np.unique's sort
        seen = np.zeros(int(period), dtype=bool)
        seen[folded] = True
        offsets = np.flatnonzero(seen)
    else:
        offsets = np.unique(folded)
    if offsets.size < PROFILE_RESOLUTION:
        return None
    gap = int(median(np.diff(np.r_[offsets, offsets[0] + period]), repeats=True))
    return max(gap, int(np.ceil(period / PROFILE_BINS)))


def _fit(
    offsets: np.ndarray, resid: np.ndarray, period: int, folded: np.ndarray | None = None
) -> tuple[tuple[float, np.ndarray, np.ndarray], int, int] | None:
    """(the fold of `resid` by `period`, the period, the bin width), or None where the steps visit too few
    offsets of that period. `offsets`: the steps less the first; `folded`: them modulo `period`, when known."""
    folded = offsets % period if folded is None else folded
    width = _width_of(folded, period)
    return None if width is None else (_fold_bins(folded // width, resid), period, width)


def _epoch_profile(data: RunData, tag: str) -> dict | None:
    """The loss repeats one profile every epoch: the same offsets in each epoch are high (an unshuffled data
    order, a bad shard read at the same place). Shuffled batches make every offset alike on average.

    The curve's trend (a running median one epoch wide) is taken out, positive losses in log units; the
    residuals are grouped by their offset within the epoch and the groups' means must differ far beyond
    what the scatter allows (PROFILE_F) by a margin worth reporting (PERIODIC_REL at the highest offset).
    """
    epoch = data.epoch_length
    if epoch is None or epoch < PROFILE_RESOLUTION:
        return None
    steps, values = data.finite(tag)
    if steps.size < PROFILE_EPOCHS * PROFILE_RESOLUTION:
        return None
    if steps[-1] - steps[0] < PROFILE_EPOCHS * epoch:
        return None
    offsets = steps - steps[0]  # (folded by the epoch once: the test below and the first fit read it)
    folded = offsets % epoch
    if _width_of(folded, epoch) is None:
        return None
    positive = bool(values.min() > 0)
    scale = max(data.features[tag].extra["scale"], 1e-12)
    y = np.log(values) if positive else values / scale
    # The trend: a running median one epoch wide over the level's bucket medians (≤ 1024 of them, so the cost
    # does not grow with the points per epoch), read back at every step.
    level = data.features[tag].extra["level"]
    medians = np.log(np.maximum(level.medians, 1e-300)) if positive else level.medians / scale
    per_bucket = max((level.steps[-1] - level.steps[0]) / max(len(level) - 1, 1), 1e-12)
    window = min(int(round(epoch / per_bucket)) | 1, (len(level) - 1) | 1)
    # Edge-padded windows (np.pad's "edge" mode and sliding_window_view, without their set-up).
    edge = window // 2
    padded = np.concatenate((np.full(edge, medians[0]), medians, np.full(edge, medians[-1])))
    running = row_medians(windows(padded, window))[: medians.size]
    resid = y - np.interp(steps, level.steps, running)
    # The epoch the run reports, unless it fails and a period within ±EPOCH_MATCH of it fits (a reported epoch
    # length is an estimate when it comes from the validation cadence or an epoch tag's slope).
    best = _fit(offsets, resid, epoch, folded)
    if best is None or best[0][0] < PROFILE_F:
        spread = max(1, int(EPOCH_MATCH * epoch))
        periods = np.unique(np.linspace(epoch - spread, epoch + spread, min(2 * spread + 1, PROFILE_PERIODS)).round())
        fits = [fit for fit in (_fit(offsets, resid, int(p)) for p in periods) if fit is not None]
        best = max(fits, key=lambda fit: fit[0][0], default=None)
    if best is None:
        return None
    (f_value, means, count), period, width = best
    if f_value < PROFILE_F or (count[count > 0] < PROFILE_MIN_COUNT).any():
        return None
    peak_bin = int(np.argmax(np.where(count > 0, means, -np.inf)))
    excess = float(means[peak_bin] - np.median(means[count > 0]))
    if excess < (np.log1p(PERIODIC_REL) if values.min() > 0 else PERIODIC_REL):
        return None
    # Onset: the first epoch from which the epochs follow the profile (their points sit high where the bin
    # means are high: a positive covariance within the epoch) in PROFILE_SIGN of the epochs (with shuffled
    # batches the sign would be a coin flip), its own included: early epochs, where the loss is high anyway,
    # show the same batches with a smaller excess, but on the same side. Comparing within each epoch keeps
    # the trend's error out, and every epoch has a say even where a coarse logging interval visits the peak
    # bin only every few epochs. The onset is that epoch's point at the highest offset it sampled.
    bin_of = (offsets % period) // width
    profile = means[bin_of]
    epoch_of = steps // period  # epochs start at step 0, whatever is logged
    firsts = np.flatnonzero(np.r_[True, np.diff(epoch_of) > 0])
    bounds = np.r_[firsts, steps.size]
    covariances, starts = [], []
    above_line = None
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        shape, seen = resid[lo:hi], profile[lo:hi]
        if not shape.any():
            # The trend passed through every point of this epoch: a running median of 3 points follows a
            # monotone stretch exactly (the fast fall of a run's first epochs, logged a few points an epoch),
            # which hides a bump smaller than the fall. Read the epoch against the line through the points at
            # the profile's low offsets instead: the excursion above the local trend the pattern is made of.
            if above_line is None:
                y_all = resid + np.interp(steps, level.steps, running)
                above_line = _above_low_line(steps, y_all, profile, float(np.median(means[count > 0])))
            shape = above_line[lo:hi]
        if np.ptp(seen) > 0:
            covariances.append(float(((shape - shape.mean()) * (seen - seen.mean())).sum()))
            starts.append(int(steps[lo + int(np.argmax(seen))]))
    signs = np.asarray(covariances) > 0
    share_after = np.cumsum(signs[::-1])[::-1] / np.arange(signs.size, 0, -1)
    start = np.flatnonzero(signs & (share_after >= PROFILE_SIGN))
    at_peak = np.flatnonzero(bin_of == peak_bin)
    onset = starts[int(start[0])] if start.size else int(steps[at_peak[0]])
    # Where in the epoch (epochs start at step 0, whatever is logged): the exact offset inside the peak bin
    # whose points sit highest on average.
    exact = steps[at_peak] % period
    offsets = np.unique(exact)
    into = int(offsets[np.argmax([resid[at_peak][exact == o].mean() for o in offsets])])
    ratio = float(np.exp(excess)) if values.min() > 0 else None
    return {"period": period, "f": f_value, "into": into, "width": width, "onset": onset, "ratio": ratio}


def _above_low_line(steps: np.ndarray, y: np.ndarray, profile: np.ndarray, typical: float) -> np.ndarray:
    """`y` less the line through its points at the profile's low offsets (`profile` at most the bins' `typical`
    mean): how far each point sits above the local trend its epoch's unaffected batches draw (zeros where
    fewer than two points draw it)."""
    low = profile <= typical
    if np.count_nonzero(low) < 2:
        return np.zeros(y.size)
    return y - np.interp(steps, steps[low], y[low])


def _series(data: RunData) -> list[str]:
    tags = data.tags("train_loss") + [t for t in data.tags("loss_component") if data.phases.get(t) != "val"]
    return tags + [t for t in data.tags("val_loss") if data.features[t].points >= 3 * MIN_CONFIDENT_POINTS]


def detect(data: RunData) -> list:
    findings = []
    for tag in _series(data):
        feats = data.features[tag]
        spikes = [s for s in feats.extra.get("spikes", ()) if not _lr_restart(data, s)]
        if (not spikes and data.epoch_length is None) or "scale" not in feats.extra:
            continue
        scale = feats.extra["scale"]
        periodic = [
            s
            for s in spikes
            if s.z >= PERIODIC_Z and _relative(s, scale) >= PERIODIC_REL and position(data, s.start_step) >= 0.02
        ]
        # The epoch profile of the main training loss: a data-order pattern shows in the total loss.
        profile = _epoch_profile(data, tag) if tag == data.primary.train_loss else None
        period = periodicity([s.peak_step for s in periodic]) if len(periodic) >= PERIODIC_MIN_SPIKES else None
        in_pattern: set[int] = set()
        if profile:
            findings.append(_profile_finding(data, tag, profile))
            in_pattern = {s.peak_step for s in spikes if on_pattern(profile, s.peak_step)}
        elif period:
            in_pattern = _pattern_members(periodic, period)
            periods = (max(in_pattern) - min(in_pattern)) / period + 1 if in_pattern else 0
            if len(in_pattern) >= PERIODIC_MIN_SPIKES and len(in_pattern) >= PERIODIC_COVERAGE * periods:
                findings.append(_periodic(data, tag, [s for s in periodic if s.peak_step in in_pattern], period))
            else:
                in_pattern = set()
        tail = feats.extra.get("tail_z95", 0.0)
        others = _other_jumps(data, tag) if spikes else []  # what `big` weighs each spike against
        big = [
            s
            for s in spikes
            if s.peak_step not in in_pattern
            and s.z >= (SPIKE_Z if _corroborated(s, others) else max(SPIKE_Z, SPIKE_TAIL_MULT * tail))
            and _relative(s, scale) >= SPIKE_REL
            and position(data, s.start_step) >= EARLY_FRAC
        ]
        if big:
            findings.append(_spike_finding(data, tag, big, scale))
    return _one_per_event(findings)


def epoch_pattern(data: RunData) -> dict | None:
    """The epoch profile this rule reports on the main training loss (`_epoch_profile`: its period, onset and the
    width of its offset bins), or None: other rules read their own excursions against it."""
    tag = data.primary.train_loss
    if tag is None or data.epoch_length is None or "scale" not in data.features[tag].extra:
        return None
    return _epoch_profile(data, tag)


def on_pattern(pattern: dict, step: int) -> bool:
    """`step` falls where an epoch pattern's bump recurs: at its onset's offset within the period, to within an
    offset bin."""
    grid = pattern["period"]
    return abs(((step - pattern["onset"]) % grid + grid / 2) % grid - grid / 2) <= pattern["width"] + 1


def recurring_batches(data: RunData, events: list[dict], recurrences: list[int] | None = None) -> bool:
    """Excursions of another signal (dicts with a `peak_step`) that are the epoch pattern's bad batches: each one
    came back (not sustained, not non-finite) and sits on the pattern's grid, where the signal's excursions
    (`recurrences`: their peak steps, default the events') recur at least twice. A shard read at the same place
    every epoch makes the gradient norm jump with the loss each time, and an early rise of the loss is its first
    occurrence: one event, told in the `periodic_spikes` finding (as one bad batch is told in `loss_spike`'s)."""
    if not events or any(e.get("sustained") or e.get("nonfinite") for e in events):
        return False
    pattern = epoch_pattern(data)
    if pattern is None or not all(on_pattern(pattern, e["peak_step"]) for e in events):
        return False
    steps = [e["peak_step"] for e in events] if recurrences is None else recurrences
    return sum(on_pattern(pattern, step) for step in steps) >= 2


def loss_spike_over(data: RunData, first: int, last: int) -> Spike | None:
    """The training loss's recovered spike over steps `first`..`last` that this rule reports as a warning
    (at least ×WARN_RATIO, SPIKE_Z sigmas and SPIKE_REL above the level before it, past the run's first
    EARLY_FRAC, not an lr restart), if there is one."""
    tag = data.primary.train_loss
    if tag is None or "scale" not in data.features[tag].extra:
        return None
    scale = data.features[tag].extra["scale"]
    for s in data.features[tag].extra.get("spikes", ()):
        if min(s.prev_step + 1, s.start_step) > last or s.end_step < first or s.before <= 0:
            continue
        if (
            s.peak >= WARN_RATIO * s.before
            and s.z >= SPIKE_Z
            and _relative(s, scale) >= SPIKE_REL
            and position(data, s.start_step) >= EARLY_FRAC
            and not _lr_restart(data, s)
        ):
            return s
    return None


def _grad_excursion(data: RunData, spike: Spike) -> dict | None:
    """The gradient norm's own spike (×CORROBORATE_RATIO) over the steps of a loss spike: one bad batch shows
    in both, and is one event (`gradients` leaves it to the loss spike)."""
    grad = data.primary.grad_norm
    if grad is None:
        return None
    first = min(spike.prev_step + 1, spike.start_step)
    for g in data.features[grad].extra.get("spikes", ()):
        if g.before > 0 and g.peak >= CORROBORATE_RATIO * g.before and _corroborated(g, [(first, spike.end_step)]):
            return {"tag": grad, "step": g.peak_step, "ratio": round(g.peak / g.before, 1), "end_step": g.end_step}
    return None


def _other_jumps(data: RunData, tag: str) -> list[tuple[int, int]]:
    """(first, last) steps that each spike of the run's other signals speaks for: the gradient norm jumping
    ×CORROBORATE_RATIO, or another training loss tag spiking (an epoch mean covers the steps since its
    previous point)."""
    out = []
    grad = data.primary.grad_norm
    sources = [(grad, CORROBORATE_RATIO)] if grad else []
    sources += [(t, 1.0) for t in data.tags("train_loss") if t != tag and data.phases.get(t) != "val"]
    for other, ratio in sources:
        for spike in data.features[other].extra.get("spikes", ()):
            if spike.before > 0 and spike.peak >= ratio * spike.before:
                out.append((min(spike.prev_step + 1, spike.start_step), spike.end_step))
    return out


def _corroborated(spike: Spike, others: list[tuple[int, int]]) -> bool:
    """Another signal of the run jumped over the same steps: the spike is an event, not the loss's own tail."""
    first = min(spike.prev_step + 1, spike.start_step)
    return any(first <= end and start <= spike.end_step for start, end in others)


def _pattern_members(spikes: list[Spike], period: int) -> set[int]:
    """Peak steps that sit on the period's grid (phase = the median offset within the period)."""
    offsets = sorted(s.peak_step % period for s in spikes)
    phase = offsets[len(offsets) // 2]
    tolerance = max(1, 0.1 * period)
    return {
        s.peak_step
        for s in spikes
        if min((s.peak_step - phase) % period, period - (s.peak_step - phase) % period) <= tolerance
    }


def _spike_finding(data: RunData, tag: str, spikes: list[Spike], scale: float):
    spikes = sorted(spikes, key=lambda s: s.start_step)
    worst = max(spikes, key=lambda s: s.peak / s.before if s.before > 0 else s.z)
    ratio = worst.peak / worst.before if worst.before > 0 else None
    feats = data.features[tag]
    ratios = sorted(s.peak / s.before for s in spikes if s.before > 0)
    typical = ratios[len(ratios) // 2] if ratios else None
    severity = (
        "warning"
        if (ratio is not None and ratio >= WARN_RATIO)
        or (len(spikes) >= WARN_COUNT and typical is not None and typical >= WARN_COUNT_RATIO)
        else "info"
    )
    severity = confident(severity, feats.points)
    summary = (
        f"{tag} {fmt(worst.prev_value)} → {fmt(worst.peak)} between steps {worst.prev_step} and "
        f"{worst.peak_step}"
        + (f" (×{ratio:.1f})" if ratio else "")
        + f", back to {fmt(worst.after)} by step {worst.end_step + 1 if worst.end_step == worst.peak_step else worst.end_step}"
    )
    evidence: dict[str, Any] = {
        "summary": summary,
        "tag": tag,
        "count": len(spikes),
        "spikes": [
            {"step": s.peak_step, "before": s.before, "peak": s.peak, "after": s.after, "sigma": round(s.z, 1)}
            for s in spikes[:10]
        ],
        "largest_ratio": ratio,
        # The first step the first spike may stand for (a point logged every k steps, or an epoch's mean,
        # speaks for the steps since the one before it): how a spike on two tags is told to be one event.
        "covers_from": min(spikes[0].prev_step + 1, spikes[0].start_step),
    }
    evidence["spikes"] = [
        {k: (round(v, 4) if isinstance(v, float) and k != "sigma" else v) for k, v in d.items()}
        for d in evidence["spikes"]
    ]
    excursion = _grad_excursion(data, worst)
    if excursion:
        evidence["grad_norm_spike"] = excursion
        evidence["summary"] += (
            f"; {excursion['tag']} jumped ×{excursion['ratio']:g} with it (step {excursion['step']}) and came back"
        )
    evidence.update(data.context_evidence(worst.peak_step))
    grads = evidence.get("context", {}).get("grad_norm")
    grad_spiked = bool(grads) and max(v for _, v in grads) > 5 * min(v for _, v in grads)
    count = f"{len(spikes)} loss spikes" if len(spikes) > 1 else "a loss spike"
    message = (
        f"{count} on {tag} (largest "
        + (f"×{ratio:.1f}" if ratio else f"{worst.z:.0f}σ")
        + f" at step {worst.peak_step}), recovered"
    )
    advice = []
    if grad_spiked:
        advice.append(clip_advice(data, spikes[0].start_step) + " (the gradient norm spiked with the loss)")
    else:
        advice.append("lower the peak lr ×0.5 or clip gradients (max_norm≈1.0)")
    advice.append(
        f"inspect the batches at steps {', '.join(str(s.peak_step) for s in spikes[:5])} for outliers or "
        "bad labels; with Adam, a larger eps (1e-6) or beta2=0.95 damps rare huge updates"
    )
    return finding(
        data,
        "loss_spike",
        severity,
        [tag],
        spikes[0].start_step,
        spikes[-1].end_step,
        evidence,
        message,
        sentence(advice),
    )


def _periodic(data: RunData, tag: str, spikes: list[Spike], period: int):
    spikes = sorted(spikes, key=lambda s: s.peak_step)
    feats = data.features[tag]
    epoch = data.epoch_length
    per_epoch = epoch is not None and epoch > 0 and any(abs(period - m * epoch) <= EPOCH_MATCH * epoch for m in (1, 2))
    into = None
    if per_epoch and epoch:
        offsets = sorted(s.peak_step % epoch for s in spikes)  # epochs start at step 0, whatever is logged
        into = offsets[len(offsets) // 2]
    ratios = [s.peak / s.before for s in spikes if s.before > 0]
    typical = sorted(ratios)[len(ratios) // 2] if ratios else None
    summary = (
        f"{len(spikes)} spikes on {tag} every {period} steps from step {spikes[0].peak_step}"
        + (f" (×{typical:.1f} typical)" if typical else "")
        + (f"; epoch = {epoch} steps, spikes {into} steps into each epoch" if per_epoch else "")
    )
    evidence = {
        "summary": summary,
        "tag": tag,
        "period": period,
        "count": len(spikes),
        "steps": [s.peak_step for s in spikes[:20]],
        "epoch_length": epoch,
        "typical_ratio": typical,
        "per_epoch": per_epoch,
    }
    if per_epoch:
        evidence["offset_in_epoch"] = into
        message = f"{tag} spikes once per epoch ({period} steps), {into} steps into each epoch"
        suggestion = (
            f"Shuffle the training data every epoch (DataLoader(shuffle=True) / set_epoch on the "
            f"DistributedSampler) and find the sample(s) at batch {into} of the epoch order: a corrupt "
            "shard, an extreme image or a mislabelled example"
        )
    else:
        message = f"{tag} spikes every {period} steps ({len(spikes)} times)"
        suggestion = (
            f"Something runs every {period} steps: look for a periodic job (eval, checkpoint, "
            "logging of a different batch, a data shard boundary) and the batch it feeds; shuffle "
            "the data and check the sample order"
        )
    severity = confident("warning", feats.points)
    return finding(
        data,
        "periodic_spikes",
        severity,
        [tag],
        spikes[0].start_step,
        spikes[-1].end_step,
        evidence,
        message,
        suggestion,
    )


def _profile_finding(data: RunData, tag: str, profile: dict):
    period, into, onset = profile["period"], profile["into"], profile["onset"]
    ratio = profile["ratio"]
    times = f" (×{ratio:.1f} its trend there)" if ratio else ""
    summary = (
        f"{tag} is high at the same offset of every {period}-step epoch, about {into} steps in{times}, "
        f"from step {onset}; grouped by offset its deviations from the trend differ far beyond chance "
        f"(F = {profile['f']:.0f})"
    )
    evidence = {
        "summary": summary,
        "tag": tag,
        "pattern": "epoch_profile",
        "period": period,
        "epoch_length": data.epoch_length,
        "offset_in_epoch": into,
        "typical_ratio": ratio,
        "per_epoch": True,
        "f_statistic": profile["f"],
    }
    grad = data.primary.grad_norm
    jumps = [
        g
        for g in (data.features[grad].extra.get("spikes", ()) if grad else ())
        if g.before > 0 and g.peak >= CORROBORATE_RATIO * g.before and on_pattern(profile, g.peak_step)
    ]
    if grad and len(jumps) >= 2:  # the bad batches show in the gradient norm too (`recurring_batches`)
        largest = max(g.peak / g.before for g in jumps)
        evidence["grad_norm_spikes"] = {
            "tag": grad,
            "steps": sorted(g.peak_step for g in jumps)[:20],
            "largest_ratio": round(largest, 1),
        }
        evidence["summary"] += f"; {grad} jumps with it ({len(jumps)} times, up to ×{largest:.0f})"
    message = (
        f"{tag} repeats the same bump every epoch ({period} steps), {into} steps into each epoch, from step {onset}"
    )
    suggestion = (
        f"The batches come in the same order every epoch: shuffle the training data each epoch (DataLoader("
        f"shuffle=True) / set_epoch on the DistributedSampler), and look at the samples of batch {into} "
        "of the epoch order: a corrupt shard, a block of one class (data sorted by label), or extreme examples"
    )
    return finding(
        data,
        "periodic_spikes",
        confident("warning", data.features[tag].points),
        [tag],
        onset,
        int(data.finite(tag)[0][-1]),
        evidence,
        message,
        suggestion,
    )


def _one_per_event(findings: list[Finding]) -> list[Finding]:
    """A total loss and its components spiking at the same steps is one event: keep the first tag's finding
    of each kind and note the others in it."""
    out: list[Finding] = []
    for f in findings:
        twin = next(
            (
                g
                for g in out
                if g.kind == f.kind
                and g.step is not None
                and f.step is not None
                and (abs(g.step - f.step) <= max(1, (g.end_step or g.step) - g.step + 1) or _same_steps(g, f))
            ),
            None,
        )
        if twin is None:
            out.append(f)
        else:
            twin.evidence.setdefault("also", []).append(f.tags[0])
    return out


def _same_steps(a: Finding, b: Finding) -> bool:
    """Two spike findings whose first spikes cover overlapping steps (see `covers_from`)."""
    if "covers_from" not in a.evidence or "covers_from" not in b.evidence:
        return False
    start = max(a.evidence["covers_from"], b.evidence["covers_from"])
    return start <= min(a.end_step or a.step or 0, b.end_step or b.step or 0)
