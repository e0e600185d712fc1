"""slow_convergence and plateau: a training loss that does not move, crawls, or stalls for a long stretch.

slow_convergence (judged on the main training loss and its validation loss): a crawl, the shape of an lr far
too small. A healthy loss falls fast at first and levels off: an exponential-like approach that covers several
of its own time constants in a run. A crawl is nearly a straight line: the first quarter of the run fell at
most FAST_START × the run's average pace (no fast early phase) and the last quarter still falls at END_PACE of
the first quarter's pace (least-squares lines through the bucket medians of each quarter, both falling beyond
SLOPE_K standard errors), and of either middle quarter's (less SLOPE_K standard errors): a loss that waited near
its start and fell fastest in the middle of the run is levelling off when its last quarter lost half that pace.
Any judged curve that clearly levelled off (its last quarter under LEVELLED_PACE of its early pace) or ended worse
than it began (a validation loss past its best) vetoes it. A loss that never moved at all is `no_learning`
(learning.py), not slow. Runs resumed from a checkpoint are not judged; the pace is measured from the end of an lr
warmup.

plateau: a flat stretch (falling less than FLAT_DROP of its level from its first to its last fifth) of at least
PLATEAU_MIN_FRAC of the run (features.find_plateaus) that is followed by a real drop (PLATEAU_DROP of the level)
that is *faster* than the curve moved during the stretch (at least PLATEAU_ACCEL × its rate: a healthy curve only
ever slows down, so a slowly falling loss whose flattish middle merely continues falling is not a plateau), when
the lr schedule does not explain it (a step decay or the end of a warmup at the plateau's end makes exactly that
shape). A plateau right at the start is a warning when it lasts START_WARN_FRAC of the run (the run sat at its
initial loss before learning anything: init, normalisation, lr); elsewhere, or shorter, it is info (a saddle the
optimizer eventually left).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..datamodel import SeriesFeatures
from ..features import PLATEAU_NOISE_K, PLATEAU_RANGE_FRAC
from ..smoothing import mad_sigma, median, percentile, running_median
from .base import (
    MIN_CONFIDENT_POINTS,
    RunData,
    confident,
    finding,
    fmt,
    pct,
    position,
    smoothed_level,
)
from .learning import (
    END_PACE,
    LEARNED,
    MIN_PACE_POINTS,
    NO_DROP,
    QUARTER,
    SLOPE_K,
    chance_classes,
    crawls,
    judgeable,
    levelled_off,
    main_loss,
    pace_lines,
    paced_curves,
    slope,
)

#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("slow_convergence", "plateau")
PLATEAU_MIN_FRAC = 0.1
PLATEAU_DROP = 0.1
PLATEAU_ACCEL = 3.0
#: A stretch whose level fell by half a real drop (PLATEAU_DROP) from its first to its last fifth is not flat: a
#: noisy loss can drift that far inside its noise band while it starts to fall. Flat stretches fall ~1 %.
FLAT_DROP = 0.5 * PLATEAU_DROP
#: lr changing by this factor across a plateau's end means the schedule made (or ended) the plateau.
LR_EXPLAINS = 1.5
#: A plateau counts as "at the start" when it begins within this share of the run; it is a warning when it
#: lasts at least START_WARN_FRAC of the run (a shorter wait at the start is info, like any other plateau).
START_FRAC = 0.03
START_WARN_FRAC = 0.15
#: An initial stretch found against its own noise must be at most this noisy relative to the rest of the run.
QUIET = 0.5


def _judged_tag(data: RunData) -> str | None:
    """The loss judged: learning.main_loss (a Keras validation sibling leaves it to its train run, which judges
    the validation curve beside its own)."""
    return main_loss(data)


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
    found = judgeable(data, tag, MIN_PACE_POINTS)
    if found is None:
        return None
    steps, values = found
    feats = data.features[tag]
    start, end = feats.extra["start_level"], feats.extra["end_level"]
    scale = abs(start) if start > 0 else feats.extra["scale"]
    drop = (start - end) / scale
    if abs(drop) < NO_DROP and (start - float(np.min(smoothed_level(feats)[1]))) / scale < LEARNED:
        return None  # the loss never moved at all: no_learning (learning.py) says so, with its causes
    # Any judged curve that levelled off, or ended worse than it began (a validation loss past its best), says
    # the run is not merely slow: raising the lr is not the answer there (and the later curves need no pace).
    paces = []
    for label, s, m in paced_curves(data, tag):
        lines = pace_lines(s, m)
        if lines is None:
            continue
        # A curve that surely levelled off needs no standard errors (two MADs) to say so: the same verdict.
        if lines.mean <= 0 or lines.surely_levelled_off():
            return None
        measured = lines.measured()
        if levelled_off(measured):
            return None
        paces.append((label, measured, s, m))
    if not paces:
        return None
    crawling = [(label, p) for label, p, s, m in paces if crawls(p) and not _slowed_from_its_fastest(s, m, p)]
    if not crawling:
        return None
    label, judged = crawling[0]
    kept = judged["last"] / judged["first"]
    evidence: dict[str, Any] = {
        "tag": tag,
        "judged": label,
        "start_level": start,
        "end_level": end,
        "relative_drop": drop,
        "end_pace": kept,
        "steps": int(steps[-1] - steps[0]),
    }
    lr_max = None
    if data.primary.lr:
        lr = data.finite(data.primary.lr)[1]
        if lr.size:
            lr_max = evidence["lr_max"] = float(lr.max())
    lr_text = f" at lr {fmt(lr_max)}" if lr_max is not None else ""
    span = int(steps[-1] - steps[0])
    evidence["summary"] = (
        f"{label} {fmt(judged['start'])} → {fmt(judged['end'])} over {span} steps{lr_text}, nearly a straight line: "
        f"its last quarter still fell at {kept:.0%} of its first quarter's pace, and it never had the fast early "
        "fall of a well-tuned run"
    )
    message = (
        f"{label} is still falling at {kept:.0%} of its early pace when the run ends ({pct(-drop)} in {span} "
        "steps): slow, steady progress far from where the curve would level off"
    )
    factor_text = f" (e.g. {fmt(lr_max)} → {fmt(lr_max * 10)})" if lr_max is not None else ""
    suggestion = (
        f"Raise the learning rate ×3–10{factor_text}, ideally after an lr range test; if the lr is already "
        "ordinary, check weight initialisation (Kaiming/Xavier), input normalisation and Adam's eps (1e-8, not "
        "1e-3), or simply train longer: the curve has not started to level off"
    )
    return finding(
        data,
        "slow_convergence",
        confident("warning", values.size, MIN_CONFIDENT_POINTS),
        [tag] if label == tag else [tag, label] if label in data.features else [tag],
        int(steps[0]),
        int(steps[-1]),
        evidence,
        message,
        suggestion,
    )


def _slowed_from_its_fastest(steps: np.ndarray, medians: np.ndarray, curve: dict[str, float]) -> bool:
    """A middle quarter fell faster than the last by more than 1/END_PACE, with SLOPE_K standard errors to
    spare: `crawls` measures the early pace on the first quarter, but a loss that waited near its start (noisy
    small batches, a symmetric init) has its fast fall in the middle of the run, and a last quarter well under
    that pace is a curve levelling off, not a straight line. An lr far too low keeps one pace (or speeds up)."""
    span = float(steps[-1] - steps[0])
    for k in (1, 2):  # the middle quarters (the first and last are `curve`'s own)
        inside = slice(
            int(np.searchsorted(steps, steps[0] + k * QUARTER * span, "left")),
            int(np.searchsorted(steps, steps[0] + (k + 1) * QUARTER * span, "right")),
        )
        rate, error = slope(steps, medians, inside)
        if curve["last"] < END_PACE * (-rate - SLOPE_K * error):
            return True
    return False


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
    before, after = median(inside), float(np.min(around_end))
    ramp = float(np.max(around_end))
    # A warmup inside the stretch: the loss sits still while the lr is still small.
    warming = float(np.max(inside)) >= LR_EXPLAINS * max(float(inside[0]), 1e-30)
    return warming or before <= 0 or after <= before / LR_EXPLAINS or ramp >= before * LR_EXPLAINS


def _initial_stretch(feats: SeriesFeatures) -> tuple[int, int] | None:
    """(first, last step) of the stretch at the start where the level stays at its initial value, within the noise
    of that early stretch itself (or PLATEAU_RANGE_FRAC of the run's range), when that stretch is at most QUIET
    times as noisy as the rest: a loss sitting exactly at ln K for a quarter of the run and noisy afterwards is
    flat there, though the later noise would hide it from a band measured on the whole run."""
    level = feats.extra["level"]
    y = level.medians
    if y.size < 2 * MIN_CONFIDENT_POINTS:
        return None
    head = max(3, y.size // 20)
    start = median(y[:head])
    noise = mad_sigma(np.diff(y[: max(head, y.size // 10)])) / math.sqrt(2.0)
    # The band is at most this (the percentiles lie within the range): a curve whose first value is already
    # beyond it left its start at once (the running median below starts at y[0]), whatever the percentiles.
    if abs(y[0] - start) > max(PLATEAU_NOISE_K * noise, PLATEAU_RANGE_FRAC * (y.max() - y.min())):
        return None
    lo, hi = percentile(y, [5, 95])
    band = max(PLATEAU_NOISE_K * noise, PLATEAU_RANGE_FRAC * (hi - lo))
    # The running median's first two values (edge-padded: y[0], then the median of y[0..2]) before the rest:
    # a curve already away from its start there has no initial stretch.
    if abs(y[0] - start) > band or abs(sorted(y[:3].tolist())[1] - start) > band:
        return None
    smooth = running_median(y, 3)
    away = np.flatnonzero(np.abs(smooth - start) > band)
    if away.size == 0 or away[0] < 2:
        return None
    end = int(away[0])
    # The stretch must be quieter than what follows: otherwise the whole-run band (features.find_plateaus) is
    # the right judge, and a few lucky points at the start of a noisy loss are not a plateau.
    inside, rest = np.diff(y[:end]), np.diff(y[end:])
    if rest.size < 3 or mad_sigma(inside) > QUIET * mad_sigma(rest):
        return None
    return int(level.steps[0]), int(level.steps[end - 1])


def _plateaus(data: RunData, tag: str) -> list:
    feats = data.features[tag]
    steps, values = data.finite(tag)
    if values.size < 2 * MIN_CONFIDENT_POINTS:
        return []
    stretches = list(feats.plateaus)
    initial = _initial_stretch(feats)
    if initial and not any(
        position(data, start) <= START_FRAC and position(data, end) <= 0.95 for start, end in stretches
    ):
        stretches = [initial] + [(start, end) for start, end in stretches if start > initial[1]]
    out = []
    for start, end in stretches:
        if (end - start) < PLATEAU_MIN_FRAC * data.span or position(data, end) > 0.95:
            continue
        flat = values[(steps >= start) & (steps <= end)]
        if flat.size < 5:
            continue
        level = median(flat)
        level_steps, medians = smoothed_level(feats)  # once a stretch is long enough to judge (it is cached)
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
        fell = median(medians[inside][:edge]) - median(medians[inside][-edge:])
        if fell >= FLAT_DROP * abs(level):
            continue  # not flat: the slow start of the fall (a noisy loss drifting down inside its own band)
        during = fell / max(end - start, 1)
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
