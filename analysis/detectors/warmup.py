"""warmup_instability: the training loss (or gradient norm) jumps up in the first steps of a run.

In the first EARLY_FRAC of the run, the loss should only fall. It is unstable when its level (a running
median of SMOOTH_POINTS, so a noisy batch or two is not enough) climbs at least RISE_REL (RISE_REL_WARMUP
when the lr already ramps up) above the best level reached so far, and at least RISE_NOISE_K noise sigmas.
Positive losses are judged in log units (their noise is multiplicative, so the whole run's log noise,
measured at lags that see noise averaged before logging, applies to the start); losses that cross zero
are judged linearly, relative to their scale, or when the gradient norm spikes ×GRAD_RATIO above its early
baseline. That is what large early updates from an optimizer with no second-moment statistics yet (Adam) or
a peak lr applied to random weights do, and what a linear warmup prevents. The lr tag says which fix
applies: add a warmup (lr starts at its peak) or lengthen it (lr was still ramping).

A rise that never comes back (the loss ends at INIT_RATIO × or more of the level it rose from) is a
divergence, reported by `divergence`, not an unstable start. An early rise (and norm jump) where the loss's epoch
pattern recurs is the first of a bad shard's bumps, reported by `spikes` as `periodic_spikes`.

Collapse: the first updates at the full lr can also knock a classifier onto a constant guess, where it then
sits: its loss goes above the loss of a uniform guess over K classes (ln K, the untrained model's loss) in
the early window, by COLLAPSE_REL and RISE_NOISE_K sigmas of the flat level's noise, and then sits at ln K
for at least COLLAPSE_FRAC of the run, with the lr at its peak from the first step. A model that merely
never learned (frozen, labels shuffled) sits at ln K without the early excursion above it. Every training
loss tag is read for the excursion: a per-step loss logged every 10 steps can miss it where the epoch's mean
or a running mean shows it.
"""

from __future__ import annotations

import numpy as np

from ..smoothing import median, running_median, scale_noise
from .base import RunData, adversarial, clip_advice, confident, finding, fmt, sentence
from .divergence import INIT_RATIO
from .learning import LOSS_ALONE_MAX_CLASSES, chance_classes
from .spikes import recurring_batches

#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("warmup_instability",)

EARLY_FRAC = 0.1
RISE_REL = 0.3
#: With a warmup in place the bar is higher: as the lr ramps up, a loss that starts near a minimum (a
#: fine-tune) legitimately climbs a little to the noise floor of the larger lr before falling again.
RISE_REL_WARMUP = 0.5
#: While the lr is still ramping up, the loss tracking the growing lr is expected; only a doubling counts.
RISE_REL_RAMP = 1.0
RISE_NOISE_K = 6.0
GRAD_RATIO = 10.0
MIN_EARLY_POINTS = 10
SMOOTH_POINTS = 5
#: lr at the first point at least this share of its early maximum: there is no warmup.
NO_WARMUP = 0.5
#: A warmup of this share of the run is what we suggest (at least MIN_WARMUP_STEPS).
WARMUP_SHARE = 0.03
MIN_WARMUP_STEPS = 100
#: Collapse: an early excursion at least this far above ln K...
COLLAPSE_REL = 0.05
#: ...then the level sits at ln K (within CHANCE_BAND of it) for at least this share of the run.
COLLAPSE_FRAC = 0.3
CHANCE_BAND = 0.03


def _early(steps: np.ndarray, end_step: float) -> np.ndarray:
    """Which lr points belong to the run's early stretch: up to `end_step`, and at least the first three."""
    return steps <= max(end_step, steps[min(2, steps.size - 1)])


def _warmup_end(data: RunData, end_step: float) -> int | None:
    """The step where the lr warmup reaches 90 % of its early peak (None: no warmup)."""
    tag = data.primary.lr
    if tag is None:
        return None
    steps, lr = data.finite(tag)
    early = _early(steps, end_step) if steps.size else steps
    window = lr[early]
    if window.size < 2 or window.max() <= 0 or lr[0] >= NO_WARMUP * window.max():
        return None
    return int(steps[early][int(np.argmax(window >= 0.9 * window.max()))])


