"""Analyse many runs: one at a time, or in a process pool when there are enough of them to pay for it.

`report`, `tbtriage.diagnose` and the app's follower (`watch.Watcher`, which `tbtriage watch` shares) all
judge runs through `analyze_runs`, so they agree by construction. The per-run work is many numpy calls on
small arrays, which hold the GIL: threads would not overlap, processes do.

The pool ships each worker the runs it judges (pickled arrays: ~2 % of the analysis time) and gets the
verdicts back without the runs' points; the parent re-attaches its own `Run`. A worker sees the logdir
context (wall-time spans for `stalled`) once, at start, and with each batch only the sibling runs
(Keras's `X/train` and `X/validation`) the batch's runs look at (`engine.related_runs`), so a run is
judged exactly as the serial path judges it. Workers are forks of a single-threaded caller (the CLI),
else forks of a fork server (the app has threads, and a fork copies whatever lock another thread holds);
a script that starts the pool from threads needs the `if __name__ == "__main__":` guard. If a pool cannot start or a worker dies, the runs not yet judged are judged here, serially.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from . import verdict_cache
from .cache import release
from .config import Config
from .datamodel import Run, RunReport
from .engine import AnalysisContext, LogdirContext, analyze_run, related_runs

if TYPE_CHECKING:
    from .logdir import Logdir

#: Below this many runs the serial path is used: starting a pool (a fresh interpreter importing numpy and
#: the engine, ~0.5 s) costs more than it saves on a hundred runs judged in ~5 ms each.
POOL_MIN_RUNS = 128
#: Runs per task: small enough that the work spreads evenly and the caller hears of progress often, large
#: enough that a task's overhead (pickling, one round trip) stays below a percent of its work.
CHUNK_RUNS = 16


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the platform has one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        try:
            return max(1, len(affinity(0)))
        except OSError:
            pass
    return max(1, os.cpu_count() or 1)


def pool_workers(runs: int, workers: int | None = None) -> int:
    """Processes to analyse `runs` runs with: 1 (serial) for few runs or one core; `workers` when given."""
    if workers is not None:
        return max(1, min(workers, runs))
    if runs < POOL_MIN_RUNS:
        return 1
    return min(usable_cores(), runs)


@dataclass(frozen=True)
class EngineAnalyzer:
    """The engine's verdict on one run with `config` (a `watch.RunAnalyzer`); poolable, unlike a stand-in."""

    config: Config | None = None

    def __call__(self, run: Run, context: LogdirContext) -> RunReport:
        report = analyze_run(run, self.config, context)
        release(run)  # its mapped columns' pages: one run's at a time in memory, however large the logdir
        return report


OnReport = Callable[[RunReport, int, int], None]


def analyze_runs(
    runs: Sequence[Run],
    context: LogdirContext,
    analyzer: Callable[[Run, LogdirContext], RunReport] | None = None,
    workers: int | None = None,
    on_report: OnReport | None = None,
    cancel: Callable[[], bool] = lambda: False,
    niceness: int = 0,
    logdir: Logdir | None = None,
) -> list[RunReport]:
    """Every run's report, in the order of `runs` (fewer when `cancel()` turned true part-way).

    With the `logdir` the runs belong to and the engine's analyzer, each run's verdict comes from the verdict
    cache when it still holds (`verdict_cache`), and each verdict judged here is cached: `on_report` then hears
    the cached ones first.

    `analyzer` defaults to the engine with no config; an `EngineAnalyzer` (or the default) may run in a
    process pool of `workers` processes (default: `pool_workers`), any other callable runs here.
    `on_report(report, done, total)` is called in order as each verdict arrives. The pool's workers
    lower their priority by `niceness` (`os.nice`): the app's, so that its UI thread gets a core the
    moment a key needs one, while the workers still use every core the rest of the time.
    """
    analyzer = analyzer or EngineAnalyzer()
    if logdir is not None and isinstance(analyzer, EngineAnalyzer) and verdict_cache.enabled():
        return verdict_cache.judge_runs(
            runs,
            context,
            logdir,
            analyzer.config,
            lambda todo, judged: analyze_runs(todo, context, analyzer, workers, judged, cancel, niceness),
            on_report,
        )
    count = pool_workers(len(runs), workers) if isinstance(analyzer, EngineAnalyzer) else 1
    reports: list[RunReport] = []
    if count > 1 and isinstance(analyzer, EngineAnalyzer):
        try:
            _pooled(runs, context, analyzer.config, count, reports, on_report, cancel, niceness)
        except (OSError, ValueError, BrokenProcessPool):
            pass  # no pool here (no /dev/shm, a sandbox, no usable stderr) or a worker died: the rest serially
    for run in runs[len(reports) :]:
        if cancel():
            break
        reports.append(analyzer(run, context))
        if on_report is not None:
            on_report(reports[-1], len(reports), len(runs))
    return reports


