"""no_learning: the run never learned anything. Three signals, each judged on the run's own curves:

- chance: an accuracy that sits at 1/K (K read from its own level) and never rose above it by more than
  CHANCE_ACC_MARGIN, while the loss sits at ln(K), the cross-entropy of a uniform guess over K classes
  (within CHANCE_MEMORISED: a training loss dips a little below by memorising labels that carry no signal).
  Without an accuracy, the loss alone: at ln(K) at the end, never more than CHANCE_FLOOR below it, and
  started there (within CHANCE_START): a loss that fell from far above to ln 2 and stopped learned to a
  plateau, it did not fail to learn;
- identical: a validation loss or metric that is the same number at every one of at least MIN_EVALS
  evaluations (within float32 rounding): the evaluated model never changed, or collapsed to a constant output.
  A metric pinned at its perfect value (accuracy 1.0, a loss of 0) is a solved task, not a stuck one;
- memorised: a held-out accuracy at chance 1/K (K read from the accuracy alone: the loss may be in nats or, as
  fairseq logs it, in bits) at every one of at least MIN_EVALS evaluations, while the held-out loss never fell
  more than HELD_OUT_GAIN below its first evaluation: whatever the training loss does (it may fall, memorising
  the training labels), nothing the model learns carries over to data it has not seen;
- flat: the main loss moved less than NO_DROP of its start over the whole run and never dipped by LEARNED of
  it (a run resumed late, or still in its lr warmup, is not judged: its curve is meant to look like that).

The usual causes: an lr far too low or zero, frozen parameters (requires_grad off, an optimizer that does
not hold them), labels misaligned with inputs, a loss computed on the wrong tensor. One finding per run,
led by the most specific signal; the others are in its evidence.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

import numpy as np

from ..datamodel import SeriesFeatures
from ..roles import rl_term
from ..smoothing import MAD_TO_SIGMA, mad_sigma, median
from .base import MIN_CONFIDENT_POINTS, RunData, adversarial, confident, finding, fmt, pct, smoothed_level

#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("no_learning",)

#: A chance-level loss: within CHANCE_TOLERANCE of ln(K) (2 %: minibatch noise around a uniform guess is
#: far smaller, while a trained model a little above ln K would drift out of it).
CHANCE_TOLERANCE = 0.02
#: ...and its lowest level never more than this far below ln K: learning anything at all pulls the loss
#: well below it (a net that found the class prior alone gains more than 5 % on any unbalanced set).
CHANCE_FLOOR = 0.05
#: Without an accuracy to confirm it, the loss must have started within this share of ln K.
CHANCE_START = 0.1
#: An accuracy at chance: its typical level within CHANCE_ACC_SHARE/K of 1/K, and its best evaluation at most
#: max(CHANCE_ACC_MARGIN, CHANCE_ACC_SHARE/K) above 1/K (a quarter of a class's share, at least 3 points:
#: outside the scatter of any validation set of a few hundred samples, far below what any learning reaches).
CHANCE_ACC_MARGIN = 0.03
CHANCE_ACC_SHARE = 0.25
#: A loss alone names K only for few classes: beyond ~20, ln K and ln(K+1) are under 5 % apart, so any
#: level sits near the ln of some class count and only an accuracy at 1/K can say the model guesses.
LOSS_ALONE_MAX_CLASSES = 20
#: With chance accuracy, the loss within this share of ln K (a training loss memorising noise dips ~10 %).
CHANCE_MEMORISED = 0.15
#: Knowing only how often each class occurs lowers the cross-entropy below ln K by at most PRIOR_GAIN on a set that
#: is not heavily unbalanced (40/30/20/10 % gains 8 %); a model that learns anything from its inputs goes far lower.
#: A loss that started at ln K, never fell further than that and is not still falling steadily learned the prior
#: at most; an accuracy confirms it when its typical level stays under PRIOR_ACC_CLASSES/K (the largest class's
#: share on such a set).
PRIOR_GAIN = 0.1
PRIOR_ACC_CLASSES = 2.0
#: A curve "identical at every evaluation" needs this many evaluations; 5 equal floats by chance never happen.
MIN_EVALS = 5
#: Within float32 rounding: values written as float32 agree to ~1e-7 relative.
IDENTICAL_RTOL = 1e-6
#: memorised: the held-out loss never fell more than this share below its first evaluation (a model that learns
#: anything that generalises lowers it well beyond the scatter of a validation set of a few hundred samples).
HELD_OUT_GAIN = 0.03
#: flat: the loss moved less than NO_DROP of its start and never dipped by LEARNED of it.
NO_DROP = 0.02
LEARNED = 0.1
#: A run whose first logged step is beyond this share of its last was resumed: its start is not "the start".
RESUMED_FRAC = 0.2
#: An lr at or below this never moves weights of ordinary scale in a run's length.
LR_ZERO = 1e-8

#: Pace is measured on least-squares lines through the bucket medians of the first and last QUARTER of the run.
QUARTER = 0.25
#: Fewer bucket medians than this give no pace: a line through fewer than 5 points per quarter proves nothing.
MIN_PACE_POINTS = 20
#: Slopes count beyond this many standard errors.
SLOPE_K = 2.0
#: A crawl: the last quarter still falls at END_PACE of the first quarter's pace and the first quarter fell at
#: most FAST_START × the average pace. An exponential approach covers that in under one time constant; a healthy
#: run covers several (its last quarter keeps under LEVELLED_PACE of its early pace).
END_PACE = 0.5
FAST_START = 2.0
LEVELLED_PACE = 0.25
#: The pace is judged from the step at which a warming-up lr reaches this share of its peak.
WARMED_UP = 0.9
_ACCURACY = re.compile(r"acc|top1|top-1|top_1")


def rl_objective(data: RunData) -> bool:
    """The run's losses are the terms of a reinforcement-learning objective (a policy loss among them): its total
    rises and falls as the policy and its data change, so its shape does not say whether the agent learns (the
    return does)."""
    return any(rl_term(t) for t in data.tags("loss_component"))


def main_loss(data: RunData) -> str | None:
    """The training loss, else a validation loss when no training loss exists here or in a Keras train
    sibling (a regularised model's validation loss may sit still while its training loss does the learning)."""
    tag = data.primary.train_loss or (None if data.has_train_sibling else data.primary.val_loss)
    return None if tag is None or adversarial(tag) or rl_objective(data) else tag


def still_warming_up(data: RunData) -> bool:
    """The lr is still rising at the end of the run: a young run whose loss is meant to be high."""
    if data.primary.lr is None:
        return False
    lr = data.finite(data.primary.lr)[1]
    if lr.size < 4:
        return False
    tail = lr[-max(2, lr.size // 5) :]
    return bool(tail[-1] > tail[0] * 1.05 and lr[-1] >= 0.95 * lr.max())


#: The most classes anyone trains a classifier on (ln 100000 ≈ 11.5).
MAX_CLASSES = 100000


def chance_classes(level: float, max_classes: int = MAX_CLASSES) -> int | None:
    """K ≤ max_classes when `level` is ln(K) within CHANCE_TOLERANCE (the loss of a uniform guess over K classes)."""
    if not 0.5 < level < 12.0:  # ln(2) .. ln(160000): the class counts anyone trains on
        return None
    k = round(math.exp(level))
    if 2 <= k <= max_classes and abs(math.log(k) - level) <= CHANCE_TOLERANCE * level:
        return k
    return None


def _accuracies(data: RunData) -> list[str]:
    return [
        t
        for t in data.tags("metric")
        if data.features[t].direction > 0 and _ACCURACY.search(t.lower()) and data.features[t].best is not None
    ]


def _as_fraction(value: float) -> float:
    return value / 100.0 if value > 1.0 else value


#: The highest best accuracy `_accuracy_at_chance` can call chance: its bar at K = 2, the fewest classes.
_CHANCE_ACC_MOST = 1.0 / 2 + max(CHANCE_ACC_MARGIN, CHANCE_ACC_SHARE / 2)


def _accuracy_at_chance(data: RunData, loss: SeriesFeatures) -> dict | None:
    """An accuracy that never rose above chance 1/K, for a class count K its own level allows; of those K,
    the one whose ln K is nearest the loss's typical level (the median of its bucket medians; 1/K alone cannot
    tell 10 classes from 11)."""
    loss_level: float | None = None
    for tag in _accuracies(data):
        values = data.finite(tag)[1]
        if values.size < 3:
            continue
        # The features' best is the values' largest (an accuracy: higher is better), and a hundredth of the largest
        # is the largest hundredth (division by 100 keeps the order): without a pass over the values.
        top = data.features[tag].best
        if top is None:  # (none: `_accuracies` keeps the accuracies with a best)
            continue
        best = top / 100.0 if top > 1.0 else top
        if best > _CHANCE_ACC_MOST:  # above chance for every class count (the bar below falls as K grows)
            continue
        fractions = values / 100.0 if top > 1.0 else values
        typical = median(fractions)
        if typical * MAX_CLASSES < 0.5:  # below the chance level of any class count anyone trains on
            continue
        # 1/K within CHANCE_ACC_SHARE/K of the typical level: K between (1 - share) and (1 + share) / typical.
        lo = max(2, math.ceil((1.0 - CHANCE_ACC_SHARE) / typical))
        hi = min(MAX_CLASSES, math.floor((1.0 + CHANCE_ACC_SHARE) / typical))
        if lo > hi:
            continue
        if loss_level is None:
            loss_level = median(loss.extra["level"].medians)
        k = int(min(max(round(math.exp(min(loss_level, 12.0))), lo), hi))
        if best <= 1.0 / k + max(CHANCE_ACC_MARGIN, CHANCE_ACC_SHARE / k):
            return {"accuracy_tag": tag, "accuracy_best": best, "classes": k}
    return None


def _chance(data: RunData, tag: str) -> dict | None:
    feats = data.features[tag]
    end, start = feats.extra.get("end_level"), feats.extra.get("start_level")
    if end is None or start is None or feats.points < 2 * MIN_CONFIDENT_POINTS:
        return None
    # (The loss's typical level, and the lowest smoothed level, only where they are read: the same verdict.)
    accuracies = _accuracies(data)
    accuracy = _accuracy_at_chance(data, feats) if accuracies else None
    if accuracies:
        # The accuracy names the class count; the loss must agree that the model sits at a uniform guess
        # (a training loss may dip a little below ln K by memorising labels that carry no signal).
        if accuracy is None:
            return None
        k = accuracy["classes"]
        chance_loss = math.log(k)
        if abs(end - chance_loss) > CHANCE_MEMORISED * chance_loss:
            return None
        lowest = float(np.min(smoothed_level(feats)[1]))
        if lowest < (1.0 - CHANCE_MEMORISED) * chance_loss:
            return None
    else:
        k = chance_classes(end, LOSS_ALONE_MAX_CLASSES)
        if k is None:
            return None
        chance_loss = math.log(k)
        if abs(start - chance_loss) > CHANCE_START * chance_loss:
            return None
        lowest = float(np.min(smoothed_level(feats)[1]))
        if lowest < (1.0 - CHANCE_FLOOR) * chance_loss:
            return None
    out = {"tag": tag, "classes": k, "chance_loss": chance_loss, "start": start, "end": end, "lowest": lowest}
    if accuracy:
        out.update(accuracy_tag=accuracy["accuracy_tag"], accuracy_best=accuracy["accuracy_best"])
    return out


def _untrained_classes(loss: float, typical: float) -> list[tuple[int, float]]:
    """(K, the untrained loss for K): per unit, nats (ln K) or bits (log2 K, as fairseq logs it), the class count
    whose uniform-guess loss is within CHANCE_START of `loss` and whose chance 1/K lies nearest an accuracy's
    `typical` level; the nearer of the two first. (Within CHANCE_START is a range of K: ln and log2 are monotone.)"""
    if not 0.5 < loss < 12.0 or typical <= 0:  # ln 2 .. ln 160000: the class counts anyone trains on
        return []
    found = []
    for log, base in ((math.log, math.e), (math.log2, 2.0)):
        lo = max(2, math.ceil(base ** ((1 - CHANCE_START) * loss)))
        hi = min(MAX_CLASSES, math.floor(base ** ((1 + CHANCE_START) * loss)))
        if lo <= hi:
            k = min(max(round(1.0 / typical), lo), hi)
            found.append((k, log(k)))
    return sorted(found, key=lambda pair: abs(1.0 / pair[0] - typical))


def _memorised(data: RunData) -> dict | None:
    """A held-out accuracy at chance while the held-out loss, which started at a uniform guess's, never improved
    (see the module docstring). The accuracies are judged first, most of them from their best alone: the loss
    curves' smoothed levels are read only for one at chance."""
    val = data.primary.val_loss
    if val is None or adversarial(val) or "level" not in data.features[val].extra:
        return None
    losses = data.finite(val)[1]
    first = float(losses[0]) if losses.size else 0.0
    if first <= 0:
        return None
    for tag in _accuracies(data):
        top = data.features[tag].best
        if data.phases.get(tag) != "val" or top is None or _as_fraction(top) > _CHANCE_ACC_MOST:
            continue
        values = data.finite(tag)[1]
        if values.size < MIN_EVALS:
            continue
        if 2 * np.unique(values).size < values.size:  # one output for every input: a collapse, not memorising
            continue
        fractions = values / 100.0 if values.max() > 1.0 else values
        best, typical = float(fractions.max()), median(fractions)
        recent = median(fractions[-max(2, fractions.size // 3) :])
        # A class count the held-out loss started at (a uniform guess's loss), under which the accuracy never beat
        # chance by more than the scatter of a validation set (the bar `_accuracy_at_chance` uses), and did not
        # climb past chance: an accuracy rising beyond its typical level and above 1/K is a slow learner, while one
        # rising from below chance (an unbalanced set, a model that first favoured a rare class) up to chance has
        # learned nothing of the inputs.
        climbing = recent > typical + CHANCE_ACC_MARGIN
        chance = next(
            (
                (k, untrained)
                for k, untrained in _untrained_classes(first, typical)
                if best <= 1.0 / k + max(CHANCE_ACC_MARGIN, CHANCE_ACC_SHARE / k)
                and not (climbing and recent > 1.0 / k + CHANCE_ACC_MARGIN)
            ),
            None,
        )
        if chance is None:
            continue
        train = data.primary.train_loss
        if train is not None:
            extra = data.features[train].extra
            start, end = extra.get("start_level"), extra.get("end_level")
            if start is None or end is None or start <= 0 or end > start:
                return None  # no training curve to read, or it got worse: divergence's or oscillation's story
            if (start - float(np.min(smoothed_level(data.features[train])[1]))) / start < LEARNED:
                return None  # the training loss did not move either: `flat`'s story, not memorising
        feats = data.features[val]
        lowest = float(np.min(smoothed_level(feats)[1]))
        if lowest < (1.0 - HELD_OUT_GAIN) * first:
            return None
        return {
            "tag": tag,
            "classes": chance[0],
            "chance_loss": chance[1],
            "accuracy_best": best,
            "evaluations": int(values.size),
            "loss_tag": val,
            "loss_first": first,
            "loss_lowest": lowest,
            "loss_end": feats.extra["end_level"],
        }
    return None


def _loss_curves(data: RunData, tag: str) -> list[tuple[str, SeriesFeatures]]:
    """(label, features) of the main loss and its validation loss (this run's, or a Keras validation sibling's)."""
    out = [(tag, data.features[tag])]
    val = data.primary.val_loss
    if val and val != tag and not adversarial(val):
        out.append((val, data.features[val]))
    elif tag in data.sibling_val:
        external = data.sibling_val[tag]
        out.append((f"{external.run}:{external.tag}", external.features))
    return [(label, feats) for label, feats in out if "level" in feats.extra]


def _prior(data: RunData, tag: str) -> dict | None:
    """The loss started at ln K and no loss curve of the run fell more than PRIOR_GAIN below it or is still falling
    steadily, and no accuracy typically beats PRIOR_ACC_CLASSES/K: the model learned at most the class frequencies."""
    feats = data.features[tag]
    start = feats.extra.get("start_level")
    if start is None or feats.points < MIN_CONFIDENT_POINTS or judgeable(data, tag, MIN_CONFIDENT_POINTS) is None:
        return None
    k = chance_classes(start, LOSS_ALONE_MAX_CLASSES)
    if k is None:
        return None
    chance_loss = math.log(k)
    judged, gain = None, 0.0
    for label, curve in _loss_curves(data, tag):
        lowest = float(np.min(smoothed_level(curve)[1]))
        if lowest < (1.0 - PRIOR_GAIN) * chance_loss:
            return None
        level = curve.extra["level"]
        found = pace(level.steps.astype(np.float64), level.medians)  # after the cheap test: the same verdict
        if found is not None and crawls(found):
            return None
        judged = (label, curve, lowest)  # the validation curve, when there is one, is the one quoted
        gain = max(gain, 1.0 - lowest / chance_loss)
    for accuracy in _accuracies(data):
        values = data.finite(accuracy)[1]
        fractions = values / 100.0 if values.size and values.max() > 1.0 else values
        if fractions.size and median(fractions[fractions.size // 2 :]) >= PRIOR_ACC_CLASSES / k:
            return None
    assert judged is not None  # the main loss itself is always a judged curve
    label, curve, lowest = judged
    return {
        "tag": label,
        "classes": k,
        "chance_loss": chance_loss,
        "start": start,
        "end": curve.extra["end_level"],
        "lowest": lowest,
        "prior": True,
        "gain": gain,
    }


def _identical(data: RunData) -> list[tuple[str, float, int]]:
    """(tag, value, evaluations) of validation losses and metrics that never changed."""
    out = []
    for tag in data.tags("val_loss", "metric", "train_loss"):
        feats = data.features[tag]
        if feats.role == "metric" and (feats.direction == 0 or adversarial(tag)):
            continue
        if feats.role == "train_loss" and feats.points < MIN_EVALS:
            continue
        values = data.finite(tag)[1]
        if values.size < MIN_EVALS:
            continue
        value = float(values[0])
        tolerance = IDENTICAL_RTOL * max(abs(value), 1e-30)
        # The last value's distance from the first is at most the whole range: most curves are told by it alone.
        if abs(float(values[-1]) - value) > tolerance or float(np.ptp(values)) > tolerance:
            continue
        perfect = (feats.direction > 0 and _as_fraction(value) == 1.0) or (feats.direction < 0 and value == 0.0)
        if feats.role == "val_loss" or feats.role == "train_loss":
            perfect = value == 0.0
        if not perfect:
            out.append((tag, value, int(values.size)))
    return out


def judgeable(
    data: RunData, tag: str, min_points: int = 2 * MIN_CONFIDENT_POINTS
) -> tuple[np.ndarray, np.ndarray] | None:
    """The finite (steps, values) of a loss that can be judged for how far it fell: at least `min_points`, not
    resumed from a checkpoint midway, and past its lr warmup; None otherwise."""
    steps, values = data.finite(tag)
    if values.size < min_points or steps[-1] <= steps[0]:
        return None
    if steps[0] > RESUMED_FRAC * steps[-1] or still_warming_up(data):
        return None
    return steps, values


def _flat(data: RunData, tag: str) -> dict | None:
    found = judgeable(data, tag, MIN_CONFIDENT_POINTS)
    if found is None:
        return None
    steps, values = found
    n = values.size
    feats = data.features[tag]
    start, end = feats.extra["start_level"], feats.extra["end_level"]
    scale = abs(start) if start > 0 else feats.extra["scale"]
    drop = (start - end) / scale
    if abs(drop) >= NO_DROP:  # before the lowest smoothed level (a running median): the same verdict
        return None
    dipped = (start - float(np.min(smoothed_level(feats)[1]))) / scale
    if dipped >= LEARNED:
        return None
    return {"tag": tag, "start": start, "end": end, "drop": drop, "span": int(steps[-1] - steps[0]), "points": n}


def _lr_max(data: RunData) -> float | None:
    if data.primary.lr is None:
        return None
    lr = data.finite(data.primary.lr)[1]
    return float(lr.max()) if lr.size else None


def detect(data: RunData) -> list:
    if any(data.features[t].first_nonfinite_step is not None for t in data.tags("train_loss", "val_loss")):
        return []  # a loss that is NaN/Inf is divergence's story; a metric frozen by it is a consequence
    loss = main_loss(data)
    chance = _chance(data, loss) if loss else None
    identical = _identical(data)
    if chance is None and loss is not None and data.features[loss].role == "train_loss":
        val = data.primary.val_loss
        chance = _chance(data, val) if val and not adversarial(val) else None
    if chance is None and loss is not None:
        chance = _prior(data, loss)
    flat = _flat(data, loss) if loss else None
    memorised = _memorised(data) if not chance else None
    if not (chance or identical or flat or memorised):
        return []
    lr_max = _lr_max(data)
    lr_text = f" (lr never above {fmt(lr_max)})" if lr_max is not None and lr_max <= LR_ZERO else ""
    parts, tags = [], []
    evidence: dict = {}
    if chance and chance.get("prior"):
        k = chance["classes"]
        parts.append(
            f"{chance['tag']} started at ln({k}) = {fmt(chance['chance_loss'])}, the loss of a uniform guess over {k} "
            f"classes, never fell more than {PRIOR_GAIN:.0%} below it (lowest {fmt(chance['lowest'])}, ended at "
            f"{fmt(chance['end'])}) and stopped falling"
        )
        tags.append(chance["tag"] if chance["tag"] in data.features else loss)
        evidence.update(
            chance_classes=k, chance_loss=chance["chance_loss"], level=chance["end"], prior_gain=chance["gain"]
        )
    elif chance:
        k = chance["classes"]
        text = (
            f"{chance['tag']} stayed near ln({k}) = {fmt(chance['chance_loss'])}, the loss of a uniform guess over "
            f"{k} classes (ended at {fmt(chance['end'])}, lowest {fmt(chance['lowest'])})"
        )
        if "accuracy_tag" in chance:
            text += f", and {chance['accuracy_tag']} never beat {fmt(chance['accuracy_best'])} (chance: {fmt(1 / k)})"
        parts.append(text)
        tags += [chance["tag"], chance.get("accuracy_tag")]
        evidence.update(chance_classes=k, chance_loss=chance["chance_loss"], level=chance["end"])
        if "accuracy_tag" in chance:
            evidence["accuracy_best"] = chance["accuracy_best"]
    if identical:
        tag, value, count = identical[0]
        others = f" (also {', '.join(t for t, _, _ in identical[1:4])})" if len(identical) > 1 else ""
        what = "logged points" if data.features[tag].role == "train_loss" else "evaluations"
        parts.append(f"{tag} was {fmt(value)} at every one of its {count} {what}{others}")
        tags += [t for t, _, _ in identical[:5]]
        evidence.update(identical_tag=tag, identical_value=value, evaluations=count)
    if memorised:
        m = memorised
        parts.append(
            f"{m['loss_tag']} started at {fmt(m['loss_first'])}, a uniform guess's over {m['classes']} classes "
            f"({fmt(m['chance_loss'])}), and never fell below it (lowest {fmt(m['loss_lowest'])}, ended at "
            f"{fmt(m['loss_end'])}); {m['tag']} never beat {fmt(m['accuracy_best'])} in {m['evaluations']} "
            f"evaluations (chance: {fmt(1 / m['classes'])})"
        )
        tags += [m["tag"], m["loss_tag"]]
        evidence.update(
            chance_classes=m["classes"],
            chance_loss=m["chance_loss"],
            accuracy_best=m["accuracy_best"],
            evaluations=m["evaluations"],
        )
    if flat:
        parts.append(
            f"{flat['tag']} {fmt(flat['start'])} → {fmt(flat['end'])} ({pct(-flat['drop'])}) over {flat['span']} steps"
        )
        tags.append(flat["tag"])
        evidence.update(start_level=flat["start"], end_level=flat["end"], relative_drop=flat["drop"])
    if lr_max is not None:
        evidence["lr_max"] = lr_max
    signals = (
        ("prior" if chance and chance.get("prior") else "chance", chance),
        ("identical", identical),
        ("memorised", memorised),
        ("flat", flat),
    )
    evidence["signals"] = [name for name, hit in signals if hit]
    evidence["summary"] = "; ".join(parts) + lr_text
    if chance and chance.get("prior") and not flat:
        k = chance["classes"]
        message = (
            f"{chance['tag']} stayed within {PRIOR_GAIN:.0%} of chance level ln({k}) = {fmt(chance['chance_loss'])} "
            "and stopped falling: the model learned at most how often each class occurs, nothing from its inputs"
        )
        suggestion = (
            "A loss that settles just under ln(K) while the weights move usually means the labels do not match the "
            "inputs (shuffled or indexed separately, the wrong label column, augmentations applied to inputs only "
            "out of step with labels) or the loss is computed on the wrong tensor: check one batch's inputs against "
            "its labels, then overfit a single batch to prove the model can learn"
        )
    elif chance and not chance.get("prior"):
        k = chance["classes"]
        message = (
            f"{chance['tag']} never left chance level ln({k}) = {fmt(chance['chance_loss'])}: the model learned nothing"
        )
        suggestion = (
            "A loss pinned at ln(K) with chance accuracy usually means the labels do not match the inputs (shuffled "
            "or indexed separately, the wrong label column), the loss is computed on the wrong tensor, or the "
            "weights never move (lr ~0, frozen parameters, an optimizer built before unfreezing): check one batch's "
            "inputs against its labels, then overfit a single batch to prove the model can learn"
        )
    elif identical:
        tag, value, count = identical[0]
        if data.features[tag].role == "train_loss":
            message = f"{tag} was identical ({fmt(value)}) at all {count} logged points: the weights never moved"
        else:
            message = (
                f"{tag} was identical ({fmt(value)}) at all {count} evaluations: the evaluated model never changed"
            )
        suggestion = (
            "The evaluated model's output never changed: check that the optimizer steps the parameters that are "
            "evaluated (requires_grad, param groups, lr not ~0), that evaluation does not load a stale checkpoint "
            "or copy, and whether the model collapsed to a constant output (dead activations, a saturated last layer)"
        )
    elif memorised:
        m = memorised
        message = (
            f"{m['loss_tag']} never improved on its first evaluation, a uniform guess's over {m['classes']} classes, "
            f"and {m['tag']} never beat {fmt(m['accuracy_best'])} in {m['evaluations']} evaluations: nothing the "
            "model learns carries over to data it has not seen"
        )
        suggestion = (
            "A held-out accuracy at chance while training goes on usually means the labels do not match the inputs "
            "(shuffled or indexed separately, the wrong label column, a split whose labels were permuted): the "
            "model can only memorise the training labels, so its training loss may still fall. Check one batch's "
            "inputs against its labels, then overfit a single batch to prove the model can learn"
        )
    else:
        assert flat is not None  # the four signals: chance, identical, memorised, or a flat loss
        message = (
            f"{flat['tag']} has not moved in {flat['span']} steps ({fmt(flat['start'])} → {fmt(flat['end'])}): "
            "the model is not learning"
        )
        suggestion = (
            "Check that the optimizer holds the model's parameters and the loss is not detached (requires_grad, "
            "zero_grad/step order), that the lr is not ~0, and the initialisation and input normalisation; then "
            "raise the lr ×10 with an lr range test"
        )
    message += lr_text
    first, last = data.first_step, data.last_step
    points = max([data.features[t].points for t in tags if t] or [0])
    needed = MIN_EVALS if (identical or memorised) and not (chance or flat) else MIN_CONFIDENT_POINTS
    severity = confident("warning", points, needed)
    return [finding(data, "no_learning", severity, [t for t in tags if t], first, last, evidence, message, suggestion)]


def _line(x: np.ndarray, y: np.ndarray, mask: np.ndarray | slice) -> tuple[float, np.ndarray | None, float]:
    """`slope`'s least-squares line before its standard error: (slope, residuals, sum of squared centred x);
    (0.0, None, 0.0) when there is no line (fewer than 3 points, or one x)."""
    x, y = x[mask].astype(np.float64, copy=False), y[mask]
    if x.size < 3:
        return 0.0, None, 0.0
    # Means as np.mean takes them (the sum over the count) without its set-up, three times its sum's cost.
    x = x - np.add.reduce(x) / x.size
    denominator = float((x * x).sum())
    if denominator <= 0:
        return 0.0, None, 0.0
    centred = y - np.add.reduce(y) / y.size
    rate = float((x * centred).sum()) / denominator
    return rate, centred - rate * x, denominator


def _standard_error(residual: np.ndarray | None, denominator: float):
    """A `_line`'s slope's standard error, from the residuals' MAD (inf without a line)."""
    return float("inf") if residual is None else mad_sigma(residual) / np.sqrt(denominator)


#: Above the MAD of any values, as a multiple of their root mean square (see `_error_bound`), with room for rounding.
_MAD_BOUND = 3.0 * (1 + 1e-6)


def _error_bound(residual: np.ndarray | None, denominator: float) -> float:
    """At least `_standard_error`, without its MAD: at most a quarter of the residuals lie 2 sigma or more from
    their mean (Chebyshev; sigma at most their root mean square), their median lies within 1 sigma of that mean,
    so three quarters of them lie within 3 sigma of the median, and the median of those distances is below it."""
    if residual is None:
        return float("inf")
    rms = math.sqrt(float(np.dot(residual, residual)) / residual.size)
    return MAD_TO_SIGMA * _MAD_BOUND * rms / math.sqrt(denominator)


def slope(x: np.ndarray, y: np.ndarray, mask: np.ndarray | slice) -> tuple[float, float]:
    """Least-squares slope of y on x over `mask` (a boolean mask or a slice), and its standard error (from the
    residuals' MAD)."""
    rate, residual, denominator = _line(x, y, mask)
    return rate, _standard_error(residual, denominator)


class Pace:
    """`pace` measured in two parts: the lines and levels first, their standard errors (two MADs, the costlier
    part) when asked for. `surely_levelled_off` tells many healthy curves from bounds on the errors alone."""

    def __init__(self, steps: np.ndarray, medians: np.ndarray) -> None:
        span = float(steps[-1] - steps[0])
        quarter = QUARTER * span
        # The steps ascend: the first quarter is a prefix, the last a suffix (slices: no masks, no copies).
        self.first = _line(steps, medians, slice(0, int(np.searchsorted(steps, steps[0] + quarter, "right"))))
        self.last = _line(steps, medians, slice(int(np.searchsorted(steps, steps[-1] - quarter, "left")), None))
        edge = max(2, medians.size // 20)
        self.start, self.end = median(medians[:edge]), median(medians[-edge:])
        self.mean = (self.start - self.end) / span

    def surely_levelled_off(self) -> bool:
        """`levelled_off` of this curve, judged with upper bounds of the standard errors: True only where it is
        True with the errors themselves (it holds for any smaller errors)."""
        (first, first_residual, first_sxx), (last, last_residual, last_sxx) = self.first, self.last
        bounds = {
            "first": -first,
            "first_error": _error_bound(first_residual, first_sxx),
            "last": -last,
            "last_error": _error_bound(last_residual, last_sxx),
        }
        return levelled_off(bounds)

    def measured(self) -> dict[str, float]:
        """What `pace` returns."""
        (first, first_residual, first_sxx), (last, last_residual, last_sxx) = self.first, self.last
        return {
            "first": -first,
            "first_error": _standard_error(first_residual, first_sxx),
            "last": -last,
            "last_error": _standard_error(last_residual, last_sxx),
            "mean": self.mean,
            "start": self.start,
            "end": self.end,
        }


def pace_lines(steps: np.ndarray, medians: np.ndarray) -> Pace | None:
    """`pace` before its standard errors; None for too few points."""
    if medians.size < MIN_PACE_POINTS or steps[-1] <= steps[0]:
        return None
    return Pace(steps, medians)


def pace(steps: np.ndarray, medians: np.ndarray) -> dict[str, float] | None:
    """How fast a curve fell in its first and last quarter and on average (level units per step, positive when
    falling), with the slopes' standard errors; None for too few points."""
    lines = pace_lines(steps, medians)
    return None if lines is None else lines.measured()


def crawls(curve: dict[str, float]) -> bool:
    """A straight, slow fall: falling in both quarters (beyond SLOPE_K standard errors), the last quarter still at
    END_PACE of the first's pace, and no fast early phase (the first quarter at most FAST_START × the average)."""
    first, last = curve["first"], curve["last"]
    return (
        curve["mean"] > 0
        and first > SLOPE_K * curve["first_error"]
        and last > SLOPE_K * curve["last_error"]
        and last >= END_PACE * first
        and first <= FAST_START * curve["mean"]
    )


def levelled_off(curve: dict[str, float]) -> bool:
    """The healthy shape: a clear early fall whose pace the last quarter has mostly lost."""
    first, last = curve["first"], curve["last"]
    return (
        first > SLOPE_K * curve["first_error"]
        and last < LEVELLED_PACE * first
        and first - last > SLOPE_K * math.hypot(curve["first_error"], curve["last_error"])
    )


def after_warmup(data: RunData) -> int | None:
    """The first step at which a rising lr reached WARMED_UP of its peak (None when the lr does not rise first):
    during a warmup the loss is meant to fall slowly, so the pace is judged from there."""
    if data.primary.lr is None:
        return None
    steps, lr = data.finite(data.primary.lr)
    if lr.size < 3 or lr.max() <= 0 or lr[0] >= WARMED_UP * lr.max():
        return None
    return int(steps[int(np.argmax(lr >= WARMED_UP * lr.max()))])


def paced_curves(data: RunData, tag: str) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(label, bucket steps, bucket medians) of the curves judged for pace: the main loss and its validation
    loss (this run's, or a Keras validation sibling's), from the end of any lr warmup; one at a time (a judge
    that has seen enough in the first stops there)."""
    begin = after_warmup(data)
    for label, feats in _loss_curves(data, tag):
        level = feats.extra["level"]
        # The bucket steps ascend: the buckets from the warmup's end on are the ones after a searchsorted.
        keep = 0 if begin is None else int(np.searchsorted(level.steps, begin))
        yield label, level.steps[keep:].astype(np.float64), level.medians[keep:]
