"""divergence: a loss or metric turns NaN/Inf, or blows up and never comes back.

Two signatures, both judged on the series' own history:
- non-finite: the first NaN/Inf point. Persistent (the series ends non-finite, or at least half of the
  points after the first one are) is critical; isolated non-finite points that the run recovered from are a
  warning.
- blow-up: the level at the end (median of the last points) sits far above the best level the curve had
  reached: by at least BLOWUP_FRACTION of the progress it had made from its start (or of its scale when it
  never made progress), by more than BLOWUP_NOISE_K noise sigmas of the levels compared (a 5-bucket running
  median's, whatever the number of points a bucket holds), and the whole final stretch stays up (it "never
  recovers"). A curve that never did better than its first point is judged from there (below). Metrics are
  judged the same way, turned so that worse is up.
  A rise that starts right where the lr schedule jumps up (a warm restart) is the schedule, not divergence.
- blow-up from the start: a training loss that ends at INIT_RATIO × or more of its first logged value (the
  loss of the untrained model, logged within the first INIT_FRAC of the run) and never comes back under
  INIT_HOLD × it got worse than a model that knew nothing: the lr blew it up in the first steps, before any
  progress the rule above could measure against.
Loss levels are not judged where lower is not better: a surrogate that hovers around zero with both signs
(a policy-gradient or entropy term, whose sign follows the advantages) and any loss of a reinforcement
learning run (one that logs an episode reward or return: its losses chase a moving target as the policy
improves); non-finite values are still judged there.
Validation curves are judged for blow-up only when the run logs no training loss, here or in a Keras
train sibling (otherwise a rising validation loss is `overfitting`'s business).

A series that ends non-finite at the top of a climb (its finite values reached CLIMB_RATIO × their best
first) diverged where the climb left INIT_RATIO × the best, not at the first NaN.

Non-finite values are looked for in every tag but the gradient norms and the loss scale (their own detectors
read Inf there). Two cases are told apart because their causes and fixes differ:
- a series that was never finite (NaN from its very first point) did not diverge: the loss or metric is
  computed wrongly or the data holds NaN/Inf; there is no earlier checkpoint to go back to;
- a metric (any tag that is not a loss) turning non-finite while the training loss stays finite is its own
  warning: training goes on, and the metric's computation fails (a 0/0, a variance of constant targets,
  an empty batch), which makes it useless for model selection.
"""

from __future__ import annotations

import numpy as np

from ..features import EDGE_FRAC
from ..roles import rl_return
from ..smoothing import median, percentile, running_median, scale_noise
from .base import RunData, adversarial, clip_advice, confident, finding, fmt, pct, sentence

#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("divergence",)

#: The end level must be back up by at least this share of the progress the curve had made (best vs start):
#: half the learning undone is what "blew up" looks like; overfitting or noise undo far less.
BLOWUP_FRACTION = 0.5
#: For a curve that never made progress, the rise must exceed this share of its own scale.
BLOWUP_SCALE_FRACTION = 0.5
#: "Never made progress": the best level is within this share of the scale of the start level.
NO_PROGRESS = 0.1
#: ...and exceed this many noise sigmas of the bucket medians (a rise must be far outside the wiggle).
BLOWUP_NOISE_K = 6.0
#: The noise of the median of 5 independent values, in units of one value's (Gaussian: sqrt(0.287)).
MEDIAN5_NOISE = 0.536
#: The final stretch that must stay up: the last 3 % of the run's points (at least 3).
SUSTAIN_FRAC = 0.03
#: The onset is where the level first crosses best + ONSET_FRACTION × rise after the best point.
ONSET_FRACTION = 0.25
#: ...walking back from there to where the level last sat within ONSET_NOISE_K noise sigmas (or ONSET_CALM of
#: the series' scale) of the best: the first step of the climb.
ONSET_NOISE_K = 3.0
ONSET_CALM = 0.05
#: An lr increase of this factor within ±RESTART_WINDOW of the rise means a scheduled warm restart.
LR_RESTART_FACTOR = 2.0
#: Non-finite points are "persistent" when at least this share of the points after the first one are.
PERSISTENT_SHARE = 0.5

