"""Healthy twins: a sibling run that differs from a sick one in a setting or two, and what that difference says.

A sweep holds the best evidence a cause can have: `gpt_lr3e-3_noclip` diverged, `gpt_lr1e-3_noclip` beside it
did not. When a run with findings has a healthy sibling — the same hyperparameters but for one to three
(`MAX_DIFFERENCES`), or, when neither logged any, the same name but for one token — the twin says which
settings differ, where the two curves part, and moves the causes those settings speak to: a higher lr than the
healthy twin counts for "lr too high", a warmup the twin had and this run lacks for "no warmup", and so on.

Twins re-rank causes; a finding's kind, step and severity never depend on which other runs were loaded, but
for one finding that only a twin can show: a run whose healthy sibling differs ONLY in a lower lr, and whose
loss bounces on a higher level than that sibling's, is `oscillation` (`detectors.oscillation.against_twin`;
from one run such bouncing looks like any noisy healthy run). Its evidence names the twin.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import chain
from typing import Any

from .causes import CAUSES, HPARAM_KEYS, UNCLEAR_BELOW, Cause, as_number
from .compare import parting_step
from .datamodel import RunReport, Series
from .detectors.base import fmt
from .detectors.oscillation import against_twin
from .health import health
from .run_config import run_hparams

#: More differing settings than this and the sibling is another experiment, not a twin.
MAX_DIFFERENCES = 3
#: Keys that differ between any two runs without being a setting (seeds, names, paths, ids, times).
NOT_A_SETTING = re.compile(r"(^|[._])(seed|run_?name|name|exp(eriment)?(_name)?|dir|path|output\w*|logging\w*|id|"
                           r"uuid|time|date|version|hostname|run_?id)$", re.I)  # fmt: skip
#: A twin counts as healthy with no warning or critical finding and at least this health.
HEALTHY_SCORE = 90
#: Weight a twin's difference adds to the cause it speaks for (a strong fact: about the clearest evidence a
#: run can have short of re-running it).
TWIN_WEIGHT = 1.5

#: Name tokens that carry a setting: `lr3e-3`, `bs256`, `wd0.1`, `warmup500`, `clip1.0`, and `noclip`-style negations.
_NAME_SETTING = re.compile(r"^(?P<key>lr|bs|batch|wd|warmup|clip|dropout|drop)[=:]?(?P<value>[0-9][0-9.e+-]*)$", re.I)
_NAME_NEGATION = re.compile(r"^no[_-]?(?P<key>clip|warmup|wd|dropout|aug|shuffle)$", re.I)
_NAME_KEYS = {"lr": "lr", "bs": "batch_size", "batch": "batch_size", "wd": "weight_decay", "warmup": "warmup",
              "clip": "clip", "dropout": "dropout", "drop": "dropout", "aug": "augmentation", "shuffle": "shuffle"}  # fmt: skip
#: Name tokens split at `/`, `_`, `-` and spaces, except the `-` of an exponent (`lr3e-3` is one token).
_SPLIT = re.compile(r"(?:[/_\s]|(?<![0-9][eE])-)+")
_SEED_TOKEN = re.compile(r"^(seed|s|run|rep)?\d{1,3}$", re.I)


@dataclass(frozen=True)
class Twin:
    """A healthy sibling of a run and how the two differ."""

    run: str
    differs: dict[str, tuple[Any, Any]]  # setting -> (this run's value, the twin's value)
    source: str  # "hparams" or "name"
    tag: str | None = None  # the curve compared
    parted_at: int | None = None  # first step where the two curves part

    def sentence(self) -> str:
        settings = ", ".join(f"{k}={_show(a)} here vs {_show(b)}" for k, (a, b) in self.differs.items())
        where = f"; the {self.tag} curves part at step {self.parted_at}" if self.parted_at is not None else ""
        return f"the healthy twin {self.run} differs only in {settings}{where}"


def _show(value: Any) -> str:
    if value is None:
        return "none"
    number = as_number(value)
    return fmt(number) if number is not None else str(value)


def _healthy(report: RunReport) -> bool:
    score = report.health.score
    return (score is not None and score >= HEALTHY_SCORE) and not any(
        f.severity in ("critical", "warning") for f in report.findings
    )


def _settings(hparams: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in hparams.items() if not NOT_A_SETTING.search(str(k))}


#: Values whose equality (of one type) means the same setting: the same number, or the same text.
_PLAIN = (str, int, float, bool, type(None))


def _differs(x: Any, y: Any) -> bool:
    """Two values of a setting differ: as numbers (`as_number`), or as text where they are no numbers."""
    if type(x) is type(y) and type(x) in _PLAIN and x == y:  # one value twice (most of two sweep runs' settings)
        return False
    nx, ny = as_number(x), as_number(y)
    return nx != ny or (nx is None and str(x) != str(y))


def _hparam_differences(a: dict[str, Any], b: dict[str, Any], most: int | None = None) -> dict[str, tuple[Any, Any]]:
    """The settings `a` and `b` differ in (shared keys first, then `a`'s own, then `b`'s), each as (a's, b's);
    with `most`, the search stops at most + 1 of them (enough to tell they are too many)."""
    out: dict[str, tuple[Any, Any]] = {}
    for k in chain((k for k in a if k in b), (k for k in a if k not in b), (k for k in b if k not in a)):
        x, y = a.get(k), b.get(k)
        if _differs(x, y):
            out[k] = (x, y)
            if most is not None and len(out) > most:
                break
    return out


@lru_cache(maxsize=8192)
def _tokens(name: str) -> tuple[str, ...]:
    """A run name's tokens, seeds left out (remembered: each healthy run is compared with every sick one)."""
    return tuple(t for t in _SPLIT.split(name) if t and not _SEED_TOKEN.match(t))


