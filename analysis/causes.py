"""Why a finding happened: candidate causes ranked by the evidence in the run itself, no model needed.

The rules say *what* happened (`detectors/`); this module says *why*, the way a person would work it out:

1. **Which signal moved first** around the onset: each of lr, grad norm, the finding's own series, the
   validation loss, the AMP loss scale and weight norms is read against the range it held before the
   trouble; the steps where each left it, in order, are the chain ("lr rose every step since 0 (×200 by step
   2000); the grad norm left its range at 1992; the loss went NaN at 2097").
2. **The learning-rate trajectory** at the onset: still rising with no cap, at its peak right after a short or
   missing warmup, stuck at zero, tiny.
3. **The hyperparameters the run logged** (warmup, clipping, weight decay, optimizer, precision) as evidence
   for or against each cause.

`CAUSES` is the cause library: data, one row per cause (what it is, what to try); the finding registry
(`findings.KINDS`) names, for each kind, the causes that can explain it and the prior each starts from. Each candidate's confidence comes from its evidence (a prior for the finding kind plus the weight of
each fact found for or against it), never a constant; when no candidate has evidence beyond its prior, the
answer is `unclear`, with the candidates that remain, rather than a guess.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .datamodel import Finding
from .detectors.base import RunData, fmt, num
from .detectors.gradients import LAYER_RATIO
from .findings import KINDS
from .smoothing import median, running_median

# ---- the cause library ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CauseRow:
    """One entry of the cause library: what the cause is and the concrete change to try."""

    id: str
    summary: str
    fix: str
    #: Appended to `fix` only when the loss had fallen LEARNED_DROP before the finding's onset: there is a checkpoint
    #: worth going back to (a run that went wrong from its first steps is re-run from scratch).
    resume: str = ""


CAUSES: dict[str, CauseRow] = {
    row.id: row
    for row in (
        CauseRow("lr_too_high", "the learning rate is too high for this model and batch size",
                 "lower the peak learning rate 3-10x (or raise the batch size) and re-run",
                 " from the last good checkpoint"),
        CauseRow("lr_schedule_unbounded", "the learning-rate schedule keeps increasing with no cap",
                 "cap the schedule: warm up to a fixed peak, then hold or decay (check the scheduler's step count and max)"),
        CauseRow("no_warmup", "the full learning rate hit the untrained model at once (no or too short warmup)",
                 "add a linear warmup over the first 1-5% of steps (e.g. get_linear_schedule_with_warmup, warmup_steps>0)"),
        CauseRow("no_grad_clipping", "gradients are not clipped, so one large gradient moves the weights too far",
                 "clip the gradient norm (torch.nn.utils.clip_grad_norm_ / max_grad_norm) just above its healthy range"),
        CauseRow("lr_too_low", "the learning rate is too low: each step changes the model too little",
                 "raise the learning rate 3-10x (an lr range test finds the largest stable value)"),
        CauseRow("lr_zero_or_frozen", "the parameters are not being updated (lr of zero, frozen parameters or a "
                 "missing optimizer step)",
                 "check that lr > 0, requires_grad is on for the trained layers, and optimizer.step() runs"),
        CauseRow("labels_or_loss_bug", "the model is updated but cannot learn the target: labels misaligned with "
                 "inputs or the loss computed on the wrong tensor",
                 "check one batch by hand: inputs vs labels, the loss inputs, and that the model can overfit 10 samples"),
        CauseRow("bad_batch", "a few bad batches (outlier or corrupt samples) hit the model",
                 "find the samples at the spike steps (log batch indices), filter or fix them; clipping limits the damage"),
        CauseRow("data_order", "the data order repeats each epoch (no shuffling, or one bad shard read at the same "
                 "point every epoch)",
                 "shuffle every epoch (DataLoader(shuffle=True) / a shuffle buffer) and check the shard read at the "
                 "spike offset"),
        CauseRow("batch_too_small", "the batch is small for this learning rate, so the gradient is noisy",
                 "raise the batch size (or accumulate gradients) or lower the learning rate"),
        CauseRow("insufficient_regularization", "the model memorises a training set too small for it",
                 "add weight decay, dropout or data augmentation, use more data, or stop early at the best validation "
                 "step"),
        CauseRow("saturating_activations_or_init", "activations saturate or the init is too small, so gradients "
                 "shrink layer by layer",
                 "use ReLU/GELU with He/Xavier init, add normalisation layers or residual connections"),
        CauseRow("nan_in_inputs_or_loss", "the inputs or the loss give NaN from the first step (missing values "
                 "never imputed, log of 0, a division by zero)",
                 "check a batch for NaN/Inf (torch.isnan(x).any()), impute or drop the bad samples, guard log/div "
                 "with an epsilon; torch.autograd.set_detect_anomaly(True) names the operation"),
        CauseRow("fp16_overflow", "fp16 values overflow: the loss scaler keeps halving",
                 "train in bf16, or keep the overflowing ops (softmax, norms, the loss) in fp32; check the inputs' range"),
        CauseRow("slow_data_loader", "the input pipeline cannot feed the device",
                 "raise DataLoader num_workers, set pin_memory=True and persistent_workers=True, prefetch, or cache "
                 "decoded data"),
        CauseRow("unweighted_loss_sum", "the loss terms are summed without weights, so the largest one dominates",
                 "weight the terms so their gradients are comparable (normalise each loss, or learn the weights)"),
        CauseRow("no_weight_decay", "nothing restrains the weights' growth",
                 "add weight decay (AdamW, 0.01-0.1) or lower the learning rate late in training"),
        CauseRow("schedule_bug", "the learning-rate schedule does something it should not",
                 "check the scheduler's configuration and that it is stepped once per optimizer step"),
        CauseRow("resumed", "the run was restarted from a checkpoint into the same folder",
                 "nothing to fix if the restart was intended; otherwise write each attempt to its own run folder"),
        CauseRow("writer_crash", "the process writing the file stopped abruptly or the file was damaged in transit",
                 "check the job's exit status and logs around the last write; copy files again if they were synced"),
        CauseRow("process_stopped", "the training process stopped or hung while others continued",
                 "check whether the job is alive (scheduler, GPU utilisation) and its last log lines"),
    )
}  # fmt: skip

#: Candidate causes of each finding kind with their priors, as the finding registry lists them.
CANDIDATES: dict[str, dict[str, float]] = {kind.name: dict(kind.causes) for kind in KINDS if kind.causes}

#: When the best candidate's confidence is below this, its evidence does not single it out: say `unclear`.
UNCLEAR_BELOW = 0.5
#: Confidences stay inside (0, 1): the rules read curves, they never see the code that produced them.
CONFIDENCE_RANGE = (0.05, 0.95)
#: Kinds whose one library cause is the finding itself restated: their confidence is the prior plus what the
#: finding's own evidence shows, and they are never `unclear` (a restart is a restart).
SELF_EVIDENT = ("run_restart", "data_integrity", "stalled", "input_bottleneck", "task_imbalance", "amp_overflow")

# ---- thresholds the facts below are read with ------------------------------------------------------------

#: An lr that rose this many times above its first value and never stopped rising has no cap. (A warmup
#: also rises every step, but it stops at its peak: what tells them apart is that this one never stops.)
UNBOUNDED_LR_RATIO = 10.0
#: The lr must go on this share of the run past the onset to show that it never stopped rising.
SEEN_AFTER_SHARE = 0.03
#: Share of the lr's steps (up to the onset) on which it must not fall for "rose every step".
MONOTONE_SHARE = 0.97
#: A warmup shorter than this share of the run (or none) is "no warmup" for a model that fails early.
SHORT_WARMUP_SHARE = 0.01
#: An onset in the first share of the run is "early": where a missing warmup does its damage ...
EARLY_SHARE = 0.1
#: ... and in this first share, the very first updates, most of all.
VERY_EARLY_SHARE = 0.02
#: "At its peak": the lr within this factor of its maximum so far.
AT_PEAK = 0.9
#: Learning rates at or below this are effectively zero.
LR_ZERO = 1e-12
#: A signal "left its range" when it goes beyond the median ± this many robust sigmas of the stretch just
#: before the onset's window (the stretch is BASELINE_WINDOWS windows long: recent enough that early training's
#: fast fall does not widen the range).
RANGE_SIGMAS = 4.0
BASELINE_WINDOWS = 3
#: ... or changes by this factor, whichever is wider (noise-free series have sigma 0).
RANGE_FACTOR = 1.5
#: Points in the running median a signal is read through (odd; fewer when the baseline is short).
SMOOTH_POINTS = 5
#: Points of a signal needed before the onset to know its range.
MIN_BASELINE_POINTS = 8
#: A grad norm starting below this (and growing 100-fold later) starts at a saddle of a too-small init.
TINY_GRAD = 1e-6
#: A grad norm that leaps this many times its recent median within LEAP_POINTS points of the onset was one
#: uncapped gradient (the RNN signature clipping exists for); a drift over many steps is the lr's doing.
GRAD_LEAP = 100.0
LEAP_POINTS = 3
LEAP_BASELINE = 20
LEAP_MIN_BASELINE = 3
#: Dead units whose zero fraction rose by this much during training were killed by the updates...
DYING_RISE = 0.05
#: ... while this share dead from the first point is the init's (or the biases') doing.
DEAD_AT_START = 0.9
#: Gradient norms below this are zero for practical purposes (no update reaches the weights).
GRAD_ZERO = 1e-10

#: Hyperparameter names that hold each setting, matched against the end of a (dotted) key, case-insensitively.
HPARAM_KEYS: dict[str, re.Pattern[str]] = {
    "warmup": re.compile(r"(^|[._])(warmup(_steps|_ratio|_epochs|_iters)?|lr_warmup\w*|num_warmup_steps)$", re.I),
    "clip": re.compile(r"(^|[._])(max_grad_norm|clip(_grad)?(_norm)?|grad(ient)?_clip(_val|ping)?(_value)?|"
                       r"gradient_clip_val|clip_value)$", re.I),
    "weight_decay": re.compile(r"(^|[._])(weight_decay|wd|l2(_reg)?)$", re.I),
    "dropout": re.compile(r"(^|[._])(dropout|drop_rate|dropout_rate|hidden_dropout_prob)$", re.I),
    "lr": re.compile(r"(^|[._])(lr|learning_rate|lr0|base_lr|max_lr)$", re.I),
    "batch_size": re.compile(r"(^|[._])(batch_size|per_device_train_batch_size|train_batch_size|bs)$", re.I),
    "precision": re.compile(r"(^|[._])(fp16|precision|amp|mixed_precision|half)$", re.I),
    "optimizer": re.compile(r"(^|[._])(optim(izer)?(_name)?|opt)$", re.I),
}  # fmt: skip

# ---- what the engine attaches to a finding -----------------------------------------------------------------


@dataclass(frozen=True)
class Cause:
    """One candidate cause of a finding, with the evidence that ranks it and the change to try."""

    cause: str  # an id of CAUSES, or "unclear"
    summary: str
    confidence: float
    evidence: dict[str, Any] = field(default_factory=dict)
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "cause": self.cause,
            "summary": self.summary,
            "confidence": self.confidence,
            "evidence": self.evidence,
            "try": self.fix,
        }


@dataclass
class _Case:
    """Facts for and against one candidate while it is being scored."""

    prior: float
    weight: float = 0.0
    facts: list[str] = field(default_factory=list)
    against: list[str] = field(default_factory=list)
    numbers: dict[str, Any] = field(default_factory=dict)

    def add(self, weight: float, fact: str, **numbers: Any) -> None:
        self.weight += weight
        (self.facts if weight > 0 else self.against).append(fact)
        self.numbers.update({k: v for k, v in numbers.items() if v is not None})

    @property
    def confidence(self) -> float:
        # Evidence moves the prior in log-odds: two strong facts (≈ +1.5 each) take 0.3 to ~0.9.
        logit = math.log(self.prior / (1 - self.prior)) + self.weight
        lo, hi = CONFIDENCE_RANGE
        return round(min(hi, max(lo, 1 / (1 + math.exp(-logit)))), 2)


# ---- facts read from the run ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LrFacts:
    """The learning-rate trajectory up to a finding's onset."""

    tag: str
    first: float  # first positive lr (or the first lr)
    first_step: int
    at_onset: float
    peak_before: float  # the largest lr up to the onset
    peak_step: int
    rising_share: float  # share of steps up to the onset on which the lr did not fall
    rising_to_end: bool | None  # the lr never stopped rising to the end of the run (None: it ends at the onset)
    warmup_end: int | None  # first step the lr reached AT_PEAK of its peak (None: at its peak from the start)
    zero: bool  # the lr never rose above LR_ZERO
    jump: tuple[int, float, float] | None = None  # (step, before, after) of an upward jump just before the onset


