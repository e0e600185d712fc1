"""Step axes: which of a run's tags count global (optimizer) steps and which count epochs, and how many steps an
epoch holds when the run says so.

Keras's TensorBoard callback writes `epoch_*` at step = epoch index and, with `update_freq=N`, `batch_*` (train
run) or `evaluation_*_vs_iterations` (validation run) at the global step; ultralytics, YOLOv5 and timm's summary
write every tag once per epoch at step = epoch. A finding is stated on one axis:

- in global steps whenever the run has them: a finding on an `epoch_*` tag of a run that also counts global steps
  has its epoch index turned into the epoch's first global step, and `evidence["epoch"]` (the epoch the step falls
  in, 0-based like the chart's axis) is added to every finding of such a run; the message says "epoch N (step S)";
- in epochs when the run has no global step at all: `evidence["axis"] == "epoch"` and the message says "epoch N".

A Keras `batch_*` tag is the running mean of the epoch so far; the detectors read it as the mean of each logged
stretch of batches (`keras_batch_means`), where the run shows it is one.

Only the run's own tags decide (a validation run has its own `evaluation_*_vs_iterations`), so a finding's onset
never depends on which other runs were loaded with it. A chart of an epoch-indexed series places a finding at
`series_step` (its epoch), any other series at its global step.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .datamodel import Finding, Run

#: A Keras per-epoch tag.
KERAS_EPOCH_PREFIX = "epoch_"
#: Tags that only frameworks logging once per epoch at step = epoch write: ultralytics's optimizer param-group
#: lrs (`lr/pg0`), YOLOv5's (`x/lr0`) and timm's summary top-k accuracy (`eval_top1`).
_PER_EPOCH_SIGNATURE = re.compile(r"^(lr/pg\d+|x/lr\d+|eval_top[15])$")


@dataclass(frozen=True)
class StepAxes:
    """One run's step axes."""

    tags: frozenset[str]  # every tag of the run with a point
    epoch_tags: frozenset[str]  # ... of those, the ones whose step is an epoch index
    steps_per_epoch: int | None  # known when the run logs one quantity per epoch and per global step
    last_epoch: int = 0  # the highest epoch index an epoch tag reaches

    def lead_on_epochs(self, tags) -> bool:
        """Whether a finding on `tags` counts epochs: its lead tag (the first this run logs; a sibling's tag a
        finding also names does not decide) is indexed by epoch."""
        lead = next((t for t in tags if t in self.tags), None)
        return lead is not None and lead in self.epoch_tags


def keras_epoch_tag(tag: str, steps: np.ndarray) -> bool:
    """An `epoch_*` tag at consecutive epoch indices (Keras; `initial_epoch` may start it above 0)."""
    if not tag.startswith(KERAS_EPOCH_PREFIX) or not steps.size:
        return False
    return bool(steps[0] >= 0 and np.all(np.diff(steps) == 1))


def keras_steps_per_epoch(run: Run) -> int | None:
    """Steps per epoch of a Keras run that logs one quantity on both axes: `epoch_loss` per epoch beside
    `batch_loss` (or `evaluation_loss_vs_iterations`) per global step. None when it does not."""
    for tag, series in run.scalars.items():
        if not tag.startswith(KERAS_EPOCH_PREFIX) or not len(series):
            continue
        quantity = tag[len(KERAS_EPOCH_PREFIX) :]
        for twin in (f"batch_{quantity}", f"evaluation_{quantity}_vs_iterations"):
            other = run.scalars.get(twin)
            if other is not None and len(other):
                per_epoch = round((int(other.steps[-1]) + 1) / (int(series.steps[-1]) + 1))
                if per_epoch > 1:
                    return per_epoch
    return None


#: A Keras per-batch tag: what `fit` passes to `on_train_batch_end`, the running mean of the epoch so far (its
#: stateful loss and metric means are reset at each epoch's start; TF >= 2.2, Keras 3), written at step = the
#: number of batches trained so far, every `update_freq` of them.
KERAS_BATCH_PREFIX = "batch_"
#: A running mean written at an epoch's last batch is that epoch's `epoch_*` value, to float32 rounding.
_SAME_VALUE = 1e-5


