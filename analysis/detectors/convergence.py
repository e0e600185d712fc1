"""slow_convergence and plateau: a training loss that does not move, crawls, or stalls for a long stretch.

slow_convergence (judged on the main training loss, else the main validation loss): a crawl. A loss that
never moved at all is `no_learning` (learning.py), not slow.
- the loss fell less than SLOW_DROP of its start, the second half fell about as much as the first
  (least-squares lines through each half: at least LINEAR_RATIO as much, or MIN_RATIO as much when the
  slowdown is within DECELERATION_K standard errors; a healthy curve decelerates, a crawl keeps the same
  slow pace), and that second-half fall is real (above CRAWL_NOISE_K noise sigmas of the edge medians):
  the run is still far from converged.
Runs resumed from a checkpoint (first step beyond RESUMED_FRAC of the last) and runs still in their lr
warmup are not judged: their curves are supposed to look like that.

plateau: a flat stretch of at least PLATEAU_MIN_FRAC of the run (features.find_plateaus) that is followed
by a real drop (PLATEAU_DROP of the level) that is *faster* than the curve moved during the stretch
(at least PLATEAU_ACCEL × its rate: a healthy curve only ever slows down, so a slowly falling loss whose
flattish middle merely continues falling is not a plateau), when the lr schedule does not explain it (a
step decay or the end of a warmup at the plateau's end makes exactly that shape). A plateau right at the start is a
warning when it lasts START_WARN_FRAC of the run (the run sat at its initial loss before learning anything:
init, normalisation, lr); elsewhere, or shorter, it is info (a saddle the optimizer eventually left).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..features import EDGE_FRAC
from ..smoothing import mad_sigma
from .base import (
    MIN_CONFIDENT_POINTS,
    RunData,
    adversarial,
    confident,
    finding,
    fmt,
    level_at,
    pct,
    position,
    smoothed_level,
)
from .learning import LEARNED, NO_DROP, chance_classes, judgeable

#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("slow_convergence", "plateau")
SLOW_DROP = 0.12
LINEAR_RATIO = 0.75
MIN_RATIO = 0.5
#: The slowdown between the halves is real beyond this many standard errors of the slope difference.
DECELERATION_K = 2.0
CRAWL_NOISE_K = 3.0
PLATEAU_MIN_FRAC = 0.1
PLATEAU_DROP = 0.1
PLATEAU_ACCEL = 3.0
#: lr changing by this factor across a plateau's end means the schedule made (or ended) the plateau.
LR_EXPLAINS = 1.5
#: A plateau counts as "at the start" when it begins within this share of the run; it is a warning when it
#: lasts at least START_WARN_FRAC of the run (a shorter wait at the start is info, like any other plateau).
START_FRAC = 0.03
START_WARN_FRAC = 0.15


def _judged_tag(data: RunData) -> str | None:
    tag = data.primary.train_loss or data.primary.val_loss
    return None if tag is None or adversarial(tag) else tag


def detect(data: RunData) -> list:
    tag = _judged_tag(data)
    if tag is None:
        return []
    out = []
    slow = _slow(data, tag)
    if slow:
        out.append(slow)
    out.extend(_plateaus(data, tag))
    return out


def _slow(data: RunData, tag: str):
    found = judgeable(data, tag)
    if found is None:
        return None
    steps, values = found
    n = values.size
    feats = data.features[tag]
    edge = max(3, int(math.ceil(EDGE_FRAC * n)))
    start, end = float(np.median(values[:edge])), float(np.median(values[-edge:]))
    middle_step = 0.5 * (steps[0] + steps[-1])
    middle = level_at(steps, values, middle_step, 2 * edge)
    scale = abs(start) if start > 0 else feats.extra["scale"]
    drop = (start - end) / scale
    lowest = float(np.min(smoothed_level(feats)[1]))
    dipped = (start - lowest) / scale
    edge_noise = (feats.noise or 0.0) * 1.2533 / math.sqrt(edge)
    # How far each half fell, from least-squares lines through the bucket medians of each half: far less
    # noisy than differences of three local medians.
    level = feats.extra["level"]
    half_span = 0.5 * (steps[-1] - steps[0])
    slope1, error1 = _slope(level.steps, level.medians, level.steps <= middle_step)
    slope2, error2 = _slope(level.steps, level.medians, level.steps >= middle_step)
    first_half, second_half = -slope1 * half_span, -slope2 * half_span
    slowed_down = (first_half - second_half) > DECELERATION_K * half_span * math.hypot(error1, error2)
    evidence: dict[str, Any] = {
        "tag": tag,
        "start_level": start,
        "middle_level": middle,
        "end_level": end,
        "relative_drop": drop,
        "steps": int(steps[-1] - steps[0]),
    }
    if data.primary.lr:
        lr = data.finite(data.primary.lr)[1]
        if lr.size:
            evidence["lr_max"] = float(lr.max())
    lr_text = f" at lr {fmt(evidence['lr_max'])}" if "lr_max" in evidence else ""
    span = int(steps[-1] - steps[0])
    if abs(drop) < NO_DROP and dipped < LEARNED:
        return None  # the loss never moved at all: no_learning (learning.py) says so, with its causes
    # Same pace in both halves: the second fell at least LINEAR_RATIO as much as the first, or at least
    # MIN_RATIO as much with the difference within noise (a short, noisy crawl gives a ragged ratio).
    same_pace = second_half >= LINEAR_RATIO * first_half or (second_half >= MIN_RATIO * first_half and not slowed_down)
    crawling = 0 < drop < SLOW_DROP and first_half > 0 and same_pace and second_half > CRAWL_NOISE_K * edge_noise
    if not crawling:
        return None
    evidence["summary"] = (
        f"{tag} {fmt(start)} → {fmt(end)} ({pct(-drop)}) over {span} steps{lr_text}: "
        f"{pct(-first_half / scale)} in the first half, {pct(-second_half / scale)} in the "
        "second, no sign of levelling off"
    )
    message = f"{tag} fell only {drop:.0%} in {span} steps and keeps crawling at the same pace"
    factor_text = ""
    if "lr_max" in evidence:
        factor_text = f" (e.g. {fmt(evidence['lr_max'])} → {fmt(evidence['lr_max'] * 10)})"
    suggestion = (
        f"Raise the learning rate ×3–10{factor_text}, ideally after an lr range test; check "
        "weight initialisation (Kaiming/Xavier), input normalisation and Adam's eps (1e-8, not 1e-3)"
    )
    return finding(
        data,
        "slow_convergence",
        confident("warning", n, 2 * MIN_CONFIDENT_POINTS),
        [tag],
        int(steps[0]),
        int(steps[-1]),
        evidence,
        message,
        suggestion,
    )


def _slope(x: np.ndarray, y: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of y on x over `mask`, and its standard error (from the residuals' MAD)."""
    x, y = x[mask].astype(np.float64), y[mask]
    if x.size < 3:
        return 0.0, float("inf")
    x = x - x.mean()
    denominator = float((x * x).sum())
    if denominator <= 0:
        return 0.0, float("inf")
    slope = float((x * (y - y.mean())).sum()) / denominator
    residual = y - y.mean() - slope * x
    return slope, mad_sigma(residual) / np.sqrt(denominator)


