"""The tbtriage Textual app: the data, the thread workers that fill it, and the actions behind every key.

`make_app(...)` builds it for the CLI and for the tests alike. Reading runs in a thread worker;
analysis and live follow go through `analysis.watch.Watcher`, the same follower `tbtriage watch`
uses (so a run that goes silent while others write on is re-judged and flagged `stalled`). Workers
report back with the typed messages of `tui.messages`, a few per second at most; the app turns
them into `store` and `data` changes, and key actions into new `view` states (`tui.state`), which
the screens watch. Time comes from an injected clock, so liveness ages (and snapshot tests) are
deterministic when it is fixed.
"""

from __future__ import annotations

import functools
import gc
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.reactive import reactive
from textual.timer import Timer
from textual.widget import Widget
from textual.worker import Worker, WorkerState, get_current_worker

import tbtriage
from tbtriage.analysis.config import Config, load_config
from tbtriage.analysis.datamodel import Run, RunReport
from tbtriage.analysis.findings import finding_key
from tbtriage.analysis.health_index import RunHealth
from tbtriage.analysis.storage import is_url
from tbtriage.themes import DEFAULT_THEME, NO_COLOR_THEME, STYLESHEET, THEME_ORDER, load_themes
from tbtriage.tui import hold_young_collections, release_young_collections, young_collections_held
from tbtriage.tui.bindings import PALETTE_ID, PALETTE_KEY, bindings, key_caption, keymap_from_config, works_on
from tbtriage.tui.chart_options import ChartOptions, SeriesRequest
from tbtriage.tui.commands import TriageCommands
from tbtriage.tui.messages import (
    COALESCE_S,
    Exported,
    HealthIndexed,
    LoadFailed,
    LogdirRead,
    PassDone,
    Progress,
    RunsAnalyzed,
    RunsDiscovered,
    RunsRead,
    Throttle,
)
from tbtriage.tui.safe_text import plain
from tbtriage.tui.screens.main import MainScreen
from tbtriage.tui.state import DataChange, RunStore, ViewState, choose_run, with_valid_tag
from tbtriage.tui.warm_open import (
    ReadOrder,
    health_from_index,
    judge_in_pool,
    new_watcher,
    read_lazily,
    start_index_read,
)
from tbtriage.tui.warm_up import Step, WarmUp, import_step

if TYPE_CHECKING:
    from tbtriage.analysis.spill import Spill
    from tbtriage.analysis.watch import RunAnalyzer, Watcher

# Only what the first screen needs is imported here: numpy, the chart (plotext; mounted by the main screen just after
# its first frame), the reader (and its protobufs), the column cache, the engine and its detectors, the Markdown
# renderer, the dashboard, the help screen and the CSV writer are imported where they are first used, off the path from
# the shell to the first frame (`bench/tui_speed.py` times it; tests/test_first_screen.py holds the list).

#: Live follow re-reads appended bytes this often. Loggers flush every 10-120 s, so 5 s shows a new
#: point within seconds of it landing, while a pass over unchanged files (a stat each) stays negligible.
FOLLOW_SECONDS = 5.0

#: Longest the read waits for the screen that shows the cached verdicts to be drawn (it is drawn in milliseconds
#: unless the app is busy elsewhere).
CACHED_DRAW_WAIT_S = 1.0
#: The analysis pool's workers run this much nicer than the app (`os.nice`): on a machine whose cores they
#: fill, the UI thread still gets one the moment a key arrives; idle cores are still all theirs.
POOL_NICENESS = 10

#: A live pass that judged runs writes the health index again, at most once in this many seconds: the write checks
#: every run's cached verdict against its files (0.76 s for 2,000 runs on a busy 2-core machine), and a logdir whose runs all write on is judged
#: again on every pass. An index left behind by a later change is never wrong, only not used (its files differ).
INDEX_EVERY_S = 60.0

#: No change of the data is waiting to be announced (`TriageApp._data_changed`).
_NOTHING = object()

#: From this many columns up the main screen shows every pane; below it, the Diagnosis pane folds away.
WIDE_COLUMNS = 110


def keep_out_of_gc() -> None:
    """Move what the process holds now (the runs read, the verdicts so far) out of the cyclic garbage collector's
    sight (`gc.freeze`), after collecting the young garbage: they live as long as the app. While thousands of runs
    load, every full collection walked all of them with every thread stopped: 100-165 ms each on 2,000 runs, the
    longest waits for a key. Frozen objects that are not in a cycle are still freed when no longer referenced.
    Before the first frame (young collections held: `tbtriage.tui`) nothing is collected first: everything start-up
    made is young then, and walking it would cost what holding the collections saved."""
    if not young_collections_held():
        gc.collect(1)
    gc.freeze()


