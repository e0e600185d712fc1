"""A warm reopen: every run's health from the logdir's health index at once, then the columns read lazily.

When `analysis.health_index` vouches for every run (the same runs, files, engine and config as when their verdicts
were judged), the app shows each run's health from it before importing the engine or reading a column (read when
the app is made, `IndexRead`: a small index at once, so the first frame shows it; a large one on a thread). The load worker then reads the runs one at a time (the UI thread gets the interpreter
between any two), the charted ones first (`ReadOrder`: the app names them as the view changes), each with its
cached verdict checked against the files as read (`verdict_cache.lookup`); once every run is read the follower
adopts those verdicts as its first pass (`Watcher.adopt`), as if it had judged them (`read_lazily`). If a verdict does
not hold after all (a file changed since the index was read), the follower's first pass judges it as on any open.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from tbtriage.analysis import health_index
from tbtriage.tui.messages import HealthIndexed, LogdirRead, PassDone, Progress, RunsAnalyzed, RunsRead, Throttle

if TYPE_CHECKING:
    from textual.worker import Worker

    from tbtriage.analysis.datamodel import RunReport
    from tbtriage.analysis.health_index import Index
    from tbtriage.analysis.logdir import Logdir
    from tbtriage.analysis.pipeline import Judged
    from tbtriage.tui.app import TriageApp


class ReadOrder:
    """The runs still to read, in order, with the ones the user is looking at moved to the front (thread-safe: the
    UI thread asks for runs, the load worker takes them)."""

    def __init__(self, names: Iterable[str]) -> None:
        self._lock = threading.Lock()
        self._todo = dict.fromkeys(names)  # insertion-ordered: the logdir's order
        self._wanted: deque[str] = deque()

    def want(self, names: Iterable[str]) -> None:
        """Read these runs next (those still unread), before any other."""
        with self._lock:
            self._wanted.extendleft(reversed([n for n in names if n in self._todo]))

    def take(self) -> tuple[str, bool] | None:
        """The next run to read, and whether it was asked for; None when every run is taken."""
        with self._lock:
            while self._wanted:
                name = self._wanted.popleft()
                if name in self._todo:
                    del self._todo[name]
                    return name, True
            if not self._todo:
                return None
            name = next(iter(self._todo))
            del self._todo[name]
            return name, False


#: An index up to this size (about 700 runs) is checked on the UI thread before the first frame, which then shows
#: every run's health: ~0.2 ms a run. A larger one is checked on a thread while Textual starts (its checks are
#: system calls, each of which hands the interpreter to the busy UI thread and waits to get it back: several times
#: slower, but the first frame does not wait for it).
INLINE_INDEX_BYTES = 512 * 1024


class IndexRead(threading.Thread):
    """Reads the logdir's health index from the moment the app is made: at once when it is small (`inline`), else
    on a thread of its own while Textual starts."""

    def __init__(self, app: TriageApp) -> None:
        super().__init__(name="tbtriage-health-index", daemon=True)
        self._logdir = Path(app.logdir_path)
        self._config, self._now = app.config, app.clock()
        self.index: Index | None = None
        self.shown = False  # the app drew it before its first frame: nothing to post
        try:
            self.inline = os.stat(health_index.index_path(self._logdir)).st_size <= INLINE_INDEX_BYTES
        except OSError:
            self.inline = True  # no index: nothing to read
        if self.inline:
            self.run()
        else:
            self.start()

    def run(self) -> None:
        self.index = health_index.read(self._logdir, self._config, self._now)


def start_index_read(app: TriageApp) -> IndexRead | None:
    """The health index's read, started (or done); None where there is no index to read."""
    if app._analyzer is not None or not isinstance(app.logdir_path, os.PathLike):
        return None  # a stand-in analyzer's verdicts are not the engine's; a store's logdir has no index
    return IndexRead(app)


def health_from_index(app: TriageApp, reading: IndexRead | None) -> Index | None:
    """The logdir's health index when it holds (posted to the app unless it drew it already), else None."""
    if reading is None:
        return None
    if not reading.inline:
        reading.join()
    if reading.index is not None and not reading.shown:
        app.post_message(HealthIndexed(reading.index.health, reading.index.paths))
    return reading.index


