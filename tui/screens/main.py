"""The main screen: runs and tags on the left, the chart over findings and diagnosis on the right.

The app owns the data (`app.store`) and the view state (`app.view`, one reactive); this screen
watches both and redraws only the panes whose inputs changed, and turns pane events into new view
states (`tui.state`'s transitions). It never imports the app, and the app never calls into it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Input, ProgressBar, Static, Tree

from tbtriage.tui.ascii_mode import apply_ascii
from tbtriage.tui.bindings import bindings
from tbtriage.tui.regex_filter import regex_filter
from tbtriage.tui.safe_text import plain
from tbtriage.tui.state import (
    DataChange,
    ViewState,
    choose_run,
    choose_tag,
    jump_to,
    next_sort,
    toggle_selected,
)
from tbtriage.tui.widgets.chart_placeholder import ChartPlaceholder
from tbtriage.tui.widgets.diagnosis import DiagnosisPane
from tbtriage.tui.widgets.findings_list import FindingsList
from tbtriage.tui.widgets.key_bar import KeyBar
from tbtriage.tui.widgets.run_table import RunTable
from tbtriage.tui.widgets.series_style import series_style
from tbtriage.tui.widgets.tag_tree import TagTree

if TYPE_CHECKING:
    from tbtriage.tui.chart_options import SeriesRequest
    from tbtriage.tui.state import HostApp
    from tbtriage.tui.widgets.tag_chart import TagChart

#: Longest legend entry before it is cut, so one long run name cannot push the others out.
LEGEND_NAME_CELLS = 28


class FilterInput(Input):
    """A regex filter box: typing filters live, `enter` returns to the list, `escape` clears it."""

    BINDINGS = bindings("filter")

    def action_close_filter(self) -> None:
        self.value = ""
        cast("MainScreen", self.screen).close_filter(self)


#: Each filter box: its placeholder, and the pane it opens at the top of.
FILTERS = {
    "run-filter": ("filter runs: regex, val/acc>0.9, top 5 by loss (? for more)", "#runs-pane"),
    "tag-filter": ("filter tags (regex)", "#tags-pane"),
}


class ChartPane(Vertical, can_focus=True):
    """The chart's pane takes the focus (`tab` reaches it), so `z` can maximise it like any other pane."""

    ALLOW_MAXIMIZE = True