@lru_cache(maxsize=8192)
def _name_setting(token: str) -> tuple[str, Any] | None:
    if match := _NAME_SETTING.match(token):
        return _NAME_KEYS[match["key"].lower()], as_number(match["value"]) or match["value"]
    if match := _NAME_NEGATION.match(token):
        return _NAME_KEYS[match["key"].lower()], 0
    return None


def name_differences(a: str, b: str) -> dict[str, tuple[Any, Any]] | None:
    """Settings that tell two run names apart when they differ in exactly one token (None: not twins)."""
    ta, tb = _tokens(a), _tokens(b)
    if len(ta) != len(tb) or len(ta) < 2:
        return None
    diff = [(x, y) for x, y in zip(ta, tb) if x != y]
    if len(diff) != 1:
        return None
    x, y = diff[0]
    sx, sy = _name_setting(x), _name_setting(y)
    if sx and sy and sx[0] == sy[0]:
        return {sx[0]: (sx[1], sy[1])}
    if sx and not sy and sx[1] == 0:  # `noclip` vs `clip`: the twin has it on
        return {sx[0]: (0, y)}
    if sy and not sx and sy[1] == 0:
        return {sy[0]: (x, 0)}
    return {"name": (x, y)}


def _loss_tag(report: RunReport) -> str | None:
    tags = [t for t, r in report.roles.items() if r == "train_loss" and len(report.run.scalars.get(t, ())) > 0]
    return max(tags, key=lambda t: (len(report.run.scalars[t]), t)) if tags else None


def parted_at(report: RunReport, twin: RunReport, tag: str) -> int | None:
    """First step where `tag`'s curve in `report` leaves the twin's and stays away (`compare.parting_step`)."""
    a, b = report.run.scalars.get(tag), twin.run.scalars.get(tag)
    parting = parting_step(a, b) if a is not None and b is not None else None
    return parting.step if parting is not None else None


def find_twin(
    report: RunReport, reports: Sequence[RunReport], settings: Mapping[str, dict[str, Any]] | None = None
) -> Twin | None:
    """The healthy sibling closest to `report` (fewest differing settings), or None.

    `settings` (run name -> its settings) saves reading every run's config files again for each sick run;
    `TwinFinder` saves sorting and indexing `reports` again for each.
    """
    return TwinFinder(reports, settings).find(report)