#: What a finding on such a tag says of its numbers (`evidence["values_from"]`): the chart shows the logged means.
KERAS_STRETCH_NOTE = (
    "means of each logged stretch of batches, recovered from Keras's running epoch mean (the chart shows the "
    "running mean as logged)"
)


def keras_batch_means(run: Run) -> Run:
    """`run` with each Keras `batch_<q>` tag's running epoch means turned back into what each logged stretch
    of batches averaged: after k_0 batches of an epoch the mean is m_0, after k_1 it is m_1, so the batches in
    between averaged (k_1·m_1 − k_0·m_0) / (k_1 − k_0) (the epoch's first logged point: its own m). A spike on
    one batch is diluted k-fold in the running mean; in the recovered values it is only shared with the other
    batches of its stretch, wherever in the epoch it fell.

    Only where the run proves the tag is a running mean: `epoch_<q>` beside it gives the epoch length, and at
    every epoch end the tag logged, its value is that epoch's `epoch_<q>` (a tag of per-batch values would
    hold its last batch there). The run itself is not changed; a run with nothing to recover is returned."""
    spe = keras_steps_per_epoch(run)
    if spe is None:
        return run
    recovered = {}
    for tag, series in run.scalars.items():
        epochs = run.scalars.get(KERAS_EPOCH_PREFIX + tag[len(KERAS_BATCH_PREFIX) :])
        if not tag.startswith(KERAS_BATCH_PREFIX) or epochs is None or len(series) < 2:
            continue
        values = _stretch_means(series.steps, series.values, spe, epochs.steps, epochs.values)
        if values is not None:
            recovered[tag] = replace(series, values=values)
    return replace(run, scalars={**run.scalars, **recovered}) if recovered else run


def _stretch_means(
    steps: np.ndarray, means: np.ndarray, spe: int, epoch_steps: np.ndarray, epoch_values: np.ndarray
) -> np.ndarray | None:
    """The mean of each logged stretch of batches from a running epoch mean logged at batch counts `steps`
    (1-based), or None when the series is not shown to be one (see `keras_batch_means`)."""
    if steps[0] < 1 or np.any(np.diff(steps) <= 0):
        return None
    epoch = (steps - 1) // spe
    done = steps - epoch * spe  # batches of its epoch the mean covers
    ends = np.flatnonzero(done == spe)
    at = np.searchsorted(epoch_steps, epoch[ends])
    known = at < epoch_steps.size
    ends, at = ends[known], at[known]
    known = epoch_steps[at] == epoch[ends]
    ends, at = ends[known], at[known]
    expected, logged = epoch_values[at], means[ends]
    if not ends.size or not np.all(np.abs(logged - expected) <= _SAME_VALUE * np.maximum(np.abs(expected), 1e-12)):
        return None
    same_epoch = np.r_[False, epoch[1:] == epoch[:-1]]
    before, prior = np.r_[0, done[:-1]], np.r_[np.nan, means[:-1]]
    with np.errstate(all="ignore"):
        stretch = (done * means - before * prior) / (done - before)
    return np.where(same_epoch, stretch, means)


def step_axes(run: Run) -> StepAxes:
    """The step axis of each of `run`'s tags, from the run alone."""
    tags = frozenset(t for t, s in run.scalars.items() if len(s))
    if any(_PER_EPOCH_SIGNATURE.match(t) for t in tags):
        return StepAxes(tags, tags, None)
    keras = frozenset(t for t in tags if keras_epoch_tag(t, run.scalars[t].steps))
    if keras == tags:
        return StepAxes(tags, keras, None)  # Keras with update_freq="epoch": no global step anywhere
    spe = keras_steps_per_epoch(run) if keras else None
    return StepAxes(tags, keras, spe, max((int(run.scalars[t].steps[-1]) for t in keras), default=0))


# ---- stating a finding on its run's axes -----------------------------------------------------------------

#: "step 5", "steps 5 and 9", "from step 3 to 9": a step number is whole (not "5.5", "12%", "3k").
_STEP_WORD = re.compile(r"\b(steps?) (\d+(?!\.\d|[\w%]))((?:(?:, | and | to |–)\d+(?!\.\d|[\w%]))*)")
_COUNT = re.compile(r"(?<![~\d.])\b(\d+) steps?\b")
_NUMBER = re.compile(r"\d+")


