"""overfitting: the training loss keeps falling while the validation loss (or metric) turns worse.

For every train/validation pair (same quantity: `Loss/train`+`Loss/test`, `train_acc`+`val_acc`, a Keras
`X/train` run's `epoch_loss` with its `X/validation` sibling's) and for the main validation metric against
the training loss:
- the validation curve's best point (on a 3-point running median, so one lucky evaluation is not "the
  best") is followed by at least MIN_AFTER evaluations,
- it ended worse than that best by at least REL_LOSS (losses) / REL_METRIC (metrics, which move less) of the
  best, by NOISE_K noise sigmas of the validation curve and (losses) by PROGRESS_SHARE of what it had gained
  since its first evaluations,
- the deterioration is sustained: the last evaluation is still in the upper half of the rise and the
  points after the best trend worse (positive least-squares slope),
- meanwhile the training side kept improving by at least TRAIN_IMPROVE since the validation best.
Losses lead: when a validation loss was judged and did not turn, a validation metric that sags on its own (an
accuracy at chance wandering by a few points) is not overfitting; a model overfits its loss first.
The onset is the validation best: the checkpoint to keep. Few evaluations (< CONFIDENT_EVALS) give info.

A held-out loss evaluated too few times to show a turn (< MIN_EVALS: often once, at the end) is still judged
against the training loss (`_above_training`): ending at GAP_RATIO × or more of the highest level the training
loss ever logged (its untrained start included), never having fallen between its evaluations, the model does
worse on held-out data than it ever did on its own (or the two losses are not computed alike). Info: one
evaluation cannot say which.
"""

from __future__ import annotations

import numpy as np

from ..features import LEVEL_BUCKETS
from ..smoothing import diff_noise, median, running_median
from .base import RunData, finding, fmt, pct, sentence

#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("overfitting",)

MIN_EVALS = 5
MIN_AFTER = 3
CONFIDENT_EVALS = 8
REL_LOSS = 0.05
REL_METRIC = 0.02
NOISE_K = 3.0
TRAIN_IMPROVE = 0.02
#: A validation loss must also give back at least this share of what it had gained from its first
#: evaluations to its best.
PROGRESS_SHARE = 0.05
#: A held-out loss at this multiple of the highest training loss ever logged (even untrained) is worse than a model
#: that knew nothing of the data would score: not a generalisation gap, a failure to carry over.
GAP_RATIO = 2.0
#: A rise of this share of the best (losses) is a warning; smaller ones are info.
WARN_REL_LOSS = 0.1
WARN_REL_METRIC = 0.03


def _running_median3(values: np.ndarray) -> np.ndarray:
    if values.size < 5:
        return values
    return running_median(values, 3)


def _val_turn(steps: np.ndarray, values: np.ndarray, direction: int, is_metric: bool) -> dict | None:
    """The validation curve's best point and how much worse it ended, when it clearly turned."""
    if values.size < MIN_EVALS:
        return None
    worse_up = values * -direction
    needed_rel = REL_METRIC if is_metric else REL_LOSS
    # The best (a running median's lowest) is at least the lowest point: for a positive curve, a rise from that
    # point too small to count bounds the real one (most validation losses end near their lowest), and the
    # running median is not needed to say no.
    lowest = float(worse_up.min())
    if lowest > 0 and (median(worse_up[-3:]) - lowest) / max(lowest, 1e-12) < needed_rel:
        return None
    smooth = _running_median3(worse_up)
    best_index = int(np.argmin(smooth))
    after = worse_up[best_index + 1 :]
    if after.size < MIN_AFTER:
        return None
    best = float(smooth[best_index])
    final = median(worse_up[-3:])
    rise = final - best
    rel = rise / max(abs(best), 1e-12)
    if rise <= 0 or rel < needed_rel:  # before the noise, the costlier test: the same verdict
        return None
    noise = max(diff_noise(worse_up), 1e-3 * abs(best))
    if rise < NOISE_K * noise:
        return None
    # Against what the curve achieved, too: a validation loss that fell from 2.3 to 0.0005 and is back at
    # 0.001 doubled, but gave back nothing anyone would notice.
    progress = median(worse_up[: min(3, best_index + 1)]) - best
    if not is_metric and progress > 0 and rise < PROGRESS_SHARE * progress:
        return None
    if worse_up[-1] < best + 0.5 * rise:
        return None
    x = steps[best_index:].astype(np.float64)
    y = worse_up[best_index:]
    x = x - x.mean()
    if float((x * (y - y.mean())).sum()) <= 0:
        return None
    return {
        "best_index": best_index,
        "best_step": int(steps[best_index]),
        "best": -direction * best,
        "final": -direction * final,
        "rel": rel,
        "noise": noise,
        "evals": int(values.size),
        "last_step": int(steps[-1]),
    }


