"""The engine: roles → features → detectors → health for every run, ranked worst first.

    report = diagnose("runs/")             # or diagnose(tbtriage.load("runs/"))
    report.runs[0]                          # the unhealthiest run's RunReport
    report.to_json()                        # the JSON contract of shared/DESIGN.md

Keras writes `X/train` and `X/validation` as sibling runs (a TF Estimator writes `X` and `X/eval`). The
validation run's series are paired with the train run's (same quantity: `epoch_loss` with `epoch_loss`),
and overfitting across the two is reported on the **train** run (`X/train`, or `X`), whose training curve is the one that keeps improving; the
finding's evidence names the validation run and tag (`val_run`, `val_tag`). The validation run is still
analysed on its own (divergence, health), so nothing it shows is lost.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from .axes import KERAS_STRETCH_NOTE, keras_batch_means, keras_steps_per_epoch, restate, step_axes
from .causes import rank_causes
from .config import Config
from .datamodel import Finding, Run, RunReport, SeriesFeatures
from .detectors import ExternalSeries, LogdirContext, RunData, run_detectors
from .features import series_features
from .findings import SEVERITIES, severity_rank
from .health import health
from .json_safe import dumps, json_safe
from .reader import activity_span
from .roles import assign_roles, pair_train_val, primary_tags, quantity_key, tag_phase
from .run_config import run_hparams
from .smoothing import median
from .twins import attach_twins, run_settings

if TYPE_CHECKING:  # pragma: no cover
    from .logdir import Logdir

#: Run-name endings Keras (and similar callbacks) use for the two halves of one training run; fairseq writes its
#: per-update training stats to `train_inner/` beside `valid/`.
_TRAIN_SIBLINGS = ("train", "training", "train_inner")
_TRAIN_SIBLING = re.compile(r"(^|/)(" + "|".join(_TRAIN_SIBLINGS) + ")$")
_VAL_SIBLINGS = ("validation", "val", "eval", "evaluation", "test", "valid")
_T = TypeVar("_T")  # a run, or what stands for one (its directory, before it is read)


@dataclass(frozen=True)
class AnalysisContext(LogdirContext):
    """`LogdirContext` plus the logdir's runs, so a Keras `X/train` run can find its `X/validation` sibling."""

    runs: Mapping[str, Run] | None = None


def logdir_context(logdir: Logdir, now: float | None = None) -> AnalysisContext:
    """What single-run analysis needs to know about the other runs of `logdir` (a Logdir)."""
    return context_from_spans({name: scalar_span(run) for name, run in logdir.runs.items()}, logdir.runs, now)


def context_from_spans(
    spans: Mapping[str, tuple[float, float] | None], runs: Mapping[str, Run], now: float | None
) -> AnalysisContext:
    """The logdir context from each run's (first, last) wall time (None: no plausible time), in `runs`' order: how
    `logdir_context` makes it, and how a warm reopen makes it from the spans its cached verdicts kept."""
    kept = tuple((name, *span) for name, span in spans.items() if span is not None)
    latest = max((end for _, _, end in kept), default=None)
    return AnalysisContext(latest_wall_time=latest, now=now, spans=kept, runs=runs)


def scalar_span(run: Run) -> tuple[float, float] | None:
    """(first, last) wall time of the run's scalar points: when it trained, not when its files were opened
    (a writer stamps its file-version record with the wall clock at creation)."""
    return activity_span(run)


def _epoch_and_eval(run: Run, roles, primary) -> tuple[int | None, int | None]:
    """(steps per epoch, steps between evaluations), from the epoch tag and the validation cadence."""
    eval_interval = None
    for tag in (primary.val_loss, primary.val_metric):
        if tag and len(run.scalars[tag]) >= 3:
            gaps = np.diff(run.scalars[tag].steps)
            lowest, highest = gaps.min(), gaps.max()
            if not lowest > 0:  # (steps that stand still or go back: only the gaps forward count)
                gaps = gaps[gaps > 0]
                lowest, highest = (gaps.min(), gaps.max()) if gaps.size else (0, 0)
            if gaps.size:
                # Evaluations' step gaps repeat; most often they are all one value, which is then their median.
                same = lowest == highest
                eval_interval = int(0.0 + float(gaps[0])) if same else int(median(gaps, repeats=True))
                break
    epoch_length = None
    epoch_tags = [t for t, (r, _) in roles.items() if r == "epoch" and len(run.scalars[t]) >= 2]
    if epoch_tags:
        series = run.scalars[max(epoch_tags, key=lambda t: len(run.scalars[t]))]
        finite = np.isfinite(series.values)
        steps, values = series.steps[finite], series.values[finite]
        if values.size >= 2 and values[-1] - values[0] >= 1.0:
            epoch_length = int(round((steps[-1] - steps[0]) / (values[-1] - values[0])))
    return epoch_length or keras_steps_per_epoch(run) or eval_interval, eval_interval