#: A training loss ending at this multiple of its first logged value (and never back under INIT_HOLD × it)
#: blew up from the start.
INIT_RATIO = 2.0
INIT_HOLD = 1.5
#: A series that turns non-finite after its finite values climbed to this multiple of their best diverged
#: where the climb began.
CLIMB_RATIO = 100.0
#: ...where the first value was logged within this share of the run (it is the untrained model's loss).
INIT_FRAC = 0.02
#: The recent stretch (this share of the points) of a signed surrogate hovers around zero: both signs, and a
#: median within SIGNED_CENTRE of its interdecile spread.
SIGNED_RECENT = 0.3
SIGNED_CENTRE = 0.5

_ROLES = ("train_loss", "loss_component", "val_loss", "metric")
_LOSSES = ("train_loss", "loss_component", "val_loss")
#: Roles whose Inf/NaN other detectors read (exploding_gradients, amp_overflow): not a divergence.
_NOT_JUDGED = ("grad_norm", "grad_norm_layer", "loss_scale")


def _nonfinite(data: RunData, tag: str) -> dict | None:
    series = data.run.scalars[tag]
    feats = data.features[tag]
    first = feats.first_nonfinite_step
    if first is None:
        return None
    values = series.values
    at = int(np.searchsorted(series.steps, first))
    after = ~np.isfinite(values[at:])
    persistent = bool(not np.isfinite(values[-1]) or after.mean() >= PERSISTENT_SHARE)
    last_good = np.flatnonzero(np.isfinite(values[:at]))
    kind = "NaN" if np.isnan(values[at]) else ("Inf" if values[at] > 0 else "-Inf")
    out = {"onset": first, "persistent": persistent, "nonfinite_points": int(after.sum()), "first_value": kind}
    if last_good.size:
        out["last_finite_step"] = int(series.steps[last_good[-1]])
        out["last_finite_value"] = float(values[last_good[-1]])
        if persistent:
            # The run went non-finite at the top of a climb: the divergence began where the finite values
            # left INIT_RATIO × the best they had reached (a loss logged every 10 steps may show only
            # 3 → 6e8 → 2e16 → NaN).
            good_steps, good = series.steps[last_good], values[last_good]
            best = int(np.argmin(np.abs(good)))
            calm = np.flatnonzero(np.abs(good[best:]) <= INIT_RATIO * abs(good[best]))
            climb = best + int(calm[-1]) + 1
            # ...only for a real climb towards overflow (the last finite value ×CLIMB_RATIO the best): a loss
            # that drifted up a little long before a sudden NaN diverged at the NaN.
            if climb < good.size and abs(good[-1]) >= CLIMB_RATIO * abs(good[best]):
                out["climb_onset"] = int(good_steps[climb])
                out["climb_from"] = float(good[climb - 1])
                out["climb_from_step"] = int(good_steps[climb - 1])
    return out


def rl_run(data: RunData) -> bool:
    """The run logs an episode reward or return: reinforcement learning."""
    return any(rl_return(tag) for tag in data.run.scalars)


def _signed_surrogate(values: np.ndarray) -> bool:
    """The recent values hover around zero with both signs (a policy-gradient or entropy term)."""
    recent = values[-max(3, int(SIGNED_RECENT * values.size)) :]
    if recent.min() >= 0:  # then so is its 10th percentile: one sign only, whatever the percentiles
        return False
    lo, mid, hi = percentile(recent, [10, 50, 90])
    return bool(lo < 0 < hi and abs(mid) <= SIGNED_CENTRE * (hi - lo))


def final_count(n: int) -> int:
    """How many of n points are "the end": the last SUSTAIN_FRAC (at least EDGE_FRAC, at least 3) of them."""
    return max(3, int(np.ceil(SUSTAIN_FRAC * n)), int(np.ceil(EDGE_FRAC * n)))


def final_stretch(values: np.ndarray) -> np.ndarray:
    """The points whose level is "the end" (`final_count`)."""
    return values[-final_count(values.size) :]


def blown_up_from(first: float, tail: np.ndarray, end_level: float) -> bool:
    """A loss whose final stretch `tail` (median `end_level`) ends at INIT_RATIO x its first value `first` and never
    came back under INIT_HOLD x it: it blew up from the start."""
    return end_level >= INIT_RATIO * first and percentile(tail, 10) >= INIT_HOLD * first