def _early_loss_rise(data: RunData, tag: str, end_step: float) -> dict | None:
    steps, values = data.finite(tag)
    early = int(np.searchsorted(steps, end_step, side="right"))  # the steps ascend: the early ones lead
    if early < MIN_EARLY_POINTS:
        return None
    # A positive loss is judged in log units: its minibatch noise is multiplicative, so the whole run's
    # (log) noise, measured at lags long enough to see noise averaged before logging, applies to its start.
    positive = bool(values.min() > 0)
    judged = np.log(values) if positive else values
    s, v = steps[:early], judged[:early]
    scale = data.features[tag].extra["scale"]
    if _no_early_rise(v, positive, scale):  # the same verdict as the test below, without the running median
        return None
    smooth = running_median(v, SMOOTH_POINTS)
    best_so_far = np.minimum.accumulate(smooth)
    rise = smooth - best_so_far
    warmup_end = _warmup_end(data, end_step)
    needed_rel = np.full(rise.size, RISE_REL if warmup_end is None else RISE_REL_WARMUP)
    if warmup_end is not None:
        needed_rel[: int(np.searchsorted(s, warmup_end))] = RISE_REL_RAMP  # the steps before the warmup's end
    if positive:
        needed = np.log1p(needed_rel)
    else:
        needed = needed_rel * np.maximum(np.abs(best_so_far), 0.5 * scale)
    bad = rise >= needed
    if not bad.any():  # before the noise, the costlier test: the same verdict
        return None
    noise = max(scale_noise(v), scale_noise(judged))
    bad &= rise >= RISE_NOISE_K * noise
    if not bad.any():
        return None
    first = int(np.argmax(bad))
    peak = first + int(np.argmax(smooth[first:]))
    at_best = int(np.flatnonzero(smooth[: first + 1] == best_so_far[first])[-1])
    back = np.exp if positive else (lambda x: x)
    end_level = float(data.features[tag].extra["end_level"])
    best = float(back(best_so_far[first]))
    if best > 0 and end_level >= INIT_RATIO * best:
        return None  # it never came back: a divergence, not an unstable start
    return {
        "tag": tag,
        "onset": int(s[first]),
        "best": best,
        "best_step": int(s[at_best]),
        "peak": float(back(smooth[peak])),
        "peak_step": int(s[peak]),
    }


def _no_early_rise(v: np.ndarray, positive: bool, scale: float) -> bool:
    """Whether no point of the early stretch `v` can pass `_early_loss_rise`'s first test (its running median
    RISE_REL above the best running median so far, or more), told from bounds alone: the running median of
    SMOOTH_POINTS at point i (the ends padded with the edge values) is at most the highest value from i - 2 on,
    and every running median up to i is at least the lowest value up to i + 2, so the rise at i is at most their
    difference; the bar is at least its smallest form (RISE_REL, in log units for a positive loss, else of half
    the scale). Rounding keeps the bound: a difference of a larger and a smaller number is rounded no lower."""
    half = SMOOTH_POINTS // 2
    if v.size <= 2 * half:
        return False
    highest_from = np.maximum.accumulate(v[::-1])[::-1]
    lowest_to = np.minimum.accumulate(v)
    # Point i's bound is highest_from[max(i - 2, 0)] - lowest_to[min(i + 2, n - 1)]: those of the first and last
    # two points are at most those of the third and third-last, so the points from the third to the third-last
    # cover them all.
    bound = highest_from[: v.size - 2 * half] - lowest_to[2 * half :]
    bar = np.log1p(RISE_REL) if positive else RISE_REL * (0.5 * scale)
    return bool(np.all(bound < bar))


def _no_warmup(data: RunData, end_step: float) -> bool:
    """The lr is logged and starts at its early peak."""
    points = data.lr_points()
    if points is None:
        return False
    steps, lr = points
    window = lr[_early(steps, end_step)]
    return bool(window.max() > 0 and lr[0] >= NO_WARMUP * window.max())


