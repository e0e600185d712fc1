"""Runs side by side: the settings that differ, best and final metrics, where the curves part, and why.

"Why is run B worse than run A" in one structure, shared by the app's compare screen, `tbtriage compare`
and the report's comparison section. It reuses the pieces that already judge runs against each other:
the hparams table (`compare.hparams_table`), the parting rule (`compare.parting_step`) and the healthy
twin's evidence (`twins.find_twin`, `twins.apply_twin`). A pure function of `RunReport`s (plus the config
files beside the runs, which `run_config` reads).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .compare import Parting, hparams_table, parting_step, series_best, tag_direction
from .datamodel import RunReport
from .findings import severity_rank
from .twins import TwinFinder, apply_twin, find_twin, name_differences, run_settings

#: Most report pairs (a sick run and its healthy twin) the report's comparison section lists.
MAX_REPORT_PAIRS = 20


@dataclass(frozen=True)
class MetricRow:
    """One tag's best and final value in each compared run (None where a run lacks it)."""

    tag: str
    role: str | None
    direction: int  # +1 higher is better, -1 lower is better, 0 unknown (no "best")
    best: tuple[float | None, ...]
    best_step: tuple[int | None, ...]
    final: tuple[float | None, ...]


@dataclass(frozen=True)
class Explanation:
    """The engine's account of a difference: a sick run, its healthy twin among the compared runs, and the
    cause their differing settings point to."""

    run: str
    twin: str
    sentence: str  # `Twin.sentence()`: the settings that differ and where the curves part
    finding: str  # the sick run's worst finding kind
    step: int | None
    cause: str | None  # the top cause once the twin's evidence is counted
    summary: str | None
    confidence: float | None


@dataclass(frozen=True)
class SideBySide:
    runs: tuple[str, ...]
    health: tuple[int | None, ...]
    differs: dict[str, tuple[Any, ...]]  # setting -> each run's value, only settings that differ
    shared: int  # settings every run has with the same value
    source: str | None  # "hparams", "name" (read off the run names) or None (nothing to compare)
    metrics: tuple[MetricRow, ...]
    tag: str | None  # the curve overlaid: the first run's headline series
    partings: dict[str, Parting | None]  # each other run -> where its curve parts from the first run's
    explanations: tuple[Explanation, ...]

    def to_dict(self) -> dict[str, Any]:
        first = self.runs[0]
        return {
            "runs": [{"run": r, "health": h} for r, h in zip(self.runs, self.health)],
            "differs": {k: list(v) for k, v in self.differs.items()},
            "shared_settings": self.shared,
            "differs_from": self.source,
            "metrics": [
                {
                    "tag": m.tag,
                    "role": m.role,
                    "direction": m.direction,
                    "best": list(m.best),
                    "best_step": list(m.best_step),
                    "final": list(m.final),
                }
                for m in self.metrics
            ],
            "tag": self.tag,
            "partings": [
                {
                    "run": run,
                    "reference": first,
                    "step": p.step if p else None,
                    "value": p.value_a if p else None,
                    "reference_value": p.value_b if p else None,
                    "band": p.band if p else None,
                }
                for run, p in self.partings.items()
            ],
            "explanations": [
                {
                    "run": e.run,
                    "twin": e.twin,
                    "sentence": e.sentence,
                    "finding": e.finding,
                    "step": e.step,
                    "cause": e.cause,
                    "summary": e.summary,
                    "confidence": e.confidence,
                }
                for e in self.explanations
            ],
        }


def _differences(reports: Sequence[RunReport]) -> tuple[dict[str, tuple[Any, ...]], int, str | None]:
    table = hparams_table(reports)
    if table is not None and len(table.rows) == len(reports):
        differs = {k: tuple(table.rows[r.name].get(k) for r in reports) for k in table.columns}
        return differs, len(table.constant), "hparams"
    if len(reports) == 2 and table is None:
        found = name_differences(reports[0].name, reports[1].name)
        if found is not None:
            return {k: (a, b) for k, (a, b) in found.items()}, 0, "name"
    if table is not None:  # some runs record settings, others none: show what is known
        differs = {k: tuple(table.rows.get(r.name, {}).get(k) for r in reports) for k in table.columns}
        return differs, len(table.constant), "hparams"
    return {}, 0, None