class TwinFinder:
    """`find_twin` over the same `reports` for many sick runs: the healthy runs sorted and indexed once."""

    def __init__(self, reports: Sequence[RunReport], settings: Mapping[str, dict[str, Any]] | None = None):
        self.settings = settings
        self.by_name: dict[str, RunReport] = {}
        for r in reports:
            self.by_name.setdefault(r.name, r)
        # In name order (a stable sort: equal names keep their order). Without settings of its own, a run is
        # compared by name only, and a name has a twin only among names of as many tokens (`name_differences`).
        self.healthy = sorted((r for r in reports if _healthy(r)), key=lambda r: r.name)
        self.by_tokens: dict[int, list[RunReport]] = {}
        for r in self.healthy:
            self.by_tokens.setdefault(len(_tokens(r.name)), []).append(r)

    def settings_of(self, r: RunReport) -> dict[str, Any]:
        return self.settings[r.name] if self.settings is not None else _settings(run_hparams(r.run)[0])

    def find(self, report: RunReport) -> Twin | None:
        mine = self.settings_of(report)
        best: tuple[int, str, Twin] | None = None
        # In name order, the first twin differing in one setting is the answer (no twin differs in fewer, and a
        # later one loses the tie on its name): a sweep's sick run stops at it instead of comparing with every
        # healthy run.
        tokens = len(_tokens(report.name))
        for other in self.healthy if mine else self.by_tokens.get(tokens, ()) if tokens >= 2 else ():
            if other is report or other.name == report.name:
                continue
            theirs = self.settings_of(other) if mine else None
            if mine and theirs:
                differs = _hparam_differences(mine, theirs, MAX_DIFFERENCES)
                source = "hparams"
                if not 0 < len(differs) <= MAX_DIFFERENCES:
                    continue
            else:
                found = name_differences(report.name, other.name)
                if found is None:
                    continue
                differs, source = found, "name"
            candidate = Twin(other.name, differs, source)
            key = (len(differs), other.name)
            if best is None or key < best[:2]:
                best = (*key, candidate)
            if best[0] == 1:
                break
        if best is None:
            return None
        twin = best[2]
        tag = _loss_tag(report)
        other = self.by_name[twin.run]
        if tag is not None and tag in other.run.scalars:
            return replace(twin, tag=tag, parted_at=parted_at(report, other, tag))
        return twin


def _setting_kind(key: str) -> str | None:
    if key in ("lr", "batch_size", "weight_decay", "warmup", "clip", "dropout"):
        return key
    for name, pattern in HPARAM_KEYS.items():
        if pattern.search(key):
            return name
    return None


def _votes(twin: Twin) -> list[tuple[str, float, str]]:
    """(cause, weight, fact) for each difference that speaks to a cause."""
    votes: list[tuple[str, float, str]] = []
    said = twin.sentence()
    for key, (mine, theirs) in twin.differs.items():
        kind = _setting_kind(key)
        a, b = as_number(mine), as_number(theirs)
        off_here, off_there = (a is not None and a <= 0) or mine is None, (b is not None and b <= 0) or theirs is None
        if kind == "lr" and a is not None and b is not None and a != b:
            if a > b:
                votes.append(("lr_too_high", TWIN_WEIGHT, said))
            else:
                votes.append(("lr_too_low", TWIN_WEIGHT, said))
                if a <= 0:
                    votes.append(("lr_zero_or_frozen", TWIN_WEIGHT, said))
        elif kind == "warmup" and off_here and not off_there:
            votes.append(("no_warmup", TWIN_WEIGHT, said))
        elif kind == "clip" and off_here and not off_there:
            votes.append(("no_grad_clipping", TWIN_WEIGHT, said))
        elif kind in ("weight_decay", "dropout") and (off_here and not off_there or (a is not None and b is not None
                                                                                     and a < b)):  # fmt: skip
            votes.append(("insufficient_regularization", TWIN_WEIGHT * 2 / 3, said))
            if kind == "weight_decay":
                votes.append(("no_weight_decay", TWIN_WEIGHT, said))
        elif kind == "batch_size" and a is not None and b is not None and a < b:
            votes.append(("batch_too_small", TWIN_WEIGHT * 2 / 3, said))
        elif kind == "precision" and "16" in str(mine) and "16" not in str(theirs):
            votes.append(("fp16_overflow", TWIN_WEIGHT, said))
    return votes


#: Causes that are a setting of the run's configuration (as opposed to its data or its dynamics).
SHARED_SETTINGS = (
    "no_warmup", "no_grad_clipping", "lr_schedule_unbounded", "insufficient_regularization", "no_weight_decay",
    "batch_too_small", "fp16_overflow", "data_order", "slow_data_loader", "unweighted_loss_sum",
)  # fmt: skip
#: Weight against such a shared cause.
SHARED_WEIGHT = 1.0