def _collapse(data: RunData, tag: str, end_step: float) -> dict | None:
    """An early excursion above ln K, then a long sit at ln K (see the module docstring)."""
    feats = data.features[tag]
    steps, values = data.finite(tag)
    if values.size < MIN_EARLY_POINTS or values.min() <= 0:
        return None
    level = feats.extra["level"]
    settled = level.steps > end_step
    if settled.sum() < 3:
        return None
    k = chance_classes(median(level.medians[settled]), LOSS_ALONE_MAX_CLASSES)
    if k is None:
        return None
    chance = float(np.log(k))
    # How long it sat at ln K after the early window: up to the first bucket below the band for good.
    smooth = running_median(level.medians, 3)
    away = np.flatnonzero(settled & (np.abs(smooth - chance) > CHANCE_BAND * chance))
    sat_until = int(level.steps[away[0]]) if away.size else int(level.steps[-1])
    if sat_until - end_step < COLLAPSE_FRAC * data.span:
        return None
    at_chance = values[(steps > end_step) & (steps <= sat_until)]
    noise = scale_noise(at_chance) if at_chance.size >= 8 else 0.0
    bar = max(COLLAPSE_REL * chance, RISE_NOISE_K * noise)
    # The excursion: in any training loss tag (its own early window: epoch-indexed tags count epochs).
    best = None
    for other in data.tags("train_loss"):
        if data.phases.get(other) == "val" or adversarial(other):
            continue
        o_steps, o_values = data.finite(other)
        if o_values.size == 0:
            continue
        early = o_steps <= o_steps[0] + max(EARLY_FRAC * (o_steps[-1] - o_steps[0]), 0)
        above = np.flatnonzero(early & (o_values >= chance + bar))
        if above.size:
            i = int(above[np.argmax(o_values[above])])
            # A logged point speaks for the steps since the one before it (an epoch's mean, a mean of 10
            # steps): the excursion began somewhere after that previous point.
            j = int(above[0])
            run_start = data.first_step if data.first_step is not None else int(o_steps[0])
            since = int(o_steps[j - 1]) + 1 if j else min(run_start, int(o_steps[0]))
            candidate = (since, float(o_values[i]), int(o_steps[i]), other)
            if best is None or (other == tag, -candidate[0]) > (best[3] == tag, -best[0]):
                best = candidate
    if best is None:
        return None
    onset, peak, peak_step, where = best
    return {
        "tag": where,
        "onset": onset,
        "peak": peak,
        "peak_step": peak_step,
        "classes": k,
        "chance": chance,
        "sat_until": sat_until,
        "loss_tag": tag,
    }


def _early_grad_spike(data: RunData, end_step: float) -> dict | None:
    """The first gradient-norm spike (×GRAD_RATIO its level before, recovered) in the early window.

    Judged against the level just before it, not the early median: gradient norms legitimately start
    high and fall fast, and that fall is not a spike.
    """
    tag = data.primary.grad_norm
    if tag is None:
        return None
    spikes = [
        s
        for s in data.features[tag].extra.get("spikes", ())
        if s.start_step <= end_step and s.before > 0 and s.peak >= GRAD_RATIO * s.before
    ]
    if not spikes:
        return None
    first = min(spikes, key=lambda s: s.start_step)
    return {
        "tag": tag,
        "onset": first.start_step,
        "baseline": first.before,
        "peak": first.peak,
        "peak_step": first.peak_step,
    }


def _lr_story(data: RunData, end_step: float) -> tuple[str, str]:
    """(what the lr did early, the warmup advice)."""
    suggested = max(MIN_WARMUP_STEPS, int(round(WARMUP_SHARE * data.span, -1)))
    tag = data.primary.lr
    if tag is None:
        return "", f"add a linear warmup of ~{suggested} steps (e.g. get_linear_schedule_with_warmup)"
    steps, lr = data.finite(tag)
    window = lr[_early(steps, end_step)] if lr.size else lr
    if window.size == 0 or window.max() <= 0:
        return "", f"add a linear warmup of ~{suggested} steps"
    if lr[0] >= NO_WARMUP * window.max():
        return (
            f"; lr started at its peak {fmt(float(lr[0]))} (no warmup)",
            f"add a linear warmup of ~{suggested} steps from ~0 to {fmt(float(window.max()))}",
        )
    ramp_end = int(steps[int(np.argmax(window >= 0.98 * window.max()))])
    return (
        f"; lr was warming up to {fmt(float(window.max()))} by step {ramp_end}",
        f"lengthen the warmup ×3 (to ~{max(suggested, 3 * max(ramp_end - int(steps[0]), 1))} steps) or lower the peak lr",
    )