def _val_sibling_names(name: str) -> list[str]:
    """Where the validation run of training run `name` would be, in the order they are tried."""
    if _TRAIN_SIBLING.search(name):
        stem = _TRAIN_SIBLING.sub("", name)
        return [f"{stem}/{ending}" if stem else ending for ending in _VAL_SIBLINGS]
    return [ending if name == "." else f"{name}/{ending}" for ending in _VAL_SIBLINGS]


def _train_sibling_names(name: str) -> list[str]:
    """Where the training run of validation run `name` would be (none unless `name` ends like one)."""
    parts = name.rsplit("/", 1)
    if parts[-1].lower() not in _VAL_SIBLINGS:
        return []
    stem = parts[0] if len(parts) == 2 else ""
    # Keras: `X/train` beside it; TF Estimator: the model directory `X` (or the logdir itself) above it.
    return [(f"{stem}/{t}" if stem else t) for t in _TRAIN_SIBLINGS] + [stem or "."]


def related_runs(name: str, runs: Mapping[str, _T]) -> dict[str, _T]:
    """The runs of `runs` that analysing run `name` looks at besides itself (its train or validation sibling):
    a context holding only these (and `name`) judges `name` exactly as the whole logdir's context does."""
    return {n: runs[n] for n in (*_val_sibling_names(name), *_train_sibling_names(name)) if n in runs and n != name}


def _sibling(run: Run, context: LogdirContext | None) -> tuple[str, Run] | None:
    """The validation run belonging to this training run: Keras's `X/validation` beside `X/train`, or a TF
    Estimator's `X/eval` inside the model directory `X`."""
    runs = getattr(context, "runs", None)
    if not runs:
        return None
    for name in _val_sibling_names(run.name):
        if name in runs and name != run.name:
            return name, runs[name]
    return None


def _has_train_sibling(run: Run, context: LogdirContext | None) -> bool:
    runs = getattr(context, "runs", None)
    if not runs:
        return False
    return any(name in runs for name in _train_sibling_names(run.name))


def _train_sibling_diverged(
    run: Run, features: Mapping[str, SeriesFeatures], context: LogdirContext | None, config: Config | None
) -> int | None:
    """The first step at which the training loss of this validation run's train sibling turned non-finite after
    finite points (training diverged), when this run holds a non-finite value itself; None otherwise."""
    runs = getattr(context, "runs", None)
    if not runs or all(f.first_nonfinite_step is None for f in features.values()):
        return None
    for name in _train_sibling_names(run.name):
        sibling = runs.get(name)
        if sibling is None or name == run.name:
            continue
        onsets = []
        for tag, (role, _) in assign_roles(sibling.scalars, config, run_name=name).items():
            series = sibling.scalars.get(tag)
            if role != "train_loss" or series is None or not len(series):
                continue
            bad = ~np.isfinite(series.values)
            if bad.any() and not bad[0]:
                onsets.append(int(series.steps[int(np.argmax(bad))]))
        if onsets:
            return min(onsets)
    return None


def _sibling_series(run: Run, roles, context: LogdirContext | None, config: Config | None) -> dict[str, ExternalSeries]:
    found = _sibling(run, context)
    if found is None:
        return {}
    name, sibling = found
    sibling_roles = assign_roles(sibling.scalars, config, run_name=name)
    out: dict[str, ExternalSeries] = {}
    for tag, (role, direction) in roles.items():
        if role not in ("train_loss", "loss_component", "metric") or tag_phase(tag, run.name) == "val":
            continue
        key = quantity_key(tag)
        matches = []
        for other, (other_role, other_direction) in sibling_roles.items():
            if quantity_key(other) != key or other not in sibling.scalars or not len(sibling.scalars[other]):
                continue
            if (role == "metric") != (other_role == "metric") or (role == "metric" and direction != other_direction):
                continue
            matches.append((other, other_role, other_direction))
        if not matches or not len(run.scalars[tag]):
            continue
        # Keras logs a validation quantity per epoch (`epoch_loss`) and per global step
        # (`evaluation_loss_vs_iterations`): pair each training series with the one on its own step axis.
        last = float(run.scalars[tag].steps[-1])
        other, other_role, other_direction = min(
            matches, key=lambda m: abs(math.log((float(sibling.scalars[m[0]].steps[-1]) + 1) / (last + 1)))
        )
        series = sibling.scalars[other]
        out[tag] = ExternalSeries(name, other, series, series_features(other, series, other_role, other_direction))
    return out