def _from_start(
    data: RunData, tag: str, steps: np.ndarray, values: np.ndarray, tail: np.ndarray, end_level: float
) -> dict | None:
    """A training loss that ends far above its first logged value (see the module docstring); `end_level`: the
    median of `tail`."""
    first = float(values[0])
    if data.features[tag].role != "train_loss" or first <= 0 or values.min() <= 0:
        return None
    if steps[0] - (data.first_step or 0) > INIT_FRAC * data.span:
        return None
    if not blown_up_from(first, tail, end_level):
        return None
    # The onset: the first point from which the loss stays above INIT_HOLD × its first value (a running
    # median of 5, so one lucky batch does not end the blow-up).
    smooth = running_median(values, 5)
    below = np.flatnonzero(smooth < INIT_HOLD * first)
    onset_index = int(below[-1]) + 1 if below.size else 0
    onset_index = min(max(onset_index, 1), values.size - 1)
    return {
        "onset": int(steps[onset_index]),
        "best": first,
        "best_step": int(steps[0]),
        "end": end_level,
        "start": first,
        "rise_vs_progress": None,
        "from_start": True,
    }


def _edge_levels(feats, direction: int, values: np.ndarray, tail_count: int) -> tuple[float, float]:
    """(start level, end level) of the finite `values` turned so that worse is up (× -`direction`): the medians of
    the first EDGE_FRAC of the points and of the last `tail_count`. The features measured both medians of the
    unturned values already (`start_level`, `end_level`); when they cover the same points they are reused:
    turning the values turns their median exactly (0.0 - m: a median of zeros is +0.0 either way)."""
    n = values.size
    edge = max(3, int(np.ceil(EDGE_FRAC * n)))
    extra = feats.extra
    if tail_count == edge and "end_level" in extra and feats.points - extra.get("nonfinite", -1) == n:
        start, end = float(extra["start_level"]), float(extra["end_level"])
        return (start, end) if direction < 0 else (0.0 - start, 0.0 - end)
    worse_up = values * (-direction)
    return median(worse_up[:edge]), median(worse_up[-tail_count:])


#: Relative slack of `_no_rise`'s bound: far above the rounding of the few operations it stands for.
_BOUND_SLACK = 1e-9


def _no_rise(start: float, end: float, lowest: float, scale: float) -> bool:
    """Whether `_blowup`'s first test (the end at most the needed share above the best level) passes whatever the
    best level is, knowing only that it is at least `lowest` (a running median never goes below the lowest value
    it runs over). The test's two forms, half the progress and half the scale, are each met at every best level
    from `lowest` up, with a slack for rounding: a higher best level only lowers the rise and raises the bar."""
    slack = _BOUND_SLACK * (abs(start) + abs(end) + abs(lowest) + abs(scale))
    return bool(
        end - lowest <= BLOWUP_SCALE_FRACTION * scale - slack
        and (end - lowest) - BLOWUP_FRACTION * (start - lowest) <= -slack
    )


