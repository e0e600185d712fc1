"""The tbtriage Textual app: state, thread workers, and the actions behind every key.

`make_app(...)` builds it for the CLI and for the tests alike. Reading and analysis run in
thread workers that report back with the typed messages of `tui.messages`; the first frame
shows at once and runs fill in as they are read and analysed. Time comes from an injected
clock, so liveness ages (and snapshot tests) are deterministic when it is fixed.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.reactive import reactive
from textual.worker import Worker, WorkerState, get_current_worker

import tbtriage
from tbtriage.analysis.config import Config, load_config
from tbtriage.analysis.datamodel import Finding, PrimaryTags, Run, RunReport
from tbtriage.analysis.discover import find_runs
from tbtriage.analysis.engine import analyze_run, logdir_context
from tbtriage.analysis.findings import finding_key
from tbtriage.analysis.render_markdown import run_markdown
from tbtriage.analysis.roles import assign_roles, primary_tags
from tbtriage.themes import DEFAULT_THEME, NO_COLOR_THEME, STYLESHEET, THEME_ORDER, load_themes
from tbtriage.tui.bindings import PALETTE_ID, PALETTE_KEY, bindings, key_caption, keymap_from_config
from tbtriage.tui.chart_data import ChartOptions, SeriesRequest
from tbtriage.tui.commands import TriageCommands
from tbtriage.tui.csv_export import export_filename, write_series_csv
from tbtriage.tui.messages import Exported, LoadFailed, LogdirRead, Progress, Refreshed, RunAnalyzed, RunsDiscovered
from tbtriage.tui.safe_text import plain
from tbtriage.tui.screens.dashboard import RunDashboard
from tbtriage.tui.screens.help import HelpScreen
from tbtriage.tui.screens.main import MainScreen
from tbtriage.tui.widgets.series_style import SlotBook

#: Live follow re-reads appended bytes this often. Loggers flush every 10-120 s, so 5 s shows a new
#: point within seconds of it landing, while a pass over unchanged files (a stat each) stays negligible.
FOLLOW_SECONDS = 5.0

#: From this many columns up the main screen shows every pane; below it, the Diagnosis pane folds away.
WIDE_COLUMNS = 110

#: A finding-jump shows the finding's step range plus this fraction of the run on each side (at least
#: MIN_JUMP_STEPS steps), enough context to see the curve before and after.
JUMP_CONTEXT = 0.05
MIN_JUMP_STEPS = 10

#: Actions that act on the main screen's chart, lists or panes (hidden elsewhere).
MAIN_SCREEN_ACTIONS = {"filter", "export_csv", "zoom", "pan", "reset_view", "toggle_all_findings", "diagnose"}

#: Turns one run into its report; the second argument is `analysis.engine.logdir_context` of the logdir
#: (other runs' wall times, for `stalled`; sibling runs, for Keras' train/validation pairs).
Analyzer = Callable[[Run, Any], RunReport]


def _while_shown(handler):
    """Worker messages can land while the app shuts down; with the main screen gone there is nothing to update."""

    @functools.wraps(handler)
    def guarded(self: TriageApp, message) -> None:
        if self.is_running and self.main_screen.is_mounted:
            handler(self, message)

    return guarded


class TriageApp(App[int]):
    TITLE = "tbtriage"
    CSS_PATH = str(STYLESHEET)
    BINDINGS = bindings("app")
    COMMANDS = App.COMMANDS | {TriageCommands}
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (WIDE_COLUMNS, "-wide")]

    options: reactive[ChartOptions] = reactive(ChartOptions, init=False)
    follow: reactive[bool] = reactive(True, init=False)

    def __init__(
        self,
        logdir: Path,
        *,
        theme: str,
        ascii_only: bool,
        config: Config,
        follow: bool,
        clock: Callable[[], float],
        follow_seconds: float,
        loader: Callable[..., Any],
        analyzer: Analyzer,
    ) -> None:
        self.keymap, self.unknown_keys = keymap_from_config(config.keys)
        # Read by App.__init__ when it binds the palette, so a remap must be in place first.
        self.COMMAND_PALETTE_BINDING = self.keymap.get(PALETTE_ID, PALETTE_KEY)
        super().__init__()
        for registered in load_themes().values():
            self.register_theme(registered)
        self.theme = theme
        self.logdir_path = logdir
        self.ascii_only = ascii_only
        self.config = config
        self.clock = clock
        self.follow_seconds = follow_seconds
        self._loader = loader
        self._analyzer = analyzer
        self.set_reactive(TriageApp.follow, follow)
        # Data, filled by the workers' messages.
        self.logdir: Any = None
        self.runs: dict[str, Run] = {}
        self.reports: dict[str, RunReport] = {}
        self.progress: tuple[str, int, int] | None = ("reading", 0, 0)
        self.load_error: str | None = None
        # What the user is looking at.
        self.slots = SlotBook()
        self.selected: list[str] = []
        self.current_run: str | None = None
        self.current_tag: str | None = None
        self.sort_key = "health"
        self.run_filter = ""
        self.tag_filter = ""
        self.all_findings = False
        # Findings seen so far, and those that appeared in the latest live pass (highlighted once).
        self.seen_findings: set[tuple] = set()
        self.new_findings: set[tuple] = set()
        self._loaded = False
        self._refreshing = False
        self._user_chose_run = False  # until then the cursor goes to the worst run once all are analysed
        self.main_screen = MainScreen()

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
        self.push_screen(self.main_screen)
        self.load_logdir()
        self.set_interval(self.follow_seconds, self._follow_tick)

    # Workers (thread) -------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def load_logdir(self) -> None:
        worker = get_current_worker()
        warnings: list[str] = []
        total = 0
        if self.logdir_path.is_dir():
            names = list(find_runs(self.logdir_path, warnings))
            total = len(names)
            self.post_message(RunsDiscovered(names, warnings))
        read: list[str] = []

        def run_read(name: str, run: Run) -> None:
            read.append(name)
            if len(read) < total:  # the last one is announced by LogdirRead
                self.post_message(Progress("reading", len(read), total))

        try:
            # Quitting cancels the worker; the reader polls this between chunks and stops at once.
            logdir = self._loader(self.logdir_path, cancel=lambda: worker.is_cancelled, on_run=run_read)
        except Exception as exc:  # one clear line in the status bar; the app stays usable
            self.post_message(LoadFailed(str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
            return
        if worker.is_cancelled:
            return
        self.post_message(LogdirRead(logdir))
        self._analyze(logdir, list(logdir.runs), worker)

    @work(thread=True, exclusive=True, group="refresh", exit_on_error=False)
    def refresh_logdir(self) -> None:
        worker = get_current_worker()
        changed = self.logdir.refresh(cancel=lambda: worker.is_cancelled)
        self.post_message(Refreshed(changed))
        self._analyze(self.logdir, changed, worker)

    def _analyze(self, logdir: Any, names: list[str], worker: Worker) -> None:
        """Analyse the named runs one by one, posting each report, and stop as soon as the worker is cancelled."""
        context = logdir_context(logdir, now=self.clock())
        runs = [logdir.runs[name] for name in names if name in logdir.runs]
        for done, run in enumerate(runs):
            if worker.is_cancelled:
                return
            self.post_message(Progress("analysing", done, len(runs)))
            self.post_message(RunAnalyzed(self._analyzer(run, context)))
        self.post_message(Progress("analysing", len(runs), len(runs)))

    @work(thread=True, exclusive=True, group="export", exit_on_error=False)
    def export_series(self, requests: list[SeriesRequest], tag: str, weight: float) -> None:
        path = Path.cwd() / export_filename(tag, self.clock())
        try:
            rows = write_series_csv(path, tag, requests, weight)
        except OSError as exc:
            self.post_message(Exported(None, 0, f"cannot write {path}: {exc.strerror or exc}"))
            return
        self.post_message(Exported(path, rows))

    # Worker messages -> state -----------------------------------------------------------------

    @_while_shown
    def on_runs_discovered(self, message: RunsDiscovered) -> None:
        """Show the runs' names at once, as empty runs, while their event files are read."""
        for warning in message.warnings:
            self.notify(plain(warning), severity="warning", markup=False)
        for name in message.names:
            self.slots.slot(name)
            self.runs.setdefault(name, Run(name=name, path=self.logdir_path / name))
        self.progress = ("reading", 0, 0)  # one read for all runs: no count to show
        self.main_screen.refresh_runs()
        self.main_screen.refresh_status()

    @_while_shown
    def on_logdir_read(self, message: LogdirRead) -> None:
        self.logdir = message.logdir
        self._adopt_runs()
        for warning in getattr(message.logdir, "warnings", []):
            self.notify(plain(warning), severity="warning", markup=False)

    @_while_shown
    def on_run_analyzed(self, message: RunAnalyzed) -> None:
        report = message.report
        keys = {finding_key(f) for f in report.findings}
        fresh = keys - self.seen_findings
        if self._loaded and fresh:
            self.new_findings |= fresh
            for finding in report.findings:
                if finding_key(finding) in fresh and finding.severity != "info":
                    self.notify(
                        f"{plain(finding.run)}: {finding.kind} at step {finding.step}",
                        title="New finding",
                        severity="error" if finding.severity == "critical" else "warning",
                        markup=False,
                    )
        self.seen_findings |= keys
        self.reports[report.name] = report
        self.runs.setdefault(report.name, report.run)
        self._refresh_screens(report.name)

    @_while_shown
    def on_progress(self, message: Progress) -> None:
        finished = message.done >= message.total
        self.progress = None if finished else (message.stage, message.done, message.total)
        if finished and not self._loaded:
            self._loaded = True
            first = self.main_screen.first_run_shown()
            if not self._user_chose_run and first is not None:
                self.set_current_run(first, by_user=False)
                self.main_screen.refresh_runs()
        self.main_screen.refresh_status()

    @_while_shown
    def on_load_failed(self, message: LoadFailed) -> None:
        self.progress = None
        self.load_error = message.message
        self.notify(message.message, title="Cannot read the logdir", severity="error", markup=False)
        self.main_screen.refresh_status()

    @_while_shown
    def on_refreshed(self, message: Refreshed) -> None:
        shown_once, self.new_findings = self.new_findings, set()  # the last pass's news have been seen
        if message.changed:
            self._adopt_runs()
        elif shown_once:
            self.main_screen.refresh_findings()

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

    def _adopt_runs(self) -> None:
        """Take the logdir's runs (new ones included) into the view; pick a run and tag if none yet."""
        for name in self.logdir.runs:
            self.slots.slot(name)
        self.runs = dict(self.logdir.runs)
        if self.current_run is None and self.runs:
            self.current_run = next(iter(self.runs))
        self._refresh_screens(None)

    def _refresh_screens(self, changed_run: str | None) -> None:
        main = self.main_screen
        main.refresh_runs()
        if changed_run is None or changed_run == self.current_run or changed_run in self.selected:
            if self.current_tag is None or self.current_tag not in self.charted_tags()[0]:
                self.current_tag = self.default_tag()
            main.refresh_tags()
            main.refresh_chart()
            main.refresh_diagnosis()
        main.refresh_findings()
        main.refresh_status()
        if isinstance(self.screen, RunDashboard) and changed_run in (None, self.screen.run_name):
            self.screen.refresh_panels()

    def _follow_tick(self) -> None:
        if self.follow:
            self._start_refresh()

    def _start_refresh(self) -> None:
        """Read what was appended, unless a pass is running (passes never overlap) or loading isn't done."""
        if self._loaded and self.logdir is not None and not self._refreshing:
            self._refreshing = True
            self.refresh_logdir()

    @property
    def separator(self) -> str:
        """Between parts of a title or status line: a middle dot, or a bar on `--ascii` terminals."""
        return " | " if self.ascii_only else " · "

    # Keys -------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Main-screen actions are hidden from the footer (and do nothing) on other screens."""
        if action in MAIN_SCREEN_ACTIONS and not isinstance(self.screen, MainScreen):
            return False
        return True

    def get_key_display(self, binding: Binding) -> str:
        return key_caption(binding.key) if self.ascii_only else super().get_key_display(binding)

    # Derived view data ------------------------------------------------------------------------

    def charted_runs(self) -> list[str]:
        """The selected runs, or the run under the cursor when none is selected."""
        if self.selected:
            return [name for name in self.selected if name in self.runs]
        return [self.current_run] if self.current_run in self.runs else []

    def roles_of(self, name: str) -> dict[str, str | None]:
        report = self.reports.get(name)
        if report is not None:
            return report.roles
        run = self.runs[name]
        return {tag: role for tag, (role, _) in assign_roles(list(run.scalars), self.config, run_name=name).items()}

    def charted_tags(self) -> tuple[list[str], dict[str, str | None]]:
        """Scalar tags of the charted runs (their union) and each tag's role."""
        roles: dict[str, str | None] = {}
        for name in self.charted_runs():
            for tag, role in self.roles_of(name).items():
                if roles.get(tag) is None:
                    roles[tag] = role
        return sorted(roles), roles

    def primary_of(self, name: str) -> PrimaryTags:
        """A run's headline tags as the engine chose them (`RunReport.primary_tags`); until its analysis
        arrives, the same rule applied to what has been read so far."""
        report = self.reports.get(name)
        if report is not None:
            return report.primary_tags
        scalars = dict(self.runs[name].scalars)
        roles = assign_roles(list(scalars), self.config, run_name=name)
        return primary_tags(roles, {tag: len(series) for tag, series in scalars.items()}, run_name=name)

    def default_tag(self) -> str | None:
        """The headline series of the first charted run (its loss, else its metric), else its first tag."""
        names = self.charted_runs()
        if not names:
            return None
        return self.primary_of(names[0]).headline or next(iter(sorted(dict(self.runs[names[0]].scalars))), None)

    def chart_requests(self, tag: str | None = None) -> list[SeriesRequest]:
        tag = tag or self.current_tag
        requests = []
        for name in self.charted_runs():
            series = dict(self.runs[name].scalars).get(tag)
            if series is None:
                continue
            report = self.reports.get(name)
            findings = tuple(f for f in report.findings if not f.tags or tag in f.tags) if report else ()
            requests.append(SeriesRequest(name, self.slots.slot(name), series, findings))
        return requests

    # State changes the screens ask for --------------------------------------------------------

    def set_current_run(self, name: str | None, by_user: bool = True) -> None:
        if name == self.current_run:
            return
        self.current_run = name
        self._user_chose_run |= by_user
        main = self.main_screen
        if not self.selected:
            if self.current_tag not in self.charted_tags()[0]:
                self.current_tag = self.default_tag()
            main.refresh_tags()
            main.refresh_chart()
        main.refresh_diagnosis()
        if not self.all_findings:
            main.refresh_findings()

    def set_current_tag(self, tag: str) -> None:
        if tag != self.current_tag:
            self.current_tag = tag
            # A zoom window belongs to the old tag; set without the watcher, then redraw once.
            self.set_reactive(TriageApp.options, replace(self.options, window=None))
            self.main_screen.refresh_chart()

    def toggle_selected(self, name: str) -> None:
        if name in self.selected:
            self.selected.remove(name)
        else:
            self.selected.append(name)
        main = self.main_screen
        main.refresh_runs()
        main.refresh_tags()
        main.refresh_chart()

    def jump_to(self, finding: Finding) -> None:
        """Chart the finding's run and first tag on the step axis, zoomed around its step range."""
        if finding.run not in self.runs:
            return
        self.selected = [finding.run] if self.selected else []
        self.current_run = finding.run
        tag = (
            finding.tags[0] if finding.tags and finding.tags[0] in self.runs[finding.run].scalars else self.current_tag
        )
        self.current_tag = tag
        window = None
        series = self.runs[finding.run].scalars.get(tag) if tag else None
        if finding.step is not None and series is not None and len(series):
            first, last = float(series.steps[0]), float(series.steps[-1])
            end = finding.end_step if finding.end_step is not None else finding.step
            pad = max((last - first) * JUMP_CONTEXT, MIN_JUMP_STEPS)
            window = (max(first, finding.step - pad), min(last, end + pad))
        main = self.main_screen
        main.refresh_runs()
        main.refresh_tags()
        main.refresh_diagnosis()
        self.options = replace(self.options, x_axis="step", window=window)
        main.refresh_chart()

    def open_dashboard(self, name: str) -> None:
        if name in self.runs:
            self.push_screen(RunDashboard(name))

    # Actions (keys from the binding table) ----------------------------------------------------

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_filter(self) -> None:
        if isinstance(self.screen, MainScreen):
            self.screen.open_filter()

    def action_cycle_smoothing(self) -> None:
        self.options = self.options.next_smoothing()

    def action_toggle_log_y(self) -> None:
        self.options = replace(self.options, log_y=not self.options.log_y)

    def action_cycle_x_axis(self) -> None:
        self.options = self.options.next_x_axis()

    def action_toggle_outliers(self) -> None:
        self.options = replace(self.options, ignore_outliers=not self.options.ignore_outliers)

    def action_zoom(self, factor: float) -> None:
        self.options = self.main_screen.query_one("#chart").zoomed(factor)

    def action_pan(self, fraction: float) -> None:
        self.options = self.main_screen.query_one("#chart").panned(fraction)

    def action_reset_view(self) -> None:
        self.options = replace(self.options, window=None)

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        self.notify("Live follow on" if self.follow else "Live follow paused", markup=False)
        self.main_screen.refresh_status()

    def action_refresh(self) -> None:
        self._start_refresh()

    def action_toggle_all_findings(self) -> None:
        self.all_findings = not self.all_findings
        self.main_screen.refresh_findings()

    def action_cycle_theme(self) -> None:
        index = THEME_ORDER.index(self.theme) if self.theme in THEME_ORDER else -1
        self.theme = THEME_ORDER[(index + 1) % len(THEME_ORDER)]
        self.notify(f"Theme: {self.theme}", markup=False)

    def action_export_csv(self) -> None:
        requests = self.chart_requests()
        if not requests or self.current_tag is None:
            self.notify("Nothing charted to export.", severity="warning", markup=False)
            return
        self.export_series(requests, self.current_tag, self.options.smoothing)

    def action_copy_report(self) -> None:
        report = self.reports.get(self.current_run) if self.current_run else None
        if report is None:
            self.notify("The run is not analysed yet.", severity="warning", markup=False)
            return
        self.copy_to_clipboard(run_markdown(report))
        self.notify(f"Copied the report of {plain(report.name)} to the clipboard.", markup=False)

    def action_diagnose(self) -> None:
        report = self.reports.get(self.current_run) if self.current_run else None
        if report is None:
            self.notify("Select an analysed run to diagnose.", severity="warning", markup=False)
            return
        self.main_screen.show_diagnosis().diagnose(report)

    def action_quit(self) -> None:
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
    loader: Callable[..., Any] | None = None,
    analyzer: Analyzer | None = None,
) -> TriageApp:
    """The app for `logdir`, as the CLI and the tests build it.

    `theme` wins over the config's; with neither, NO_COLOR picks the monochrome theme. Raises
    ValueError for an unknown theme and ConfigError for an unusable config file.
    """
    if not isinstance(config, Config):
        config = load_config(config)
    chosen = theme or config.theme or (NO_COLOR_THEME if "NO_COLOR" in os.environ else DEFAULT_THEME)
    if chosen not in THEME_ORDER:
        raise ValueError(f"unknown theme {chosen!r} (choose from {', '.join(THEME_ORDER)})")
    if analyzer is None:

        def analyzer(run: Run, context: Any) -> RunReport:
            return analyze_run(run, config, context)

    return TriageApp(
        Path(logdir),
        theme=chosen,
        ascii_only=ascii,
        config=config,
        follow=follow,
        clock=clock,
        follow_seconds=follow_seconds,
        loader=loader or tbtriage.load,
        analyzer=analyzer,
    )