def run_data(run: Run, config: Config | None = None, context: LogdirContext | None = None) -> RunData:
    """What the detectors see of one run: its roles, per-series features, headline tags and run-level facts.
    A Keras running epoch mean is seen as the mean of each logged stretch of batches (`keras_batch_means`)."""
    run = keras_batch_means(run)
    roles = assign_roles(run.scalars, config, run_name=run.name)
    features: dict[str, SeriesFeatures] = {
        tag: series_features(tag, series, *roles[tag]) for tag, series in run.scalars.items()
    }
    points = {tag: len(series) for tag, series in run.scalars.items()}
    primary = primary_tags(roles, points, run_name=run.name)
    epoch_length, eval_interval = _epoch_and_eval(run, roles, primary)
    return RunData(
        name=run.name,
        run=run,
        roles=roles,
        features=features,
        primary=primary,
        pairs=tuple(pair_train_val(roles, points, run_name=run.name)),
        phases={tag: tag_phase(tag, run.name) for tag in run.scalars},
        epoch_length=epoch_length,
        eval_interval=eval_interval,
        context=context or LogdirContext(),
        sibling_val=_sibling_series(run, roles, context, config),
        has_train_sibling=_has_train_sibling(run, context),
        train_sibling_diverged=_train_sibling_diverged(run, features, context, config),
        axes=step_axes(run),
    )


def analyze_run(run: Run, config: Config | None = None, context: LogdirContext | None = None) -> RunReport:
    """Roles, features, findings and health of one run.

    `context` (see `logdir_context`) carries the logdir's newest wall time and other runs: `stalled` needs
    it, and a Keras `X/train` run finds its `X/validation` sibling through it.
    """
    return judge_run(run, config, context)[0]


def judge_run(
    run: Run, config: Config | None = None, context: LogdirContext | None = None
) -> tuple[RunReport, RunData]:
    """`analyze_run`, and the `RunData` its detectors saw (a pool's worker reads what `stalled` needs from it)."""
    # Values near DBL_MAX (a corrupt or hostile file) overflow to inf in differences and sums; the
    # features and detectors treat inf/nan results as "no evidence", so numpy's warnings are noise.
    with np.errstate(all="ignore"):
        return _analyze_run(run, config, context)


def _analyze_run(run: Run, config: Config | None, context: LogdirContext | None) -> tuple[RunReport, RunData]:
    data = run_data(run, config, context)
    found = run_detectors(data)
    # Only findings read the hparams (their causes): a run without any opens none of its config files.
    hparams = run_hparams(run)[0] if found else {}
    # Causes read the series on the detectors' axes; the finding is then stated on the run's axes.
    findings = [restate(replace(f, causes=rank_causes(f, data, hparams)), data.axes) for f in found]
    recovered = (
        {tag for tag, series in data.run.scalars.items() if series is not run.scalars.get(tag)}
        if data.run is not run  # `keras_batch_means` recovered a tag
        else set()
    )
    if recovered:  # its numbers are not the curve the chart shows: say so where a person reads them
        findings = [
            replace(f, evidence={**f.evidence, "values_from": KERAS_STRETCH_NOTE}) if recovered & set(f.tags) else f
            for f in findings
        ]
    report = RunReport(
        name=run.name,
        run=run,
        roles={tag: role for tag, (role, _) in data.roles.items()},
        directions={tag: direction for tag, (_, direction) in data.roles.items()},
        features=data.features,
        findings=findings,
        health=health(findings, data.features, data.roles),
        primary_tags=data.primary,
    )
    return report, data


def _rank_key(report: RunReport) -> tuple:
    counts = [0] * len(SEVERITIES)
    for f in report.findings:
        rank = severity_rank(f.severity)
        if rank < len(SEVERITIES):
            counts[rank] += 1
    # A run without data has no score: after every scored run (nothing in it to act on but its note).
    score = report.health.score
    return (score is None, score or 0, *(-c for c in counts), report.name)


def rank(reports: list[RunReport]) -> list[RunReport]:
    """Worst first: lowest health, then the most critical, warning and info findings; runs without data last."""
    return sorted(reports, key=_rank_key)