# ---- the pool -------------------------------------------------------------------------------------------

_worker_context: LogdirContext = LogdirContext()
_worker_config: Config | None = None


def _start_worker(context: LogdirContext, config: Config | None, niceness: int = 0) -> None:
    global _worker_context, _worker_config
    _worker_context, _worker_config = context, config
    if niceness and hasattr(os, "nice"):
        try:
            os.nice(niceness)
        except OSError:
            pass  # not allowed here: the workers run at the caller's priority


def _analyze_batch(runs: list[Run], related: dict[str, Run]) -> list[RunReport]:
    """A worker's verdicts on `runs`, each with an empty `Run` in place of the points (the parent has them)."""
    context = _worker_context
    if isinstance(context, AnalysisContext):
        context = replace(context, runs={**related, **{run.name: run for run in runs}})
    return [replace(analyze_run(run, _worker_config, context), run=Run(run.name, run.path)) for run in runs]


def _pool_context() -> multiprocessing.context.BaseContext:
    """Fork when this process has no other thread (the CLI: workers start at once, nothing re-imported);
    otherwise (the app, with its worker threads, where a fork may copy a lock another thread holds) a fork
    server, whose workers fork from a fresh interpreter that imported the engine once."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    _start_resource_tracker()
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([__name__])
        return ctx
    return multiprocessing.get_context("spawn")


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker (which a fork server or spawned pool needs) with a real stderr.

    It hands its child `sys.stderr.fileno()`; a Textual app replaces sys.stderr with a capture whose fileno
    is -1, and the start fails ("bad value(s) in fds_to_keep"). For the moment of that start, the process's
    own stderr stands in; the tracker keeps running for every later pool.
    """
    from multiprocessing import resource_tracker

    try:
        usable = sys.stderr is not None and sys.stderr.fileno() >= 0
    except (AttributeError, OSError, ValueError):
        usable = False
    if usable or sys.__stderr__ is None:
        resource_tracker.ensure_running()
        return
    captured, sys.stderr = sys.stderr, sys.__stderr__
    try:
        resource_tracker.ensure_running()
    finally:
        sys.stderr = captured


def _pooled(
    runs: Sequence[Run],
    context: LogdirContext,
    config: Config | None,
    workers: int,
    reports: list[RunReport],
    on_report: OnReport | None,
    cancel: Callable[[], bool],
    niceness: int = 0,
) -> None:
    """Judge `runs` in a pool, appending each verdict to `reports` in order as it arrives."""
    everything = getattr(context, "runs", None) or {}
    shared = replace(context, runs=None) if isinstance(context, AnalysisContext) else context
    batches = [list(runs[i : i + CHUNK_RUNS]) for i in range(0, len(runs), CHUNK_RUNS)]
    pool = ProcessPoolExecutor(
        workers, mp_context=_pool_context(), initializer=_start_worker, initargs=(shared, config, niceness)
    )
    try:
        futures: list[Future[list[RunReport]]] = []
        for batch in batches:
            related: dict[str, Run] = {}
            for run in batch:
                related.update(related_runs(run.name, everything))
            futures.append(pool.submit(_analyze_batch, batch, related))
        for batch, future in zip(batches, futures):
            if cancel():
                break
            for run, report in zip(batch, future.result()):
                reports.append(replace(report, run=run))
                release(run)  # the pages its pickling touched
                if on_report is not None:
                    on_report(reports[-1], len(reports), len(runs))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