def lr_facts(data: RunData, onset: int) -> LrFacts | None:
    tag, points = data.primary.lr, data.lr_points()
    if tag is None or points is None:
        return None
    steps, values = points
    upto = int(np.searchsorted(steps, onset, side="right")) or 1
    s, v = steps[:upto], values[:upto]
    positive = np.flatnonzero(v > LR_ZERO)
    first_i = int(positive[0]) if positive.size else 0
    peak_i = int(np.argmax(v))
    rising = _rising_share(v)
    seen_after = steps[-1] - onset >= SEEN_AFTER_SHARE * data.span
    rising_to_end = (_rising_share(values) >= MONOTONE_SHARE and values[-1] >= values.max()) if seen_after else None
    reached = np.flatnonzero(v >= AT_PEAK * v[peak_i])
    warmup_end = int(s[reached[0]]) if reached.size and reached[0] > 0 else None
    jump = None
    recent = max(1, upto - JUMP_POINTS)
    if upto - recent >= 1 and np.all(v[recent - 1 : upto] > LR_ZERO):
        ratios = v[recent:upto] / v[recent - 1 : upto - 1]
        at = int(np.argmax(ratios)) if ratios.size else -1
        # A restart comes after the lr had come down from higher; a warmup's first steps also double, but
        # from the lowest lr the run has had.
        came_down = at >= 0 and float(v[: recent + at].max()) >= LR_JUMP * float(v[recent + at - 1])
        if at >= 0 and ratios[at] >= LR_JUMP and came_down:
            jump = (int(s[recent + at]), float(v[recent + at - 1]), float(v[recent + at]))
    return LrFacts(
        jump=jump,
        tag=tag,
        first=float(v[first_i]),
        first_step=int(s[first_i]),
        at_onset=float(v[-1]),
        peak_before=float(v[peak_i]),
        peak_step=int(s[peak_i]),
        rising_share=rising,
        rising_to_end=rising_to_end,
        warmup_end=warmup_end,
        # Any lr above LR_ZERO up to the onset is one in the whole run (then not all of it is zero).
        zero=False if positive.size else bool(np.all(values <= LR_ZERO)),
    )