# ---- the report ---------------------------------------------------------------------------------------


def finding_dict(finding: Finding) -> dict[str, Any]:
    """A finding as the JSON contract writes it (strict JSON values)."""
    return json_safe(finding.to_dict())


def run_report_dict(report: RunReport) -> dict[str, Any]:
    """One run as the JSON contract writes it."""
    run = report.run
    return {
        "run": report.name,
        "files": list(run.files),
        "last_step": None if run.last_step is None else int(run.last_step),
        "last_wall_time": None if run.last_wall_time is None else float(run.last_wall_time),
        "tags": {tag: {"role": report.roles.get(tag), "points": n} for tag, n in report.tag_points().items()},
        "health": {
            "score": None if report.health.score is None else int(report.health.score),
            "components": dict(report.health.components),
        },
        "findings": [finding_dict(f) for f in report.findings],
    }


@dataclass
class Report:
    """Every run's verdict, worst first."""

    logdir: Logdir
    runs: list[RunReport]
    logdir_arg: str = ""  # the logdir as the user gave it (the JSON's "logdir")
    #: Each run's settings as its twins were found with (`twins.run_settings`): `twin_pairs` reuses them
    #: instead of reading every run's hparams and config files again. None: not read yet.
    settings: dict[str, dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        from . import __version__

        return {
            "tool": "tbtriage",
            "version": __version__,
            "logdir": self.logdir_arg or str(getattr(self.logdir, "path", "")),
            "runs": [run_report_dict(r) for r in self.runs],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return dumps(self.to_dict(), indent=indent)


def diagnose(
    logdir_or_path: str | os.PathLike[str] | Logdir,
    config: Config | None = None,
    runs: str | None = None,
    now: float | None = None,
    storage_options: dict[str, Any] | None = None,
    workers: int | None = None,
    slim: bool = False,
) -> Report:
    """Analyse every run of a logdir (a path or URL, read with `analysis.load`, or an already loaded Logdir).

    `runs` keeps only runs whose name matches the regex; `now` (default: the wall clock) tells `stalled`
    whether the logdir is live; `storage_options` go to fsspec for a URL; `workers` is the number of processes
    (default: every core once there are enough runs to pay for a pool, see `pipeline.analyze_runs`; 1 judges
    every run in this process). `slim` (a local path with many runs): the pool's workers read the runs as well
    (`pipeline.read_and_judge`), and each report's run keeps only the series the report reads afterwards
    (`fleet.slim_run`): the same verdicts, with neither the reading nor every run's points in this process.
    """
    from .pipeline import EngineAnalyzer, analyze_runs, pool_workers, read_and_judge

    now = time.time() if now is None else now
    if isinstance(logdir_or_path, (str, os.PathLike)):
        from concurrent.futures.process import BrokenProcessPool

        from .logdir import compile_filter, open_logdir

        arg = str(logdir_or_path)
        compile_filter("--runs", runs)
        logdir = open_logdir(logdir_or_path, runs=runs, storage_options=storage_options)
        found, only = logdir.discover()
        pattern = re.compile(runs) if runs else None
        found = {name: path for name, path in found.items() if pattern is None or pattern.search(name)}
        count = pool_workers(len(found), workers)
        if slim and count > 1 and not logdir.storage.objects:
            # Many local runs: the pool's workers read them too, and only verdicts come back (`read_and_judge`).
            try:
                logdir.runs, reports = read_and_judge(logdir, found, only, config, now, count)
            except (OSError, ValueError, BrokenProcessPool):
                pass  # no pool here, or a worker died: read and judge below, as for few runs
            else:
                settings = run_settings(reports)
                attach_twins(reports, settings)
                return Report(logdir=logdir, runs=rank(reports), logdir_arg=arg, settings=settings)
        logdir.warnings.clear()  # the refresh lists the logdir again, and notes each warning again
        logdir.refresh()
    else:
        logdir = logdir_or_path
        arg = str(getattr(logdir, "path", ""))
    context = logdir_context(logdir, now=now)
    pattern = re.compile(runs) if runs else None
    chosen = [run for name, run in logdir.runs.items() if pattern is None or pattern.search(name)]
    reports = analyze_runs(chosen, context, EngineAnalyzer(config), workers=workers, logdir=logdir)
    settings = run_settings(reports)
    attach_twins(reports, settings)
    return Report(logdir=logdir, runs=rank(reports), logdir_arg=arg, settings=settings)
