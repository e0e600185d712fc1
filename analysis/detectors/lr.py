"""lr_anomaly: the learning rate does something no schedule should.

Schedules that are NOT anomalies: constant, linear/cosine warmup, step decay (sudden drops), exponential
and polynomial decay, cosine to zero at the very end, one-cycle, cyclic/triangular and warm restarts
(jumps back up to, at most, the earlier peak), ReduceLROnPlateau (drops only). Anomalies:
- non-finite or negative lr (critical), an lr of exactly 0 for the whole run (critical: nothing trains);
- lr at (effectively) zero for a long stretch: the first ZERO_FRAC of the run (a warmup starts at 0 for a
  point, not for 5 % of the run), a stretch in the middle, or from some step to the end when that tail is
  ZERO_FRAC of the run or more (a scheduler whose total steps were shorter than the training);
- a new high: after the warmup peak, the lr jumps above NEW_HIGH × everything it had been before;
- a blip: the lr jumps up ×JUMP and is back near its old value within TRANSIENT points (a restart stays up
  and decays over many points).
"""

from __future__ import annotations

import numpy as np

from ..smoothing import true_stretches
from .base import RunData, confident, finding, fmt, sentence

#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("lr_anomaly",)

ZERO_REL = 1e-8
ZERO_FRAC = 0.05
#: ...and over at least this many logged points: a warmup logged sparsely shows one 0 at its first point.
ZERO_POINTS = 3
NEW_HIGH = 1.5
JUMP = 3.0
TRANSIENT = 3

_ADVICE = (
    "check the scheduler: stepped per batch vs per epoch, its total/max steps vs the real run length, "
    "a resume that did not restore the scheduler's state_dict, or an lr overwritten by a callback"
)


def _zero_stretches(steps: np.ndarray, zero: np.ndarray) -> list[tuple[int, int]]:
    if not zero.any():
        return []
    starts, ends = true_stretches(zero)
    return list(zip(starts.tolist(), ends.tolist()))


def detect(data: RunData) -> list:
    tag = data.primary.lr
    if tag is None:
        return []
    series = data.run.scalars[tag]
    steps, values = series.steps, series.values
    n = values.size
    if n < 3:
        return []
    out = []
    # The features counted the non-finite points: with none, only a negative value can be bad (the same test).
    feats = data.features.get(tag)
    clean = feats is not None and feats.points == n and feats.extra.get("nonfinite") == 0 and not values.min() < 0
    bad = None if clean else ~np.isfinite(values) | (values < 0)
    if bad is not None and bad.any():
        at = int(np.argmax(bad))
        what = "NaN/Inf" if not np.isfinite(values[at]) else f"negative ({fmt(float(values[at]))})"
        evidence = {"summary": f"{tag} is {what} at step {int(steps[at])}", "tag": tag, "points": int(bad.sum())}
        out.append(
            finding(
                data,
                "lr_anomaly",
                "critical",
                [tag],
                int(steps[at]),
                int(steps[np.flatnonzero(bad)[-1]]),
                evidence,
                f"{tag} became {what} at step {int(steps[at])}",
                sentence([_ADVICE]),
            )
        )
        return out
    peak = float(values.max())
    if peak <= 0:
        evidence = {"summary": f"{tag} is 0 at all {n} points", "tag": tag}
        out.append(
            finding(
                data,
                "lr_anomaly",
                confident("critical", n),
                [tag],
                int(steps[0]),
                int(steps[-1]),
                evidence,
                f"{tag} is 0 for the whole run: nothing is being trained",
                sentence(["set a non-zero learning rate", _ADVICE]),
            )
        )
        return out
    span = max(1, int(steps[-1] - steps[0]))
    zero = values <= ZERO_REL * peak
    for lo, hi in _zero_stretches(steps, zero):
        stretch_end = int(steps[min(hi + 1, n - 1)]) if hi + 1 < n else int(steps[-1])
        length = stretch_end - int(steps[lo])
        if length < ZERO_FRAC * span or hi - lo + 1 < ZERO_POINTS:
            continue
        at_end = hi == n - 1
        where = "from the start" if lo == 0 else ("to the end" if at_end else "in the middle of the run")
        summary = (
            f"{tag} is 0 from step {int(steps[lo])} to {int(steps[hi])} ({length / span:.0%} of the run, "
            f"{where}); its peak was {fmt(peak)}"
        )
        evidence = {
            "summary": summary,
            "tag": tag,
            "zero_from": int(steps[lo]),
            "zero_to": int(steps[hi]),
            "zero_fraction": length / span,
            "peak": peak,
        }
        message = (
            f"{tag} reached 0 at step {int(steps[lo])} and stayed there for the last {length / span:.0%} of the run"
            if at_end
            else f"{tag} is stuck at 0 for {length / span:.0%} of the run {where}"
        )
        out.append(
            finding(
                data,
                "lr_anomaly",
                confident("warning", n),
                [tag],
                int(steps[lo]),
                int(steps[hi]),
                evidence,
                message,
                sentence([_ADVICE]),
            )
        )
    out.extend(_jumps(data, tag, steps, values, peak))
    return out