#: While a logdir loads, automatic full collections wait until this many younger ones have run (Python's default:
#: 10). Objects made between two `keep_out_of_gc` calls (a reader or the pool's results on a worker thread, a
#: quarter of a second's worth) were still walked by each full collection, with every thread stopped: up to
#: 650 ms on 10,000 runs. Young collections still run (cycles among new objects are collected), and the default
#: is back once the load worker is done (every run judged, and read where a first pass came from verdicts).
FULL_COLLECTIONS_WHILE_LOADING = 1_000_000


class FullCollectionsHeld:
    """Holds off automatic full collections (`FULL_COLLECTIONS_WHILE_LOADING`) until `release` (the young ones are
    left as they are: held until the first frame)."""

    def __init__(self) -> None:
        young, middle, self.full = gc.get_threshold()
        gc.set_threshold(young, middle, FULL_COLLECTIONS_WHILE_LOADING)
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            young, middle, _ = gc.get_threshold()
            gc.set_threshold(young, middle, self.full)


def _while_shown(handler):
    """Worker messages can land while the app shuts down; with the main screen gone there is nothing to update."""

    @functools.wraps(handler)
    def guarded(self: TriageApp, message) -> None:
        if self.is_running and self.main_screen.is_mounted:
            handler(self, message)

    return guarded