def detect(data: RunData) -> list:
    tag = data.primary.train_loss
    first = data.first_step
    if first is None:
        return []
    end_step = first + EARLY_FRAC * data.span
    loss_event = _early_loss_rise(data, tag, end_step) if tag and not adversarial(tag) else None
    grad_event = _early_grad_spike(data, end_step)
    if loss_event or grad_event:
        events = [e for e in (loss_event, grad_event) if e]
        seen = [s.peak_step for e in events for s in data.features[e["tag"]].extra.get("spikes", ())]
        if recurring_batches(data, events, seen):
            return []  # the first of bad batches read at the same place every epoch (`periodic_spikes`)
    if loss_event is None and grad_event is None:
        collapse = (
            _collapse(data, tag, end_step) if tag and not adversarial(tag) and _no_warmup(data, end_step) else None
        )
        return [_collapse_finding(data, collapse, end_step)] if collapse else []
    lr_text, warmup_advice = _lr_story(data, end_step)
    parts, tags, onsets = [], [], []
    evidence: dict = {}
    if loss_event:
        parts.append(
            f"{loss_event['tag']} rose from {fmt(loss_event['best'])} (step {loss_event['best_step']}) to "
            f"{fmt(loss_event['peak'])} at step {loss_event['peak_step']}"
        )
        tags.append(loss_event["tag"])
        onsets.append(loss_event["onset"])
        evidence.update(
            loss_best=loss_event["best"], loss_peak=loss_event["peak"], loss_peak_step=loss_event["peak_step"]
        )
    if grad_event:
        parts.append(
            f"{grad_event['tag']} {fmt(grad_event['baseline'])} → {fmt(grad_event['peak'])} at step "
            f"{grad_event['peak_step']} (×{grad_event['peak'] / grad_event['baseline']:.0f})"
        )
        tags.append(grad_event["tag"])
        onsets.append(grad_event["onset"])
        evidence.update(grad_baseline=grad_event["baseline"], grad_peak=grad_event["peak"])
    onset = min(onsets)
    evidence["summary"] = "; ".join(parts) + f", within the first {EARLY_FRAC:.0%} of the run" + lr_text
    evidence.update(data.context_evidence(onset))
    message = "unstable start: " + parts[0] + (" (warmup would prevent it)" if "no warmup" in lr_text else "")
    points = data.features[tags[0]].points
    advice = [warmup_advice, clip_advice(data, None) if grad_event else "lower the peak lr ×0.5"]
    return [
        finding(
            data,
            "warmup_instability",
            confident("warning", points),
            tags,
            onset,
            int(end_step),
            evidence,
            message,
            sentence(advice),
        )
    ]


def _collapse_finding(data: RunData, event: dict, end_step: float):
    k, chance = event["classes"], event["chance"]
    lr_text, warmup_advice = _lr_story(data, end_step)
    loss_end = int(data.finite(event["loss_tag"])[0][-1])
    until = (
        "to the end of the run"
        if event["sat_until"] >= loss_end - 0.02 * data.span
        else f"until step {event['sat_until']}"
    )
    summary = (
        f"{event['tag']} reached {fmt(event['peak'])} at step {event['peak_step']}, above ln({k}) = {fmt(chance)} "
        f"(the loss of a uniform guess over {k} classes), then {event['loss_tag']} sat at ln({k}) {until}" + lr_text
    )
    evidence = {
        "summary": summary,
        "pattern": "collapse",
        "loss_peak": event["peak"],
        "loss_peak_step": event["peak_step"],
        "chance_loss": chance,
        "classes": k,
        "at_chance_until": event["sat_until"],
    }
    evidence.update(data.context_evidence(event["onset"]))
    message = (
        f"unstable start: the first updates at the full lr pushed {event['tag']} above a uniform guess "
        f"(ln({k}) = {fmt(chance)}) and the model collapsed onto a constant guess, at ln({k}) {until}"
    )
    advice = [warmup_advice, "or lower the peak lr ×0.3 (with Adam, a warmup also lets its second moments settle)"]
    points = data.features[event["loss_tag"]].points
    return finding(
        data,
        "warmup_instability",
        confident("warning", points),
        [event["loss_tag"], event["tag"]],
        event["onset"],
        event["sat_until"],
        evidence,
        message,
        sentence(advice),
    )