def _blowup(data: RunData, tag: str) -> dict | None:
    feats = data.features[tag]
    role = feats.role
    direction = feats.direction if role == "metric" else -1
    if direction == 0:
        return None
    steps, values = data.finite(tag)
    n = values.size
    if n < 8:
        return None
    if role in _LOSSES and (rl_run(data) or _signed_surrogate(values)):
        return None
    level = feats.extra["level"]
    smooth = -direction * level.medians  # turn the curve so that worse is up
    tail_count = final_count(n)
    tail = values[-tail_count:] * (-direction)
    start_level, end_level = _edge_levels(feats, direction, values, tail_count)
    scale = feats.extra["scale"]
    if _no_rise(start_level, end_level, float(smooth.min()), scale):
        # Whatever the running median below makes the best level, the end is not far enough above it: the
        # same verdict as the test after it, without the running median.
        return _from_start(data, tag, steps, values, tail, end_level)
    if smooth.size >= 5:  # a 5-bucket running median: one bad bucket is not a level
        smooth = running_median(smooth, 5)
    best_index = int(np.argmin(smooth))
    best_level = float(smooth[best_index])
    rise = end_level - best_level
    progress = start_level - best_level
    needed = BLOWUP_FRACTION * progress if progress > NO_PROGRESS * scale else BLOWUP_SCALE_FRACTION * scale
    if rise <= needed:  # before the noise (two noise estimates cost more than the rest): the same verdict
        return _from_start(data, tag, steps, values, tail, end_level)
    bucket_noise = scale_noise(level.medians)
    level_noise = max(bucket_noise, scale_noise(smooth)) if smooth.size > 3 else 0.0
    # The rise is measured between levels, not points: the best of the 5-bucket running median (whose noise is
    # MEDIAN5_NOISE of a bucket's) and the median of the final stretch. Against single points' noise, a run
    # logging under LEVEL_BUCKETS points (one a bucket) needed a rise ~2x larger than a denser run of the same
    # noise to count.
    bar_noise = MEDIAN5_NOISE * bucket_noise if level.medians.size >= 5 else level_noise
    if rise <= BLOWUP_NOISE_K * bar_noise:
        return _from_start(data, tag, steps, values, tail, end_level)
    if values.min() >= (1 - NO_PROGRESS) * values[0]:  # never better than the untrained model: judged from there
        from_start = _from_start(data, tag, steps, values, tail, end_level)
        if from_start:
            return from_start
    # "Never recovers": every point of the final stretch stays in the upper part of the rise.
    if percentile(tail, 10) < best_level + 0.5 * rise:
        return None
    threshold = best_level + ONSET_FRACTION * rise
    after_best = np.flatnonzero(smooth[best_index:] > threshold)
    if after_best.size == 0:
        return None
    crossing = best_index + int(after_best[0])
    # The climb began where the level last sat within noise of the best before that crossing.
    calm_level = best_level + max(ONSET_NOISE_K * level_noise, ONSET_CALM * scale)
    calm = np.flatnonzero(smooth[best_index:crossing] <= calm_level)
    bucket = best_index + (int(calm[-1]) + 1 if calm.size else 0)
    first_point = int(level.first[min(bucket, crossing)])
    onset = int(steps[first_point])
    lr_pair = data.lr_values_near(onset, before=5, after=5)
    if lr_pair and lr_pair[0] > 0 and lr_pair[1] >= LR_RESTART_FACTOR * lr_pair[0]:
        return None  # the schedule restarted: a loss jump after an lr jump is expected
    best_step = int(level.steps[best_index])
    return {
        "onset": onset,
        "best": -direction * best_level,
        "best_step": best_step,
        "end": -direction * end_level,
        "start": -direction * start_level,
        "rise_vs_progress": rise / progress if progress > 0 else None,
    }


def _judge_blowup(data: RunData, tag: str) -> bool:
    """Whether a rise of this series can mean divergence (see the module docstring)."""
    role = data.features[tag].role
    phase = data.phases.get(tag)
    if role == "val_loss" or (role in ("metric", "loss_component") and phase == "val"):
        # A validation curve rising while training improves is overfitting; judge it only in runs that
        # log no training loss at all (here or in a Keras train sibling).
        train_side = [t for t in data.tags("train_loss", "loss_component") if data.phases.get(t) != "val"]
        return not train_side and not data.has_train_sibling
    if role == "loss_component":
        # With a total loss logged, one term rising while the total holds is a trade-off, not divergence;
        # adversarial terms rise by design.
        totals = [t for t in data.tags("train_loss", "val_loss") if data.phases.get(t) == phase]
        return not totals and not adversarial(tag)
    return not adversarial(tag)


def _training_loss_finite(data: RunData) -> bool:
    """The run logs a training loss and it never went non-finite."""
    losses = [t for t in data.tags("train_loss", "loss_component") if data.phases.get(t) != "val"]
    return bool(losses) and all(data.features[t].first_nonfinite_step is None for t in losses)