def read_lazily(app: TriageApp, worker: Worker, index: Index) -> bool:
    """Read every run (the ones the user looks at first) and take its cached verdict, then hand the whole to the
    follower; False when the logdir no longer lists the runs the index holds (then nothing was read)."""
    from tbtriage.analysis import cache, verdict_cache
    from tbtriage.analysis.engine import context_from_spans
    from tbtriage.analysis.logdir import LogdirError, open_logdir

    try:
        logdir = open_logdir(app.logdir_path)
        logdir.spill = app.spill  # the points appended while following (the cache maps the rest)
        logdir.find()
    except (LogdirError, OSError):
        return False
    if list(logdir.runs) != list(index.health):
        return False
    context = context_from_spans(index.spans, logdir.runs, app.clock())
    reports: dict[str, RunReport] = {}
    missed = False

    def verdict(name: str) -> RunReport | None:
        nonlocal missed
        report = None if missed else verdict_cache.lookup(logdir, name, context, app.config)
        missed = missed or report is None
        if report is not None:
            reports[name] = report
        # Its twins change nothing: the engine's verdict is the one shown while the others are read.
        return report if report is not None and name not in index.twinned else None

    if not _read_columns(app, worker, logdir, verdict):
        return True
    app.post_message(LogdirRead(logdir))
    new_watcher(app, logdir)
    if missed:  # a file changed since the index was read: the first pass judges what no longer holds
        app.post_message(Progress("analysing", 0, len(logdir.runs)))
        app.indexed_pass(worker, app._follow_pass)
        return True
    cache.touch(health_index.index_path(app.logdir_path))  # used: the last the size cap evicts
    assert app.watcher is not None
    new = app.watcher.adopt(reports, context)
    total = len(logdir.runs)
    app.post_message(RunsAnalyzed(list(app.watcher.shown.values()), total, total))
    app.post_message(PassDone(new, True))
    return True


def _read_columns(
    app: TriageApp,
    worker: Worker,
    logdir: Logdir,
    verdict: Callable[[str], RunReport | None] | None = None,
    kernel: ModuleType | None = None,
) -> bool:
    """Read every run of `logdir` one at a time (the UI thread gets the interpreter between any two), the charted
    ones first (`ReadOrder`: the app names them as the view changes), posting them (with `verdict(name)`, where
    given and not None) a few times a second; False when the worker was cancelled. Each run is read with `kernel`
    (one for the whole logdir), else with the one its own bytes call for; what the column cache does not map goes
    to the logdir's spill (`Logdir.spill`)."""
    from tbtriage.analysis.decode import choose_kernel

    order = app.read_order = ReadOrder(logdir.runs)
    order.want(app.store.charted_runs(app.view))
    cancel = lambda: worker.is_cancelled  # noqa: E731 - the reader polls it between chunks
    runs, shown = {}, []
    throttle = Throttle()
    total = len(logdir.runs)
    while (taken := order.take()) is not None:
        if worker.is_cancelled:
            return False
        name, wanted = taken
        reader = logdir._readers[name]
        reader.read(kernel or choose_kernel(reader.pending_bytes(), logdir.kernel), cancel)
        if logdir.spill is not None:
            logdir.spill.add(reader)
        app.columns_read.add(name)
        runs[name] = logdir.runs[name] = reader.run
        report = None if verdict is None else verdict(name)
        if report is not None:
            shown.append(report)
        if wanted or throttle.ready():  # the run the user looks at at once, the others a few times a second
            app.post_message(RunsRead(dict(runs), list(shown), len(app.columns_read), total))
            runs.clear()
            shown.clear()
    if logdir.spill is not None:
        logdir.spill.flush()
    if runs:
        app.post_message(RunsRead(dict(runs), list(shown), total, total))
    app.read_order = None
    return not worker.is_cancelled


def new_watcher(app: TriageApp, logdir: Logdir) -> None:
    """The app's follower of `logdir`, before its first pass."""
    from tbtriage.analysis.watch import RECHECK_SILENT_S, Watcher, engine_analyzer

    analyzer = app._analyzer or engine_analyzer(app.config)
    silent_s = RECHECK_SILENT_S if app.recheck_silent_s is None else app.recheck_silent_s
    app.watcher = Watcher(
        logdir, analyzer, clock=app.clock, recheck_silent_s=silent_s, niceness=app.pool_niceness, keep_curves=False
    )