class TriageApp(App[int]):
    """Holds the data (`store`), the view (`view`, watched by the screens) and the workers that fill the data.

    The app never calls into a screen: it assigns `view` and `data`, and each screen redraws what
    depends on what changed.
    """

    TITLE = "tbtriage"
    CSS_PATH = str(STYLESHEET)
    BINDINGS = bindings("app")
    COMMANDS = App.COMMANDS | {TriageCommands}
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (WIDE_COLUMNS, "-wide")]
    pool_niceness = POOL_NICENESS

    view: reactive[ViewState] = reactive(ViewState, init=False)
    #: Bumped (coalesced, a few times a second at most) when runs or reports arrive.
    data: reactive[DataChange] = reactive(DataChange, init=False)
    follow: reactive[bool] = reactive(True, init=False)

    def __init__(
        self,
        logdir: Path | str,
        *,
        theme: str,
        ascii_only: bool,
        config: Config,
        follow: bool,
        clock: Callable[[], float],
        follow_seconds: float,
        recheck_silent_s: float | None,
        loader: Callable[..., Any],
        analyzer: RunAnalyzer | None,
        spill: Spill | None = None,
    ) -> None:
        hold_young_collections()  # until the first frame (`_first_frame_drawn`), as since `tbtriage.tui` was imported
        self.keymap, self.unknown_keys = keymap_from_config(config.keys)
        # Read by App.__init__ when it binds the palette, so a remap must be in place first.
        self.COMMAND_PALETTE_BINDING = self.keymap.get(PALETTE_ID, PALETTE_KEY)  # type: ignore[misc]  # per app, by design
        super().__init__()
        for registered in load_themes().values():
            self.register_theme(registered)
        self.theme = theme
        self.logdir_path = logdir
        self.ascii_only = ascii_only
        self.config = config
        self.clock = clock
        self.follow_seconds = follow_seconds
        self.recheck_silent_s = recheck_silent_s
        self._loader = loader
        self._analyzer = analyzer
        self.spill = spill  # where the loader moves columns the cache does not map (closed when the app ends)
        self.set_reactive(TriageApp.follow, follow)
        self.store = RunStore(config)
        self.logdir: Any = None
        self.watcher: Watcher | None = None  # the live follower, once the logdir is read; used by one worker at a time
        self.progress: tuple[str, int, int] | None = ("reading", 0, 0)
        self.load_error: str | None = None
        self.loaded = False
        self._refreshing = False
        #: The load worker writes the health index after the first pass: no live pass may change the runs meanwhile.
        self._indexing = False
        #: A live pass judged runs since the index was last written; it is written again from `_index_due` on
        #: (time.monotonic()), after the pass then running.
        self._index_stale = False
        self._index_due = float("-inf")
        self._cached_drawn = threading.Event()  # the screen with the cached verdicts is drawn: the read may start
        self._first_frame = threading.Event()  # the first frame is drawn: the load worker's heavy part may start
        self._first_pass_shown = threading.Event()  # the first pass's verdicts are handled: a lazy read may start
        #: Runs whose columns were read so far (a warm reopen reads them lazily, the charted ones first).
        self.columns_read: set[str] = set()
        self.read_order: ReadOrder | None = None  # a warm reopen's lazy read, while it runs
        self._user_chose_run = False  # until then the cursor goes to the worst run once all are analysed
        self.main_screen = MainScreen()
        self._index_read = start_index_read(self)  # a warm reopen's health, read while Textual starts
        self._pending_change: object = _NOTHING  # runs changed since `data` was last announced (`_data_changed`)
        self._last_announced = float("-inf")  # time.monotonic() of that announcement
        self._announce_timer: Timer | None = None
        self.full_collections: FullCollectionsHeld | None = None  # while the logdir loads
        self._health_frame_drawn = False  # the frame with a warm reopen's health, from its index (`_health_drawn`)
        #: The chart, the Markdown parser and the report's renderer, made ready after the first screen (`tui.warm_up`).
        self.warm_up = WarmUp(self, self._warm_up_steps())

    @property
    def runs(self) -> dict[str, Run]:
        return self.store.runs

    @property
    def reports(self) -> dict[str, RunReport]:
        return self.store.reports

    # Start-up ---------------------------------------------------------------------------------

    def on_mount(self) -> None:
        if self.keymap:
            self.set_keymap(self.keymap)
        if self.unknown_keys:
            self.notify(
                f"config [keys]: unknown action(s) {', '.join(map(plain, self.unknown_keys))}",
                severity="warning",
                markup=False,
            )
        reading = self._index_read
        if reading is not None and reading.inline and reading.index is not None:  # read already: the first frame has it
            reading.shown = True
            self._show_health(reading.index.health, reading.index.paths)
        # Styled for the terminal's width from the start: Textual sets the breakpoint class once the screen is laid out,
        # and every widget would be styled again before the first frame.
        width = self.size.width
        self.main_screen.add_class(
            next(name for at, name in sorted(self.HORIZONTAL_BREAKPOINTS, reverse=True) if width >= at)
        )
        self.push_screen(self.main_screen)
        # The worker starts at once: it posts a warm reopen's health (its index read since the app was made) for the
        # first frames; anything heavier waits for the first frame (`_first_frame`): reading would hold the GIL.
        self.call_after_refresh(self._first_frame_drawn)
        self.full_collections = FullCollectionsHeld()  # until the load worker is done (`on_worker_state_changed`)
        self.load_logdir()
        self.set_interval(self.follow_seconds, self._follow_tick)

    def _first_frame_drawn(self) -> None:
        keep_out_of_gc()  # what start-up made, uncollected (young collections were held)
        release_young_collections()
        self._first_frame.set()
        self.warm_up.start()

    def _warm_up_steps(self) -> tuple[Step, ...]:
        """The Diagnosis pane's Markdown parser first (the load worker is importing numpy meanwhile, to read the worst
        run's columns), then the chart (numpy, plotext), then what renders a report (the cause library and its
        detectors, which the load worker usually imports first): the worst run's verdict and columns arrive together."""
        screen = self.main_screen
        return (
            self._health_shown,
            import_step("markdown_it"),
            import_step("numpy"),
            import_step("plotext"),
            import_step("textual_plotext", "tbtriage.tui.widgets.tag_chart"),
            screen.mount_chart,
            import_step("tbtriage.analysis.reader"),  # with its protobufs: half of what the detectors import
            import_step("tbtriage.analysis.detectors"),
            import_step("tbtriage.analysis.render_markdown", "tbtriage.analysis.roles"),
        )

    def _health_shown(self) -> bool:
        """False while a warm reopen's health, read from its index on a thread, is still on its way to the screen: the
        warm-up waits for its frame rather than delay it."""
        reading = self._index_read
        on_its_way = reading is not None and (reading.is_alive() or reading.index is not None)
        return self._health_frame_drawn or not on_its_way

    def on_unmount(self) -> None:
        release_young_collections()  # in case the app ends before its first frame
        if self.full_collections is not None:
            self.full_collections.release()
        if self.spill is not None:
            self.spill.close()

    # Workers (thread) -------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def load_logdir(self) -> None:
        worker = get_current_worker()
        index = health_from_index(self, self._index_read)  # a warm reopen: every run's health, then its columns
        self._wait_for(self._cached_drawn if index is not None else self._first_frame, worker)
        if worker.is_cancelled or index is not None and read_lazily(self, worker, index):
            return
        if index is not None:
            self.post_message(HealthIndexed({}, {}))  # the logdir changed under the index: its health goes
        self.indexed_pass(worker, self._read_and_judge)

    def indexed_pass(self, worker: Worker, judge: Callable[[Worker], bool | None]) -> None:
        """`judge(worker)`, a pass that judges every run, with no live pass changing the runs meanwhile, then the
        health index written from its verdicts (each run's shown health paired with its files as they are then),
        unless `judge` wrote it itself (True: a pool's pass writes it before its lazy read of the columns)."""
        self._indexing = True
        try:
            if not judge(worker) and not worker.is_cancelled:
                self.write_health_index()
        finally:
            self._indexing = False

    def _wait_for(self, drawn: threading.Event, worker: Worker) -> None:
        """Until `drawn` is set (the frame the user waits for), or the worker is cancelled."""
        while not drawn.wait(0.05) and not worker.is_cancelled:
            pass

    def write_health_index(self) -> None:
        """After a pass that judged every run: the health index a warm reopen draws its first screen from."""
        from tbtriage.analysis import health_index

        watcher = self.watcher
        if watcher is not None and self._analyzer is None and isinstance(self.logdir_path, Path):
            self._index_stale, self._index_due = False, time.monotonic() + INDEX_EVERY_S
            health_index.write(watcher.logdir, watcher.shown, watcher.reports, self.config, self.clock())

    def _read_and_judge(self, worker: Worker) -> bool:
        """Read every run, then judge it (from the verdict cache where it holds) in the follower's first pass; many
        local runs with the cache on are read and judged in the pool instead (`warm_open.judge_in_pool`, which
        writes the health index itself: True)."""
        from tbtriage.analysis.discover import find_runs

        warnings: list[str] = []
        total = 0
        if isinstance(self.logdir_path, Path) and self.logdir_path.is_dir():  # a store URL is listed by the load
            found = find_runs(self.logdir_path, warnings)
            total = len(found)
            keep_out_of_gc()  # what start-up made: a full collection would walk it while runs load
            self.post_message(RunsDiscovered({name: Run(name, self.logdir_path / name) for name in found}, warnings))
            if self._analyzer is None:
                from tbtriage.analysis.pipeline import pool_workers, warm_pool

                if pool_workers(total) > 1:  # the pool's fork server gets ready while the runs are listed and sized
                    warm_pool()
            # One walk of the logdir for the names, the cached verdicts and the pool (each walked it again, and the
            # pool's logdir noted its warnings a second time).
            listed = (found, None)
            self._cached_verdicts(total, listed)
            # Many runs, the cache on: read and judged in the pool, as `report` does.
            if judge_in_pool(self, worker, listed):
                return True
        read = 0
        throttle = Throttle()

        def run_read(name: str, run: Run) -> None:
            nonlocal read
            read += 1
            self.columns_read.add(name)
            if read < total and throttle.ready():  # the last one is announced by LogdirRead
                self.post_message(Progress("reading", read, total))

        try:
            # Quitting cancels the worker; the reader polls this between chunks and stops at once.
            logdir = self._loader(self.logdir_path, cancel=lambda: worker.is_cancelled, on_run=run_read)
        except Exception as exc:  # one clear line in the status bar; the app stays usable
            self.post_message(LoadFailed(str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
            return False
        if worker.is_cancelled:
            return False
        self.post_message(LogdirRead(logdir))
        new_watcher(self, logdir)
        self._follow_pass(worker)
        return False

    def _cached_verdicts(self, total: int, listed: tuple[dict[str, Path], None] | None = None) -> None:
        """A warm reopen: every run's verdict from the verdict cache, shown before any run is read
        (`verdict_cache.before_reading`); the read and the first pass follow, and confirm or replace them. `listed`:
        the runs as the caller's walk of the logdir just found them (`Logdir.find`)."""
        from tbtriage.analysis import verdict_cache
        from tbtriage.analysis.logdir import LogdirError, open_logdir

        if self._analyzer is not None or not verdict_cache.enabled():
            return  # a stand-in analyzer's verdicts are not the engine's
        try:
            logdir = open_logdir(self.logdir_path)
            logdir.find(listed)
            cached = verdict_cache.before_reading(logdir, self.config, self.clock())
        except (LogdirError, OSError):
            return
        if cached:
            self.post_message(RunsAnalyzed(list(cached.values()), len(cached), max(total, len(cached))))
            # The read holds the GIL for a while: let that screen be drawn first (it is what the user waits for).
            self._cached_drawn.wait(CACHED_DRAW_WAIT_S)

    @work(thread=True, exclusive=True, group="refresh", exit_on_error=False)
    def refresh_logdir(self) -> None:
        worker = get_current_worker()
        self._follow_pass(worker)
        if self._index_stale and not worker.is_cancelled and time.monotonic() >= self._index_due:
            self.write_health_index()  # the verdicts this pass (or one before it) changed: the next open draws them

    def _follow_pass(self, worker: Worker) -> None:
        """One poll of the follower (the same one `tbtriage watch` uses), its verdicts posted in batches."""
        assert self.watcher is not None
        batch: list[RunReport] = []
        throttle = Throttle()

        def judged(report: RunReport, done: int, total: int) -> None:
            batch.append(report)
            self._index_stale = True
            if done == total or throttle.ready():
                assert self.watcher is not None
                # Twins, as `report` attaches them, once the pass has judged every run (the runs whose twin
                # evidence changed): a twin is read off the whole logdir, and attaching them over every run after
                # each batch made a 2,000-run logdir take minutes to show its health.
                shown = self.watcher.twinned() if done == total else list(batch)
                self.post_message(RunsAnalyzed(shown, done, total))
                batch.clear()

        first = self.watcher.polls == 0
        new = self.watcher.poll(cancel=lambda: worker.is_cancelled, on_report=judged)
        if not worker.is_cancelled:  # the last verdict went out with done == total
            self.post_message(PassDone(new, first))

    @work(thread=True, exclusive=True, group="export", exit_on_error=False)
    def export_series(self, requests: list[SeriesRequest], tag: str, weight: float) -> None:
        from tbtriage.analysis.output_guard import refuse_output
        from tbtriage.tui.csv_export import export_filename, write_series_csv

        path = Path.cwd() / export_filename(tag, self.clock())
        refused = refuse_output(path, self.logdir_path) if isinstance(self.logdir_path, Path) else None
        if refused:
            self.post_message(Exported(None, 0, f"not written: {refused}"))
            return
        try:
            rows = write_series_csv(path, tag, requests, weight)
        except OSError as exc:
            self.post_message(Exported(None, 0, f"cannot write {path}: {exc.strerror or exc}"))
            return
        self.post_message(Exported(path, rows))

    # Worker messages -> state -----------------------------------------------------------------

    def _data_changed(self, runs: frozenset[str] | None, at_once: bool = False, rows: bool = True) -> None:
        """Tell the screens (`data`) that `runs` changed (None: any run may have), at most once per `COALESCE_S`:
        each announcement redraws the panes showing them and builds and places their rows in the runs table, and the
        workers' messages of every kind (names, progress, verdicts, passes) each asked for one. What arrives in between is merged and announced
        together when the interval is up; `at_once` announces now (the end of a pass: the final state). `rows`: their
        rows in the runs table changed too (built again when the change is announced)."""
        if rows:
            self.store.touch(runs)
        pending = self._pending_change
        if pending is _NOTHING:
            self._pending_change = runs
        elif pending is None or runs is None:
            self._pending_change = None
        else:
            self._pending_change = cast("frozenset[str]", pending) | runs
        wait = self._last_announced + COALESCE_S - time.monotonic()
        if at_once or wait <= 0:
            self._announce_change()
        elif self._announce_timer is None:
            self._announce_timer = self.set_timer(wait, self._announce_change)

    def _announce_change(self) -> None:
        if self._announce_timer is not None:
            self._announce_timer.stop()
            self._announce_timer = None
        runs, self._pending_change = self._pending_change, _NOTHING
        if runs is _NOTHING or not (self.is_running and self.main_screen.is_mounted):
            return
        self._last_announced = time.monotonic()
        self.data = DataChange(self.data.version + 1, cast("frozenset[str] | None", runs))

    def on_health_indexed(self, message: HealthIndexed) -> None:
        """Every run's health from the index, before any is read. Not held back until the main screen is shown: it
        draws the store as it finds it. The worst run is chosen once this frame is drawn: the panes about it
        (findings, diagnosis) would hold it back."""
        if self.is_running:
            self._show_health(message.health, message.paths)

    def _show_health(self, health: dict[str, RunHealth], paths: dict[str, Path]) -> None:
        keep_out_of_gc()  # what the app is made of by now, and the index's rows below: they live as long as it
        self.store.health = dict(health)
        for name, row in health.items():
            self.store.slots.slot(name)
            run = Run(name, paths[name], last_step=row.last_step, last_wall_time=row.last_wall_time)
            self.store.runs.setdefault(name, run)
        self.progress = ("reading", 0, len(health)) if health else None
        self._data_changed(None, at_once=True)  # a milestone: every run's health, for the first frames
        self.call_after_refresh(self._health_drawn)

    def _health_drawn(self) -> None:
        """The frame with every run's health is drawn: the worst run goes under the cursor (its panes follow in
        the next frames), then the load worker may go on."""
        self._health_frame_drawn = True
        if self.view.current_run is None and not self._user_chose_run:
            rows, _ = self.store.rows(self.view, whole=True)
            if rows:
                self.view = choose_run(self.view, self.store, rows[0].name)
        self._cached_drawn.set()

    def on_runs_read(self, message: RunsRead) -> None:
        """Runs read lazily: their points (charts, tags) and the verdicts that need no twins."""
        if not self.is_running:
            return
        # The runs and verdicts read so far: a warm reopen unpickles thousands of verdicts while it reads, and each
        # full collection walked all of them with every thread stopped (100-270 ms on 2,000 runs, the longest
        # waits for a key).
        keep_out_of_gc()
        self.store.runs.update(message.runs)
        for report in message.reports:
            self.store.reports[report.name] = report
        # After a cold open's first pass (`warm_open.judge_in_pool`) the read ends the load: no pass follows it.
        self.progress = (
            None if self.loaded and message.done >= message.total else ("reading", message.done, message.total)
        )
        self._adopt_runs(frozenset(message.runs))

    def watch_view(self, view: ViewState) -> None:
        if self.read_order is not None:  # a lazy read is on: what is charted is read next
            self.read_order.want(self.store.charted_runs(view))

    @_while_shown
    def on_runs_discovered(self, message: RunsDiscovered) -> None:
        """Show the runs' names at once, as empty runs, while their event files are read."""
        for warning in message.warnings:
            self.notify(plain(warning), severity="warning", markup=False)
        runs = self.store.runs
        came = [run for name, run in message.runs.items() if name not in runs]
        for run in came:
            self.store.slots.slot(run.name)
            runs[run.name] = run
        self.progress = ("reading", 0, 0)  # one read for all runs: no count to show
        self._data_changed(frozenset(run.name for run in came))

    @_while_shown
    def on_logdir_read(self, message: LogdirRead) -> None:
        keep_out_of_gc()
        self.logdir = message.logdir
        # Every run is read: the count goes on with the analysis (from 0, until its first verdicts arrive),
        # rather than stopping at the last read count that got through.
        self.progress = ("analysing", 0, len(message.logdir.runs))
        for warning in getattr(message.logdir, "warnings", []):
            self.notify(plain(warning), severity="warning", markup=False)
        self._adopt_runs(None, at_once=True)  # a milestone, once per load: shown now

    @_while_shown
    def on_progress(self, message: Progress) -> None:
        keep_out_of_gc()  # the runs read so far
        self.progress = (message.stage, message.done, message.total)
        self._data_changed(frozenset())

    @_while_shown
    def on_runs_analyzed(self, message: RunsAnalyzed) -> None:
        if not self.loaded:
            keep_out_of_gc()
        reports = self.store.reports
        # A pass's last message holds every run's verdict as shown (twins attached): most are those shown already.
        changed = [report for report in message.reports if reports.get(report.name) is not report]
        for report in changed:
            reports[report.name] = report
            if self.logdir is None and report.name in self.store.runs:
                # A cached verdict before the read: its run as judged (steps, times, files; no points yet).
                self.store.runs[report.name] = report.run
        if self.logdir is None:
            self.call_after_refresh(self._cached_drawn.set)
        self.progress = None if message.done >= message.total else ("analysing", message.done, message.total)
        self._adopt_runs(frozenset(report.name for report in changed))

    @_while_shown
    def on_pass_done(self, message: PassDone) -> None:
        self.progress = None
        highlighted = {key[0] for key in self.store.new_findings}  # their runs redraw without the highlight
        if message.first:
            keep_out_of_gc()  # every run's verdict, as shown: held as long as the app
            self.loaded = True
            self._first_pass_shown.set()
            self._choose_worst_run()  # now that every run has its health
        else:
            # Highlighted until the next pass; the first pass's findings are the starting point, not news.
            self.store.new_findings = {finding_key(f) for f in message.new}
            for finding in message.new:
                if finding.severity != "info":
                    self.notify(
                        f"{plain(finding.run)}: {finding.kind} at step {finding.step}",
                        title="New finding",
                        severity="error" if finding.severity == "critical" else "warning",
                        markup=False,
                    )
        # Their findings lists redraw; their rows stay as they are.
        self._data_changed(frozenset(highlighted | {f.run for f in message.new}), at_once=True, rows=False)

    def _choose_worst_run(self) -> None:
        """Put the run on the runs table's first row under the cursor unless the user chose one, once every row is
        built: the table builds a few thousand a frame (`RunStore.rows`)."""
        if self._user_chose_run or not self.is_running:
            return
        rows, _ = self.store.rows(self.view)
        if self.store.rows_due:
            self.call_after_refresh(self._choose_worst_run)
        elif rows:
            self.view = choose_run(self.view, self.store, rows[0].name)

    @_while_shown
    def on_load_failed(self, message: LoadFailed) -> None:
        if self.full_collections is not None:
            self.full_collections.release()
        self.progress = None
        self.load_error = message.message
        self.notify(message.message, title="Cannot read the logdir", severity="error", markup=False)
        self._data_changed(frozenset(), at_once=True)

    @_while_shown
    def on_exported(self, message: Exported) -> None:
        if message.error:
            self.notify(message.error, title="Export failed", severity="error", markup=False)
        else:
            self.notify(f"{message.rows} rows to {message.path}", title="Exported CSV", markup=False)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "refresh" and event.state in (
            WorkerState.SUCCESS,
            WorkerState.ERROR,
            WorkerState.CANCELLED,
        ):
            self._refreshing = False
            if event.state == WorkerState.ERROR:
                self.notify(f"live follow: {plain(str(event.worker.error))}", severity="warning", markup=False)
        if event.worker.group == "load" and event.state == WorkerState.ERROR:
            self.post_message(LoadFailed(plain(str(event.worker.error))))
        if event.worker.group == "load" and event.state in (
            WorkerState.SUCCESS,
            WorkerState.ERROR,
            WorkerState.CANCELLED,
        ):
            # The load is over (a cold or warm open reads the columns lazily after its first pass): what it made
            # stays out of the collector's sight, and full collections run as usual again.
            keep_out_of_gc()
            if self.full_collections is not None:
                self.full_collections.release()

    def _adopt_runs(self, changed: frozenset[str] | None, at_once: bool = False) -> None:
        """Take the logdir's runs (new ones included) into the store; pick a run and tag if none yet."""
        if self.logdir is not None:
            runs = self.logdir.runs
            if runs.keys() != self.store.runs.keys():  # runs came (or went): new ones get their colours
                for name in runs:
                    self.store.slots.slot(name)
            self.store.runs = dict(runs)
        view = self.view
        if view.current_run is None and self.store.runs:
            view = replace(view, current_run=next(iter(self.store.runs)))
        self.view = with_valid_tag(view, self.store)
        self._data_changed(changed, at_once)

    def _follow_tick(self) -> None:
        if self.follow:
            self._start_refresh()

    def _start_refresh(self) -> None:
        """Read what was appended, unless a pass is running (passes never overlap) or loading isn't done."""
        if self.loaded and self.watcher is not None and not self._refreshing and not self._indexing:
            self._refreshing = True
            self.refresh_logdir()

    @property
    def separator(self) -> str:
        """Between parts of a title or status line: a middle dot, or a bar on `--ascii` terminals."""
        return " | " if self.ascii_only else " · "

    # Keys -------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """An action works (and shows in the footer) only on the screens its binding table row names."""
        return works_on(action, getattr(self.screen, "SCREEN", None))

    def get_key_display(self, binding: Binding) -> str:
        return key_caption(binding.key) if self.ascii_only else super().get_key_display(binding)

    def note_user_chose_run(self) -> None:
        """The user moved the cursor: from now on the app no longer moves it to the worst run."""
        self._user_chose_run = True

    def open_dashboard(self, name: str) -> None:
        if name in self.store.runs:
            from tbtriage.tui.screens.dashboard import RunDashboard

            self.push_screen(RunDashboard(name))

    def action_open_histograms(self) -> None:
        # On a run's dashboard, that run; elsewhere, the run under the cursor.
        name = getattr(self.screen, "run_name", None) or self.view.current_run
        run = self.store.runs.get(name) if name else None
        if run is None:
            self.notify("Select a run first.", severity="warning", markup=False)
        elif not run.histograms and "grad_norm_layer" not in self.store.roles_of(run.name).values():
            self.notify(f"{plain(run.name)} logged no histograms and no per-layer gradient norms.", markup=False)
        else:
            from tbtriage.tui.screens.distributions import DistributionsScreen

            self.push_screen(DistributionsScreen(run.name))

    def _set_options(self, options: ChartOptions) -> None:
        self.view = replace(self.view, options=options)

    # Actions (keys from the binding table) ----------------------------------------------------

    def action_help(self) -> None:
        from tbtriage.tui.screens.help import HelpScreen  # its tables are not on the way to the first frame

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_filter(self) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.open_filter()

    def action_cycle_smoothing(self) -> None:
        self._set_options(self.view.options.next_smoothing())

    def action_toggle_log_y(self) -> None:
        self._set_options(replace(self.view.options, log_y=not self.view.options.log_y))

    def action_cycle_x_axis(self) -> None:
        self._set_options(self.view.options.next_x_axis())

    def action_toggle_outliers(self) -> None:
        self._set_options(replace(self.view.options, ignore_outliers=not self.view.options.ignore_outliers))

    def action_zoom(self, factor: float) -> None:
        if (chart := self.main_screen.chart) is not None:
            self._set_options(chart.zoomed(factor))

    def action_pan(self, fraction: float) -> None:
        if (chart := self.main_screen.chart) is not None:
            self._set_options(chart.panned(fraction))

    def action_reset_view(self) -> None:
        self._set_options(replace(self.view.options, window=None))

    def action_compare(self) -> None:
        names = tuple(name for name in self.view.selected if name in self.store.runs)
        if len(names) < 2:
            self.notify("Select two or more runs with space, then press C to compare them.", markup=False)
            return
        from tbtriage.tui.screens.compare import CompareScreen

        self.push_screen(CompareScreen(names))

    def action_toggle_maximize(self) -> None:
        """Maximise the pane holding the focus (the first pane when none does), or restore the layout."""
        screen = self.screen
        if screen.maximized is not None:
            screen.minimize()
            return
        focused = screen.focused
        holders = [focused, *focused.ancestors] if focused is not None else []
        pane = next((w for w in holders if isinstance(w, Widget) and w.has_class("pane")), None)
        pane = pane or next(iter(screen.query(".pane")), None)
        if pane is not None and not screen.maximize(pane, container=False):
            screen.maximized = pane  # a pane that cannot take focus itself (a chart panel) all the same

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        self.notify("Live follow on" if self.follow else "Live follow paused", markup=False)

    def action_refresh(self) -> None:
        self._start_refresh()

    def action_toggle_all_findings(self) -> None:
        self.view = replace(self.view, all_findings=not self.view.all_findings)

    def action_cycle_theme(self) -> None:
        index = THEME_ORDER.index(self.theme) if self.theme in THEME_ORDER else -1
        self.theme = THEME_ORDER[(index + 1) % len(THEME_ORDER)]
        self.notify(f"Theme: {self.theme}", markup=False)

    def action_export_csv(self) -> None:
        requests = self.store.chart_requests(self.view)
        if not requests or self.view.current_tag is None:
            self.notify("Nothing charted to export.", severity="warning", markup=False)
            return
        self.export_series(requests, self.view.current_tag, self.view.options.smoothing)

    def action_copy_report(self) -> None:
        # On a run's dashboard, that run; elsewhere, the run under the cursor.
        name = getattr(self.screen, "run_name", None) or self.view.current_run
        report = self.store.reports.get(name) if name else None
        if report is None:
            self.notify("The run is not analysed yet.", severity="warning", markup=False)
            return
        from tbtriage.analysis.render_markdown import run_markdown

        self.copy_to_clipboard(run_markdown(report))
        self.notify(f"Copied the report of {plain(report.name)} to the clipboard.", markup=False)

    def action_diagnose(self) -> None:
        report = self.store.reports.get(self.view.current_run) if self.view.current_run else None
        if report is None:
            self.notify("Select an analysed run to diagnose.", severity="warning", markup=False)
            return
        self.main_screen.show_diagnosis().explain(report)

    async def action_quit(self) -> None:
        self.workers.cancel_all()
        self.exit(0)


def make_app(
    logdir: str | os.PathLike[str] = ".",
    *,
    theme: str | None = None,
    ascii: bool = False,
    config: Config | str | os.PathLike[str] | None = None,
    follow: bool = True,
    clock: Callable[[], float] = time.time,
    follow_seconds: float = FOLLOW_SECONDS,
    recheck_silent_s: float | None = None,
    loader: Callable[..., Any] | None = None,
    analyzer: RunAnalyzer | None = None,
    storage_options: dict[str, Any] | None = None,
) -> TriageApp:
    """The app for `logdir`, as the CLI and the tests build it.

    `theme` wins over the config's; with neither, NO_COLOR picks the monochrome theme. Raises
    ValueError for an unknown theme and ConfigError for an unusable config file. `recheck_silent_s` is
    how far the logdir's newest event moves on before a silent run is judged again (`stalled`; None:
    `analysis.watch.RECHECK_SILENT_S`).
    """
    if not isinstance(config, Config):
        config = load_config(config)
    chosen = theme or config.theme or (NO_COLOR_THEME if "NO_COLOR" in os.environ else DEFAULT_THEME)
    if chosen not in THEME_ORDER:
        raise ValueError(f"unknown theme {chosen!r} (choose from {', '.join(THEME_ORDER)})")
    # Columns the decoded-column cache does not map (`--no-cache`, points appended while following) are moved
    # to a private temporary spill and mapped back: the app holds a logdir larger than memory either way.
    from tbtriage.analysis.spill import Spill

    spill = Spill() if loader is None else None
    return TriageApp(
        str(logdir) if is_url(str(logdir)) else Path(logdir),
        theme=chosen,
        ascii_only=ascii,
        config=config,
        follow=follow,
        clock=clock,
        follow_seconds=follow_seconds,
        recheck_silent_s=recheck_silent_s,
        loader=loader or functools.partial(tbtriage.load, storage_options=storage_options, spill=spill),
        analyzer=analyzer,  # None: the engine's, made when the logdir is read
        spill=spill,
    )