def _metric_nonfinite(data: RunData) -> list:
    """Metrics (and unlabelled tags) turning non-finite while the training loss stays finite: one warning."""
    if not _training_loss_finite(data):
        return []
    bad = []
    for tag, (role, _) in data.roles.items():
        if role in _LOSSES or role in _NOT_JUDGED or tag not in data.run.scalars:
            continue
        found = _nonfinite(data, tag) if data.features[tag].first_nonfinite_step is not None else None
        if found:
            bad.append((found["onset"], tag, found))
    if not bad:
        return []
    bad.sort(key=lambda b: b[0])
    onset, tag, first = bad[0]
    loss = next(t for t in data.tags("train_loss", "loss_component") if data.phases.get(t) != "val")
    never = "last_finite_step" not in first
    where = "from its first point" if never else f"from step {onset} (last finite {fmt(first['last_finite_value'])})"
    summary = (
        f"{tag} {first['first_value']} {where}, {first['nonfinite_points']} non-finite point(s); {loss} stayed finite"
    )
    evidence = {
        "summary": summary + (f"; also {', '.join(b[1] for b in bad[1:4])}" if len(bad) > 1 else ""),
        "tag": tag,
        "first_nonfinite_step": onset,
        "nonfinite_points": first["nonfinite_points"],
        "loss_tag": loss,
        "metric_only": True,
    }
    message = f"{tag} turned {first['first_value']} at step {onset} while {loss} stayed finite: the metric, not training, broke"
    suggestion = (
        f"Training itself is fine; {tag}'s computation fails: look for a 0/0 (a variance or count of zero, e.g. "
        "constant returns for explained_variance, an empty class for precision/recall), a log of 0 or an empty "
        "evaluation batch, and guard it (add an epsilon, skip empty batches) so the metric can select models again"
    )
    return [finding(data, "divergence", "warning", [b[1] for b in bad[:5]], onset, None, evidence, message, suggestion)]


def detect(data: RunData) -> list:
    metric_only = _metric_nonfinite(data)
    told = {t for f in metric_only for t in f.tags}
    events = []
    for tag in data.tags(*_ROLES):
        feats = data.features[tag]
        if (feats.role == "metric" and feats.direction == 0) or tag in told:
            continue
        bad_values = _nonfinite(data, tag)
        # A climb that ends in NaN for good is part of the divergence whatever else the run logs: judging it
        # only when no train sibling is loaded would move the onset with the set of runs analysed together.
        judge_blowup = _judge_blowup(data, tag) or bool(bad_values and bad_values["persistent"])
        blow = _blowup(data, tag) if judge_blowup else None
        if bad_values is None and blow is None:
            continue
        onsets = [e.get("climb_onset", e["onset"]) for e in (bad_values, blow) if e]
        persistent = bool(blow) or bool(bad_values and bad_values["persistent"])
        events.append((min(onsets), tag, bad_values, blow, persistent))
    if not events:
        return metric_only
    events.sort(key=lambda e: (not e[4], data.features[e[1]].role != "train_loss", e[0]))
    # A run diverges once: every tag that never recovered is one story, told from the training loss when it
    # is among them, starting at the earliest onset. Non-finite points the run recovered from are another.
    findings = []
    for persistent in (True, False):
        group = [e for e in events if e[4] == persistent]
        if group:
            lead = group[0]
            onset = min(e[0] for e in group)
            findings.append(_finding(data, [e[1] for e in group], onset, lead[2], lead[3], persistent))
    return findings + metric_only


