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
"""

from __future__ import annotations

import numpy as np

from ..smoothing import scale_noise
from .base import RunData, adversarial, clip_advice, confident, finding, fmt, sentence

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


def _warmup_end(data: RunData, end_step: float) -> int | None:
    """The step where the lr warmup reaches 90 % of its early peak (None: no warmup)."""
    tag = data.primary.lr
    if tag is None:
        return None
    steps, lr = data.finite(tag)
    early = steps <= max(end_step, steps[min(2, steps.size - 1)]) if steps.size else steps
    window = lr[early]
    if window.size < 2 or window.max() <= 0 or lr[0] >= NO_WARMUP * window.max():
        return None
    return int(steps[early][int(np.argmax(window >= 0.9 * window.max()))])


def _early_loss_rise(data: RunData, tag: str, end_step: float) -> dict | None:
    steps, values = data.finite(tag)
    early = steps <= end_step
    if early.sum() < MIN_EARLY_POINTS:
        return None
    # A positive loss is judged in log units: its minibatch noise is multiplicative, so the whole run's
    # (log) noise, measured at lags long enough to see noise averaged before logging, applies to its start.
    positive = bool(values.min() > 0)
    judged = np.log(values) if positive else values
    s, v = steps[early], judged[early]
    padded = np.pad(v, SMOOTH_POINTS // 2, mode="edge")
    smooth = np.median(np.lib.stride_tricks.sliding_window_view(padded, SMOOTH_POINTS), axis=1)
    best_so_far = np.minimum.accumulate(smooth)
    rise = smooth - best_so_far
    warmup_end = _warmup_end(data, end_step)
    needed_rel = np.full(rise.size, RISE_REL if warmup_end is None else RISE_REL_WARMUP)
    if warmup_end is not None:
        needed_rel[s < warmup_end] = RISE_REL_RAMP
    if positive:
        needed = np.log1p(needed_rel)
    else:
        needed = needed_rel * np.maximum(np.abs(best_so_far), 0.5 * data.features[tag].extra["scale"])
    noise = max(scale_noise(v), scale_noise(judged))
    bad = (rise >= needed) & (rise >= RISE_NOISE_K * noise)
    if not bad.any():
        return None
    first = int(np.argmax(bad))
    peak = first + int(np.argmax(smooth[first:]))
    at_best = int(np.flatnonzero(smooth[: first + 1] == best_so_far[first])[-1])
    back = np.exp if positive else (lambda x: x)
    return {
        "tag": tag,
        "onset": int(s[first]),
        "best": float(back(best_so_far[first])),
        "best_step": int(s[at_best]),
        "peak": float(back(smooth[peak])),
        "peak_step": int(s[peak]),
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
    window = lr[steps <= max(end_step, steps[min(2, steps.size - 1)])] if lr.size else lr
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
    if loss_event is None and grad_event is None:
        return []
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
