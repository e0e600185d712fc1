"""exploding_gradients and vanishing_gradients, from the global and per-layer gradient norms.

Gradient norms are multiplicative (minibatch scatter is lognormal-ish, an explosion multiplies), so they
are judged on log10: "×10" means the same at 0.01 and at 100.

exploding_gradients:
- spikes: an excursion that recovered (features' spikes, found on log10) reaching at least SPIKE_RATIO
  times the level before it (the seed articles' "5–10× the baseline"; we take the strict end), and at least
  SPIKE_Z local sigmas and SPIKE_TAIL_MULT × the series' own 95th-percentile deviation above it;
- growth: the level (bucket medians) climbs to SPIKE_RATIO × the calmest level it had held (at the start of
  a run: the median of its first buckets, so an explosion in the first steps has a baseline) and stays up to
  the end, or comes back only after a stretch too wide for a spike having reached CRITICAL_RATIO × it;
  or the norm turns Inf/NaN for good while the loss stays finite (when the loss is NaN too, that is
  `divergence`, and the norm's NaN is its consequence, unless the finite norm had already climbed
  CRITICAL_RATIO × before it: then the explosion came first). The onset is where the climb began: the
  last point within the calm level's own scatter before it.
An explosion is an excursion that hurts, judged against the run's own other signals: a norm that grows
as training starts (from a tiny init, or out of a saddle, or the ordinary rise of the first few hundred
steps) while the loss keeps falling is not one, and neither is any norm below EXPLOSION_FLOOR (1e-17 →
6e-15 is a vanishing net, whatever the ratio). So an event counts only when
- the training loss reacts: it turns non-finite, jumps (a point beyond the loss's own 3σ band within
  REACTION_POINTS of the norm's excursion), or, for sustained growth, its level ends LOSS_RISE above
  where it stood when the norm began to climb;
- or, where no training loss is logged, the norm itself leaves the range the run's own stretches showed
  (a spike's peak beyond RANGE_MULT × the highest level the smoothed norm ever held; sustained growth only
  when it ends non-finite).
Sustained growth, non-finite norms or a ratio beyond CRITICAL_RATIO are critical; recovered spikes warn.
One bad batch (a corrupt sample, an outlier) makes the loss spike and the norm jump on the same step, and both
come back at once: a norm whose only excursion is such a spike (below CRITICAL_RATIO) over the steps of a loss
spike that `spikes` reports is that loss spike's evidence, not an exploding gradient (`_bad_batch`). So are jumps
that recur where the loss's epoch pattern does (a bad shard read at the same place every epoch): they are the
`periodic_spikes` finding's evidence (`spikes.recurring_batches`).
A total norm and its layers exploding together is one finding (the layers are listed in evidence).

vanishing_gradients:
- a layer's recent gradient norm is below LAYER_RATIO of the median of the other layers' (1000× smaller:
  different layers differ, but not by three orders of magnitude in a healthy net), or below ABSOLUTE_FLOOR
  while the others are not;
- the global norm fell below GLOBAL_DROP of its early level while the training loss stalled (moved less than
  STALL_CHANGE over the last STALL_FRAC of the run) well above where it started falling from (it had not
  converged: a converged model has small gradients for a good reason).
"""

from __future__ import annotations

import numpy as np

from ..smoothing import diff_noise, median
from .base import RunData, clip_advice, confident, finding, fmt, sentence, smoothed_level
from .histograms import from_histograms
from .spikes import loss_spike_over, recurring_batches

#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("exploding_gradients", "vanishing_gradients")

