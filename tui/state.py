"""The app's state: the runs and reports the workers delivered, and what the user is looking at.

`RunStore` is the data (filled on the UI thread from worker messages); `ViewState` is one frozen
object for everything the user chose (run under the cursor, overlaid runs, charted tag, chart
options, filters, sort). The app holds the view in one reactive; screens watch it and redraw the
panes whose inputs changed, and they change it by assigning a new one built by the transitions
here. The transitions are pure functions of (view, store), so they are tested without a terminal.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tbtriage.analysis.config import Config
from tbtriage.analysis.datamodel import Finding, PrimaryTags, Run, RunReport
from tbtriage.analysis.health_index import RunHealth
from tbtriage.tui.chart_options import ChartOptions, SeriesRequest
from tbtriage.tui.regex_filter import value_filter
from tbtriage.tui.run_rows import SORTS, RunRow, place_rows, run_row, sort_rows, verdict_cells
from tbtriage.tui.widgets.series_style import SlotBook

#: A finding-jump shows the finding's step range plus this fraction of the run on each side (at least
#: MIN_JUMP_STEPS steps), enough context to see the curve before and after.
JUMP_CONTEXT = 0.05
MIN_JUMP_STEPS = 10


#: Rows the runs table's refresh builds at most (`RunStore.rows`); ~1.5 ms a thousand.
ROWS_AT_ONCE = 2_000
#: Rows built again for more than 1/WALLS_RESORT of the runs: they and their wall times are sorted again, not moved
#: one by one (a bisection and a move of the list's tail each).
WALLS_RESORT = 8


@dataclass(frozen=True)
class ViewState:
    """What the user is looking at; replaced whole (never mutated), so a watcher sees old and new."""

    current_run: str | None = None  # the run under the runs table's cursor
    current_tag: str | None = None  # the charted tag
    selected: tuple[str, ...] = ()  # runs overlaid on the chart, in the order they were picked
    sort_key: str = "health"
    run_filter: str = ""
    tag_filter: str = ""
    all_findings: bool = False  # the findings pane lists every run's findings
    options: ChartOptions = field(default_factory=ChartOptions)


@dataclass(frozen=True)
class DataChange:
    """Reports or runs arrived: `runs` names the runs that changed (None: any run may have)."""

    version: int = 0
    runs: frozenset[str] | None = None

    def touches(self, names: list[str]) -> bool:
        return self.runs is None or not self.runs.isdisjoint(names)


@dataclass
class RunStore:
    """The runs read so far, and the latest report of each run analysed (a run without one is pending)."""

    config: Config
    runs: dict[str, Run] = field(default_factory=dict)
    reports: dict[str, RunReport] = field(default_factory=dict)
    #: Each run's health as a warm reopen's index recorded it (`analysis.health_index`): the runs table shows it
    #: until the run's verdict is loaded (a verdict in `reports` always wins).
    health: dict[str, RunHealth] = field(default_factory=dict)
    slots: SlotBook = field(default_factory=SlotBook)  # each run keeps its colour for the session
    new_findings: set[tuple] = field(default_factory=set)  # appeared in the latest live pass, highlighted once
    #: run -> (the report and index health its row's verdict cells were worked out from, those cells): a report
    #: changes far less often than its run's row.
    _verdicts: dict[str, tuple[RunReport | None, RunHealth | None, tuple[str, int | None, str]]] = field(
        default_factory=dict, repr=False, compare=False
    )
    #: run -> its row, built again only for the runs the app says changed (`touch`): while thousands of runs load,
    #: the rows are asked for several times a second and a batch of verdicts changes a few of them.
    _rows: dict[str, RunRow] = field(default_factory=dict, repr=False, compare=False)
    #: The runs whose rows are due to be built again (None: every run's).
    _stale: set[str] | None = field(default=None, repr=False, compare=False)
    #: (the runs' names as last seen, the same sorted): sorted again only when runs come or go.
    _by_name: tuple[tuple[str, ...], list[str]] = field(default=((), []), repr=False, compare=False)
    #: (sort key, every row sorted by it): sorted again only when a row changed or the key did.
    _sorted: tuple[str, list[RunRow]] | None = field(default=None, repr=False, compare=False)
    #: Rows built since the runs table last measured them (`take_fresh`); None: too many to measure apart.
    _fresh: list[RunRow] | None = field(default_factory=list, repr=False, compare=False)
    #: Every row's last wall time, sorted: the table measures its ages column from them (`RunTable.sync_rows`).
    walls: list[float] = field(default_factory=list, repr=False, compare=False)

    def touch(self, names: Iterable[str] | None) -> None:
        """Runs whose run, report or index health changed (None: any run's may have): their rows are built again
        when next asked for. Whoever changes `runs`, `reports` or `health` says so here."""
        if names is None:
            self._stale = None
        elif self._stale is not None:
            self._stale.update(names)

    def roles_of(self, name: str) -> dict[str, str | None]:
        report = self.reports.get(name)
        if report is not None:
            return report.roles
        from tbtriage.analysis.roles import assign_roles  # a run's tags: not on the way to the first frame

        run = self.runs[name]
        return {tag: role for tag, (role, _) in assign_roles(list(run.scalars), self.config, run_name=name).items()}

    def rows(self, view: ViewState, whole: bool = False) -> tuple[list[RunRow], str | None]:
        """The runs table's rows as the view filters and sorts them (a `top N by` filter's rank wins over the
        sort), and the filter's error (None: valid). Unfiltered, the sorted rows are kept until a row or the sort
        key changes: the list returned is shared, and never changed in place.

        At most ROWS_AT_ONCE rows are built per call unless `whole`: the rest show as they were (a run not shown
        before, not at all) until the next call (`rows_due`), so ten thousand runs read at once hold the UI thread
        for a few short pieces rather than one long one."""
        self._build_rows(None if whole else ROWS_AT_ONCE)
        if view.run_filter.strip():
            rows, error, ranked = value_filter(self._in_name_order(), view.run_filter, _row_name, self.scalars_of)
            return (rows if ranked else sort_rows(rows, view.sort_key, by_name=True)), error
        if self._sorted is None or self._sorted[0] != view.sort_key:
            self._sorted = (view.sort_key, sort_rows(self._in_name_order(), view.sort_key, by_name=True))
        return self._sorted[1], None

    @property
    def rows_due(self) -> bool:
        """Rows are due to be built (`rows` built some of them only)."""
        return self._stale is None or bool(self._stale)

    def take_fresh(self) -> list[RunRow] | None:
        """The rows built since the last call (None: more than there are runs, measure them all)."""
        fresh, self._fresh = self._fresh, []
        return fresh

    def _in_name_order(self) -> list[RunRow]:
        rows, names = self._rows, self._by_name[1]
        if len(rows) == len(names):
            return [rows[name] for name in names]
        return [row for name in names if (row := rows.get(name)) is not None]

    def _build_rows(self, at_most: int | None) -> None:
        """Build the rows that are due (`touch`) and those of runs that came, `at_most` of them; drop those of runs
        gone."""
        names = tuple(self.runs)
        gone: list[str] = []
        if names != self._by_name[0]:
            self._by_name = (names, sorted(names))
            gone = [name for name in self._rows if name not in self.runs]
            for name in gone:
                self._forget(name)
            if gone:
                self._sorted = None
            if self._stale is not None:
                self._stale.update(name for name in names if name not in self._rows)
        stale = set(names) if self._stale is None else self._stale
        todo = [name for name in stale if name in self.runs]
        if at_most is not None and len(todo) > at_most:
            # Runs never shown first, then the others.
            todo.sort(key=self._rows.__contains__)
            todo, rest = todo[:at_most], todo[at_most:]
        else:
            rest = []
        self._stale = set(rest)
        # A few rows are moved in the sorted lists (the walls, the rows shown); for many, each is sorted again once.
        one_by_one = len(todo) * WALLS_RESORT < len(names) and not gone
        moves = [(self._rows.get(name), self._build_row(name, one_by_one)) for name in todo]
        if not one_by_one:
            self.walls = sorted(row.wall for row in self._rows.values() if row.wall is not None)
        built = [new for _, new in moves]
        if built:
            if self._sorted is not None:
                if one_by_one:
                    moved = list(self._sorted[1])  # a copy: the table holds the list it was given
                    self._sorted = (self._sorted[0], moved) if place_rows(moved, self._sorted[0], moves) else None
                else:
                    self._sorted = None
            if self._fresh is not None:
                self._fresh += built
                if len(self._fresh) > len(names):
                    self._fresh = None

    def _build_row(self, name: str, place_wall: bool) -> RunRow:
        row = run_row(self.runs[name], None, self._verdict_of(name))
        if place_wall:
            self._forget(name)
            if row.wall is not None:
                bisect.insort(self.walls, row.wall)
        self._rows[name] = row
        return row

    def _forget(self, name: str) -> None:
        """Drop run `name`'s row and its wall time."""
        row = self._rows.pop(name, None)
        if row is not None and row.wall is not None:
            at = bisect.bisect_left(self.walls, row.wall)
            if at < len(self.walls) and self.walls[at] == row.wall:
                del self.walls[at]

    def _verdict_of(self, name: str) -> tuple[str, int | None, str]:
        report, health = self.reports.get(name), self.health.get(name)
        known = self._verdicts.get(name)
        if known is None or known[0] is not report or known[1] is not health:
            known = self._verdicts[name] = (report, health, verdict_cells(report, health))
        return known[2]

    def scalars_of(self, name: str) -> RunScalars:
        """What a value filter reads of run `name`: its analysis, or until then what has been read so far."""
        from tbtriage.analysis.roles import assign_roles
        from tbtriage.analysis.run_filter import RunScalars

        report = self.reports.get(name)
        if report is not None:
            return RunScalars.of(report)
        run = self.runs[name]
        roles = assign_roles(list(run.scalars), self.config, run_name=name)
        return RunScalars(
            name,
            run.scalars,
            {tag: role for tag, (role, _) in roles.items()},
            {tag: direction for tag, (_, direction) in roles.items()},
            self.primary_of(name),
        )

    def charted_runs(self, view: ViewState) -> list[str]:
        """The selected runs, or the run under the cursor when none is selected."""
        if view.selected:
            return [name for name in view.selected if name in self.runs]
        return [view.current_run] if view.current_run in self.runs else []

    def charted_tags(self, view: ViewState) -> tuple[list[str], dict[str, str | None]]:
        """Scalar tags of the charted runs (their union) and each tag's role."""
        roles: dict[str, str | None] = {}
        for name in self.charted_runs(view):
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
        from tbtriage.analysis.roles import assign_roles, primary_tags

        scalars = dict(self.runs[name].scalars)
        roles = assign_roles(list(scalars), self.config, run_name=name)
        return primary_tags(roles, {tag: len(series) for tag, series in scalars.items()}, run_name=name)

    def default_tag(self, view: ViewState) -> str | None:
        """The headline series of the first charted run (its loss, else its metric), else its first tag."""
        names = self.charted_runs(view)
        if not names:
            return None
        return self.primary_of(names[0]).headline or next(iter(sorted(dict(self.runs[names[0]].scalars))), None)

    def chart_requests(self, view: ViewState) -> list[SeriesRequest]:
        tag = view.current_tag
        if tag is None:  # no tag charted: no series to draw
            return []
        requests = []
        for name in self.charted_runs(view):
            series = dict(self.runs[name].scalars).get(tag)
            if series is None:
                continue
            report = self.reports.get(name)
            findings = tuple(f for f in report.findings if not f.tags or tag in f.tags) if report else ()
            requests.append(SeriesRequest(name, self.slots.slot(name), series, findings, tag))
        return requests