class _Cancelled(Exception):
    """The app quit while the pool judged: raised from the pool's callback, it stops the pool."""


def judge_in_pool(app: TriageApp, worker: Worker, listed: tuple[dict[str, Path], None] | None = None) -> bool:
    """A cold open of many local runs: the pool's workers read the runs and judge them (`pipeline.read_and_judge`, as
    `report` does: the reading runs on every core), each task's verdicts shown as they come; the follower adopts them
    as its first pass (`Watcher.adopt`), then the runs' columns are read lazily: mapped from the column cache the
    workers filled, or with `--no-cache` decoded again here (one kernel for the whole logdir) into the app's spill,
    once every run's health is on screen. False (nothing shown) where this does not apply: the caller reads and
    judges as before (a stand-in analyzer, a store's logdir, too few runs for a pool, no pool here).
    True also when it was cancelled; when it returns True after the pool's pass, the health index is written
    (`TriageApp.write_health_index`: after the pass, before the lazy read). `listed`: the runs as the caller's walk of
    the logdir just found them (else it is walked here)."""
    from concurrent.futures.process import BrokenProcessPool

    from tbtriage.analysis import cache, verdict_cache
    from tbtriage.analysis.decode import choose_kernel
    from tbtriage.analysis.engine import context_from_spans
    from tbtriage.analysis.logdir import LogdirError, open_logdir
    from tbtriage.analysis.pipeline import pool_workers, read_and_judge

    if app._analyzer is not None or not isinstance(app.logdir_path, os.PathLike):
        return False
    try:
        logdir = open_logdir(app.logdir_path)
        logdir.spill = app.spill  # what the cache does not map: the lazy read's columns, the points appended later
        found, only = logdir.discover() if listed is None else listed
    except (LogdirError, OSError):
        return False
    workers = pool_workers(len(found))
    if workers < 2:
        return False
    total = len(found)
    spans: dict[str, tuple[float, float] | None] = {}

    def judged(batch: list[Judged]) -> None:
        if worker.is_cancelled:
            raise _Cancelled
        spans.update((j.report.name, j.span) for j in batch)
        # Judged without the logdir's context (`stalled` comes once every span is known) and without twins.
        app.post_message(RunsAnalyzed([j.report for j in batch], min(len(spans), total - 1), total))

    try:
        runs, reports = read_and_judge(logdir, found, only, app.config, app.clock(), workers, app.pool_niceness, judged)
    except _Cancelled:
        return True
    except (OSError, ValueError, BrokenProcessPool):
        return False  # no pool here, or a worker died: read and judge as before
    logdir.runs = runs  # each cut to the series the report reads (points mapped): the columns are read below
    for name in found:
        if name not in spans:  # its verdict was cached before: the cache kept its span
            entry = verdict_cache.candidate(logdir, name, app.config)
            spans[name] = None if entry is None else entry.span
    context = context_from_spans({name: spans[name] for name in found}, logdir.runs, app.clock())
    app.post_message(LogdirRead(logdir))
    new_watcher(app, logdir)
    assert app.watcher is not None
    new = app.watcher.adopt({r.name: r for r in reports}, context)
    app._first_pass_shown.clear()
    app.post_message(RunsAnalyzed(list(app.watcher.shown.values()), total, total))
    app.post_message(PassDone(new, True))
    app._wait_for(app._first_pass_shown, worker)  # every run's health on screen before the read takes the GIL
    # Every run is judged: the index is written now, not after the lazy read, so that quitting at any moment from
    # here on (the worker cancelled) still leaves the next open a warm one.
    app.write_health_index()
    # Without the cache every run is decoded again: one kernel for all its bytes (sized run by run, 2,000 small runs
    # would each be read by the pure-Python kernel). With it, each run maps what its worker cached.
    kernel = None if cache.enabled() else choose_kernel(logdir.pending_bytes(), logdir.kernel)
    _read_columns(app, worker, logdir, kernel=kernel)
    return True