SPIKE_RATIO = 10.0
SPIKE_Z = 6.0
SPIKE_TAIL_MULT = 5.0
CRITICAL_RATIO = 100.0
ONSET_RATIO = 2.0
#: The climb starts after the last point within ONSET_NOISE_K sigmas of the calm level's log scatter (at least
#: ×ONSET_CALM): where it left its normal band, not where it had already doubled.
ONSET_NOISE_K = 3.0
ONSET_CALM = 1.2
#: Buckets of recent past the growth is measured against.
BASELINE_BUCKETS = 20
#: ...and at the start of a run, at least this many (the window grows from here to BASELINE_BUCKETS).
CALM_FIRST = 3
#: A gradient norm that never exceeds this moves no weight of ordinary scale: its growth is not an explosion.
EXPLOSION_FLOOR = 1e-3
#: The loss reacted to a norm excursion when one of its outliers lies within this many of its logged points.
REACTION_POINTS = 3
#: ...or, for sustained growth, its level at the end is this much above its level at the climb's onset.
LOSS_RISE = 0.1
#: Without a loss, a spike must reach RANGE_MULT × the highest smoothed level the norm ever held.
RANGE_MULT = 3.0
LAYER_RATIO = 1e-3
ABSOLUTE_FLOOR = 1e-7
GLOBAL_DROP = 1e-3
STALL_FRAC = 0.3
STALL_CHANGE = 0.01
#: The loss counts as not converged while it is above this share of its start level.
UNCONVERGED = 0.5


def _times(ratio: float) -> str:
    """×60, or ×3.9e+07 for the ratios of a norm that overflowed."""
    return f"×{ratio:.0f}" if ratio < 1e5 else f"×{fmt(ratio)}"


def _spike_events(data: RunData, tag: str) -> list[dict]:
    feats = data.features[tag]
    tail = feats.extra.get("tail_z95", 0.0)
    out = []
    for s in feats.extra.get("spikes", ()):
        ratio = s.peak / s.before if s.before > 0 else np.inf
        if ratio >= SPIKE_RATIO and s.z >= max(SPIKE_Z, SPIKE_TAIL_MULT * tail):
            out.append(
                {
                    "step": s.start_step,
                    "peak_step": s.peak_step,
                    "end_step": s.end_step,
                    "before": s.before,
                    "peak": s.peak,
                    "prev_step": s.prev_step,
                    "prev_value": s.prev_value,
                    "ratio": ratio,
                    "sustained": False,
                }
            )
    return out


def _loss_went_nonfinite(data: RunData) -> bool:
    return any(data.features[t].first_nonfinite_step is not None for t in data.tags("train_loss", "loss_component"))


def _below_spike(y: np.ndarray) -> bool:
    """Whether no bucket k ≥ CALM_FIRST of the log level `y` can reach SPIKE_RATIO × the calm level before it
    (`_growth_event`'s crossing), told without the window medians: each is at least the lowest bucket before k,
    and so is the lowest of them. (A difference of a larger and a smaller number is rounded no lower.)"""
    lowest_before = np.minimum.accumulate(y)[CALM_FIRST - 1 : -1]
    return bool(np.all(y[CALM_FIRST:] - lowest_before < np.log10(SPIKE_RATIO)))


