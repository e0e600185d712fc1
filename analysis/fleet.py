"""The report on a Dask cluster: each worker reads and analyses a share of the runs, the client merges.

    report = fleet_diagnose("s3://lab/runs", "tcp://scheduler:8786")   # or "local": a LocalCluster here

The runs are packed into tasks of about TASK_BYTES of event files (a run's Keras/Estimator siblings stay in
its task: the train run's overfitting check reads its validation sibling). A worker reads its task's runs
with the reader the local path uses (`reader.RunReader`) and keeps them; the client gathers each run's
activity span (the `stalled` detector compares a run with the whole logdir's newest event), then each task
analyses its runs with `engine.analyze_run` and sends back the verdicts: findings, health, features and the
few loss and metric series the report itself still reads (the twin comparison, the best metric, the
sparklines), never the other points. The client attaches twins and ranks, as `engine.diagnose` does, so
the report is the local one, byte for byte.

A task whose worker dies is run again elsewhere (`TASK_RETRIES`); a run that cannot be read or analysed
becomes a warning of the report, never a lost report.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .config import Config
from .datamodel import Run, RunReport
from .engine import AnalysisContext, Report, analyze_run, rank, scalar_span
from .logdir import Logdir, compile_filter, open_logdir
from .reader import RunReader
from .storage import RemoteStorage

#: Bytes of event files per task: big enough that a task's overhead (a few ms) is nothing next to its
#: reading, small enough that a lost worker costs little to redo and memory stays modest.
TASK_BYTES = 256 << 20
#: At least this many tasks per worker when the logdir is small, so every worker has work and a slow
#: one does not hold the others up.
TASKS_PER_WORKER = 4
#: Times a task is run again after its worker died (distributed's `retries`).
TASK_RETRIES = 3
#: Seconds to connect to a scheduler before giving up with one line (never a hang).
CONNECT_TIMEOUT_S = 10
#: Run names ending like this belong with their parent directory's run (Keras `X/train` + `X/validation`,
#: Estimator `X` + `X/eval`): `engine` pairs them, so they are analysed in the same task.
_SIBLING_ENDINGS = ("train", "training", "validation", "val", "eval", "evaluation", "test", "valid")


class FleetError(Exception):
    """The cluster cannot be used (no `distributed`, no scheduler at the address): one line."""


def family(name: str) -> str:
    """The run that `name` is a sibling of (itself when it is none): runs of one family share a task."""
    parts = name.split("/")
    while parts and parts[-1].lower() in _SIBLING_ENDINGS:
        parts.pop()
    return "/".join(parts) or "."


def pack(sizes: dict[str, int], target: int) -> list[list[str]]:
    """Run names in tasks of about `target` bytes, families together, in name order."""
    families: dict[str, list[str]] = {}
    for name in sizes:
        families.setdefault(family(name), []).append(name)
    tasks: list[list[str]] = []
    current: list[str] = []
    used = 0
    for members in families.values():
        size = sum(sizes[m] for m in members)
        if current and used + size > target:
            tasks.append(current)
            current, used = [], 0
        current.extend(members)
        used += size
    if current:
        tasks.append(current)
    return tasks


@dataclass
class Task:
    """What a worker needs to read some runs: the logdir, its storage (a store's listing of these runs), the runs."""

    path: Any
    storage: Any
    only: str | None
    kernel: str | None
    runs: list[tuple[str, Any]]  # (name, directory)


@dataclass
class Loaded:
    """A task's runs as read on the worker (they stay there), and the runs that could not be read."""

    runs: dict[str, Run]
    failed: dict[str, str] = field(default_factory=dict)


@dataclass
class Verdicts:
    """What comes back from a task: slim reports (see `slim`) and the runs that failed, with why."""

    reports: list[RunReport]
    failed: dict[str, str]


def read_task(task: Task) -> Loaded:
    """Read a task's runs with the local path's reader, one kernel for the task (as `Logdir.refresh` does)."""
    from .decode import choose_kernel

    readers = {
        name: RunReader(task.path, directory, name, kernel=task.kernel, only_file=task.only, storage=task.storage)
        for name, directory in task.runs
    }
    kernel = choose_kernel(sum(r.pending_bytes() for r in readers.values()), task.kernel)
    loaded = Loaded({})
    for name, reader in readers.items():
        try:
            reader.read(kernel)
        except Exception as exc:  # noqa: BLE001 - one run that breaks the reader is a warning, not a lost report
            loaded.failed[name] = f"cannot be read ({type(exc).__name__}: {exc})"
            continue
        loaded.runs[name] = reader.run
    return loaded


def task_spans(loaded: Loaded) -> list[tuple[str, float, float] | None]:
    """Each run's activity span, in the task's order (None for a run with no plausible wall time)."""
    out: list[tuple[str, float, float] | None] = []
    for name, run in loaded.runs.items():
        span = scalar_span(run)
        out.append(None if span is None else (name, *span))
    return out


def analyse_task(
    loaded: Loaded,
    config: Config | None,
    latest: float | None,
    spans: tuple[tuple[str, float, float], ...],
    now: float,
) -> Verdicts:
    """`engine.analyze_run` on every run of a task, in the logdir's context; the slim verdicts."""
    context = AnalysisContext(latest_wall_time=latest, now=now, spans=spans, runs=loaded.runs)
    reports, failed = [], dict(loaded.failed)
    for name, run in loaded.runs.items():
        try:
            reports.append(slim(analyze_run(run, config, context)))
        except Exception as exc:  # noqa: BLE001 - a run the engine cannot take is a warning, not a lost report
            failed[name] = f"cannot be analysed ({type(exc).__name__}: {exc})"
    return Verdicts(reports, failed)


def report_tags(report: RunReport) -> set[str]:
    """The tags whose points the report still reads after analysis: losses (twins, final loss), the headline
    loss and the best-metric tag (sparklines)."""
    from .compare import best_metric

    tags = {tag for tag, role in report.roles.items() if role in ("train_loss", "val_loss")}
    if report.primary_tags.loss:
        tags.add(report.primary_tags.loss)
    best = best_metric(report)
    if best is not None:
        tags.add(best.tag)
    return tags


def slim(report: RunReport) -> RunReport:
    """`report` with its run cut to what the report reads (`slim_run`), and features without the detectors'
    bucketed curves (`without_curves`)."""
    return without_curves(slim_run(report))


def without_curves(report: RunReport) -> RunReport:
    """`report` with features without the detectors' bucketed curves (`SeriesFeatures.without_curves`: only
    detectors read them): ~3 KB of verdict a run instead of ~30 KB."""
    if not any(f.has_curves for f in report.features.values()):
        return report  # none to drop (a pool's worker dropped them already)
    return replace(report, features={tag: f.without_curves() for tag, f in report.features.items()})


def slim_run(report: RunReport) -> RunReport:
    """`report` with its run cut to what the report reads after analysis: no histograms, only `report_tags`'
    series (the features, findings and health stay whole)."""
    keep = report_tags(report)
    run = replace(
        report.run,
        scalars={tag: s for tag, s in report.run.scalars.items() if tag in keep},
        histograms={},
    )
    return replace(report, run=run)


def _sizes(logdir: Logdir, found: dict[str, Any], only: str | None) -> dict[str, int]:
    storage: Any = logdir.storage
    sizes = {}
    for name, directory in found.items():
        total = 0
        try:
            names = [only] if only is not None else storage.list_files(directory)
        except OSError:
            names = []  # the worker's reader notes it, as the local path does
        for fname in names:
            try:
                total += storage.stat(storage.join(directory, fname)).size
            except OSError:
                continue
        sizes[name] = total
    return sizes


def connect(address: str, workers: int | None = None):
    """A distributed Client for `address` ("local": a LocalCluster of worker processes here); FleetError."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise FleetError("--dask needs distributed: pip install 'tbtriage[dask]'") from None
    if address == "local":
        n = workers or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
            silence_logs=40,
        )
        return Client(cluster), cluster
    try:
        return Client(address, timeout=f"{CONNECT_TIMEOUT_S}s"), None
    except (OSError, TimeoutError) as exc:
        raise FleetError(
            f"--dask {address}: no scheduler answered within {CONNECT_TIMEOUT_S} s ({type(exc).__name__})"
        ) from None
    except Exception as exc:  # noqa: BLE001 - a malformed address, a scheduler of another version: one line
        raise FleetError(f"--dask {address}: cannot connect ({type(exc).__name__}: {exc})") from None


def fleet_diagnose(
    path,
    client,
    config: Config | None = None,
    runs: str | None = None,
    now: float | None = None,
    storage_options: dict[str, Any] | None = None,
    progress: Callable[[str, int, int, int], None] | None = None,
    task_bytes: int = TASK_BYTES,
) -> Report:
    """`engine.diagnose(path)` computed on the cluster behind `client`; the same Report.

    `progress(stage, tasks done, tasks, runs done)` is called as each task's runs are read (stage "read") and
    as its verdicts arrive ("analysed").
    """
    from distributed import as_completed

    from .twins import attach_twins

    compile_filter("--runs", runs)
    logdir = open_logdir(path, runs=runs, storage_options=storage_options)
    found, only = logdir.discover()
    if runs:
        pattern = re.compile(runs)
        found = {k: v for k, v in found.items() if pattern.search(k)}
    now = time.time() if now is None else now
    sizes = _sizes(logdir, found, only)
    workers = max(1, len(client.scheduler_info().get("workers", {})))
    target = max(1, min(task_bytes, math.ceil(sum(sizes.values()) / (TASKS_PER_WORKER * workers))))
    tasks = []
    for names in pack(sizes, target):
        storage = logdir.storage
        if isinstance(storage, RemoteStorage):  # the worker gets these runs' listing, and lists nothing itself
            storage = storage.subset([found[n] for n in names])
        tasks.append(Task(logdir.path, storage, only, logdir.kernel, [(n, found[n]) for n in names]))

    loaded = [client.submit(read_task, t, pure=False, retries=TASK_RETRIES) for t in tasks]
    spans_of = [client.submit(task_spans, f, pure=False, retries=TASK_RETRIES) for f in loaded]
    span_by_name = {}
    read = runs_read = 0
    for future in as_completed(spans_of):
        read += 1
        if future.status == "finished":  # a task lost for good is reported below
            spans = future.result()
            runs_read += len(spans)
            span_by_name.update({s[0]: s for s in spans if s is not None})
        if progress is not None:
            progress("read", read, len(tasks), runs_read)
    ordered = tuple(span_by_name[n] for n in found if n in span_by_name)  # the logdir's order, as the local path
    latest = max((end for _, _, end in ordered), default=None)
    verdicts = [
        client.submit(analyse_task, f, config, latest, ordered, now, pure=False, retries=TASK_RETRIES) for f in loaded
    ]
    by_name: dict[str, RunReport] = {}
    failed: dict[str, str] = {}
    done = 0
    index = {future.key: i for i, future in enumerate(verdicts)}
    for future in as_completed(verdicts):
        try:
            result = future.result()
        except Exception as exc:  # noqa: BLE001 - a task lost for good (its workers kept dying): its runs are warnings
            task = tasks[index[future.key]]
            failed.update({name: f"lost on the cluster ({type(exc).__name__}: {exc})" for name, _ in task.runs})
        else:
            by_name.update({r.name: r for r in result.reports})
            failed.update(result.failed)
        done += 1
        if progress is not None:
            progress("analysed", done, len(tasks), len(by_name) + len(failed))
    del loaded, spans_of, verdicts  # the runs held on the workers are let go
    reports = [by_name[n] for n in found if n in by_name]
    logdir.runs = {r.name: r.run for r in reports}
    logdir.warnings.extend(f"{name}: {why}" for name, why in sorted(failed.items()))
    attach_twins(reports)
    return Report(logdir=logdir, runs=rank(reports), logdir_arg=str(path))