def apply_twin(causes: Sequence[Cause], twin: Twin) -> tuple[Cause, ...]:
    """`causes` re-ranked with what the twin's differences say; every cause names the twin in its evidence."""
    if not causes:
        return tuple(causes)
    votes = _votes(twin)
    voted = {cid for cid, _, _ in votes}
    ranked = []
    for cause in causes:
        if cause.cause == "unclear":
            continue
        weight = sum(w for cid, w, _ in votes if cid == cause.cause)
        if cause.cause in SHARED_SETTINGS and cause.cause not in voted and voted:
            # The twin runs the same configuration but for the settings that differ: a configuration cause
            # no differing setting speaks to is one the healthy twin shares, so it cannot be the difference.
            weight -= SHARED_WEIGHT
            shared = f"the healthy twin {twin.run} shares this configuration and trained fine"
            evidence_against = [*cause.evidence.get("against", []), shared]
            cause = replace(cause, evidence={**cause.evidence, "against": evidence_against})
        evidence = dict(cause.evidence)
        evidence["twin"] = {"run": twin.run, "differs": {k: [a, b] for k, (a, b) in twin.differs.items()},
                            "parted_at": twin.parted_at}  # fmt: skip
        confidence = cause.confidence
        if weight:
            logit = math.log(confidence / (1 - confidence)) + weight
            confidence = round(min(0.95, max(0.05, 1 / (1 + math.exp(-logit)))), 2)
            if cause.cause in voted:
                evidence["for"] = [*evidence.get("for", []), next(f for cid, _, f in votes if cid == cause.cause)]
        ranked.append(replace(cause, confidence=confidence, evidence=evidence))
    ranked.sort(key=lambda c: -c.confidence)
    first = causes[0]
    if first.cause != "unclear":
        return tuple(ranked)
    best = ranked[0] if ranked else None
    if best is not None and best.confidence >= UNCLEAR_BELOW and best.evidence.get("for"):
        return tuple(ranked)
    return (replace(first, confidence=round(1 - best.confidence, 2) if best else first.confidence), *ranked)


class RunSettings(dict[str, dict[str, Any]]):
    """Run name -> its settings (`run_settings`), with `hparams`: run name -> (every hyperparameter, where they came
    from), as `run_config.run_hparams` read them for the settings (`compare.hparams_table` takes them: each run's
    config files are read once for a report, not once for its twins and again for its hparams table)."""

    def __init__(self, hparams: dict[str, tuple[dict[str, Any], tuple[str, ...]]]):
        super().__init__((name, _settings(found[0])) for name, found in hparams.items())
        self.hparams = hparams


def run_settings(reports: Sequence[RunReport]) -> RunSettings:
    """Each run's settings for `find_twin`, its hparams read once (config files included), not once per sick run."""
    return RunSettings({r.name: run_hparams(r.run) for r in reports})


def attach_twins(reports: Sequence[RunReport], settings: Mapping[str, dict[str, Any]] | None = None) -> None:
    """Give every run with a warning or critical finding its healthy twin's evidence, and every run that bounces
    above its lower-lr twin an `oscillation` (`lr_oscillation`), in place.

    Idempotent: each report is first put back to the engine's verdict (`RunReport.engine_verdict`, kept the first
    time), so attaching twins again, after more runs arrived or changed, never re-weighs a cause twice.
    `settings` (`run_settings` of the same reports) saves reading each run's settings again."""
    for report in reports:
        if report.engine_verdict is None:
            report.engine_verdict = (report.findings, report.health)
        else:
            report.findings, report.health = report.engine_verdict
    if settings is None:
        settings = run_settings(reports)
    # Only a healthy run can be a twin: judged once here, not once per sick run (a sweep of 2,000 runs with
    # 800 sick ones made that 1.6 M health checks and name comparisons).
    finder = TwinFinder(reports, settings)
    healthy = finder.healthy
    sick = [r for r in reports if _sick(r)]
    for report in sick:
        twin = finder.find(report)
        if twin is None:
            continue
        report.findings = [replace(f, causes=apply_twin(f.causes, twin)) if f.causes else f for f in report.findings]
    lr_oscillation(reports, settings, {r.name for r in healthy})


def with_twins(reports: Sequence[RunReport], settings: Mapping[str, dict[str, Any]] | None = None) -> list[RunReport]:
    """`attach_twins` without touching `reports`: each report itself where twins change nothing, else a copy with
    its twin's evidence (and health). Derived from the engine's verdicts every time, so the app can call it after
    each batch of verdicts while the reports it already shows stay as they are."""
    copies = [replace(r) for r in reports]
    attach_twins(copies, settings)
    return [r if c.findings is r.findings and c.health is r.health else c for r, c in zip(reports, copies)]


def _lr_place(report: RunReport, settings: dict[str, Any]) -> tuple[tuple, float] | None:
    """(everything about the run but its lr, its lr) when it states one lr (a setting, else a name token)."""
    if settings:
        keys = [k for k in settings if _setting_kind(str(k)) == "lr"]
        lr = as_number(settings[keys[0]]) if len(keys) == 1 else None
        if lr is None:
            return None
        rest = tuple(sorted((str(k), str(as_number(v) if as_number(v) is not None else v)) for k, v in
                            settings.items() if k != keys[0]))  # fmt: skip
        return ("hparams", rest), lr
    tokens = _tokens(report.name)
    at = [i for i, t in enumerate(tokens) if (found := _name_setting(t)) is not None and found[0] == "lr"]
    value = _name_setting(tokens[at[0]]) if len(at) == 1 else None
    lr = as_number(value[1]) if value is not None else None
    if lr is None:
        return None
    return ("name", (*tokens[: at[0]], "lr", *tokens[at[0] + 1 :])), lr


