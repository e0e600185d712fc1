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

`report` (`engine.diagnose(slim=True)`) goes further with many local runs: `read_and_judge` hands the workers
the runs' directories, not their points; each worker reads its runs and sends back the verdicts and only the
series the report reads afterwards (see the section "reading in the pool" below). So does the app's cold open of
many local runs (`tui.warm_open.judge_in_pool`), which then maps the columns the workers cached (or, with the cache
off, decodes them again itself); otherwise it reads every run itself and judges through `analyze_runs`.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import shutil
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from . import verdict_cache
from .cache import release
from .cache import root as cache_root
from .config import Config
from .datamodel import Run, RunReport, Series
from .decode import JIT_COLD_MIN_BYTES, JIT_MIN_BYTES, choose_kernel, kernel_name
from .detectors.stalled import StallFacts, stall, stall_facts
from .engine import AnalysisContext, LogdirContext, analyze_run, judge_run, related_runs, scalar_span
from .fleet import slim, slim_run, without_curves
from .reader import RunReader
from .spill import map_columns, write_columns

if TYPE_CHECKING:  # pragma: no cover
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


#: Collections of the youngest generation, then automatic full collections, while `full_collections_held`: a one-shot
#: command that builds thousands of verdicts keeps them to its end, and each full collection walked every one of them
#: (and everything imported): 0.3-0.45 s of a 2,000-run report's 2.2-4 s in its own process, for nothing to free.
HELD_THRESHOLDS = (50_000, 20, 1_000_000)
_held_from: tuple[int, int, int] | None = None  # the thresholds `full_collections_held` replaced, while it holds


@contextmanager
def full_collections_held() -> Iterator[None]:
    """Hold off the cyclic garbage collector's full passes (and make its young ones rarer) in this process until the
    block ends. Young cycles are still collected; a pool's workers keep the caller's usual thresholds (`_start_worker`):
    their tasks' garbage comes and goes with each task. A pool forked in the block freezes the heap first (`_new_pool`):
    for a command about to exit (`report`), not for a process that lives on."""
    global _held_from
    before, outer = gc.get_threshold(), _held_from
    _held_from = outer or (before[0], before[1], before[2])  # nested: the usual ones are the outermost block's
    gc.set_threshold(*HELD_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        _held_from = outer


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
    curves: bool = True,
) -> list[RunReport]:
    """Every run's report, in the order of `runs` (fewer when `cancel()` turned true part-way).

    `curves=False`: the pool's workers send each verdict without the detectors' curves (`fleet.without_curves`;
    ~3 KB pickled instead of ~30 for four tags), for a caller that would drop them.

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
            lambda todo, judged: analyze_runs(todo, context, analyzer, workers, judged, cancel, niceness, None, curves),
            on_report,
        )
    count = pool_workers(len(runs), workers) if isinstance(analyzer, EngineAnalyzer) else 1
    reports: list[RunReport] = []
    if count > 1 and isinstance(analyzer, EngineAnalyzer):
        try:
            _pooled(runs, context, analyzer.config, count, reports, on_report, cancel, niceness, curves)
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


#: What says where and whether to cache and how to read. A fork server's workers carry the environment the server
#: started with (another caller's, in a process that starts pools for several), so each pool hands them the caller's.
CALLER_ENV = ("HOME", "XDG_CACHE_HOME", "TBTRIAGE_NO_CACHE", "TBTRIAGE_CACHE_MAX", "TBTRIAGE_KERNEL")


def _caller_env() -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in CALLER_ENV}


def _new_pool(workers: int, initializer: Callable[..., None], *initargs: object) -> ProcessPoolExecutor:
    """A pool of `workers` processes started as `_pool_context` chooses, each running `initializer(*initargs, env)`
    first, `env` being this caller's `CALLER_ENV`: the one place a pool is made."""
    context = _pool_context()
    if _held_from is not None and context.get_start_method() == "fork":
        # A one-shot caller (`full_collections_held`): what it holds now is left out of every collection, here and
        # in the forked workers, whose full collections walked it all (and copied the pages they touched).
        gc.freeze()
    return ProcessPoolExecutor(
        workers, mp_context=context, initializer=initializer, initargs=(*initargs, _caller_env())
    )