def _train_change(data: RunData, tag: str, since: int) -> float | None:
    """Relative improvement of a training series from `since` to its end (positive: it got better)."""
    steps, values = data.finite(tag)
    direction = data.features[tag].direction or -1
    if values.size < 4:
        return None
    width = max(3, values.size // 50)
    at = int(np.searchsorted(steps, since))
    lo = max(0, min(at - width // 2, values.size - width))
    then = median(values[lo : lo + width])
    now = median(values[-width:])
    return direction * (now - then) / max(abs(then), 1e-12)


def _candidates(data: RunData) -> list[tuple[str, str, np.ndarray, np.ndarray, int, bool, str | None]]:
    """(train tag, val label, val steps, val values, direction, is_metric, val run) to examine, losses first."""
    out: list[tuple[str, str, np.ndarray, np.ndarray, int, bool, str | None]] = []
    paired_val = set()
    for train_tag, val_tag in data.pairs:
        role = data.features[val_tag].role
        steps, values = data.finite(val_tag)
        if values.size > LEVEL_BUCKETS:  # evaluated every step: judge its bucket medians
            level = data.features[val_tag].extra["level"]
            steps, values = level.steps.astype(np.int64), level.medians
        out.append((train_tag, val_tag, steps, values, data.features[val_tag].direction or -1, role == "metric", None))
        paired_val.add(val_tag)
    for train_tag, external in data.sibling_val.items():
        steps, values = external.series.steps, external.series.values
        finite = np.isfinite(values)
        role = external.features.role
        out.append(
            (
                train_tag,
                external.tag,
                steps[finite],
                values[finite],
                external.features.direction or -1,
                role == "metric",
                external.run,
            )
        )
    metric = data.primary.val_metric
    if metric and metric not in paired_val and data.primary.train_loss and data.features[metric].direction:
        steps, values = data.finite(metric)
        out.append((data.primary.train_loss, metric, steps, values, data.features[metric].direction, True, None))
    # Losses first: they lead the finding; then the finest step axis (a Keras run's global-step pair before its
    # per-epoch one), so the onset is stated in global steps.
    out.sort(key=lambda c: (c[5], -(int(c[2][-1]) if c[2].size else 0)))
    return out


def detect(data: RunData) -> list:
    events: list[tuple[str, str, dict, float, bool, str | None]] = []
    loss_judged = False
    candidates = _candidates(data)
    for train_tag, val_tag, steps, values, direction, is_metric, val_run in candidates:
        if is_metric and loss_judged and not events:
            break  # a validation loss was judged and did not turn: a metric that sags alone is noise, not overfitting
        loss_judged = loss_judged or (not is_metric and values.size >= MIN_EVALS)
        turn = _val_turn(steps, values, direction, is_metric)
        if turn is None:
            continue
        improved = _train_change(data, train_tag, turn["best_step"])
        if improved is None or improved < TRAIN_IMPROVE:
            continue
        events.append((train_tag, val_tag, turn, improved, is_metric, val_run))
    if not events:
        return _above_training(data, candidates)
    lead = events[0]
    train_tag, val_tag, turn, improved, is_metric, val_run = lead
    val_label = f"{val_run}:{val_tag}" if val_run else val_tag
    others = events[1:]
    summary = (
        f"{val_label} best {fmt(turn['best'])} at step {turn['best_step']}, now {fmt(turn['final'])} "
        f"({pct((turn['final'] - turn['best']) / abs(turn['best']))}) while {train_tag} "
        f"{'fell' if data.features[train_tag].direction <= 0 else 'rose'} {abs(improved):.0%} since"
    )
    evidence = {
        "summary": summary,
        "val_tag": val_tag,
        "train_tag": train_tag,
        "best_step": turn["best_step"],
        "best": turn["best"],
        "final": turn["final"],
        "relative_change": turn["rel"],
        "train_improvement": improved,
        "evaluations": turn["evals"],
    }
    if val_run:
        evidence["val_run"] = val_run
    if others:
        evidence["also"] = [f"{e[5]}:{e[1]}" if e[5] else e[1] for e in others]
    warn_rel = WARN_REL_METRIC if is_metric else WARN_REL_LOSS
    severity = "warning" if turn["rel"] >= warn_rel and turn["evals"] >= CONFIDENT_EVALS else "info"
    epochs = at_epoch = ""
    # A run that counts both epochs and steps gets "epoch N (step S)" from the engine (`axes.restate`); a run
    # logged per epoch only, "epoch N". Else an epoch tag or the evaluation cadence tells roughly which epoch.
    if data.epoch_length and data.epoch_length > 1 and not data.axes.steps_per_epoch:
        count = max(1, round((turn["best_step"] - (data.first_step or 0)) / data.epoch_length))
        epochs, at_epoch = f" (~{count} epochs)", f" (~epoch {count})"
        evidence["best_epoch"] = count
    message = (
        f"overfitting: {val_label} is {turn['rel']:.0%} worse than its best at step {turn['best_step']}{at_epoch} "
        f"while {train_tag} keeps improving"
    )
    hp_wd = _hparam(data, "weight_decay", "wd", "weight-decay")
    advice = [
        f"keep the checkpoint from step {turn['best_step']}{epochs} and early-stop there",
        "add regularisation: weight decay 0.05–0.1 with AdamW"
        + (f" (weight_decay is {hp_wd} now)" if hp_wd is not None else "")
        + ", dropout 0.1–0.3, stronger augmentation (RandAugment, mixup/cutmix) or more data",
    ]
    tags = [train_tag] + ([val_tag] if not val_run else [])
    return [
        finding(
            data,
            "overfitting",
            severity,
            tags,
            turn["best_step"],
            turn["last_step"],
            evidence,
            message,
            sentence(advice),
        )
    ]


def _above_training(
    data: RunData, candidates: list[tuple[str, str, np.ndarray, np.ndarray, int, bool, str | None]]
) -> list:
    """Held-out losses with too few evaluations for a turn that end at GAP_RATIO × the highest training loss
    ever logged and never fell (see the module docstring): one info finding, led by the main training loss's."""
    found = []
    for train_tag, val_tag, steps, values, _direction, is_metric, val_run in candidates:
        if is_metric or not 0 < values.size < MIN_EVALS or values[-1] < values[0]:
            continue
        if data.features[train_tag].first_nonfinite_step is not None:
            continue  # training broke: whatever the held-out loss did then is divergence's story
        train = data.finite(train_tag)[1]
        ceiling = float(train.max()) if train.size else 0.0
        final = median(values[-3:])
        if ceiling <= 0 or final < GAP_RATIO * ceiling:
            continue
        at = int(steps[int(np.argmax(values >= GAP_RATIO * ceiling))])
        found.append(
            (
                train_tag != data.primary.train_loss,
                -final / ceiling,
                train_tag,
                val_tag,
                val_run,
                at,
                final,
                ceiling,
                values.size,
            )
        )
    if not found:
        return []
    found.sort(key=lambda f: f[:2])
    _, _, train_tag, val_tag, val_run, at, final, ceiling, evaluations = found[0]
    val_label = f"{val_run}:{val_tag}" if val_run else val_tag
    train_steps, train_values = data.finite(train_tag)
    now = float(train_values[min(int(np.searchsorted(train_steps, at)), train_values.size - 1)])
    summary = (
        f"{val_label} {fmt(final)} at step {at}: ×{final / ceiling:.1f} the highest {train_tag} ever logged "
        f"({fmt(ceiling)}), and {train_tag} was {fmt(now)} then"
    )
    evidence = {
        "summary": summary,
        "val_tag": val_tag,
        "train_tag": train_tag,
        "final": final,
        "train_highest": ceiling,
        "train_at_evaluation": now,
        "evaluations": int(evaluations),
        "above_training": True,
    }
    if val_run:
        evidence["val_run"] = val_run
    if len(found) > 1:
        evidence["also"] = [f"{f[4]}:{f[3]}" if f[4] else f[3] for f in found[1:]]
    message = (
        f"{val_label} is {fmt(final)} at step {at}, ×{final / ceiling:.0f} the highest {train_tag} ever logged: "
        "the model does far worse on held-out data than on its training data at any point of the run"
    )
    advice = [
        "check that the evaluation data match the training data (label map and class ids, preprocessing, "
        "annotations) and that both losses are computed alike (a mean, not a sum over batches)",
        "if they are, the model memorised its training set: more data or augmentation, regularisation, early stopping",
    ]
    tags = [train_tag] + ([val_tag] if not val_run else [])
    return [finding(data, "overfitting", "info", tags, at, at, evidence, message, sentence(advice))]


def _hparam(data: RunData, *names: str):
    for key, value in data.run.hparams.items():
        if key.rsplit(".", 1)[-1].lower() in names:
            return value
    return None