def _finding(data: RunData, tags: list[str], onset: int, bad_values: dict | None, blow: dict | None, persistent: bool):
    tag = tags[0]
    feats = data.features[tag]
    evidence: dict = {"tag": tag}
    parts = []
    if blow and blow.get("from_start"):
        parts.append(
            f"{tag} started at {fmt(blow['start'])} (step {blow['best_step']}) and was above "
            f"{fmt(INIT_HOLD * blow['start'])} from step {blow['onset']} on, ending at {fmt(blow['end'])} "
            f"(×{blow['end'] / blow['start']:.1f} the untrained model's loss)"
        )
        evidence.update(start_level=blow["start"], end_level=blow["end"], blowup_step=blow["onset"], from_start=True)
    elif blow:
        change = (blow["end"] - blow["best"]) / abs(blow["best"]) if blow["best"] else None
        parts.append(
            f"{tag} best {fmt(blow['best'])} at step {blow['best_step']}, rose from step {blow['onset']} "
            f"to {fmt(blow['end'])}" + (f" ({pct(change)})" if change is not None else "")
        )
        evidence.update(
            best=blow["best"],
            best_step=blow["best_step"],
            end_level=blow["end"],
            start_level=blow["start"],
            blowup_step=blow["onset"],
        )
    if bad_values:
        where = f"{tag} {bad_values['first_value']} from step {bad_values['onset']}"
        if "climb_from" in bad_values:
            where += (
                f" after a climb from {fmt(bad_values['climb_from'])} (step {bad_values['climb_from_step']}) "
                f"that began at step {bad_values['climb_onset']}"
            )
        if "last_finite_step" in bad_values:
            where += f" (last finite {fmt(bad_values['last_finite_value'])} at step {bad_values['last_finite_step']})"
        if not bad_values["persistent"]:
            where += f", {bad_values['nonfinite_points']} non-finite point(s), then finite again"
        parts.append(where)
        evidence.update(first_nonfinite_step=bad_values["onset"], nonfinite_points=bad_values["nonfinite_points"])
    evidence["summary"] = "; ".join(parts)
    if len(tags) > 1:
        evidence["also"] = tags[1:]
    evidence.update(data.context_evidence(onset))
    points = feats.points - feats.extra.get("nonfinite", 0)
    never_finite = bad_values is not None and "last_finite_step" not in bad_values and bad_values["persistent"]
    trained_into = data.train_sibling_diverged
    evaluations = data.run.scalars[tag].steps
    if (
        bad_values is not None
        and never_finite
        and trained_into is not None
        and trained_into <= int(evaluations[min(1, evaluations.size - 1)])
    ):
        # A validation run whose training sibling turned non-finite by its second evaluation: it evaluated
        # diverging weights. Training's divergence is the story (and its cause), not a bug in this loss or data.
        evidence["train_nonfinite_step"] = trained_into
        message = (
            f"{tag} was {bad_values['first_value']} from its first evaluation (step {onset}), and the training loss "
            f"beside it turned non-finite at step {trained_into}: the evaluations saw diverging weights"
        )
        suggestion = (
            "Not a bug in the evaluation: the training run diverged (see its finding, and fix that); these "
            "evaluations only saw its broken weights"
        )
        severity = confident("critical", bad_values["nonfinite_points"], 8)
        return finding(data, "divergence", severity, tags, onset, None, evidence, message, suggestion)
    if bad_values is not None and never_finite:
        # Nothing to resume from: it was never a number. A bug in the loss or the data, not a divergence.
        severity = confident("critical", bad_values["nonfinite_points"], 8)
        message = f"{tag} was {bad_values['first_value']} from its very first point (step {onset}): a data or loss bug, not a divergence"
        suggestion = (
            f"{tag} was never a number, so the cause is there from the start: check the inputs and labels for "
            "NaN/Inf (missing values, a division by a zero std in normalisation), the loss for log(0) or 0/0 "
            "(use the logits form: cross_entropy/BCEWithLogits), and run one batch under "
            "torch.autograd.set_detect_anomaly(True) (or tf.debugging.enable_check_numerics) to find the op"
        )
        evidence["never_finite"] = True
        return finding(data, "divergence", severity, tags, onset, None, evidence, message, suggestion)
    if persistent:
        severity = confident("critical", points + (bad_values["nonfinite_points"] if bad_values else 0), 8)
        message = f"{tag} diverged at step {onset}" + (" (NaN/Inf)" if bad_values else "") + " and never recovered"
    else:
        severity = confident("warning", points, 8)
        message = f"{tag} went non-finite at step {onset} and recovered"
    grad_context = evidence.get("context", {}).get("grad_norm")
    grad_rose = False
    if grad_context:
        grads = [v for _, v in grad_context]
        finite = [v for v in grads if np.isfinite(v)]
        grad_rose = (len(finite) < len(grads)) or (len(finite) >= 2 and max(finite) > 10 * max(min(finite), 1e-30))
    advice = []
    if grad_rose:
        advice.append(clip_advice(data, onset))
    if blow and blow.get("from_start"):
        advice.append(
            "it never did better than at its first step, so there is no checkpoint worth resuming: restart with "
            "the peak lr ×0.1 (then raise it while the loss still falls), with a warmup"
        )
    elif onset > (data.first_step or 0):
        advice.append(
            f"resume from the last checkpoint before step {onset} with the peak lr ×0.5 (and a warmup if there is none)"
        )
    else:
        advice.append("restart with the peak lr ×0.5 and a warmup (it went wrong from the first step)")
    if bad_values:
        advice.append(
            "keep softmax/attention scores and the loss in fp32 (or train in bf16) and check the batch "
            f"at step {onset} for NaN/Inf inputs or labels"
        )
    return finding(data, "divergence", severity, tags, onset, None, evidence, message, sentence(advice))
