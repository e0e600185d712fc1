"""amp_overflow: the mixed-precision loss scale collapses, or gradients overflow again and again.

PyTorch's GradScaler starts at 2^16, halves the scale on every step whose gradients overflow (and skips
that step), and doubles it after `growth_interval` (2000) clean steps. A healthy run drops a few octaves in
its first steps and then hovers: about one halving per growth interval. Signatures:
- collapse: after the scaler's calibration (its opening descent from 2^16 to the first clean step, and at
  least the first STARTUP_FRAC of the run), the scale ends at least COLLAPSE_OCTAVES (÷256) below its
  later maximum and never climbs back, or it ends below MIN_SCALE (1.0: gradients overflow even unscaled,
  i.e. real Inf/NaN). The onset is where the final descent begins. An opening descent that goes below
  MIN_SCALE without ever holding calibrates nothing: it is the collapse, under way from the first point.
- overflow skips: the global grad norm is Inf/NaN at OVERFLOW_WARN of its logged points or more (HF Trainer
  and most loops log the pre-clip norm, which is Inf on an overflow step) while the loss stayed finite.
  When the run logs its loss scale and the scale holds (it ends within HOLD_OCTAVES of the highest level it
  reached after calibration), those skips are the scaler doing its job: it doubles the scale after every
  growth interval of clean steps and the doubling that overflows is halved back. That probing is info
  whatever its share (a short growth interval probes often); without a scale to read, the share decides.
"""

from __future__ import annotations

import numpy as np

from ..smoothing import median
from .base import RunData, confident, finding, fmt, sentence

#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("amp_overflow",)

STARTUP_FRAC = 0.05
COLLAPSE_OCTAVES = 8.0
MIN_SCALE = 1.0
OVERFLOW_WARN = 0.01
OVERFLOW_INFO = 0.002
#: A scale that ends within this many octaves of its post-calibration maximum holds: its overflows are probes.
HOLD_OCTAVES = 2.0


def _collapse(data: RunData, tag: str) -> dict | None:
    steps, values = data.finite(tag)
    positive = values > 0
    steps, values = steps[positive], values[positive]
    if values.size < 5:
        return None
    octaves = np.log2(values)
    # The scaler's calibration: from its initial 2^16 it halves until the first clean step; that opening
    # descent (everything up to the first point it stops falling) says nothing about the run.
    holding = np.flatnonzero(np.diff(octaves) >= 0)
    settled = int(holding[0]) if holding.size else values.size - 1
    unscaled = np.flatnonzero(values < MIN_SCALE)
    if unscaled.size and unscaled[0] <= settled:
        # The opening descent went below 1.0 without ever holding: no calibration ends there (gradients that
        # overflow unscaled are Inf/NaN), so the collapse is that whole descent, under way from the first point.
        start = 0
    else:
        start = max(settled, int(STARTUP_FRAC * values.size))
    after = octaves[start:]
    if after.size < 3:
        after, start = octaves[-1:], values.size - 1
    peak = float(after.max())
    final = median(octaves[-3:])
    if values[-1] >= MIN_SCALE and (after.size < 3 or final > peak - COLLAPSE_OCTAVES):
        return None
    # The final descent: from the last time the scale was within one octave of its peak.
    suffix_max = np.maximum.accumulate(after[::-1])[::-1]
    low = np.flatnonzero(suffix_max <= peak - 2.0)
    first_low = int(low[0]) if low.size else after.size - 1
    near_peak = np.flatnonzero(after[:first_low] >= peak - 1.0)
    onset_index = start + (int(near_peak[-1]) + 1 if near_peak.size else 0)
    halvings = int(np.sum(np.diff(octaves[start:]) <= -0.9))
    return {
        "onset": int(steps[onset_index]),
        "peak": float(2**peak),
        "final": float(values[-1]),
        "halvings": halvings,
        "end": int(steps[-1]),
        "points": int(values.size),
    }