def _growth_event(data: RunData, tag: str) -> dict | None:
    """A climb to SPIKE_RATIO × the calm level before it that never comes back (or ends in Inf/NaN).

    The calm level is the lowest running median (over BASELINE_BUCKETS buckets) seen so far, so a slow,
    steady explosion cannot drag its own baseline up with it.
    """
    feats = data.features[tag]
    series = data.run.scalars[tag]
    steps, values = data.finite(tag)
    positive = values > 0
    steps, values = steps[positive], values[positive]
    # Inf/NaN "for good": the norm ends non-finite and at least half its points from the first one on are.
    nonfinite_tail = False
    if feats.first_nonfinite_step is not None and not np.isfinite(series.values[-1]):
        tail = series.values[int(np.searchsorted(series.steps, feats.first_nonfinite_step)) :]
        nonfinite_tail = bool((~np.isfinite(tail)).mean() >= 0.5)
    runaway = _runaway(data, tag, steps, values) if nonfinite_tail else None
    if runaway is not None:
        return runaway
    if values.size < 8:
        return None
    logs = np.log10(values)
    level = feats.extra["level"]
    y = np.log10(np.maximum(level.medians, 1e-300))
    width = min(BASELINE_BUCKETS, max(3, y.size // 10))
    crossing = None
    return_bucket = None
    if y.size > CALM_FIRST + 2 and not _below_spike(y):
        # windows[k - CALM_FIRST]: the median of the (up to `width`) buckets just before bucket k. The first
        # windows grow from CALM_FIRST buckets, so an explosion in the run's first few percent is measured
        # against the run's own start rather than against a window it has already filled.
        rolling = np.median(np.lib.stride_tricks.sliding_window_view(y, width), axis=1)[:-1] if y.size > width else []
        growing = [median(y[:k]) for k in range(CALM_FIRST, min(width, y.size))]
        windows = np.concatenate([growing, rolling])
        calm = np.minimum.accumulate(windows)  # calm[i]: the calmest level before bucket i + CALM_FIRST
        above = np.flatnonzero(y[CALM_FIRST : CALM_FIRST + calm.size] - calm >= np.log10(SPIKE_RATIO))
        if above.size:
            index = int(above[0])
            base_level = float(calm[index])
            crossing = CALM_FIRST + index
            # Sustained: from the crossing on, the level stays above ONSET_RATIO × the calm level to the end.
            # Otherwise it is an excursion as wide as the buckets where it stays up: too wide for a spike.
            back = np.flatnonzero(y[crossing:] < base_level + np.log10(ONSET_RATIO))
            if back.size:
                return_bucket = crossing + int(back[0])
    if crossing is None:
        if nonfinite_tail and feats.first_nonfinite_step is not None and not _loss_went_nonfinite(data):
            at = int(np.searchsorted(steps, feats.first_nonfinite_step))
            before = median(values[max(0, at - 20) : at]) if at else None
            return {
                "step": feats.first_nonfinite_step,
                "peak_step": feats.first_nonfinite_step,
                "end_step": None,
                "before": before,
                "peak": float("inf"),
                "ratio": np.inf,
                "sustained": True,
                "nonfinite": True,
            }
        return None
    # Walk back from the crossing to the last point still within the calm level's own scatter.
    first_point = int(level.first[crossing])
    scatter = diff_noise(logs[:first_point]) if first_point >= 8 else np.log10(ONSET_RATIO)
    calm_points = np.flatnonzero(logs[:first_point] <= base_level + max(ONSET_NOISE_K * scatter, np.log10(ONSET_CALM)))
    onset_index = min(int(calm_points[-1]) + 1 if calm_points.size else 0, values.size - 1)
    stop = values.size if return_bucket is None else int(level.first[return_bucket])
    if return_bucket is not None and (
        return_bucket - crossing < 2
        or float(np.max(values[onset_index:stop], initial=0.0)) < CRITICAL_RATIO * 10**base_level
    ):
        return None  # a recovered excursion is a spike's business unless it is wide and reaches ×CRITICAL_RATIO
    peak_index = onset_index + int(np.argmax(values[onset_index:stop])) if stop > onset_index else onset_index
    return {
        "step": int(steps[onset_index]),
        "peak_step": int(steps[peak_index]),
        "end_step": int(steps[-1] if return_bucket is None else steps[max(stop - 1, onset_index)]),
        "before": float(10**base_level),
        "peak": float(values[peak_index]),
        "prev_step": int(steps[max(onset_index - 1, 0)]),
        "prev_value": float(values[max(onset_index - 1, 0)]),
        "ratio": float(values[peak_index] / 10**base_level),
        "sustained": return_bucket is None,
        "wide": return_bucket is not None,
        "nonfinite": bool(nonfinite_tail),
    }


def _runaway(data: RunData, tag: str, steps: np.ndarray, values: np.ndarray) -> dict | None:
    """A norm that climbs ×CRITICAL_RATIO over its finite points and then overflows to Inf/NaN for good.

    The climb came first, so it is an explosion even when the loss turns non-finite with it (a norm that is
    NaN only because the loss already is says nothing); a run logging every 10 steps may hold only two or
    three finite points of it.
    """
    first_bad = data.features[tag].first_nonfinite_step
    finite = values[steps < first_bad] if first_bad is not None else values
    if finite.size < 2:
        return None
    base = float(np.min(finite[: max(2, min(5, finite.size // 4))]))
    last = float(finite[-1])
    if base <= 0 or last < CRITICAL_RATIO * base or last < EXPLOSION_FLOOR:
        return None
    # The climb starts after the last point within ×ONSET_RATIO of the base, and never falls back there.
    calm = np.flatnonzero(finite <= ONSET_RATIO * base)
    onset_index = min(int(calm[-1]) + 1 if calm.size else 0, finite.size - 1)
    return {
        "step": int(steps[onset_index]),
        "peak_step": int(steps[finite.size - 1]),
        "end_step": None,
        "before": base,
        "peak": last,
        "prev_step": int(steps[max(onset_index - 1, 0)]),
        "prev_value": float(finite[max(onset_index - 1, 0)]),
        "ratio": last / base,
        "sustained": True,
        "nonfinite": True,
    }


def _loss_reaction(data: RunData, event: dict) -> str | None:
    """How the training loss showed the norm's excursion hurt (None: it did not, or no loss is logged)."""
    tag = data.primary.train_loss
    if tag is None:
        return None
    feats = data.features[tag]
    start = event["step"]
    stop = event["end_step"] if event["end_step"] is not None else event["peak_step"]
    bad = feats.first_nonfinite_step
    if bad is not None and bad >= start - 1 and (event["sustained"] or bad <= stop + 1):
        return f"{tag} turned non-finite at step {bad}"
    steps, values = data.finite(tag)
    if steps.size < 8:
        return None
    if event["sustained"] or event.get("wide"):
        # Growth (to the end, or over a stretch too wide for a spike): the loss's level must rise with it.
        at = int(np.searchsorted(steps, start))
        width = max(3, steps.size // 50)
        # The loss before the norm's last calm point: a loss logged more often than the norm may already
        # have risen between that point and the first high one.
        calm_at = int(np.searchsorted(steps, min(event.get("prev_step", start), start), side="right"))
        before = median(values[max(0, calm_at - width) : max(calm_at, 1)])
        if event["sustained"]:
            after = float(feats.extra["end_level"])
        else:
            during = values[at : int(np.searchsorted(steps, stop, side="right"))]
            after = median(during) if during.size else before
        if before > 0 and after > (1.0 + LOSS_RISE) * before:
            where = "" if event["sustained"] else f" until step {stop}"
            return f"{tag} rose from {fmt(before)} at step {start} to {fmt(after)}{where}"
        return None
    lo = int(np.searchsorted(steps, start)) - REACTION_POINTS
    hi = int(np.searchsorted(steps, stop, side="right")) + REACTION_POINTS
    window = steps[max(0, lo) : max(0, hi)]
    if window.size == 0:
        return None
    hits = np.intersect1d(feats.outlier_steps, window)
    if hits.size == 0:
        return None
    positions = np.searchsorted(steps, hits)
    at = int(positions[np.argmax(values[positions])])
    base = median(values[max(0, lo - 10) : max(1, lo)])
    value = float(values[at])
    if value <= base:
        return None
    return f"{tag} jumped to {fmt(value)} at step {int(steps[at])} (from {fmt(base)})"


def _hurts(data: RunData, tag: str, event: dict) -> bool:
    """Whether a norm event is an explosion (see the module docstring); records the reason in the event."""
    if np.isfinite(event["peak"]) and event["peak"] < EXPLOSION_FLOOR:
        return False
    reaction = _loss_reaction(data, event)
    if reaction:
        event["loss_reaction"] = reaction
        return True
    if data.primary.train_loss is not None:
        return False
    if event["sustained"]:
        return bool(event.get("nonfinite"))
    top = float(np.max(smoothed_level(data.features[tag])[1]))
    return event["peak"] > RANGE_MULT * top


def _bad_batch(data: RunData, events: list[dict]) -> bool:
    """The norm's only excursion is one recovered spike (below CRITICAL_RATIO) over the steps of a loss spike
    the loss_spike rule reports: the fingerprint of one bad batch, told in that finding."""
    if len(events) != 1:
        return False
    event = events[0]
    if event["sustained"] or event.get("wide") or not event["ratio"] < CRITICAL_RATIO:
        return False
    first = min(event.get("prev_step", event["step"]) + 1, event["step"])
    return loss_spike_over(data, first, event["end_step"]) is not None


def _exploding(data: RunData) -> list:
    per_tag: dict[str, list[dict]] = {}
    for tag in data.tags("grad_norm", "grad_norm_layer"):
        spikes = _spike_events(data, tag)
        growth = _growth_event(data, tag)
        events = [e for e in spikes if e["step"] < growth["step"]] + [growth] if growth else spikes
        events = [e for e in events if _hurts(data, tag, e)]
        excursions = [s.peak_step for s in data.features[tag].extra.get("spikes", ())]
        if events and not _bad_batch(data, events) and not recurring_batches(data, events, excursions):
            per_tag[tag] = events
    if not per_tag:
        return []
    global_tags = [t for t in per_tag if data.features[t].role == "grad_norm"]
    lead = data.primary.grad_norm if data.primary.grad_norm in per_tag else (global_tags or list(per_tag))[0]
    events = per_tag[lead]
    layers = [t for t in per_tag if t != lead]
    first = min(events, key=lambda e: e["step"])
    worst = max(events, key=lambda e: (e["sustained"], e["ratio"]))
    critical = any(e["sustained"] for e in events) or worst["ratio"] >= CRITICAL_RATIO
    severity = confident("critical" if critical else "warning", data.features[lead].points)
    if worst.get("before") is not None and np.isfinite(worst["peak"]):
        prev_value = worst.get("prev_value", worst["before"])
        summary = (
            f"{lead} {fmt(prev_value)} → {fmt(worst['peak'])} between steps {worst.get('prev_step', worst['step'])} "
            f"and {worst['peak_step']} ({_times(worst['ratio'])} its baseline of {fmt(worst['before'])})"
        )
    else:
        summary = f"{lead} Inf/NaN from step {worst['step']}"
    if worst.get("nonfinite") and np.isfinite(worst["peak"]):
        summary += f", then Inf/NaN from step {data.features[lead].first_nonfinite_step}"
    if worst.get("loss_reaction"):
        summary += f"; {worst['loss_reaction']}"
    evidence = {
        "summary": summary,
        "tag": lead,
        "events": len(events),
        "steps": [e["peak_step"] for e in sorted(events, key=lambda e: e["step"])[:10]],
        "largest_ratio": None if not np.isfinite(worst["ratio"]) else float(worst["ratio"]),
        "baseline": worst.get("before"),
        "peak": worst["peak"] if np.isfinite(worst["peak"]) else None,
        "sustained": bool(worst["sustained"]),
    }
    if layers:
        evidence["layers"] = layers[:10]
        evidence["layer_count"] = len(layers)
    evidence.update(data.context_evidence(worst["peak_step"]))
    if worst["sustained"]:
        message = (
            f"{lead} exploded from step {first['step']} ({_times(worst['ratio'])})"
            if np.isfinite(worst["ratio"])
            else f"{lead} became Inf/NaN at step {worst['step']}"
        )
    elif worst.get("wide"):
        message = (
            f"{lead} exploded from step {worst['step']} ({_times(worst['ratio'])} at step {worst['peak_step']}) "
            f"and stayed up until step {worst['end_step']}"
        )
    else:
        message = f"{lead} spiked {_times(worst['ratio'])} above its baseline" + (
            f" {len(events)} times" if len(events) > 1 else f" at step {worst['peak_step']}"
        )
    advice = [
        clip_advice(data, first["step"]),
        "lower the peak lr ×0.3–0.5 or lengthen the warmup",
        "under fp16 AMP keep attention softmax and the loss in fp32 (or use bf16)",
    ]
    tags = [lead] + layers[:8]
    return [
        finding(
            data,
            "exploding_gradients",
            severity,
            tags,
            first["step"],
            max(e["end_step"] or e["peak_step"] for e in events),
            evidence,
            message,
            sentence(advice),
        )
    ]


def _vanishing_layers(data: RunData) -> list:
    layers = [t for t in data.tags("grad_norm_layer") if data.features[t].extra.get("recent_median") is not None]
    if len(layers) < 2:
        return []
    recent = {t: abs(data.features[t].extra["recent_median"]) for t in layers}
    weak = []
    for tag in layers:
        others = np.median([v for t, v in recent.items() if t != tag])
        if others <= 0:
            continue
        if recent[tag] <= LAYER_RATIO * others or (recent[tag] < ABSOLUTE_FLOOR and others > 100 * ABSOLUTE_FLOOR):
            weak.append((tag, recent[tag], float(others)))
    if not weak:
        return []
    weak.sort(key=lambda w: w[1] / w[2])
    tag, value, others = weak[0]
    steps, values = data.finite(tag)
    all_zero = bool(values.size) and not np.any(values)
    start = data.features[tag].extra.get("start_level", value)
    decayed = start > 100 * max(value, 1e-300)
    # Onset: where the layer's level first fell below LAYER_RATIO × the others' (or the series start).
    level = data.features[tag].extra["level"]
    below = np.flatnonzero(level.medians <= max(LAYER_RATIO * others, ABSOLUTE_FLOOR))
    onset = (
        int(steps[level.first[below[0]]]) if below.size and values.size else (int(steps[0]) if values.size else None)
    )
    names = ", ".join(w[0] for w in weak[:5])
    summary = (
        f"{tag} recent median {fmt(value)} vs {fmt(others)} for the other layers "
        f"({value / others:.1e} of them)" + (f"; it started at {fmt(start)}" if decayed else "")
    )
    evidence = {
        "summary": summary,
        "tag": tag,
        "recent": value,
        "others_median": others,
        "layers": [w[0] for w in weak[:10]],
        "started_at": start,
    }
    if all_zero:
        message = f"{tag} has had no gradient at all: frozen, detached or unused"
        severity = "info"
        suggestion = (
            "If the layer should train, check requires_grad, that its output reaches the loss (no "
            ".detach()/no_grad) and that the optimizer holds its parameters"
        )
    else:
        message = f"vanishing gradients in {names}: {value / others:.0e} of the other layers' norm"
        severity = confident("warning", data.features[tag].points)
        suggestion = (
            "Add residual connections or normalisation (BatchNorm/LayerNorm) before the weak layers, "
            "use ReLU/GELU instead of sigmoid/tanh, Kaiming/Xavier initialisation, and log per-layer "
            "gradient flow to confirm"
        )
    return [
        finding(
            data, "vanishing_gradients", severity, [w[0] for w in weak[:8]], onset, None, evidence, message, suggestion
        )
    ]


def _vanishing_global(data: RunData) -> list:
    tag = data.primary.grad_norm
    loss = data.primary.train_loss
    if tag is None or loss is None:
        return []
    feats = data.features[tag]
    steps, values = data.finite(tag)
    if values.size < 20:
        return []
    early = median(values[: max(3, values.size // 10)])
    late = abs(feats.extra["recent_median"])
    if early <= 0 or late > GLOBAL_DROP * early:
        return []
    loss_steps, loss_values = data.finite(loss)
    if loss_values.size < 20:
        return []
    tail = loss_values[loss_steps >= loss_steps[-1] - STALL_FRAC * (loss_steps[-1] - loss_steps[0])]
    change = abs(float(tail[0] - tail[-1])) / max(abs(median(tail)), 1e-12) if tail.size > 1 else 0.0
    loss_feats = data.features[loss]
    start = loss_feats.extra["start_level"]
    if change >= STALL_CHANGE or abs(loss_feats.extra["end_level"]) < UNCONVERGED * abs(start):
        return []
    below = np.flatnonzero(values <= 10 * GLOBAL_DROP * early)
    onset = int(steps[below[0]]) if below.size else int(steps[0])
    evidence = {
        "summary": (
            f"{tag} fell from {fmt(early)} to {fmt(late)} (×{late / early:.0e}) while {loss} stalled "
            f"at {fmt(loss_feats.extra['end_level'])} (started at {fmt(start)})"
        ),
        "tag": tag,
        "early": early,
        "recent": late,
        "loss_tag": loss,
    }
    message = f"{tag} vanished (×{late / early:.0e}) from step {onset} while {loss} stopped improving"
    suggestion = (
        "Check for saturating activations (sigmoid/tanh) and dead ReLUs, add normalisation or residual "
        "connections, re-initialise with Kaiming/Xavier; a too-small lr at the end of a schedule also "
        "shows like this"
    )
    return [
        finding(
            data,
            "vanishing_gradients",
            confident("warning", values.size),
            [tag, loss],
            onset,
            None,
            evidence,
            message,
            suggestion,
        )
    ]


def detect(data: RunData) -> list:
    found = _exploding(data) + (_vanishing_layers(data) or _vanishing_global(data))
    # Per-layer gradient histograms stand in for per-layer norm scalars the run did not log.
    return found + from_histograms(data, "gradient", found, lambda view: _exploding(view) + _vanishing_layers(view))