def _best_final(report: RunReport, tag: str) -> tuple[float | None, int | None, float | None]:
    """Best (in the tag's direction) and its step, from the features when the engine made them, and the last
    logged value (NaN when the run ended non-finite, as `compare.final_loss` reads it)."""
    series = report.run.scalars.get(tag)
    if series is None or not len(series):
        return None, None, None
    final = float(series.values[-1])
    features = report.features.get(tag)
    if features is not None and features.points:
        return features.best, features.best_step, final
    best = series_best(series, tag_direction(report.roles, report.directions, tag))
    return (best[0], best[1], final) if best is not None else (None, None, final)


def _metric_tags(reports: Sequence[RunReport]) -> list[str]:
    tags: list[str] = []
    for report in reports:
        primary = report.primary_tags
        for tag in (primary.train_loss, primary.val_loss, primary.val_metric):
            if tag is not None and tag not in tags:
                tags.append(tag)
    return tags


def _metrics(reports: Sequence[RunReport]) -> tuple[MetricRow, ...]:
    rows = []
    for tag in _metric_tags(reports):
        values = [_best_final(r, tag) for r in reports]
        owner = next(r for r in reports if tag in r.roles)
        direction = tag_direction(owner.roles, owner.directions, tag)
        rows.append(
            MetricRow(
                tag=tag,
                role=owner.roles.get(tag),
                direction=int(direction),
                best=tuple(v[0] for v in values),
                best_step=tuple(v[1] for v in values),
                final=tuple(v[2] for v in values),
            )
        )
    return tuple(rows)


def _overlaid_tag(reports: Sequence[RunReport]) -> str | None:
    """The first run's headline series when every run logs it, else the first headline they all share."""
    for report in reports:
        tag = report.primary_tags.headline
        if tag is not None and all(tag in r.run.scalars for r in reports):
            return tag
    return None


def _explanations(reports: Sequence[RunReport]) -> tuple[Explanation, ...]:
    """For each sick run among `reports`, its healthy twin among them and the cause their difference supports."""
    out = []
    for report in reports:
        sick = [f for f in report.findings if f.severity in ("critical", "warning")]
        if not sick:
            continue
        twin = find_twin(report, reports)
        if twin is None:
            continue
        worst = min(sick, key=lambda f: (severity_rank(f.severity), f.step if f.step is not None else 1 << 62))
        causes = worst.causes
        # The engine already counted a twin when it found one; count this one only if it was another run.
        if causes and (causes[0].evidence.get("twin") or {}).get("run") != twin.run:
            causes = apply_twin(causes, twin)
        top = causes[0] if causes else None
        out.append(
            Explanation(
                run=report.name,
                twin=twin.run,
                sentence=twin.sentence(),
                finding=worst.kind,
                step=worst.step,
                cause=top.cause if top else None,
                summary=top.summary if top else None,
                confidence=top.confidence if top else None,
            )
        )
    return tuple(out)


def side_by_side(reports: Sequence[RunReport]) -> SideBySide:
    """Two or more runs compared; the first is the reference every other run's curve is measured against."""
    if len(reports) < 2:
        raise ValueError("a comparison needs two or more runs")
    differs, shared, source = _differences(reports)
    tag = _overlaid_tag(reports)
    first = reports[0]
    partings: dict[str, Parting | None] = {}
    for other in reports[1:]:
        partings[other.name] = parting_step(other.run.scalars[tag], first.run.scalars[tag]) if tag else None
    return SideBySide(
        runs=tuple(r.name for r in reports),
        health=tuple(r.health.score for r in reports),
        differs=differs,
        shared=shared,
        source=source,
        metrics=_metrics(reports),
        tag=tag,
        partings=partings,
        explanations=_explanations(reports),
    )


def twin_pairs(
    reports: Sequence[RunReport], settings: Mapping[str, dict[str, Any]] | None = None
) -> tuple[SideBySide, ...]:
    """Each sick run beside its healthy twin (the natural pairs of a sweep), worst run first, at most
    MAX_REPORT_PAIRS. `settings`: `run_settings` of these runs (or of more), when the caller has them."""
    by_name = {r.name: r for r in reports}
    finder = TwinFinder(reports, run_settings(reports) if settings is None else settings)
    pairs = []
    for report in reports:
        if not any(f.severity in ("critical", "warning") for f in report.findings):
            continue
        twin = finder.find(report)
        if twin is not None:
            pairs.append(side_by_side([report, by_name[twin.run]]))
        if len(pairs) >= MAX_REPORT_PAIRS:
            break
    return tuple(pairs)