def _train_loss(report: RunReport) -> tuple[str, Series] | None:
    tag = report.primary_tags.train_loss
    series = report.run.scalars.get(tag) if tag is not None else None
    return (tag, series) if tag is not None and series is not None else None


def _points(report: RunReport) -> int:
    found = _train_loss(report)
    return max(1, len(found[1])) if found is not None else 1


def _sick(report: RunReport) -> bool:
    """A run a twin can speak for: a warning or critical finding with causes to re-weigh."""
    return any(f.severity in ("critical", "warning") and f.causes for f in report.findings)


def _lr_candidates(
    reports: Sequence[RunReport], settings: Mapping[str, dict[str, Any]], healthy: set[str]
) -> list[tuple[float, RunReport, list[tuple[float, RunReport]]]]:
    """(its lr, the run, its healthy siblings at a lower lr) for each run that may bounce above an lr twin."""
    places: dict[tuple, list[tuple[float, RunReport]]] = {}
    for report in reports:
        if (place := _lr_place(report, settings.get(report.name, {}))) is not None:
            places.setdefault(place[0], []).append((place[1], report))
    found = []
    for group in places.values():
        for lr, report in group:
            # A diverged or non-finite loss (a critical finding) is not bouncing in a valley; an oscillation
            # already warned of needs no twin.
            if any(
                f.severity == "critical" or f.kind == "oscillation" and f.severity != "info" for f in report.findings
            ):
                continue
            lower = [(other_lr, r) for other_lr, r in group if r.name in healthy and 0 < other_lr < lr]
            if lower:
                found.append((lr, report, lower))
    return found


def twin_candidates(reports: Sequence[RunReport], complete: bool = True) -> set[str]:
    """The runs whose verdict `attach_twins` over `reports` may change, told without their points (a sick run with
    a healthy twin, a run with a healthy lower-lr twin): what a screen that shows verdicts before twins are
    attached holds back. `complete=False` (other runs of the logdir are not in `reports` and could be twins): every
    sick run and every run that states an lr."""
    settings = run_settings(reports)
    if not complete:
        return {r.name for r in reports if _sick(r) or _lr_place(r, settings[r.name]) is not None}
    finder = TwinFinder(reports, settings)
    healthy = finder.healthy
    names = {r.name for r in reports if _sick(r) and finder.find(r) is not None}
    return names | {r.name for _, r, _ in _lr_candidates(reports, settings, {h.name for h in healthy})}


def lr_oscillation(reports: Sequence[RunReport], settings: Mapping[str, dict[str, Any]], healthy: set[str]) -> None:
    """Add `oscillation` to each run that bounces above its lr twin: the healthy run that differs from it ONLY
    in the lr, the nearest lower one. In place; the run's health is scored again with it."""
    for lr, report, lower in _lr_candidates(reports, settings, healthy):
        mine = _train_loss(report)
        if mine is None:
            continue
        tag, series = mine
        nearest = max(other_lr for other_lr, _ in lower)
        # Of equal twins (seeds), the one logged most like this run: its loss under the same tag, else at the
        # nearest number of points (a loss averaged over a window or an epoch scatters less than per step).
        twin = min(
            (r for other_lr, r in lower if other_lr == nearest),
            key=lambda r: (r.primary_tags.train_loss != tag, abs(math.log(_points(r) / _points(report))), r.name),
        )
        theirs = _train_loss(twin)
        found = against_twin(report.name, tag, series, twin.name, theirs[1], (lr, nearest)) if theirs else None
        if found is None:
            continue
        row = CAUSES["lr_too_high"]
        fact = f"the healthy twin {twin.name} differs only in lr={fmt(lr)} here vs {fmt(nearest)}"
        # The twin's difference is the cause's whole case: its weight (TWIN_WEIGHT) on an even prior.
        confidence = round(1 / (1 + math.exp(-TWIN_WEIGHT)), 2)
        evidence = {"for": [fact], "twin": {"run": twin.name, "differs": {"lr": [lr, nearest]}}}
        cause = Cause("lr_too_high", row.summary, confidence, evidence, row.fix)
        kept = [f for f in report.findings if f.kind != "oscillation"]  # an info `scatter` gives way to it
        report.findings = [*kept, replace(found, causes=(cause,))]
        report.health = health(report.findings, report.features, report.roles)