def _rising_share(values: np.ndarray) -> float:
    """Share of the steps on which `values` did not fall (a count over the size, both exact: np.mean of the
    booleans without its set-up)."""
    diffs = np.diff(values)
    return np.count_nonzero(diffs >= -1e-12 * np.abs(values[1:])) / diffs.size if diffs.size else 0.0


def _log_positive(values: np.ndarray) -> bool:
    return bool(values.size) and bool(np.all(values > 0))


def _running_median(values: np.ndarray, width: int) -> np.ndarray:
    """`running_median(values, width)` for an odd `width`; a monotone stretch (an lr schedule, an evaluated loss
    that only falls) is its own running median: each window, edge-padded, holds its centre value in the middle of
    its order (+ 0.0, as `running_median` adds, so a median of zeros is +0.0)."""
    if width > 1 and width % 2 and values.size >= 2:  # (a width of 1 is a copy, without the + 0.0)
        steps = np.diff(values)
        if steps.min() >= 0 or steps.max() <= 0:  # no NaN here: a NaN step fails both tests
            return values + 0.0
    return running_median(values, width)


def left_range_at(steps: np.ndarray, values: np.ndarray, onset: int, window: int) -> int | None:
    """First step in (onset - window, onset] where the series leaves the range it held before that window.

    Non-finite values count as leaving it. Positive series (losses, norms, lr) are read on a log scale.
    """
    lo = int(np.searchsorted(steps, onset - window * (1 + BASELINE_WINDOWS), side="right"))
    hi = int(np.searchsorted(steps, onset, side="right"))
    steps, values = steps[lo:hi], values[lo:hi]
    # The steps ascend (as the searches above need): those up to onset - window, the baseline's, lead.
    cut = int(np.searchsorted(steps, onset - window, side="right"))
    finite = np.isfinite(values[:cut])
    baseline = int(np.count_nonzero(finite))
    if baseline < MIN_BASELINE_POINTS:
        return None
    before: slice | np.ndarray = slice(0, cut) if baseline == cut else np.flatnonzero(finite)
    log = _log_positive(values[before])
    with np.errstate(divide="ignore", invalid="ignore"):
        read = np.log(values) if log else values.astype(np.float64)
    # A running median over a few points: one noisy batch is not a departure, a shifted level is.
    width = max(1, min(SMOOTH_POINTS, baseline // 4)) | 1
    if width > 1 and read.size >= width:
        readable = np.isfinite(read)
        if readable.all():
            read = _running_median(read, width)
        else:
            smooth = _running_median(np.where(readable, read, np.inf), width)
            read = np.where(readable, smooth, read)  # a non-finite point stays a departure
    base = read[before]
    centre = median(base)
    floor = math.log(RANGE_FACTOR) if log else (RANGE_FACTOR - 1) * abs(centre)
    if cut == steps.size:  # no point inside the window
        return None
    w_steps, read = steps[cut:], read[cut:]
    distance = np.abs(read - centre)
    if distance.max() <= floor:  # finite, and within the range whatever its sigma: the baseline's MAD is not needed
        return None
    sigma = 1.4826 * median(np.abs(base - centre))
    half_width = max(RANGE_SIGMAS * sigma, floor)
    out = ~np.isfinite(read) | (distance > half_width)
    hit = np.flatnonzero(out)
    return int(w_steps[hit[0]]) if hit.size else None


def first_movers(data: RunData, finding: Finding) -> list[tuple[int, str, str]]:
    """(step, role, tag) of each signal that left its range around the onset, earliest first."""
    onset = finding.step
    if onset is None:
        return []
    window = max(int(0.05 * data.span), 10 * max(1, _median_gap(data)), 1)
    candidates: dict[str, str] = {}
    for role, tag in (("lr", data.primary.lr), ("grad_norm", data.primary.grad_norm)):
        if tag:
            candidates[tag] = role
    for tag in finding.tags:
        if tag in data.run.scalars:
            candidates.setdefault(tag, data.roles.get(tag, (None, 0))[0] or "series")
    if data.primary.train_loss:
        candidates.setdefault(data.primary.train_loss, "train_loss")
    if data.primary.val_loss:
        candidates.setdefault(data.primary.val_loss, "val_loss")
    for role in ("loss_scale", "weight_norm"):
        for tag in data.tags(role)[:1]:
            candidates.setdefault(tag, role)
    moved = []
    for tag, role in candidates.items():
        series = data.run.scalars[tag]
        step = left_range_at(series.steps, series.values, onset, window)
        if step is not None:
            moved.append((step, role, tag))
    return sorted(moved)


def _median_gap(data: RunData) -> int:
    tag = data.primary.train_loss or next(iter(data.run.scalars), None)
    if tag is None or len(data.run.scalars[tag]) < 2:
        return 1
    gaps = np.diff(data.run.scalars[tag].steps)
    lowest = gaps.min()
    if lowest == gaps.max():  # one gap throughout (most loggers): it is their median, without sorting them
        return max(1, int(0.0 + float(lowest)))
    return max(1, int(median(gaps, repeats=True)))  # a logger's step gaps repeat


def hparam(hparams: Mapping[str, Any], name: str) -> tuple[str, Any] | None:
    """(key, value) of the first logged hyperparameter that holds `name` (see HPARAM_KEYS)."""
    pattern = HPARAM_KEYS[name]
    for key, value in hparams.items():
        if pattern.search(str(key)):
            return str(key), value
    return None


def as_number(value: Any) -> float | None:
    """A logged setting as a finite float (hparams arrive as numbers, strings or bools), or None."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _off(value: Any) -> bool:
    """A setting that is disabled: 0, None, false, 'none', 'off'."""
    if value is None:
        return True
    if isinstance(value, str) and value.strip().lower() in ("", "none", "null", "false", "off", "no", "0", "0.0"):
        return True
    n = as_number(value)
    return n is not None and n <= 0


# ---- scoring ---------------------------------------------------------------------------------------------------


def rank_causes(finding: Finding, data: RunData, hparams: Mapping[str, Any] | None = None) -> tuple[Cause, ...]:
    """The candidate causes of `finding`, most likely first; `unclear` first when none is singled out."""
    priors = CANDIDATES.get(finding.kind)
    if not priors:
        return ()
    hparams = hparams or {}
    cases = {cause: _Case(prior) for cause, prior in priors.items()}
    onset = finding.step if finding.step is not None else data.first_step
    movers = first_movers(data, finding) if finding.step is not None else []
    lr = lr_facts(data, onset) if onset is not None else None
    optimizer = optimizer_family(hparams, lr.tag if lr is not None else None)
    learned = learned_before(data, finding) if finding.step is not None else None
    links = [f"{tag} left its range at {step}" for step, _role, tag in movers if tag != (lr and lr.tag)]
    if lr is not None and onset is not None and lr.rising_share >= MONOTONE_SHARE and lr.first > LR_ZERO:
        growth = lr.at_onset / lr.first
        if growth >= UNBOUNDED_LR_RATIO:  # a ramp never "leaves its range": say how far it climbed
            links.insert(0, f"{lr.tag} rose every step since {lr.first_step} (×{fmt(growth)} by step {onset})")
    chain = "; ".join(links)
    if movers:
        for case in cases.values():
            case.numbers["moved_first"] = [[step, tag] for step, _role, tag in movers]
    _score_lr(cases, finding, data, lr, optimizer, learned)
    _score_hparams(cases, hparams)
    _score_signals(cases, finding, data, movers, lr)
    ranked = sorted(cases.items(), key=lambda item: (-item[1].confidence, item[0]))
    resumable = learned is not None and learned >= LEARNED_DROP
    causes = [_cause(cid, case, chain, resumable) for cid, case in ranked]
    best_id, best = ranked[0]
    singled_out = best.weight > 0 and best.confidence >= UNCLEAR_BELOW
    if finding.kind in SELF_EVIDENT or singled_out:
        return tuple(causes)
    remaining = ", ".join(c for c, case in ranked if case.weight >= 0)
    unclear = Cause(
        "unclear",
        "the run's own signals do not single out one cause" + (f"; candidates: {remaining}" if remaining else ""),
        round(1 - best.confidence, 2),
        {"moved_first": best.numbers.get("moved_first")} if chain else {},
        "log the learning rate and the gradient norm (and the hyperparameters) so the next run can tell them apart",
    )
    return (unclear, *causes)


def _cause(cid: str, case: _Case, chain: str, resumable: bool) -> Cause:
    row = CAUSES[cid]
    evidence: dict[str, Any] = dict(case.numbers)
    if case.facts:
        evidence["for"] = case.facts
    if case.against:
        evidence["against"] = case.against
    if chain:
        evidence["chain"] = chain
    return Cause(cid, row.summary, case.confidence, evidence, row.fix + (row.resume if resumable else ""))


def optimizer_family(hparams: Mapping[str, Any], lr_tag: str | None) -> str | None:
    """`adam` or `sgd` when the run says which (an optimizer hyperparameter, or Lightning's `lr-AdamW` tag)."""
    names = []
    if (found := hparam(hparams, "optimizer")) is not None:
        names.append(str(found[1]))
    if lr_tag and (match := _LR_TAG_OPTIMIZER.search(lr_tag)):
        names.append(match[1])
    for name in names:
        low = name.lower()
        if "adam" in low or "lamb" in low:
            return "adam"
        if "sgd" in low or "momentum" in low or "nesterov" in low:
            return "sgd"
    return None


#: Lightning's LearningRateMonitor names the lr tag after the optimizer class: `lr-AdamW`, `lr-SGD/pg1`.
_LR_TAG_OPTIMIZER = re.compile(r"(?:^|/)lr-([A-Za-z]+)")
#: A loss that fell by this share from its start before the trouble had been learning at that lr.
LEARNED_DROP = 0.2


def learned_before(data: RunData, finding: Finding) -> float | None:
    """How far the training loss fell from its start before the onset (0.3 = 30 % lower), or None."""
    tag = data.primary.train_loss or next((t for t in finding.tags if t in data.run.scalars), None)
    if tag is None or finding.step is None:
        return None
    steps, values = data.finite(tag)
    before = steps < finding.step
    if int(before.sum()) < 2 * MIN_BASELINE_POINTS or not np.all(values > 0):
        return None
    head = values[: max(MIN_BASELINE_POINTS, int(before.sum()) // 10)]
    tail = values[before][-MIN_BASELINE_POINTS:]
    start, end = median(head), median(tail)
    return 1 - end / start if start > 0 else None


def _score_lr(
    cases: dict[str, _Case],
    finding: Finding,
    data: RunData,
    lr: LrFacts | None,
    optimizer: str | None = None,
    learned: float | None = None,
) -> None:
    def add(cause: str, weight: float, fact: str, **numbers: Any) -> None:
        if cause in cases:
            cases[cause].add(weight, fact, **numbers)

    if lr is None:
        return
    onset = finding.step if finding.step is not None else lr.first_step
    early = data.first_step is not None and (onset - data.first_step) <= EARLY_SHARE * data.span
    growth = lr.at_onset / lr.first if lr.first > LR_ZERO else float("inf")
    if lr.zero:
        add("lr_zero_or_frozen", 2.5, f"{lr.tag} is 0 at every step", lr=0.0)
        add("lr_too_low", -1.0, f"{lr.tag} is exactly 0, not small")
        add("labels_or_loss_bug", -2.0, f"{lr.tag} is 0: nothing can be learned whatever the labels")
        return
    rising = lr.rising_share >= MONOTONE_SHARE and growth >= UNBOUNDED_LR_RATIO
    if rising and lr.rising_to_end is not False:
        rose = f"{lr.tag} rose every step since {lr.first_step} (×{fmt(growth)} by step {onset}, {fmt(lr.at_onset)})"
        numbers = {"lr_first": num(lr.first), "lr_at_onset": num(lr.at_onset), "lr_growth": num(growth)}
        if lr.rising_to_end:
            add("lr_schedule_unbounded", 3.0, rose + " and kept rising to the end of the run", **numbers)
            add("no_warmup", -1.5, f"{lr.tag} was still rising at the onset: the warmup never ended")
        else:  # the lr stops being logged at the onset: rising, but whether it had a cap cannot be seen
            add("lr_schedule_unbounded", 1.0, rose, **numbers)
        add("lr_too_high", 0.5, f"{lr.tag} reached {fmt(lr.at_onset)} by the onset")
        return
    if lr.jump is not None:
        jump_step, before, after = lr.jump
        add("lr_too_high", 1.0, f"{lr.tag} jumped from {fmt(before)} to {fmt(after)} at step {jump_step} "
            f"(a schedule restart), just before step {onset}", lr_jump_step=jump_step)  # fmt: skip
        add("schedule_bug", 0.5, f"{lr.tag} jumped ×{fmt(after / before)} at step {jump_step}")
        add("bad_batch", -0.5, "the step size changed right before the trouble: the data need not have")
    if lr.peak_before >= HIGH_LR:
        add("lr_too_high", 1.5, f"{lr.tag} peaks at {fmt(lr.peak_before)}, high for any optimizer",
            lr_peak=num(lr.peak_before))  # fmt: skip
    elif optimizer == "adam" and lr.peak_before > ADAM_HIGH_LR and finding.kind not in _SLOW_KINDS:
        add("lr_too_high", 1.0, f"{lr.tag} peaks at {fmt(lr.peak_before)}, high for an Adam-family optimizer",
            lr_peak=num(lr.peak_before))  # fmt: skip
    # A constant lr is always "at its peak": only a schedule makes the lr at the onset tell anything.
    scheduled = lr.peak_before >= LR_VARIES * max(lr.first, LR_ZERO) or lr.at_onset < lr.peak_before / LR_VARIES
    at_peak = scheduled and lr.at_onset >= AT_PEAK * lr.peak_before
    warmup_steps = None if lr.warmup_end is None else lr.warmup_end - lr.first_step
    no_warmup = warmup_steps is None or warmup_steps <= SHORT_WARMUP_SHARE * data.span
    if learned is not None and learned >= LEARNED_DROP and finding.kind not in _SLOW_KINDS:
        # The first steps, where a warmup matters, were survived: the loss had been learning at this lr.
        add("no_warmup", -1.5, f"the loss had already fallen {learned:.0%} before step {onset}: "
            "the run got past its first steps", learned_before=num(learned))  # fmt: skip
    elif early and no_warmup and (at_peak or not scheduled):
        said = "no warmup" if warmup_steps is None else f"a {warmup_steps}-step warmup"
        # Circumstantial (early, with the full lr): the stronger the sooner, the first updates being where a
        # warmup acts.
        very_early = data.first_step is not None and onset - data.first_step <= VERY_EARLY_SHARE * data.span
        add("no_warmup", 2.0 if very_early else 1.5,
            f"{said}: {lr.tag} was at its peak {fmt(lr.peak_before)} when the trouble began at step {onset}",
            lr_at_onset=num(lr.at_onset), warmup_steps=warmup_steps)  # fmt: skip
        add("lr_too_high", 0.7, f"the trouble began at the peak lr {fmt(lr.peak_before)}")
    elif early and not no_warmup and lr.warmup_end is not None and onset <= lr.warmup_end:
        add("no_warmup", -1.0, f"{lr.tag} was still warming up ({warmup_steps} steps) at the onset")
        add("lr_too_high", 1.0, f"trouble during the warmup, at lr {fmt(lr.at_onset)}: even a partial lr is too high",
            lr_at_onset=num(lr.at_onset))  # fmt: skip
    elif at_peak:
        add("lr_too_high", 1.0, f"the trouble began at step {onset} with {lr.tag} at its peak {fmt(lr.peak_before)}",
            lr_at_onset=num(lr.at_onset))  # fmt: skip
    elif lr.at_onset < 0.5 * lr.peak_before:
        add("lr_too_high", -1.0, f"{lr.tag} had already decayed to {fmt(lr.at_onset)} "
            f"({fmt(lr.at_onset / lr.peak_before)}× its peak) at the onset")  # fmt: skip
        add("bad_batch", 0.5, "the lr was falling when it happened: a data cause is likelier")
    if finding.kind in _SLOW_KINDS:
        _score_small_lr(cases, lr, optimizer)


#: Kinds about learning too little: a high lr does not explain them, a small one may.
_SLOW_KINDS = ("slow_convergence", "plateau", "no_learning", "vanishing_gradients")
#: A schedule moves the lr by at least this factor; less is a constant lr.
LR_VARIES = 1.5


#: An lr that grows this many times from one logged point to the next has jumped (a warm restart, a resumed
#: schedule): a warmup's steps are far smaller.
LR_JUMP = 2.0
#: Logged lr points before the onset searched for such a jump.
JUMP_POINTS = 5
#: A peak lr at or above this is high for any optimizer (SGD on ImageNet peaks at ~0.1-0.4 per 256 samples;
#: only layer-wise schemes like LARS go above 1).
HIGH_LR = 1.0
#: A no_learning loss that settled at least this share below ln K learned the class frequencies: its weights move.
PRIOR_LEARNED = 0.02
#: SGD learning rates at or below this are small (SGD trains at 0.01-0.5).
SGD_SMALL_LR = 1e-3
#: Adam-family learning rates above this are high for most models (transformers train at 1e-4-1e-3).
ADAM_HIGH_LR = 3e-3
#: Largest learning rates the usual optimizers are trained with; far below them, the lr explains slowness.
#: (Adam-family peaks sit around 1e-4-3e-3, SGD 0.01-0.5; a peak under 1e-5 is small for either.)
SMALL_LR = 1e-5


def _score_small_lr(cases: dict[str, _Case], lr: LrFacts, optimizer: str | None) -> None:
    if "lr_too_low" not in cases:
        return
    case = cases["lr_too_low"]
    peak = lr.peak_before
    if peak <= SMALL_LR:
        case.add(1.5, f"{lr.tag} peaks at {fmt(peak)}, small for any optimizer", lr_peak=num(peak))
    elif optimizer == "sgd" and peak <= SGD_SMALL_LR:
        case.add(1.0, f"{lr.tag} peaks at {fmt(peak)}, small for SGD", lr_peak=num(peak))
    elif (optimizer == "adam" and peak >= 1e-3) or (optimizer == "sgd" and peak >= 0.05) or peak >= 0.05:
        case.add(-1.0, f"{lr.tag} peaks at {fmt(peak)}: not a small learning rate for this optimizer")


def _score_hparams(cases: dict[str, _Case], hparams: Mapping[str, Any]) -> None:
    def add(cause: str, weight: float, fact: str) -> None:
        if cause in cases:
            cases[cause].add(weight, fact)

    if (found := hparam(hparams, "warmup")) is not None:
        key, value = found
        if _off(value):
            add("no_warmup", 1.0, f"the run logged {key}={value}")
        else:
            add("no_warmup", -1.0, f"the run logged {key}={value}")
    if (found := hparam(hparams, "clip")) is not None:
        key, value = found
        if _off(value):
            add("no_grad_clipping", 1.0, f"the run logged {key}={value}: no clipping")
        else:
            add("no_grad_clipping", -1.5, f"the run logged {key}={value}: gradients are clipped")
    for name in ("weight_decay", "dropout"):
        if (found := hparam(hparams, name)) is not None:
            key, value = found
            if _off(value):
                add("insufficient_regularization", 0.7, f"the run logged {key}={value}")
                add("no_weight_decay", 1.0 if name == "weight_decay" else 0.0, f"the run logged {key}={value}")
            else:
                add("insufficient_regularization", -0.5, f"the run logged {key}={value}")
                if name == "weight_decay":
                    add("no_weight_decay", -1.0, f"the run logged {key}={value}")
    if (found := hparam(hparams, "optimizer")) is not None and (lr := hparam(hparams, "lr")) is not None:
        rate = as_number(lr[1])
        if "adam" in str(found[1]).lower() and rate is not None and rate > ADAM_HIGH_LR:
            add("lr_too_high", 0.7, f"the run logged {found[0]}={found[1]} with {lr[0]}={lr[1]}: high for Adam")
    if (found := hparam(hparams, "precision")) is not None:
        key, value = found
        text = str(value).lower()
        if text in ("16", "16-mixed", "fp16", "true", "o1", "o2") or value is True:
            add("fp16_overflow", 1.0, f"the run trains in fp16 ({key}={value})")
        elif text in ("32", "bf16", "bf16-mixed", "false", "no") or value is False:
            add("fp16_overflow", -1.5, f"the run does not train in fp16 ({key}={value})")


def _score_signals(
    cases: dict[str, _Case], finding: Finding, data: RunData, movers: list[tuple[int, str, str]], lr: LrFacts | None
) -> None:
    def add(cause: str, weight: float, fact: str, **numbers: Any) -> None:
        if cause in cases:
            cases[cause].add(weight, fact, **numbers)

    roles_moved = {role: step for step, role, _tag in reversed(movers)}  # earliest step per role
    grad_step = roles_moved.get("grad_norm")
    loss_steps = [s for s, role, tag in movers if tag in finding.tags or role in ("train_loss", "val_loss")]
    if grad_step is not None and loss_steps and grad_step < min(loss_steps):
        add("no_grad_clipping", 1.0, f"the grad norm left its range at {grad_step}, before the loss ({min(loss_steps)})",
            grad_left_range=grad_step)  # fmt: skip
        add("lr_too_high", 0.3, "the gradients moved before the loss did")
    if "loss_scale" in roles_moved:
        add("fp16_overflow", 2.0, f"the AMP loss scale left its range at {roles_moved['loss_scale']}")
    elif finding.kind == "divergence" and data.tags("loss_scale"):
        add("fp16_overflow", -1.0, "the AMP loss scale held steady")
    grad_tag = data.primary.grad_norm
    if grad_tag is not None and finding.kind in ("no_learning", "slow_convergence", "plateau"):
        _steps, values = data.finite(grad_tag)
        if values.size and float(np.max(np.abs(values))) <= GRAD_ZERO:
            add("lr_zero_or_frozen", 2.5, f"{grad_tag} is 0 throughout: no gradient reaches the parameters")
            add("labels_or_loss_bug", -1.0, f"{grad_tag} is 0: the loss does not depend on the parameters")
        elif values.size and finding.kind == "no_learning":
            if lr is not None and not lr.zero and lr.peak_before > SMALL_LR:
                add("labels_or_loss_bug", 1.5,
                    f"{grad_tag} is nonzero (median {fmt(median(values))}) and lr {fmt(lr.peak_before)} "
                    "is ordinary, yet nothing is learned")  # fmt: skip
                add("lr_zero_or_frozen", -1.0, "gradients flow and the lr is not zero")
    if finding.kind == "slow_convergence" and isinstance(pace := finding.evidence.get("end_pace"), (int, float)):
        add("lr_too_low", 1.0, f"the loss fell along a nearly straight line, its last quarter still at {pace:.0%} of "
            "its first quarter's pace: progress limited by the step size, not by what is left to learn")  # fmt: skip
    signals = finding.evidence.get("signals") or ()
    if finding.kind == "no_learning" and "prior" in signals and not (lr is not None and lr.peak_before <= SMALL_LR):
        gain = finding.evidence.get("prior_gain")
        learned = isinstance(gain, (int, float)) and gain >= PRIOR_LEARNED
        add("labels_or_loss_bug", 1.5 if learned else 0.5,
            "the loss settled just under ln(K) and stayed there at an ordinary lr: what a model learns from labels "
            "that do not match its inputs (their frequencies, nothing else)")  # fmt: skip
        add("lr_too_low", -1.0, "the loss stopped falling instead of crawling on, as a small lr would make it")
        if learned and "identical" not in signals:
            add("lr_zero_or_frozen", -1.0, f"the loss fell {gain:.0%} below ln(K): the weights do move")
    if finding.kind == "no_learning" and "memorised" in signals and "identical" not in signals:
        add("labels_or_loss_bug", 1.5,
            "the held-out accuracy moves between evaluations yet stays at chance, and the held-out loss never "
            "improved: the model changes, but nothing it learns carries over, as with labels that do not match "
            "their inputs")  # fmt: skip
        add("lr_zero_or_frozen", -1.0, "the held-out accuracy changes between evaluations: the weights move")
        add("lr_too_low", -0.5, "a small lr makes held-out curves improve slowly, not stay at chance")
    if finding.kind in ("loss_spike", "periodic_spikes"):
        _score_spikes(cases, finding, data)
    if finding.kind == "exploding_gradients" and "no_grad_clipping" in cases:
        # The finding exists only where the loss reacted (or the norm overflowed): an update that large went
        # through uncapped. A clipped run logs its pre-clip norm too, but its loss does not follow it.
        ratio = finding.evidence.get("largest_ratio")
        leapt = "to Inf/NaN" if ratio is None else f"×{fmt(ratio)}"
        if ratio is None or ratio >= GRAD_LEAP:
            add("no_grad_clipping", 2.0, f"the gradient norm leapt {leapt} its baseline and the loss followed: "
                "nothing capped the update", grad_ratio=num(ratio) if ratio is not None else None)  # fmt: skip
    if grad_tag is not None and finding.step is not None and "no_grad_clipping" in cases:
        leap = grad_leap(data, grad_tag, finding.step)
        if leap is not None and leap >= GRAD_LEAP:
            size = f"×{fmt(leap)}" if math.isfinite(leap) else "to Inf/NaN"
            add("no_grad_clipping", 2.0 if leap >= 10 * GRAD_LEAP else 1.5,
                f"{grad_tag} leapt {size} within {LEAP_POINTS} logged steps of step {finding.step}: one uncapped "
                "gradient, not a slow drift", grad_leap=num(leap))  # fmt: skip
        elif leap is not None and leap < GRAD_LEAP / 10:
            add(
                "no_grad_clipping", -0.5, f"{grad_tag} rose only ×{fmt(leap)} around the onset: no single huge gradient"
            )
    if finding.kind == "dead_units":
        # Zeros of ReLUs, or (from tanh/sigmoid histograms) outputs pinned at the saturation ends.
        state = "zero" if "recent_zero_fraction" in finding.evidence else "saturated"
        start = finding.evidence.get(f"start_{state}_fraction")
        recent = finding.evidence.get(f"recent_{state}_fraction")
        if isinstance(start, (int, float)) and isinstance(recent, (int, float)):
            if recent - start >= DYING_RISE:
                add("lr_too_high", 1.5, f"units kept dying during training ({start:.0%} → {recent:.0%} "
                    f"{state}): large updates push them past the point of no return")  # fmt: skip
            elif start >= DEAD_AT_START:
                add("saturating_activations_or_init", 1.5, f"{start:.0%} of the units were dead from the "
                    "start: the init or the bias leaves them off")  # fmt: skip
    if finding.kind == "vanishing_gradients":
        recent, others = finding.evidence.get("recent"), finding.evidence.get("others_median")
        if isinstance(recent, (int, float)) and isinstance(others, (int, float)) and others > 0:
            if recent / others <= LAYER_RATIO:
                add("saturating_activations_or_init", 1.5, f"the earliest layer's gradient is {fmt(recent / others)}× "
                    "the others': it shrinks on the way back through the layers")  # fmt: skip
    if "nan_in_inputs_or_loss" in cases:
        _score_nan_from_start(cases, finding, data)
    if grad_tag is not None and "saturating_activations_or_init" in cases:
        _steps, values = data.finite(grad_tag)
        head = values[: max(3, values.size // 20)]
        if head.size and 0 < median(head) <= TINY_GRAD and float(np.max(values)) >= 100 * median(head):
            add("saturating_activations_or_init", 2.0,
                f"{grad_tag} starts at {fmt(median(head))} and grows ×{fmt(float(np.max(values) / median(head)))}: "
                "the init sits near a saddle, where gradients vanish",
                grad_start=num(median(head)))  # fmt: skip
            add("lr_too_low", -0.5, f"{grad_tag} itself is tiny at the start: a larger lr would not move it far")
    if finding.kind == "oscillation" and lr is not None and lr.at_onset >= AT_PEAK * lr.peak_before:
        add("lr_too_high", 0.5, "the bouncing is at the peak lr")
    if finding.kind == "overfitting":
        improved = finding.evidence.get("train_improvement")
        if isinstance(improved, (int, float)) and improved > 0:
            add("insufficient_regularization", 0.5,
                f"the training curve kept improving ({fmt(improved)}) after the best validation step",
                train_improvement=improved)  # fmt: skip
    if finding.kind in SELF_EVIDENT:
        for cause in cases:
            add(cause, 1.0, finding.message)


def grad_leap(data: RunData, tag: str, onset: int) -> float | None:
    """The largest grad norm within LEAP_POINTS points of `onset` over the median of the points before them."""
    series = data.run.scalars[tag]
    at = int(np.searchsorted(series.steps, onset))
    before = series.values[max(0, at - LEAP_BASELINE) : max(0, at - 1)]
    before = before[np.isfinite(before) & (before > 0)]
    after = series.values[max(0, at - 1) : at + LEAP_POINTS]
    if before.size < LEAP_MIN_BASELINE or not after.size:
        return None
    peak = float(np.max(np.where(np.isfinite(after), after, np.inf)))
    return peak / median(before)


def _score_nan_from_start(cases: dict[str, _Case], finding: Finding, data: RunData) -> None:
    """NaN from a tag's very first point is no instability that grew: the data or the loss was broken (unless the
    tag evaluated the weights of a training run that had diverged by then: `train_nonfinite_step`)."""
    if finding.evidence.get("train_nonfinite_step") is not None:
        return
    for tag in finding.tags:
        series = data.run.scalars.get(tag)
        if series is None or not len(series):
            continue
        finite = np.isfinite(series.values)
        if not finite[0]:
            share = 1 - float(finite.mean())
            cases["nan_in_inputs_or_loss"].add(3.0, f"{tag} is non-finite from its very first point "
                                                    f"({share:.0%} of its points)", nonfinite_share=num(share))  # fmt: skip
            for other in ("lr_too_high", "no_grad_clipping", "lr_schedule_unbounded", "no_warmup"):
                if other in cases:
                    cases[other].add(-1.5, f"{tag} was never finite: nothing grew out of control")
            return
    if finding.tags:
        cases["nan_in_inputs_or_loss"].add(-1.0, "the series were finite before the onset")


def _score_spikes(cases: dict[str, _Case], finding: Finding, data: RunData) -> None:
    period = finding.evidence.get("period")
    epoch = data.epoch_length
    if finding.kind == "periodic_spikes" and period and epoch:
        ratio = float(period) / float(epoch)
        if abs(ratio - round(ratio)) < 0.05 and round(ratio) >= 1:
            every = "once per epoch" if round(ratio) == 1 else f"every {round(ratio)} epochs"
            cases["data_order"].add(2.0, f"the spikes recur every {period} steps: {every} ({epoch} steps an epoch)",
                                    period=period, epoch_length=epoch)  # fmt: skip
    elif finding.kind == "periodic_spikes" and period:
        cases["data_order"].add(0.8, f"the spikes recur at a fixed period of {period} steps", period=period)
    if finding.step is not None and "bad_batch" in cases:
        near = data.lr_values_near(finding.step)
        if near is not None and near[0] > 0 and abs(near[1] - near[0]) <= 0.05 * near[0]:
            cases["bad_batch"].add(1.0, f"the lr was steady ({fmt(near[0])}) across the spike: the data changed, "
                                   "not the step size")  # fmt: skip


# ---- words for the renderers ---------------------------------------------------------------------------------

#: Other candidates named after the top one (the rest are in the JSON).
OTHERS_SHOWN = 2


@dataclass(frozen=True)
class CauseText:
    """A finding's causes as plain sentences (untrusted tag names inside: renderers escape them)."""

    why: str  # "the learning rate is too high … (confidence 0.78): fact; fact"
    signals: str  # which signal moved first ("" when none moved)
    others: str  # "lr_too_high 0.41, no_grad_clipping 0.20" ("" when none)
    fix: str  # the change to try for the top cause


def cause_text(causes: tuple[Cause, ...]) -> CauseText | None:
    """What a person reads about a finding's causes, or None when it has none."""
    if not causes:
        return None
    top = causes[0]
    facts = "; ".join(str(f) for f in top.evidence.get("for", ()))
    if top.cause == "unclear":
        why = f"unclear: {top.summary}"
    else:
        why = f"{top.summary} (confidence {top.confidence:.2f})" + (f": {facts}" if facts else "")
    others = ", ".join(f"{c.cause} {c.confidence:.2f}" for c in causes[1:] if c.cause != "unclear")
    if top.cause != "unclear":
        others = ", ".join(f"{c.cause} {c.confidence:.2f}" for c in causes[1 : 1 + OTHERS_SHOWN])
    return CauseText(why=why, signals=str(top.evidence.get("chain", "")), others=others, fix=top.fix)
