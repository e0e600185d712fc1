"""The main screen: runs and tags on the left, the chart over findings and diagnosis on the right.

The app owns the data (runs, reports, selection, chart options); this screen turns that state
into panes and turns pane events back into app state changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.coordinate import Coordinate
from textual.screen import Screen
from textual.widgets import Footer, Input, ProgressBar, Static, Tree

from tbtriage.tui.ascii_mode import apply_ascii
from tbtriage.tui.bindings import bindings
from tbtriage.tui.chart_data import SeriesRequest
from tbtriage.tui.regex_filter import regex_filter
from tbtriage.tui.run_rows import SORTS, run_row, sort_rows
from tbtriage.tui.safe_text import plain
from tbtriage.tui.widgets.diagnosis import DiagnosisPane
from tbtriage.tui.widgets.findings_list import FindingsList
from tbtriage.tui.widgets.run_table import RunTable
from tbtriage.tui.widgets.series_style import series_style
from tbtriage.tui.widgets.tag_chart import TagChart
from tbtriage.tui.widgets.tag_tree import TagTree

if TYPE_CHECKING:
    from tbtriage.tui.app import TriageApp

#: Longest legend entry before it is cut, so one long run name cannot push the others out.
LEGEND_NAME_CELLS = 28


class FilterInput(Input):
    """A regex filter box: typing filters live, `enter` returns to the list, `escape` clears it."""

    BINDINGS = bindings("filter")

    def action_close_filter(self) -> None:
        self.value = ""
        cast("MainScreen", self.screen).close_filter(self)


class MainScreen(Screen):
    app: TriageApp

    def compose(self) -> ComposeResult:
        ascii_only = self.app.ascii_only
        with Horizontal(id="status-bar"):
            yield Static(id="status")
            yield ProgressBar(id="progress", show_eta=False, show_percentage=False)
        with Horizontal(id="panes"):
            with Vertical(id="left"):
                with Vertical(id="runs-pane", classes="pane"):
                    yield FilterInput(placeholder="filter runs (regex)", id="run-filter", classes="filter")
                    yield RunTable(ascii_only=ascii_only, id="runs")
                with Vertical(id="tags-pane", classes="pane"):
                    yield FilterInput(placeholder="filter tags (regex)", id="tag-filter", classes="filter")
                    yield TagTree(ascii_only=ascii_only, id="tags")
            with Vertical(id="right"):
                with Vertical(id="chart-pane", classes="pane"):
                    yield TagChart(ascii_only=ascii_only, id="chart")
                    yield Static(id="legend")
                with Horizontal(id="bottom"):
                    yield FindingsList(ascii_only=ascii_only, id="findings", classes="pane")
                    yield DiagnosisPane(id="diagnosis", classes="pane")
        yield Footer(show_command_palette=not ascii_only)

    def on_mount(self) -> None:
        if self.app.ascii_only:
            apply_ascii(self)
        self.query_one("#runs-pane").border_title = "Runs"
        self.query_one("#tags-pane").border_title = "Tags"
        self.query_one("#findings").border_title = "Findings"
        self.query_one("#diagnosis").border_title = "Diagnosis"
        self.watch(self.app, "options", lambda _: self.refresh_chart(), init=False)
        self.watch(self.app, "theme", lambda _: self.refresh_all(), init=False)
        self.query_one(RunTable).focus()
        self.refresh_all()

    # State -> panes --------------------------------------------------------------------------

    def refresh_all(self) -> None:
        self.refresh_runs()
        self.refresh_tags()
        self.refresh_chart()
        self.refresh_findings()
        self.refresh_diagnosis()
        self.refresh_status()

    def refresh_runs(self) -> None:
        app = self.app
        now = app.clock()
        rows = [run_row(run, app.reports.get(name), now) for name, run in app.runs.items()]
        rows, error = regex_filter(rows, app.run_filter, lambda row: row.name)
        self.query_one("#run-filter").set_class(error is not None, "-invalid")
        swatches = {
            name: series_style(app.slots.slot(name), app.theme_variables, app.ascii_only).swatch
            for name in app.selected
        }
        table = self.query_one(RunTable)
        table.show_rows(sort_rows(rows, app.sort_key), swatches, keep=app.current_run)
        shown = f"{len(rows)}/{len(app.runs)}" if app.run_filter else str(len(app.runs))
        self.query_one("#runs-pane").border_title = f"Runs ({shown}){app.separator}sort: {app.sort_key}"

    def refresh_tags(self) -> None:
        app = self.app
        tags, roles = app.charted_tags()
        tags, error = regex_filter(tags, app.tag_filter)
        self.query_one("#tag-filter").set_class(error is not None, "-invalid")
        self.query_one(TagTree).show_tags(tags, roles, keep=app.current_tag)

    def refresh_chart(self) -> None:
        app = self.app
        chart = self.query_one(TagChart)
        requests = app.chart_requests()
        chart.set_data(requests, app.options)
        title = Text(plain(app.current_tag) if app.current_tag else "Chart")
        title.append(f"  {app.options.describe(app.separator)}", style="dim")
        self.query_one("#chart-pane").border_title = title
        self.query_one("#legend", Static).update(self._legend(requests))

    def _legend(self, requests: list[SeriesRequest]) -> Text:
        legend = Text(no_wrap=True, overflow="ellipsis")
        for request in requests:
            style = series_style(request.slot, self.app.theme_variables, self.app.ascii_only)
            legend.append(style.sample + " ", style=style.swatch)
            name = plain(request.run)
            legend.append(name if len(name) <= LEGEND_NAME_CELLS else name[: LEGEND_NAME_CELLS - 1] + "…")
            legend.append("   ")
        return legend

    def refresh_findings(self) -> None:
        app = self.app
        if app.all_findings:
            findings = [f for report in app.reports.values() for f in report.findings]
            empty, title = "No findings in any run.", f"Findings{app.separator}all runs"
        else:
            report = app.reports.get(app.current_run) if app.current_run else None
            findings = list(report.findings) if report else []
            empty = "No findings for this run." if report else "Select an analysed run to see its findings."
            title = "Findings"
        self.query_one("#findings").border_title = f"{title} ({len(findings)})"
        self.query_one(FindingsList).show_findings(
            findings, with_run=app.all_findings, new=app.new_findings, empty=empty
        )

    def refresh_diagnosis(self) -> None:
        app = self.app
        report = app.reports.get(app.current_run) if app.current_run else None
        pane = self.query_one(DiagnosisPane)
        if app.current_run is None:
            return
        pane.show_report(report)
        pane.border_title = Text(f"Diagnosis{app.separator}{plain(app.current_run)}")

    def refresh_status(self) -> None:
        app = self.app
        parts = [f"tbtriage  {plain(str(app.logdir_path))}", f"{len(app.runs)} runs"]
        parts.append(("following" if app.follow else "paused") + (" ●" if app.follow and not app.ascii_only else ""))
        if app.progress is not None:
            stage, done, total = app.progress
            parts.append(f"{stage} {done}/{total}" if total else f"{stage}…")
        elif app.load_error:
            parts.append(app.load_error)
        self.query_one("#status", Static).update(Text(f" {app.separator} ".join(parts)))
        bar = self.query_one(ProgressBar)
        bar.display = app.progress is not None and not app.ascii_only
        if app.progress is not None:
            bar.update(total=app.progress[2] or None, progress=app.progress[1])

    # Pane events -> state --------------------------------------------------------------------

    @on(RunTable.RowHighlighted)
    def _run_highlighted(self, event: RunTable.RowHighlighted) -> None:
        if event.row_key.value != cast(RunTable, event.data_table).current_run:
            return  # a rebuild's stale highlight: the cursor has moved on since
        # The very first highlight is the table's own, not the user's choice.
        self.app.set_current_run(event.row_key.value, by_user=self.app.current_run is not None)

    @on(RunTable.ToggleSelect)
    def _toggle_select(self, event: RunTable.ToggleSelect) -> None:
        self.app.toggle_selected(event.run)

    @on(RunTable.OpenRun)
    def _open_run(self, event: RunTable.OpenRun) -> None:
        self.app.open_dashboard(event.run)

    @on(RunTable.CycleSort)
    def _cycle_sort(self) -> None:
        app = self.app
        app.sort_key = SORTS[(SORTS.index(app.sort_key) + 1) % len(SORTS)]
        self.refresh_runs()

    @on(Tree.NodeHighlighted, "#tags")
    def _tag_highlighted(self, event: Tree.NodeHighlighted) -> None:
        if event.node.data is not None:
            self.app.set_current_tag(event.node.data)

    @on(FindingsList.Jump)
    def _jump(self, event: FindingsList.Jump) -> None:
        self.app.jump_to(event.finding)

    @on(Input.Changed, "#run-filter")
    def _run_filter_changed(self, event: Input.Changed) -> None:
        self.app.run_filter = event.value
        self.refresh_runs()

    @on(Input.Changed, "#tag-filter")
    def _tag_filter_changed(self, event: Input.Changed) -> None:
        self.app.tag_filter = event.value
        self.refresh_tags()

    @on(Input.Submitted, ".filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self._focus_list_of(event.input)

    # Filter boxes ----------------------------------------------------------------------------

    def open_filter(self) -> None:
        """Show the filter box of the focused list (tags when the tags pane has focus, else runs)."""
        in_tags = self.focused is not None and (self.focused.id == "tags" or self.focused.id == "tag-filter")
        box = self.query_one("#tag-filter" if in_tags else "#run-filter", FilterInput)
        box.add_class("-open")
        box.focus()

    def close_filter(self, box: FilterInput) -> None:
        box.remove_class("-open")
        self._focus_list_of(box)

    def _focus_list_of(self, box: Input) -> None:
        if not box.value:
            box.remove_class("-open")
        self.query_one("#tags" if box.id == "tag-filter" else "#runs").focus()

    def first_run_shown(self) -> str | None:
        table = self.query_one(RunTable)
        return table.coordinate_to_cell_key(Coordinate(0, 0)).row_key.value if table.row_count else None

    def show_diagnosis(self) -> DiagnosisPane:
        pane = self.query_one(DiagnosisPane)
        pane.add_class("-show")
        return pane