def _jumps(data: RunData, tag: str, steps: np.ndarray, values: np.ndarray, peak: float) -> list:
    n = values.size
    # The warmup: the initial stretch up to the first point at 98 % of the early maximum.
    early = values[: max(3, n // 2)]
    warm_end = int(np.argmax(early >= 0.98 * early.max()))
    # A jump (×JUMP) and a new high (×NEW_HIGH its running maximum, which is at least the previous point) both
    # rise more than NEW_HIGH × the previous point: after the warmup a schedule that never does has neither.
    if not np.count_nonzero(values[warm_end + 1 :] > NEW_HIGH * values[warm_end:-1]):
        return []
    running_max = np.maximum.accumulate(values)
    previous = values[:-1]
    # Jumps out of a zero stretch are that stretch's end (reported above), not a jump.
    alive = previous > ZERO_REL * peak
    ratio = np.where(alive, values[1:] / np.where(alive, previous, 1.0), 1.0)
    index = np.arange(1, n)
    after_warmup = index > warm_end
    new_high = after_warmup & alive & (values[1:] > NEW_HIGH * running_max[:-1])
    jump = after_warmup & (ratio >= JUMP)
    candidates = index[new_high | jump][:50]
    # A blip comes back within TRANSIENT points to ≤ 1.5 × where it came from (a restart stays up and decays
    # over many points, so it is neither a blip nor, at ≤ its old peak, a new high).
    returned = {
        int(i)
        for i in candidates
        if values[i + 1 : i + 1 + TRANSIENT].size and values[i + 1 : i + 1 + TRANSIENT].min() <= 1.5 * values[i - 1]
    }
    highs = set(index[new_high].tolist())
    events = sorted(i for i in map(int, candidates) if i in returned or i in highs)
    if not events:
        return []
    first = events[0]
    before, after = float(values[first - 1]), float(values[first])
    kind = "blip" if first in returned else "new high"
    summary = (
        f"{tag} {fmt(before)} → {fmt(after)} between steps {int(steps[first - 1])} and {int(steps[first])} "
        f"(×{after / before:.0f})"
        if before > 0
        else f"{tag} 0 → {fmt(after)} at step {int(steps[first])}"
    )
    if kind == "new high":
        summary += f", {after / running_max[first - 1]:.1f}× its previous maximum"
    else:
        summary += ", back down within a few points"
    evidence = {
        "summary": summary,
        "tag": tag,
        "events": len(events),
        "steps": [int(steps[i]) for i in events[:10]],
        "kind": kind,
        "before": before,
        "after": after,
    }
    evidence.update(data.context_evidence(int(steps[first])))
    message = f"{tag} jumped ×{after / max(before, 1e-30):.0f} at step {int(steps[first])}" + (
        " above anything its schedule reached before" if kind == "new high" else " and fell back"
    )
    return [
        finding(
            data,
            "lr_anomaly",
            confident("warning", n),
            [tag],
            int(steps[first]),
            int(steps[events[-1]]),
            evidence,
            message,
            sentence([_ADVICE]),
        )
    ]