def _lr_explains(data: RunData, start: int, end: int) -> bool:
    if data.primary.lr is None:
        return False
    steps, lr = data.finite(data.primary.lr)
    if lr.size < 3:
        return False
    margin = 0.03 * data.span
    inside = lr[(steps >= start) & (steps <= end - margin)]
    around_end = lr[(steps >= end - margin) & (steps <= end + margin)]
    if inside.size == 0 or around_end.size == 0:
        return False
    before, after = float(np.median(inside)), float(np.min(around_end))
    ramp = float(np.max(around_end))
    # A warmup inside the stretch: the loss sits still while the lr is still small.
    warming = float(np.max(inside)) >= LR_EXPLAINS * max(float(inside[0]), 1e-30)
    return warming or before <= 0 or after <= before / LR_EXPLAINS or ramp >= before * LR_EXPLAINS


def _plateaus(data: RunData, tag: str) -> list:
    feats = data.features[tag]
    steps, values = data.finite(tag)
    if values.size < 2 * MIN_CONFIDENT_POINTS:
        return []
    level_steps, medians = smoothed_level(feats)
    out = []
    for start, end in feats.plateaus:
        if (end - start) < PLATEAU_MIN_FRAC * data.span or position(data, end) > 0.95:
            continue
        flat = values[(steps >= start) & (steps <= end)]
        if flat.size < 5:
            continue
        level = float(np.median(flat))
        later = level_steps > end
        if not later.any():
            continue
        lowest = float(np.min(medians[later]))
        drop = (level - lowest) / max(abs(level), 1e-12)
        if drop < PLATEAU_DROP or _lr_explains(data, start, end):
            continue
        # Rates in level units per step: during the stretch, and over the fastest window after it as long
        # as half the stretch (or 5 % of the run).
        inside = (level_steps >= start) & (level_steps <= end)
        edge = max(1, inside.sum() // 5)
        during = (np.median(medians[inside][:edge]) - np.median(medians[inside][-edge:])) / max(end - start, 1)
        window = max(0.5 * (end - start), 0.05 * data.span)
        ahead = later & (level_steps <= end + window)
        after = (level - float(np.min(medians[ahead]))) / window if ahead.any() else 0.0
        if after < PLATEAU_ACCEL * max(during, 0.0) or (
            level - float(np.min(medians[ahead]))
        ) < 0.5 * PLATEAU_DROP * abs(level):
            continue
        at_start = position(data, start) <= START_FRAC
        chance = chance_classes(level) if at_start else None
        fraction = (end - start) / data.span
        evidence: dict[str, Any] = {
            "tag": tag,
            "level": level,
            "plateau_fraction": fraction,
            "then_min": lowest,
            "summary": (
                f"{tag} flat at {fmt(level)} from step {start} to {end} ({fraction:.0%} of the run), "
                f"then fell to {fmt(lowest)} ({pct(-drop)})"
            ),
        }
        if chance:
            evidence["chance_level_classes"] = chance
            evidence["summary"] += f"; {fmt(level)} ≈ ln({chance}), the loss of a uniform guess over {chance} classes"
        if at_start:
            message = f"{tag} sat at its initial level {fmt(level)} for {fraction:.0%} of the run before learning"
            suggestion = (
                "Check the initialisation (no zero/constant init, Kaiming for ReLU), input normalisation "
                "and the lr at the start (a warmup too long or too low); a loss stuck at chance level "
                "often means labels and inputs are misaligned or the output layer is saturated"
            )
            severity = "warning" if fraction >= START_WARN_FRAC else "info"
        else:
            message = f"{tag} plateaued at {fmt(level)} from step {start} to {end}, then dropped again"
            suggestion = (
                "A saddle the optimizer left by itself; a cosine/one-cycle schedule or a short lr "
                "warm restart usually shortens such stretches"
            )
            severity = "info"
        out.append(
            finding(
                data,
                "plateau",
                confident(severity, values.size, 2 * MIN_CONFIDENT_POINTS),
                [tag],
                start,
                end,
                evidence,
                message,
                suggestion,
            )
        )
    return out