class MainScreen(Screen):
    """Redraws each pane when the view state or data it shows changes; pane events become new view states."""

    SCREEN = "main"  # its name in the binding table's `screens`
    app: HostApp

    def __init__(self) -> None:
        super().__init__()
        self._shown_text: dict[str, tuple] = {}  # Static selector -> what it shows (`_show_text`)
        self._shown_tags: tuple | None = None  # the tag tree's last (tags, roles, kept tag)
        self._shown_findings: tuple | None = None  # the findings list's last (findings, with run, new, empty)
        self._details_from: ViewState | None = None  # the view the run's panes show, while their redraw is due
        self._chart: TagChart | None = None  # mounted in the placeholder's place after the first frame (`mount_chart`)
        self._chart_mounting = False
        #: The filter boxes opened so far: each is mounted when first opened (`open_filter`), not for the first frame,
        #: where styling two hidden inputs cost a fifth of the app's start.
        self._filters: dict[str, FilterInput] = {}
        self._shown_filter = ""  # the runs filter the runs table last showed
        self._more_rows_due = False  # the runs table shows some rows as they were: a refresh is queued

    def compose(self) -> ComposeResult:
        ascii_only = self.app.ascii_only
        with Horizontal(id="status-bar"):
            yield Static(id="status")
            yield ProgressBar(id="progress", show_eta=False, show_percentage=False)
        with Horizontal(id="panes"):
            with Vertical(id="left"):
                with Vertical(id="runs-pane", classes="pane"):
                    yield Static(id="run-filter-error")
                    yield RunTable(ascii_only=ascii_only, id="runs")
                with Vertical(id="tags-pane", classes="pane"):
                    yield TagTree(ascii_only=ascii_only, id="tags")
            with Vertical(id="right"):
                with ChartPane(id="chart-pane", classes="pane"):
                    yield ChartPlaceholder(id="chart-placeholder")
                    yield Static(id="legend")
                with Horizontal(id="bottom"):
                    yield FindingsList(ascii_only=ascii_only, id="findings", classes="pane")
                    yield DiagnosisPane(id="diagnosis", classes="pane")
        yield KeyBar(show_command_palette=not ascii_only)

    def on_mount(self) -> None:
        if self.app.ascii_only:
            apply_ascii(self)
        self.query_one("#runs-pane").border_title = "Runs"
        self.query_one("#tags-pane").border_title = "Tags"
        self.query_one("#findings").border_title = "Findings"
        self.query_one("#diagnosis").border_title = "Diagnosis"
        self.watch(self.app, "view", self._view_changed, init=False)
        self.watch(self.app, "data", self._data_changed, init=False)
        self.watch(self.app, "follow", lambda _: self.refresh_status(), init=False)
        self.watch(self.app, "theme", lambda _: self.refresh_all(), init=False)
        self.query_one(RunTable).focus()
        self.refresh_all()

    async def mount_chart(self) -> None:
        """The chart in its placeholder's place, after the first frame (a step of the app's warm-up, `tui.warm_up`):
        plotext, numpy and the chart's data pipeline are imported here, not on the way from the shell to the first
        screen."""
        if not self.is_attached or self._chart_mounting:
            return  # the app quit before its first frame was followed up, or the chart is (being) mounted
        self._chart_mounting = True
        from tbtriage.tui.widgets.tag_chart import TagChart

        chart = TagChart(ascii_only=self.app.ascii_only, id="chart")
        placeholder = self.query_one(ChartPlaceholder)
        await self.query_one("#chart-pane").mount(chart, before=placeholder)
        await placeholder.remove()
        self._chart = chart
        self.refresh_chart()

    @property
    def chart(self) -> TagChart | None:
        """The chart widget, None until it is mounted (just after the first frame)."""
        return self._chart

    # State -> panes --------------------------------------------------------------------------

    def _view_changed(self, old: ViewState, new: ViewState) -> None:
        """Redraw only the panes whose inputs differ between the two views.

        When the cursor moved to another run, the frame that shows it moved is drawn first and the panes
        about the run (tags, chart, findings, diagnosis) after it, once for however many moves came in
        between: a held arrow key scrolls the list without waiting for every run's diagnosis.
        """
        if (old.sort_key, old.run_filter, old.selected) != (new.sort_key, new.run_filter, new.selected):
            self.refresh_runs()
        elif old.current_run != new.current_run and self.query_one(RunTable).current_run != new.current_run:
            self.refresh_runs()  # moved by the app (a finding jump, the worst run after loading): follow it
        if self._details_from is not None:
            return  # a redraw of the run's panes is due after the next frame; it compares against the view then
        if old.current_run != new.current_run:
            self._details_from = old
            self.call_after_refresh(self._redraw_details)
        else:
            self._refresh_details(old, new)

    def _redraw_details(self) -> None:
        old, self._details_from = self._details_from, None
        if old is not None:
            self._refresh_details(old, self.app.view)

    def _refresh_details(self, old: ViewState, new: ViewState) -> None:
        """Redraw the panes beside the runs table whose inputs differ between `old` and `new`."""
        store = self.app.store
        charted_changed = store.charted_runs(old) != store.charted_runs(new)
        if charted_changed or old.tag_filter != new.tag_filter or old.current_tag != new.current_tag:
            self.refresh_tags()
        if charted_changed or old.current_tag != new.current_tag or old.options != new.options:
            self.refresh_chart()
        if old.current_run != new.current_run:
            self.refresh_diagnosis()
        if old.all_findings != new.all_findings or (old.current_run != new.current_run and not new.all_findings):
            self.refresh_findings()

    def _data_changed(self, change: DataChange) -> None:
        """Runs or reports arrived: their rows change in place; the other panes redraw if they show them."""
        app = self.app
        if change.runs is None or change.runs:
            self.refresh_runs()
            if change.touches(app.store.charted_runs(app.view)):
                self.refresh_tags()
                self.refresh_chart()
                self.refresh_diagnosis()
            if app.view.all_findings or change.touches([app.view.current_run] if app.view.current_run else []):
                self.refresh_findings()
        self.refresh_status()

    def _show_text(self, selector: str, text: Text, *, layout: bool = True) -> None:
        """Show `text` in the Static `selector` unless it already does.

        Every `Static.update` repaints it, and with `layout` re-lays out the whole screen (a full redraw);
        the status line, legend and filter error are asked to redraw several times a second while
        thousands of runs load, mostly with what they already show. `layout=False` is for the one-line
        widgets whose size never depends on their text.
        """
        look = (text.plain, str(text.style), tuple(text.spans))
        if self._shown_text.get(selector) != look:
            self._shown_text[selector] = look
            self.query_one(selector, Static).update(text, layout=layout)

    def refresh_all(self) -> None:
        self._shown_text.clear()  # the theme changed: redraw what looks the same in other colours
        self._shown_tags = self._shown_findings = None
        self.refresh_runs(restyle=True)
        self.refresh_tags()
        self.refresh_chart()
        self.refresh_findings()
        self.refresh_diagnosis()
        self.refresh_status()

    def refresh_runs(self, restyle: bool = False) -> None:
        app, view = self.app, self.app.view
        table = self.query_one(RunTable)
        # Built a few thousand at a time (the rest after the next frame), but all at once for the first rows shown.
        rows, error = app.store.rows(view, whole=not table.row_count)
        # Unfiltered, every row is shown: the rows built since the last time are all the table has not measured.
        # A filter shows some; when it changes, the table measures the rows it shows then.
        filtered = view.run_filter.strip()
        fresh = app.store.take_fresh()
        measured_apart = not filtered and not self._shown_filter and fresh is not None
        self._shown_filter = filtered
        if (box := self._filters.get("run-filter")) is not None:
            box.set_class(error is not None, "-invalid")
        self._show_text("#run-filter-error", Text(plain(error or "")))
        shown_error = self.query_one("#run-filter-error", Static)
        shown_error.set_class(error is not None, "-show")
        swatches = {
            name: series_style(app.store.slots.slot(name), app.theme_variables, app.ascii_only).swatch
            for name in view.selected
        }
        table.sync_rows(
            rows,
            swatches,
            keep=view.current_run,
            restyle=restyle,
            now=app.clock(),
            fresh=fresh if measured_apart else None,
            walls=app.store.walls if measured_apart else None,
        )
        if app.store.rows_due and not self._more_rows_due:  # built in pieces: the next after the next frame
            self._more_rows_due = True
            self.call_after_refresh(self._more_rows)
        total = len(app.store.runs)
        shown = f"{len(rows)}/{total}" if view.run_filter else str(total)
        self.query_one("#runs-pane").border_title = f"Runs ({shown}){app.separator}sort: {view.sort_key}"

    def _more_rows(self) -> None:
        self._more_rows_due = False
        self.refresh_runs()

    def refresh_tags(self) -> None:
        app, view = self.app, self.app.view
        tags, roles = app.store.charted_tags(view)
        tags, error = regex_filter(tags, view.tag_filter)
        if (box := self._filters.get("tag-filter")) is not None:
            box.set_class(error is not None, "-invalid")
        shown = (tags, roles, view.current_tag)
        if shown != self._shown_tags:  # the next run has the same tags: the tree (and its cursor) stays
            self._shown_tags = shown
            self.query_one(TagTree).show_tags(tags, roles, keep=view.current_tag)

    def refresh_chart(self) -> None:
        app, view = self.app, self.app.view
        requests = app.store.chart_requests(view)
        if self._chart is not None:
            self._chart.set_data(requests, view.options)
        elif requests:
            # A series to draw before the warm-up got to the chart: the warm-up's own steps mount it shortly. Mounted
            # here at once, its imports (plotext, the chart's pipeline) and mount held the UI thread 35-120 ms just as a
            # warm reopen's worst run arrived, and a key pressed then waited for them.
            self.query_one(ChartPlaceholder).expect_chart()
        title = Text(plain(view.current_tag) if view.current_tag else "Chart")
        title.append(f"  {view.options.describe(app.separator)}", style="dim")
        self.query_one("#chart-pane").border_title = title
        self._show_text("#legend", self._legend(requests), layout=False)

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
        app, view = self.app, self.app.view
        reports = app.store.reports
        if view.all_findings:
            findings = [f for report in reports.values() for f in report.findings]
            empty, title = "No findings in any run.", f"Findings{app.separator}all runs"
        else:
            report = reports.get(view.current_run) if view.current_run else None
            findings = list(report.findings) if report else []
            empty = "No findings for this run." if report else "Select an analysed run to see its findings."
            title = "Findings"
        self.query_one("#findings").border_title = f"{title} ({len(findings)})"
        shown = (findings, view.all_findings, set(app.store.new_findings), empty)
        if shown != self._shown_findings:  # a verdict on another run leaves this list as it is
            self._shown_findings = shown
            self.query_one(FindingsList).show_findings(
                findings, with_run=view.all_findings, new=app.store.new_findings, empty=empty
            )

    def refresh_diagnosis(self) -> None:
        app, view = self.app, self.app.view
        if view.current_run is None:
            return
        pane = self.query_one(DiagnosisPane)
        pane.show_report(app.store.reports.get(view.current_run))
        pane.border_title = Text(f"Diagnosis{app.separator}{plain(view.current_run)}")

    def refresh_status(self) -> None:
        app = self.app
        parts = [f"tbtriage  {plain(str(app.logdir_path))}", f"{len(app.store.runs)} runs"]
        parts.append(("following" if app.follow else "paused") + (" ●" if app.follow and not app.ascii_only else ""))
        if app.progress is not None:
            stage, done, total = app.progress
            parts.append(f"{stage} {done}/{total}" if total else f"{stage}…")
        elif app.load_error:
            parts.append(app.load_error)
        self._show_text("#status", Text(f" {app.separator} ".join(parts)), layout=False)
        bar = self.query_one(ProgressBar)
        bar.display = app.progress is not None and not app.ascii_only
        if app.progress is not None:
            bar.update(total=app.progress[2] or None, progress=app.progress[1])

    # Pane events -> state --------------------------------------------------------------------

    @on(RunTable.Highlighted)
    def _run_highlighted(self, event: RunTable.Highlighted) -> None:
        app = self.app
        name = event.run
        if name != event.table.current_run or name == app.view.current_run:
            return  # a stale highlight (the cursor has moved on since), or no change
        if app.view.current_run is not None:  # the very first highlight is the table's own, not the user's
            app.note_user_chose_run()
        app.view = choose_run(app.view, app.store, name)

    @on(RunTable.ToggleSelect)
    def _toggle_select(self, event: RunTable.ToggleSelect) -> None:
        self.app.view = toggle_selected(self.app.view, self.app.store, event.run)

    @on(RunTable.OpenRun)
    def _open_run(self, event: RunTable.OpenRun) -> None:
        self.app.open_dashboard(event.run)

    @on(RunTable.CycleSort)
    def _cycle_sort(self) -> None:
        self.app.view = next_sort(self.app.view)

    @on(Tree.NodeHighlighted, "#tags")
    def _tag_highlighted(self, event: Tree.NodeHighlighted) -> None:
        if event.node.data is not None:
            self.app.view = choose_tag(self.app.view, event.node.data)

    @on(FindingsList.Jump)
    def _jump(self, event: FindingsList.Jump) -> None:
        self.app.view = jump_to(self.app.view, self.app.store, event.finding)

    @on(Input.Changed, "#run-filter")
    def _run_filter_changed(self, event: Input.Changed) -> None:
        self.app.view = replace(self.app.view, run_filter=event.value)

    @on(Input.Changed, "#tag-filter")
    def _tag_filter_changed(self, event: Input.Changed) -> None:
        self.app.view = replace(self.app.view, tag_filter=event.value)

    @on(Input.Submitted, ".filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self._focus_list_of(event.input)

    # Filter boxes ----------------------------------------------------------------------------

    def open_filter(self) -> None:
        """Show the filter box of the focused list (tags when the tags pane has focus, else runs)."""
        in_tags = self.focused is not None and (self.focused.id == "tags" or self.focused.id == "tag-filter")
        box_id = "tag-filter" if in_tags else "run-filter"
        box = self._filters.get(box_id)
        if box is None:
            placeholder, pane = FILTERS[box_id]
            box = self._filters[box_id] = FilterInput(placeholder=placeholder, id=box_id, classes="filter")
            self.query_one(pane).mount(box, before=0)
        box.add_class("-open")
        box.focus()

    def close_filter(self, box: FilterInput) -> None:
        box.remove_class("-open")
        self._focus_list_of(box)

    def _focus_list_of(self, box: Input) -> None:
        if not box.value:
            box.remove_class("-open")
        self.query_one("#tags" if box.id == "tag-filter" else "#runs").focus()

    def show_diagnosis(self) -> DiagnosisPane:
        pane = self.query_one(DiagnosisPane)
        pane.add_class("-show")
        return pane
