"""What every detector receives (`RunData`) and the small helpers they share to phrase findings.

A detector is a pure function `detect(data: RunData) -> list[Finding]`. `RunData` carries the run's series,
per-series features, roles and the few run-level facts detectors need (epoch length, validation cadence,
train/val pairs, the logdir context for `stalled`). Numbers in evidence are rounded to what a person would
quote (4 significant digits); every finding says where it starts (`step`) and, where it applies, ends.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from ..axes import StepAxes
from ..datamodel import Finding, Run, Series, SeriesFeatures
from ..features import context_tags, context_windows, finite_view
from ..roles import PrimaryTags, rl_term
from ..smoothing import median, percentile, running_median
from ..text import number

#: Adversarial loss terms (GAN generator/discriminator/critic): they rise and fall against each other by
#: design, so the shape rules for a loss (divergence by blow-up, oscillation, slow convergence) do not apply.
ADVERSARIAL = re.compile(r"(^|[^a-z])(g|d|gen|disc|generator|discriminator|critic|adv|adversarial)([^a-z]|$)")

#: Below this many finite points a series proves nothing strongly: findings on it are downgraded to info.
MIN_CONFIDENT_POINTS = 20
#: Points either side of a critical step in the lr / grad_norm / memory context attached to evidence.
CONTEXT_POINTS = 5


@dataclass(frozen=True)
class LogdirContext:
    """Facts about the whole logdir that single-run detectors need (only `stalled` uses them today)."""

    latest_wall_time: float | None = None  # the newest event of any run in the logdir
    now: float | None = None  # wall clock when the analysis ran (None: judge against the logdir alone)
    # (run name, first wall time, last wall time) of every run, for "others continued while this one stopped"
    spans: tuple[tuple[str, float, float], ...] = ()


@dataclass(frozen=True)
class ExternalSeries:
    """A series that lives in another run but belongs to this one's story (Keras's validation sibling)."""

    run: str
    tag: str
    series: Series
    features: SeriesFeatures


@dataclass(frozen=True, eq=False)
class RunData:
    """Everything a detector may look at for one run."""

    name: str
    run: Run
    roles: dict[str, tuple[str | None, int]]
    features: dict[str, SeriesFeatures]
    primary: PrimaryTags
    pairs: tuple[tuple[str, str], ...]  # (train tag, val tag) in this run
    phases: dict[str, str | None]  # tag -> 'train' / 'val' / None
    epoch_length: int | None  # steps per epoch, when the run says (epoch tag) or validation cadence implies
    eval_interval: int | None  # steps between validation points
    context: LogdirContext = field(default_factory=LogdirContext)
    sibling_val: dict[str, ExternalSeries] = field(default_factory=dict)  # train tag -> validation series
    has_train_sibling: bool = False  # this is a Keras `X/validation` run whose `X/train` sibling exists
    #: ...and that sibling's training loss turned non-finite at this step after finite points (it diverged), when
    #: this run holds non-finite values too (None otherwise): this run's NaN may be that divergence's
    train_sibling_diverged: int | None = None
    axes: StepAxes = field(default_factory=lambda: StepAxes(frozenset(), frozenset(), None))  # global steps vs epochs
    _finite: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)
    # Not an init field: a `replace`d copy with other roles or series (a histogram view) starts its own.
    _tags: dict[tuple[str, ...], tuple[str, ...]] = field(default_factory=dict, init=False, repr=False)

    # ---- access ---------------------------------------------------------------------------------------

    def tags(self, *roles: str) -> list[str]:
        """Tags having one of `roles`, in the run's order, with at least one point (a new list: worked out once
        per run and set of roles, however many detectors ask)."""
        found = self._tags.get(roles)
        if found is None:
            scalars = self.run.scalars
            found = self._tags[roles] = tuple(
                t for t, (r, _) in self.roles.items() if r in roles and t in scalars and len(scalars[t])
            )
        return list(found)

    def finite(self, tag: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of the tag's finite points; worked out once per run, however many detectors ask."""
        view = self._finite.get(tag)
        if view is None:
            series = self.run.scalars[tag]
            feats = self.features.get(tag)
            if feats is not None and feats.points == len(series) and feats.extra.get("nonfinite") == 0:
                # The features counted the series' non-finite points: none, so the view is the series itself
                # (what `finite_view` returns then), without testing every value again.
                view = (series.steps, series.values)
            else:
                view = finite_view(series)
            self._finite[tag] = view
        return view

    @cached_property  # asked for by every detector (`position`, `span`); the run does not change meanwhile
    def first_step(self) -> int | None:
        firsts = [int(s.steps[0]) for s in self.run.scalars.values() if len(s)]
        return min(firsts) if firsts else None

    @cached_property
    def last_step(self) -> int | None:
        lasts = [int(s.steps[-1]) for s in self.run.scalars.values() if len(s)]
        return max(lasts) if lasts else None

    @cached_property
    def span(self) -> int:
        """Steps the run covers (at least 1)."""
        if self.first_step is None or self.last_step is None:
            return 1
        return max(1, self.last_step - self.first_step)

    def context_evidence(self, step: int | None) -> dict[str, Any]:
        """±CONTEXT_POINTS of lr, grad_norm and gpu_mem around `step`, for evidence (empty when none logged)."""
        if step is None:
            return {}
        windows = context_windows(self.run, self.roles, step, CONTEXT_POINTS)
        windows = {role: points for role, points in windows.items() if points}
        if not windows:
            return {}
        tags = context_tags(self.run, self.roles)
        return {
            "context": {role: [[s, v] for s, v in points] for role, points in windows.items()},
            "context_tags": {role: tags[role] for role in windows},
        }

    def lr_points(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The main lr tag's finite (steps, values); None without an lr tag or with fewer than 2 points."""
        tag = self.primary.lr
        if tag is None:
            return None
        steps, values = self.finite(tag)
        return (steps, values) if steps.size >= 2 else None

    def lr_values_near(self, step: int, before: int = 3, after: int = 3) -> tuple[float, float] | None:
        """(lr just before, lr just after) `step` from the main lr tag: (max of the `before` points before,
        max of the `after` points from it on)."""
        points = self.lr_points()
        if points is None:
            return None
        steps, values = points
        at = int(np.searchsorted(steps, step))
        prior = values[max(at - before, 0) : at]
        later = values[at : at + after]
        if prior.size == 0 or later.size == 0:
            return None
        return float(prior.max()), float(later.max())


# ---- phrasing ----------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)  # a pure function of the tag, asked by several detectors for every run
def adversarial(tag: str) -> bool:
    """A term that rises and falls against the others by design: a GAN's (`loss_G`, `disc_loss`, `critic/loss`),
    or an RL objective's policy, value or entropy term (`train/value_loss`, `loss/policy`; roles.rl_term)."""
    return ADVERSARIAL.search(tag.lower()) is not None or rl_term(tag)


def num(value: float | None, digits: int = 4) -> float | None:
    """A number rounded to `digits` significant digits, for evidence (None and non-finite pass through)."""
    if value is None:
        return None
    value = float(value)
    if not math.isfinite(value) or value == 0:
        return value
    return float(f"{value:.{digits}g}")


def fmt(value: float | None) -> str:
    """A number as a person writes it in a message: `text.number`, the spelling every view uses."""
    return number(value)


def pct(fraction: float) -> str:
    """+34% / -60%: a relative change as a signed whole percentage."""
    return f"{fraction * 100:+.0f}%"


def finding(
    data: RunData,
    kind: str,
    severity: str,
    tags: Iterable[str],
    step: int | None,
    end_step: int | None,
    evidence: dict[str, Any],
    message: str,
    suggestion: str,
) -> Finding:
    """A Finding on this run, evidence numbers rounded."""
    clean = {k: (num(v) if isinstance(v, float) else v) for k, v in evidence.items()}
    return Finding(
        kind,
        severity,
        data.name,
        tuple(dict.fromkeys(tags)),
        None if step is None else int(step),
        None if end_step is None else int(end_step),
        clean,
        message,
        suggestion,
    )


def confident(severity: str, points: int, needed: int = MIN_CONFIDENT_POINTS) -> str:
    """`severity`, or 'info' when the series behind it is too short to be sure."""
    return severity if points >= needed else "info"


def position(data: RunData, step: int) -> float:
    """Where `step` falls in the run, 0.0 (first step) to 1.0 (last)."""
    first = data.first_step or 0
    return (step - first) / data.span


def level_at(steps: np.ndarray, values: np.ndarray, step: float, width: int) -> float:
    """Median of the `width` points nearest `step` (a robust reading of the level there)."""
    at = int(np.searchsorted(steps, step))
    lo = max(0, min(at - width // 2, values.size - width))
    return median(values[lo : lo + width])


#: A clip threshold worth suggesting sits just above the healthy gradient norms: 1.5 × their 95th percentile
#: clips only the outliers that cause trouble, not the everyday steps.
CLIP_HEADROOM = 1.5


def clip_threshold(data: RunData, before_step: int | None) -> float | None:
    """A concrete `max_norm` for clip_grad_norm_: CLIP_HEADROOM × the 95th percentile of the healthy grad norm."""
    tag = data.primary.grad_norm
    if tag is None:
        return None
    steps, values = data.finite(tag)
    if before_step is not None:
        values = values[steps < before_step]
    if values.size < 5:
        return None
    return num(CLIP_HEADROOM * float(percentile(values, 95)), 2)


def clip_advice(data: RunData, before_step: int | None) -> str:
    threshold = clip_threshold(data, before_step)
    if threshold is None:
        return "clip gradients (torch.nn.utils.clip_grad_norm_(params, max_norm=1.0)) and log the grad norm"
    return f"clip gradients at max_norm={fmt(threshold)} (1.5× the healthy 95th percentile of {data.primary.grad_norm})"


def some_of(names: list[str], shown: int = 3) -> str:
    """`a, b, c and 4 more`: the first `shown` names of a list a message cannot hold whole."""
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def sentence(parts: Iterable[str]) -> str:
    """Advice clauses joined with '; ', the first letter capitalised."""
    text = "; ".join(p for p in parts if p)
    return text[:1].upper() + text[1:]


#: Smoothed levels remembered (the most recent series'): several detectors ask for the same series' level
#: while judging one run, and each running median costs as much as a detector.
SMOOTHED_CACHE = 64
_smoothed: OrderedDict[tuple[int, float], tuple[SeriesFeatures, np.ndarray]] = OrderedDict()


def smoothed_level(feats: SeriesFeatures, frac: float = 0.02) -> tuple[np.ndarray, np.ndarray]:
    """(steps, level): the series' bucket medians under a running median over `frac` of the run (≥ 3 buckets),
    so that a single lucky or unlucky bucket is never taken for the curve's minimum or maximum."""
    level = feats.extra["level"]
    key = (id(feats), frac)
    hit = _smoothed.get(key)
    if hit is not None and hit[0] is feats:  # the entry holds `feats`, so its id cannot have been reused
        return level.steps, hit[1]
    medians = level.medians
    width = max(3, int(frac * medians.size)) | 1
    if medians.size >= width:
        medians = running_median(medians, width)  # bucket medians are finite: np.median's values exactly
        medians.flags.writeable = False
    _smoothed[key] = (feats, medians)
    while len(_smoothed) > SMOOTHED_CACHE:
        try:
            _smoothed.popitem(last=False)
        except KeyError:  # another thread (the app judges in a worker thread) emptied it first
            break
    return level.steps, medians
