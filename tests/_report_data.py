"""Hand-built runs and reports for the view tests (report, compare, render): no engine, no files needed."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tbtriage.analysis.datamodel import Finding, Health, Run, RunReport, Series, SeriesFeatures, TextEntry
from tbtriage.analysis.roles import primary_tags

ROLE_DIRECTION = {"train_loss": -1, "val_loss": -1, "metric": 1}


def series(steps, values) -> Series:
    steps = np.asarray(steps, dtype=np.int64)
    return Series(steps, 1.7e9 + steps.astype(np.float64), np.asarray(values, dtype=np.float64))


def features_of(tag: str, s: Series, role: str | None, direction: int) -> SeriesFeatures:
    """Best/final the way the engine defines them: best respects direction, non-finite points skipped."""
    finite = np.isfinite(s.values)
    best = best_step = None
    if finite.any():
        idx = np.flatnonzero(finite)
        pick = idx[np.argmax(s.values[idx])] if direction > 0 else idx[np.argmin(s.values[idx])]
        best, best_step = float(s.values[pick]), int(s.steps[pick])
    nonfinite = np.flatnonzero(~finite)
    return SeriesFeatures(
        tag=tag,
        role=role,
        direction=direction,
        points=len(s),
        first_step=int(s.steps[0]) if len(s) else None,
        last_step=int(s.steps[-1]) if len(s) else None,
        best=best,
        best_step=best_step,
        final=float(s.values[-1]) if len(s) else None,
        final_step=int(s.steps[-1]) if len(s) else None,
        first_nonfinite_step=int(s.steps[nonfinite[0]]) if nonfinite.size else None,
        noise=None,
        outlier_steps=np.empty(0, np.int64),
        plateaus=(),
        trend=None,
        spike_period=None,
    )


def make_report(
    name: str,
    curves: dict[str, tuple[str | None, Series]],
    findings: list[Finding] = (),
    score: int = 100,
    path: Path | None = None,
    hparams: dict | None = None,
    texts: dict[str, str] | None = None,
    directions: dict[str, int] | None = None,
) -> RunReport:
    """A RunReport over `curves` (tag -> (role, series)); roles decide directions unless given."""
    run = Run(name=name, path=path or Path("/nonexistent") / name)
    run.scalars = {tag: s for tag, (_, s) in curves.items()}
    run.hparams = dict(hparams or {})
    run.texts = {tag: [TextEntry(0, 1.7e9, text)] for tag, text in (texts or {}).items()}
    steps = [int(s.steps[-1]) for _, s in curves.values() if len(s)]
    run.last_step = max(steps) if steps else None
    run.files = ["events.out.tfevents.1700000000.host.0"]
    roles = {tag: role for tag, (role, _) in curves.items()}
    dirs = {tag: (directions or {}).get(tag, ROLE_DIRECTION.get(role, 0)) for tag, role in roles.items()}
    feats = {tag: features_of(tag, s, roles[tag], dirs[tag]) for tag, (_, s) in curves.items()}
    components = {
        "convergence": score,
        "stability": score,
        "gradient_health": None,
        "resource_efficiency": None,
        "overfitting_risk": score,
    }
    primary = primary_tags(
        {tag: (role, dirs[tag]) for tag, role in roles.items()}, {tag: len(s) for tag, (_, s) in curves.items()}
    )
    return RunReport(name, run, roles, dirs, feats, list(findings), Health(score, components), primary)


def finding(run: str, kind: str, severity: str, step: int | None, tags=("train/loss",), **evidence) -> Finding:
    return Finding(
        kind=kind,
        severity=severity,
        run=run,
        tags=tuple(tags),
        step=step,
        end_step=None,
        evidence=evidence or {"value": 1.5},
        message=f"{kind} in {run} at {step}",
        suggestion=f"fix the {kind}",
    )


def loss_curve(n: int = 200, start: float = 3.0, floor: float = 0.5, seed: int = 0) -> Series:
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n + 1) * 10
    values = floor + (start - floor) * np.exp(-steps / (steps[-1] / 4)) * np.exp(rng.normal(0, 0.02, n))
    return series(steps, values)


def accuracy_curve(n: int = 20, top: float = 0.9, peak_at: int | None = None, seed: int = 0) -> Series:
    steps = np.arange(1, n + 1) * 100
    values = top * (1 - np.exp(-steps / (steps[-1] / 3)))
    if peak_at is not None:
        values = np.where(steps > peak_at, values[steps <= peak_at].max() - (steps - peak_at) * 1e-5, values)
    return series(steps, values)
