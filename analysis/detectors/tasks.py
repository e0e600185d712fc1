"""task_imbalance: one term of a multi-task loss dominates the total while the others stall.

Over the training-side loss components (at least two): each term's share of their recent sum and its own
progress (start level vs recent level). An unweighted sum of terms of very different scales lets the largest
one own the gradient: it learns while the others barely move. So one term at DOMINANT_SHARE or more of the
total that fell at least MOVED_REL, while another fell less than DOMINATED_STALL of its start (a head that
learned anything at all falls far more: a classification head left at ~ln K falls ~10 %, a trained one
50 % or more), is a warning. Without such dominance, a term that fell less than STALL_REL of its start and
less than STALL_NOISE_K noise sigmas while another term learned is info (an auxiliary term can legitimately
stay flat).
"""

from __future__ import annotations

import numpy as np

from .base import MIN_CONFIDENT_POINTS, RunData, confident, finding, fmt, pct

#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("task_imbalance",)

DOMINANT_SHARE = 0.8
DOMINATED_STALL = 0.15
STALL_REL = 0.05
STALL_NOISE_K = 3.0
MOVED_REL = 0.2


def detect(data: RunData) -> list:
    components = [
        t
        for t in data.tags("loss_component")
        if data.phases.get(t) != "val" and data.features[t].extra.get("recent_median") is not None
    ]
    if len(components) < 2:
        return []
    recent = {t: abs(data.features[t].extra["recent_median"]) for t in components}
    total = sum(recent.values())
    if total <= 0:
        return []
    share = {t: v / total for t, v in recent.items()}
    progress, flat = {}, []
    for tag in components:
        feats = data.features[tag]
        start = feats.extra["start_level"]
        change = (start - feats.extra["recent_median"]) / max(abs(start), 1e-12)
        progress[tag] = change
        edge_noise = (feats.noise or 0.0) * 1.2533 / np.sqrt(max(3, feats.points // 20))
        if abs(change) < STALL_REL and abs(start - feats.extra["recent_median"]) < STALL_NOISE_K * max(
            edge_noise, 1e-12
        ):
            flat.append(tag)
    moving = [t for t in components if progress[t] >= MOVED_REL]
    if not moving:
        return []
    dominant = max(components, key=lambda t: share[t])
    dominated = [t for t in components if t != dominant and progress[t] < DOMINATED_STALL]
    dominates = share[dominant] >= DOMINANT_SHARE and dominant in moving and bool(dominated)
    stalled = dominated if dominates else [t for t in flat if t not in moving]
    if not stalled:
        return []
    points = min(data.features[t].points for t in components)
    severity = confident("warning" if dominates else "info", points, MIN_CONFIDENT_POINTS)
    stalled_text = ", ".join(f"{t} stayed at {fmt(recent[t])} ({pct(-progress[t])})" for t in stalled[:3])
    moving_text = ", ".join(f"{t} fell {progress[t]:.0%}" for t in moving[:2])
    summary = (
        f"{dominant} is {share[dominant]:.0%} of the summed loss terms; " if dominates else ""
    ) + f"{stalled_text} while {moving_text}"
    evidence = {
        "summary": summary,
        "shares": {t: round(share[t], 3) for t in components},
        "progress": {t: round(progress[t], 3) for t in components},
        "stalled": stalled,
        "dominant": dominant,
    }
    first = min(int(data.finite(t)[0][0]) for t in components)
    message = (
        f"task imbalance: {dominant} dominates ({share[dominant]:.0%}) while {stalled[0]} does not learn"
        if dominates
        else f"{stalled[0]} is not learning while {moving[0]} is"
    )
    weights = ""
    if dominates and recent[stalled[0]] > 0:
        weights = f" (×{max(2, round(recent[dominant] / recent[stalled[0]] / 3))} for {stalled[0]})"
    suggestion = (
        f"Re-weight the loss terms so they are comparable{weights}, or learn the weights (uncertainty "
        "weighting, GradNorm); check the stalled head's targets, its normalisation and whether its "
        "gradient reaches the shared layers"
    )
    tags = [dominant] + [t for t in stalled if t != dominant]
    return [finding(data, "task_imbalance", severity, tags, first, None, evidence, message, suggestion)]
