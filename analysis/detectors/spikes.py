"""loss_spike and periodic_spikes: sudden upward jumps of a training loss that come back down.

The features already list every upward excursion that recovered (the level after it is back near the
level before it), at several resolutions. Here they must also be big, by three bars at once:
- at least SPIKE_Z local noise sigmas above the level before them (a Gaussian minibatch loss does not
  reach 6σ in a million points),
- at least SPIKE_TAIL_MULT times the 95th percentile of the series' own upward deviations (a loss whose
  noise is heavy-tailed has its own, higher bar),
- at least SPIKE_REL of the level before them (a 3 % blip on a very smooth curve is not a spike anyone
  would act on).
Spikes in the first EARLY_FRAC of the run belong to `warmup_instability`; a spike right after the lr
jumps up is a scheduled warm restart, not a fault.

Spikes recurring at a fixed period (gaps within 10 % of multiples of one period, at least
PERIODIC_MIN_SPIKES of them, in at least PERIODIC_COVERAGE of the periods they span) are reported once as
`periodic_spikes`, with the epoch length when the
validation cadence or the epoch tag gives it: a bad shard or an unshuffled dataset shows once per epoch.
Periodic spikes may be smaller (PERIODIC_Z, PERIODIC_REL): regularity itself is the evidence.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..datamodel import Finding
from ..features import Spike, periodicity
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


def _series(data: RunData) -> list[str]:
    tags = data.tags("train_loss") + [t for t in data.tags("loss_component") if data.phases.get(t) != "val"]
    return tags + [t for t in data.tags("val_loss") if data.features[t].points >= 3 * MIN_CONFIDENT_POINTS]


def detect(data: RunData) -> list:
    findings = []
    for tag in _series(data):
        feats = data.features[tag]
        spikes = [s for s in feats.extra.get("spikes", ()) if not _lr_restart(data, s)]
        if not spikes:
            continue
        scale = feats.extra["scale"]
        periodic = [
            s
            for s in spikes
            if s.z >= PERIODIC_Z and _relative(s, scale) >= PERIODIC_REL and position(data, s.start_step) >= 0.02
        ]
        period = periodicity([s.peak_step for s in periodic]) if len(periodic) >= PERIODIC_MIN_SPIKES else None
        in_pattern: set[int] = set()
        if period:
            in_pattern = _pattern_members(periodic, period)
            periods = (max(in_pattern) - min(in_pattern)) / period + 1 if in_pattern else 0
            if len(in_pattern) >= PERIODIC_MIN_SPIKES and len(in_pattern) >= PERIODIC_COVERAGE * periods:
                findings.append(_periodic(data, tag, [s for s in periodic if s.peak_step in in_pattern], period))
            else:
                in_pattern = set()
        tail = feats.extra.get("tail_z95", 0.0)
        big = [
            s
            for s in spikes
            if s.peak_step not in in_pattern
            and s.z >= max(SPIKE_Z, SPIKE_TAIL_MULT * tail)
            and _relative(s, scale) >= SPIKE_REL
            and position(data, s.start_step) >= EARLY_FRAC
        ]
        if big:
            findings.append(_spike_finding(data, tag, big, scale))
    return _one_per_event(findings)


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
    }
    evidence["spikes"] = [
        {k: (round(v, 4) if isinstance(v, float) and k != "sigma" else v) for k, v in d.items()}
        for d in evidence["spikes"]
    ]
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
                and abs(g.step - f.step) <= max(1, (g.end_step or g.step) - g.step + 1)
            ),
            None,
        )
        if twin is None:
            out.append(f)
        else:
            twin.evidence.setdefault("also", []).append(f.tags[0])
    return out