def _scale_holds(data: RunData) -> bool:
    """A loss scale is logged and ends near the highest level it reached after its calibration."""
    for tag in data.tags("loss_scale"):
        steps, values = data.finite(tag)
        values = values[values > 0]
        if values.size < 5:
            continue
        octaves = np.log2(values)
        holding = np.flatnonzero(np.diff(octaves) >= 0)
        start = max(int(holding[0]) if holding.size else values.size - 1, int(STARTUP_FRAC * values.size))
        if median(octaves[-3:]) >= float(octaves[start:].max()) - HOLD_OCTAVES:
            return True
    return False


def _overflow_skips(data: RunData) -> dict | None:
    tag = data.primary.grad_norm
    if tag is None:
        return None
    series = data.run.scalars[tag]
    bad = ~np.isfinite(series.values)
    share = float(bad.mean()) if bad.size else 0.0
    first = int(np.argmax(bad)) if bad.any() else 0
    if share < OVERFLOW_INFO or (~np.isfinite(series.values[first:])).mean() >= 0.5:
        return None  # a norm that stays Inf/NaN exploded; exploding_gradients reports that
    loss = data.primary.train_loss
    if loss is not None and data.features[loss].first_nonfinite_step is not None:
        return None
    return {
        "tag": tag,
        "share": share,
        "count": int(bad.sum()),
        "onset": int(series.steps[np.argmax(bad)]),
        "end": int(series.steps[np.flatnonzero(bad)[-1]]),
        "points": int(bad.size),
    }


def detect(data: RunData) -> list:
    out = []
    advice = [
        "switch to bf16 autocast (no loss scaling needed)",
        "or keep softmax/attention scores, norms and the loss in fp32 under fp16",
        "call scaler.unscale_(optimizer) before clipping, and look for an op overflowing fp16's 65504",
    ]
    for tag in data.tags("loss_scale"):
        event = _collapse(data, tag)
        if event is None:
            continue
        severity = "critical" if event["final"] < MIN_SCALE else "warning"
        summary = (
            f"{tag} {fmt(event['peak'])} → {fmt(event['final'])} from step {event['onset']} "
            f"({event['halvings']} halvings after the start)"
        )
        evidence = {
            "summary": summary,
            "tag": tag,
            "peak_scale": event["peak"],
            "final_scale": event["final"],
            "halvings": event["halvings"],
        }
        evidence.update(data.context_evidence(event["onset"]))
        message = (
            f"AMP loss scale collapsed to {fmt(event['final'])} from step {event['onset']}: steps keep overflowing"
        )
        out.append(
            finding(
                data,
                "amp_overflow",
                confident(severity, event["points"]),
                [tag],
                event["onset"],
                event["end"],
                evidence,
                message,
                sentence(advice),
            )
        )
    skips = _overflow_skips(data)
    if skips and not out:
        probing = _scale_holds(data)
        severity = "warning" if skips["share"] >= OVERFLOW_WARN and not probing else "info"
        summary = (
            f"{skips['tag']} Inf/NaN at {skips['count']} of {skips['points']} logged steps "
            f"({skips['share']:.1%}) from step {skips['onset']} while the loss stayed finite"
        )
        evidence = {
            "summary": summary,
            "tag": skips["tag"],
            "overflow_share": skips["share"],
            "overflow_points": skips["count"],
        }
        message = f"gradient overflow on {skips['share']:.1%} of logged steps (skipped fp16 updates)" + (
            ": the loss scaler probing upward and backing off, its scale holds" if probing else ""
        )
        evidence["scale_holds"] = probing
        suggestion = (
            "Nothing to fix while the scale holds: each skipped step is a doubling of the scale that overflowed "
            "and was halved back; a longer growth_interval makes the probes rarer"
            if probing
            else sentence(advice)
        )
        out.append(
            finding(
                data,
                "amp_overflow",
                confident(severity, skips["points"]),
                [skips["tag"]],
                skips["onset"],
                skips["end"],
                evidence,
                message,
                suggestion,
            )
        )
    return out