def _row_name(row: RunRow) -> str:
    return row.name


# Transitions: each returns the next view ----------------------------------------------------


def with_valid_tag(view: ViewState, store: RunStore) -> ViewState:
    """Keep the charted tag while the charted runs have it; otherwise chart their headline series."""
    if view.current_tag is not None and view.current_tag in store.charted_tags(view)[0]:
        return view
    return replace(view, current_tag=store.default_tag(view))


def choose_run(view: ViewState, store: RunStore, name: str | None) -> ViewState:
    return with_valid_tag(replace(view, current_run=name), store)


def choose_tag(view: ViewState, tag: str) -> ViewState:
    if tag == view.current_tag:
        return view
    # A zoom window belongs to the old tag.
    return replace(view, current_tag=tag, options=replace(view.options, window=None))


def toggle_selected(view: ViewState, store: RunStore, name: str) -> ViewState:
    selected = tuple(n for n in view.selected if n != name) if name in view.selected else (*view.selected, name)
    return with_valid_tag(replace(view, selected=selected), store)


def next_sort(view: ViewState) -> ViewState:
    return replace(view, sort_key=SORTS[(SORTS.index(view.sort_key) + 1) % len(SORTS)])


def jump_to(view: ViewState, store: RunStore, finding: Finding) -> ViewState:
    """Chart the finding's run and first tag on the step axis, zoomed around its step range."""
    from tbtriage.analysis.axes import series_step  # numpy: not on the way to the first frame

    if finding.run not in store.runs:
        return view
    run = store.runs[finding.run]
    tag = finding.tags[0] if finding.tags and finding.tags[0] in run.scalars else view.current_tag
    window = None
    series = run.scalars.get(tag) if tag else None
    # On the series' own axis: a Keras epoch_* series counts epochs where the finding states global steps.
    start = None if tag is None or series is None else series_step(finding, tag, series.steps)
    if start is not None and series is not None and len(series):
        end = series_step(finding, tag or "", series.steps, end=True)
        end = start if end is None else end
        first, last = float(series.steps[0]), float(series.steps[-1])
        pad = max((last - first) * JUMP_CONTEXT, MIN_JUMP_STEPS)
        window = (max(first, start - pad), min(last, end + pad))
    return replace(
        view,
        selected=(finding.run,) if view.selected else (),
        current_run=finding.run,
        current_tag=tag,
        options=replace(view.options, x_axis="step", window=window),
    )


class TriageHost(Protocol):
    """What the screens read from the app (`tui.app.TriageApp`), named here so they never import it."""

    store: RunStore
    view: ViewState
    data: DataChange
    follow: bool
    ascii_only: bool
    clock: Any
    logdir_path: Path | str  # a local path, or a store URL (s3://...) as given
    progress: tuple[str, int, int] | None
    load_error: str | None
    theme_variables: dict[str, str]
    keymap: dict[str, str]
    config: Config

    @property
    def separator(self) -> str: ...

    def open_dashboard(self, name: str) -> None: ...

    def note_user_chose_run(self) -> None: ...

    def run_action(self, action: str) -> Any: ...


if TYPE_CHECKING:
    from textual.app import App

    from tbtriage.analysis.run_filter import RunScalars

    class HostApp(App[Any], TriageHost):
        """How the screens, panes and palette type `self.app`: a Textual app (it can be watched) that is a
        `TriageHost`. For the checker only: Python has no intersection of a class and a protocol, and
        `TriageApp` is both."""