def _start_worker(
    context: LogdirContext, config: Config | None, niceness: int = 0, env: dict[str, str | None] | None = None
) -> None:
    global _worker_context, _worker_config
    _worker_context, _worker_config = context, config
    if _held_from is not None:  # forked while the caller held its full collections: a worker's usual ones
        gc.set_threshold(*_held_from)
    for name, value in (env or {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if niceness and hasattr(os, "nice"):
        try:
            os.nice(niceness)
        except OSError:
            pass  # not allowed here: the workers run at the caller's priority


def _analyze_batch(runs: list[Run], related: dict[str, Run], curves: bool = True) -> list[RunReport]:
    """A worker's verdicts on `runs`, each with an empty `Run` in place of the points (the parent has them), and
    without the detectors' curves unless `curves`."""
    context = _worker_context
    if isinstance(context, AnalysisContext):
        context = replace(context, runs={**related, **{run.name: run for run in runs}})
    reports = [replace(analyze_run(run, _worker_config, context), run=Run(run.name, run.path)) for run in runs]
    return reports if curves else [without_curves(report) for report in reports]


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


def warm_pool() -> None:
    """Start now the fork server that this process's next pool forks its workers from (`_pool_context`: a fresh
    interpreter that imports the engine, ~0.5 s of a core), so that it gets ready while the caller lists and sizes the
    runs; nothing where the pool forks or spawns. A server that cannot start is started (or given up on) by the pool."""
    context = _pool_context()
    if context.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        try:
            forkserver.ensure_running()
        except (OSError, ValueError):
            pass


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
    curves: bool = True,
) -> None:
    """Judge `runs` in a pool, appending each verdict to `reports` in order as it arrives."""
    everything = getattr(context, "runs", None) or {}
    shared = replace(context, runs=None) if isinstance(context, AnalysisContext) else context
    batches = [list(runs[i : i + CHUNK_RUNS]) for i in range(0, len(runs), CHUNK_RUNS)]
    pool = _new_pool(workers, _start_worker, shared, config, niceness)
    try:
        # Each future is let go of once its verdicts are taken (each is copied with the caller's run): a list of every
        # future kept the worker's verdicts, each with an empty run of its own, until the pass ended.
        futures: deque[tuple[list[Run], Future[list[RunReport]]]] = deque()
        for batch in batches:
            related: dict[str, Run] = {}
            for run in batch:
                related.update(related_runs(run.name, everything))
            futures.append((batch, pool.submit(_analyze_batch, batch, related, curves)))
        while futures:
            if cancel():
                break
            batch, future = futures.popleft()
            for run, report in zip(batch, future.result()):
                reports.append(replace(report, run=run))
                release(run)  # the pages its pickling touched
                if on_report is not None:
                    on_report(reports[-1], len(reports), len(runs))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# ---- reading in the pool ------------------------------------------------------------------------------
#
# With many runs, the workers read the runs as well as judge them: the caller lists the logdir, hands each
# worker the names and directories of its runs, and gets back each verdict with only what the steps across
# runs need of its points (`fleet.slim_run`: the losses and best metric that twins, comparisons and the
# renderers read; the features, findings and health whole) plus its activity span (the logdir context) and
# `stalled.StallFacts`. A worker judges without the logdir's context (no other run's wall times yet), which can
# only leave `stalled` out: once every span is known, the caller judges again, here, the few runs for which
# `stalled.stall` says it fires. A Keras `X/train` run is read with its `X/validation` sibling
# (`engine.related_runs`, found from the names), so every run is judged as the serial path judges it.
# With the cache on, each worker caches the verdicts it judged (`verdict_cache.store`, as not stalled: the entry
# holds in every context where `stalled` says nothing), so caching costs the report's process nothing; it caches
# only the few runs it judged again.


@dataclass(frozen=True)
class Judged:
    """One run's verdict from a worker, and what the caller needs of the run to finish the logdir's steps."""

    report: RunReport  # its run cut to the series read after analysis, no curves (`fleet.slim`)
    span: tuple[float, float] | None  # first and last plausible wall time (`engine.scalar_span`)
    facts: StallFacts | None  # what `stalled` needs of the run, judged against the logdir's spans by the caller
    spilled: tuple[tuple[str, int], ...] = ()  # (tag, points) of the series written to the task's spill file


@dataclass(frozen=True)
class ReadTask:
    """What a worker needs to read and judge a batch of runs: their directories, and those of their siblings."""

    root: Path | str  # the logdir
    runs: tuple[tuple[str, Path | str], ...]  # (name, directory) of each run to judge, in order
    related: tuple[tuple[str, Path | str], ...]  # siblings the batch's runs look at, read but not judged
    only_file: str | None = None
    kernel: str | None = None  # the user's preference ("pure", "jit"; part of a run's column-cache key)
    spill: str | None = None  # the file the worker writes the verdicts' series to (None: they are pickled)
    read_with: str | None = None  # the kernel chosen for the whole pool's bytes (`_kernel_for`), else the batch's


@dataclass(frozen=True)
class _TaskRuns:
    """A worker's runs (its task's and their siblings) as `verdict_cache` looks runs up in a logdir: by name, each
    with the reader that read it."""

    _readers: Mapping[str, RunReader]

    @property
    def runs(self) -> Mapping[str, RunReader]:
        return self._readers


def _readers(task: ReadTask) -> dict[str, RunReader]:
    return {
        name: RunReader(task.root, path, name, kernel=task.kernel, only_file=task.only_file)
        for name, path in (*task.runs, *task.related)
    }


def judge_one(
    name: str, run_of: Callable[[str], Run], related: Sequence[str], config: Config | None, now: float | None
) -> Judged:
    """Read run `name` (through `run_of`, which reads each run of the task once) and judge it, without the
    logdir's context: the one place a run becomes a verdict in a worker."""
    run = run_of(name)
    context = AnalysisContext(now=now, runs={name: run, **{n: run_of(n) for n in related}})
    report, data = judge_run(run, config, context)
    return Judged(slim(report), scalar_span(run), stall_facts(run, data.primary.lr))


def _read_and_judge(task: ReadTask) -> list[Judged]:
    """A worker's verdicts on the runs of `task`, read here (through the decoded-column cache when it is on)."""
    readers = _readers(task)
    for reader in readers.values():
        reader.map_cached = False  # a cold read's columns stay in the heap: the task lets its runs go at its end
        reader.store_after_read = False  # cached below, once judged, with the run's verdict in the same file
    prefer = task.read_with or task.kernel
    # Chosen for the whole pool (`read_with`), the kernel needs no sizing: that lists and stats every run once more.
    nbytes = 0 if prefer in ("jit", "pure") else sum(reader.pending_bytes(resume=False) for reader in readers.values())
    kernel = choose_kernel(nbytes, prefer)
    read: set[str] = set()
    names = {name: path for name, path in (*task.runs, *task.related)}

    def run_of(name: str) -> Run:
        if name not in read:
            readers[name].read(kernel)
            read.add(name)
        return readers[name].run

    out = []
    for name, _ in task.runs:
        out.append(judge_one(name, run_of, list(related_runs(name, names)), _worker_config, _worker_now))
    verdicts: dict[str, bytes] = {}
    if verdict_cache.enabled():
        held = _TaskRuns(readers)
        for j in out:
            # Judged without the logdir's context: the verdict holds in every context where `stalled` says nothing
            # (cached as such: the entry's `stall` is None, checked on reuse). The caller judges again, and caches,
            # the runs that `stalled` speaks of once it knows every span.
            raw = verdict_cache.entry_bytes(held, j.report, LogdirContext(), _worker_config, j.facts)
            if raw is not None:
                verdicts[j.report.name] = raw
    for name in read:
        # Each run's columns and verdict in one entry: a file created costs more than writing its bytes (~0.3 ms of
        # the kernel's CPU a file in a crowded directory of this machine's disk, against ~0.1 ms for 88 kB).
        raw = verdicts.pop(name, b"")
        if not readers[name].store_cache(raw) and raw:
            verdict_cache.write(readers[name], raw)  # its columns were not written (a hit, a failed write)
    if task.spill is not None:
        out = _spill(out, task.spill)
    for name in read:
        release(readers[name].run)  # its mapped columns' pages: the batch's runs at a time in memory
    return out


def _spill(judged: list[Judged], path: str) -> list[Judged]:
    """`judged` with its series written to the file `path` (`spill.write_columns`) and each left as (tag, points) in
    their place: the caller maps the file (`_unspill`) instead of unpickling, copying and holding every run's points."""
    out = []
    with open(path, "wb") as f:
        for j in judged:
            run = j.report.run
            lengths = write_columns(f, ((s.steps, s.wall_times, s.values) for s in run.scalars.values()))
            shape = tuple(zip(run.scalars, lengths))
            out.append(replace(j, report=replace(j.report, run=replace(run, scalars={})), spilled=shape))
    return out


def _unspill(judged: list[Judged], path: str) -> list[Judged]:
    """The series `_spill` wrote to `path`, put back as read-only views of the file mapped (`spill.map_columns`)."""
    columns = iter(map_columns(path, [n for j in judged for _, n in j.spilled]))
    out = []
    for j in judged:
        j.report.run.scalars = {tag: Series(*next(columns)) for tag, _ in j.spilled}
        out.append(replace(j, spilled=()))
    return out


_worker_now: float | None = None


def _start_reader(
    config: Config | None, now: float | None, niceness: int = 0, env: dict[str, str | None] | None = None
) -> None:
    global _worker_now
    _worker_now = now
    _start_worker(LogdirContext(), config, niceness, env)


def read_and_judge(
    logdir: Logdir,
    found: Mapping[str, Path | str],
    only_file: str | None,
    config: Config | None,
    now: float | None,
    workers: int,
    niceness: int = 0,
    on_judged: Callable[[list[Judged]], None] | None = None,
) -> tuple[dict[str, Run], list[RunReport]]:
    """Every run of `found` (name -> directory, as `Logdir.discover` lists them) read and judged in a pool of
    `workers` processes: (name -> its cut `Run`, the reports in the order of `found`), each exactly as
    `analyze_runs` would judge it in the logdir's context. Raises what `_pooled` lets its caller fall back on
    (OSError, ValueError, BrokenProcessPool) when the pool cannot do it. `on_judged` (the app) gets each task's
    verdicts as they come back, judged without the logdir's context (`stalled` is judged once every span is known);
    what it raises stops the pool (its running tasks finish first) and goes to the caller."""
    names = list(found)
    logdir.find((dict(found), only_file))  # each run's reader, reading nothing: what the verdict cache stats and
    # the kernel is sized on (from the caller's listing: 2,000 directories are not walked twice)
    entries = _cached_entries(logdir, names, config)
    todo = [name for name in names if name not in entries]
    kernel = _kernel_for(logdir, todo)
    spill = tempfile.mkdtemp(prefix="tbtriage-pool-")  # never in the logdir: it is read only
    tasks: list[ReadTask] = []
    for i in range(0, len(todo), CHUNK_RUNS):
        batch = todo[i : i + CHUNK_RUNS]
        related: dict[str, Path | str] = {}
        for name in batch:
            related.update((n, p) for n, p in related_runs(name, found).items() if n not in batch)
        tasks.append(
            ReadTask(
                logdir.path,
                tuple((n, found[n]) for n in batch),
                tuple(related.items()),
                only_file,
                logdir.kernel,
                os.path.join(spill, f"{len(tasks)}.cols"),
                kernel,
            )
        )
    judged: dict[str, Judged] = {}
    try:
        if tasks:
            pool = _new_pool(workers, _start_reader, config, now, niceness)
            try:
                for task, result in [(task, pool.submit(_read_and_judge, task)) for task in tasks]:
                    done = _unspill(result.result(), task.spill) if task.spill else result.result()
                    judged.update((j.report.name, j) for j in done)
                    if on_judged is not None:
                        on_judged(done)
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
    finally:
        shutil.rmtree(spill, ignore_errors=True)  # the files mapped stay readable until their last view goes
    spans = tuple(
        (name, *span)
        for name in names
        if (span := entries[name].span if name in entries else judged[name].span) is not None
    )
    context = AnalysisContext(latest_wall_time=max((end for _, _, end in spans), default=None), now=now, spans=spans)
    reports = []
    for name in names:
        report = _from_cache(logdir, name, entries[name], context) if name in entries else None
        if report is None:
            verdict = judged.get(name)
            if verdict is not None and stall(verdict.facts, context) is None:
                report = verdict.report  # cached by its worker (`_read_and_judge`): this process never reads the run
            else:  # `stalled` speaks of it in this context (or its cached verdict no longer holds)
                report = _judge_here(logdir, found, only_file, name, config, context)
                _cache_verdict(logdir, report, context, config)
        reports.append(report)
    return {r.name: r.run for r in reports}, reports


def _kernel_for(logdir: Logdir, names: Sequence[str]) -> str:
    """The kernel every worker reads with, chosen once for all the bytes the pool reads (as `Logdir.refresh`
    chooses for a whole refresh): sized on one task's 16 runs, a 1.5 GB logdir was read by the pure-Python kernel
    (~0.2 s a run, 30x the compiled one)."""
    # Not resumed from the column cache here: the workers cache these runs, and this process's readers then
    # map what they cached (`_cache_verdict`) instead of decoding the runs a second time. Counted only up to the
    # size from which the compiled kernel pays (statting every file of 2,000 runs took 0.16 s before the pool).
    enough = max(JIT_MIN_BYTES, JIT_COLD_MIN_BYTES)
    nbytes = 0
    for name in names:
        reader = logdir._readers.get(name)
        if reader is not None and nbytes < enough:
            nbytes += reader.pending_bytes(resume=False)
    return kernel_name(nbytes, logdir.kernel)  # decided without loading numba here: only the workers read


def _cached_entries(logdir: Logdir, names: Sequence[str], config: Config | None) -> dict[str, verdict_cache.Entry]:
    """The runs of `names` whose cached verdict still holds as far as their own files tell (`verdict_cache`):
    the workers need not read them; the logdir's context is checked once every span is known."""
    if not verdict_cache.enabled() or not cache_root().is_dir():
        return {}  # a first report (no entry yet): ~30 µs a run of failed opens spared before the pool starts
    entries = {}
    for name in names:
        entry = verdict_cache.candidate(logdir, name, config)
        if entry is not None:
            entries[name] = entry
    return entries


def _from_cache(logdir: Logdir, name: str, entry: verdict_cache.Entry, context: AnalysisContext) -> RunReport | None:
    """Run `name`'s cached verdict when it holds in `context`, with the series the report reads (mapped from the
    column cache); None when it must be judged again."""
    reader = logdir._readers[name]
    reader.read()
    report = entry.report(context, reader.run)
    out = None if report is None else slim_run(report)
    release(reader.run)
    return out


def _cache_verdict(logdir: Logdir, report: RunReport, context: AnalysisContext, config: Config | None) -> None:
    """Keep a verdict judged here (a run `stalled` speaks of, whose worker cached it as not stalled) for the next
    reopen: the run's reader here vouches for its files (it maps the columns the worker cached, decoding nothing)."""
    reader = logdir._readers.get(report.name) if verdict_cache.enabled() else None
    if reader is None:
        return
    reader.read()
    verdict_cache.store(logdir, report, context, config)
    release(reader.run)


def _judge_here(
    logdir: Logdir,
    found: Mapping[str, Path | str],
    only_file: str | None,
    name: str,
    config: Config | None,
    context: AnalysisContext,
) -> RunReport:
    """Run `name` read again and judged here in the logdir's whole context: a run that `stalled` speaks of."""
    task = ReadTask(
        logdir.path, ((name, found[name]),), tuple(related_runs(name, found).items()), only_file, logdir.kernel
    )
    readers = _readers(task)
    for reader in readers.values():
        reader.read()
    report = analyze_run(readers[name].run, config, replace(context, runs={n: r.run for n, r in readers.items()}))
    for reader in readers.values():
        release(reader.run)
    return slim(report)