def _epochs(count: str) -> str:
    return f"{count} epoch" if count == "1" else f"{count} epochs"


def _in_epochs(text: str) -> str:
    """`text` of a finding on epoch indices of a run without global steps: step N is epoch N."""
    text = _STEP_WORD.sub(lambda m: ("epochs " if m[1] == "steps" else "epoch ") + m[2] + m[3], text)
    # "~100 steps" is advice in optimizer steps (a warmup length), not a span of this run: left alone.
    return _COUNT.sub(lambda m: _epochs(m[1]), text)


def _with_epochs(text: str, epoch_of, step_of) -> str:
    """`text` with each "step N" said as "epoch E (step S)"."""

    def phrase(m: re.Match) -> str:
        numbers = [int(n) for n in _NUMBER.findall(m[2] + m[3])]
        if len(numbers) == 1:
            return f"epoch {epoch_of(numbers[0])} (step {step_of(numbers[0])})"
        joins = re.findall(r", | and | to |–", m[3])
        epochs = str(epoch_of(numbers[0])) + "".join(j + str(epoch_of(n)) for j, n in zip(joins, numbers[1:]))
        steps = str(step_of(numbers[0])) + "".join(j + str(step_of(n)) for j, n in zip(joins, numbers[1:]))
        return f"epochs {epochs} (steps {steps})"

    return _STEP_WORD.sub(phrase, text)


def restate(finding: Finding, axes: StepAxes) -> Finding:
    """`finding` stated on its run's axes (see the module docstring); unchanged where there is nothing to say.
    Its message, suggestion and the reasons its causes give ("the trouble began at step 29") are all restated.

    A detector states a finding on its lead tag's axis; a number beyond the last epoch index is a global step
    already (a finding on `epoch_loss` may end at the run's last global step)."""
    if finding.step is None:
        return finding
    spe = axes.steps_per_epoch
    on_epochs = axes.lead_on_epochs(finding.tags)
    evidence = dict(finding.evidence)
    if on_epochs and not spe:
        evidence["axis"] = "epoch"
        return _said(replace(finding, evidence=evidence), _in_epochs)
    if not spe:
        return finding

    def is_epoch(n: int) -> bool:
        return on_epochs and n <= axes.last_epoch

    def epoch_of(n: int) -> int:
        return n if is_epoch(n) else n // spe

    def step_of(n: int, end: bool = False) -> int:
        # An epoch spans its steps: it starts at its first, and a span of epochs ends at the last one's last.
        return ((n + 1) * spe - 1 if end else n * spe) if is_epoch(n) else n

    def say(text: str) -> str:
        if on_epochs:  # a span counted on the lead tag's epoch axis ("in 19 steps") is in epochs
            text = _COUNT.sub(lambda m: _epochs(m[1]), text)
        return _with_epochs(text, epoch_of, step_of)

    evidence["epoch"] = epoch_of(finding.step)
    end = None
    if finding.end_step is not None:
        evidence["end_epoch"] = epoch_of(finding.end_step)
        end = step_of(finding.end_step, end=True)
    evidence["steps_per_epoch"] = spe
    return _said(replace(finding, step=step_of(finding.step), end_step=end, evidence=evidence), say)


def _said(finding: Finding, say: Callable[[str], str]) -> Finding:
    """`finding` with `say` applied to every sentence about its steps."""
    causes = tuple(
        replace(
            cause,
            evidence={
                k: [say(x) if isinstance(x, str) else x for x in v]
                if k in ("for", "against") and isinstance(v, list)
                else v
                for k, v in cause.evidence.items()
            },
        )
        for cause in finding.causes
    )
    return replace(finding, message=say(finding.message), suggestion=say(finding.suggestion), causes=causes)


def series_step(finding: Finding, tag: str, steps: np.ndarray, end: bool = False) -> int | None:
    """Where `finding` (its step, or its end step) falls on the series `tag` (logged at `steps`): its epoch on a
    Keras epoch-indexed series when the finding states global steps, else its step."""
    step = finding.end_step if end else finding.step
    if step is None:
        return None
    epoch = finding.evidence.get("end_epoch" if end else "epoch")
    if isinstance(epoch, int) and keras_epoch_tag(tag, steps):
        return epoch
    return step
