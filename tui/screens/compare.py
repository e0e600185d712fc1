"""The compare screen (`C` with two or more runs selected): why is one run worse than another.

The runs' headline curves overlaid, with a marker where each parts from the first run's (the step their
difference leaves both runs' own noise band), above the side-by-side table and the engine's account of the
difference: the same `analysis.side_by_side` comparison and Markdown that `tbtriage compare` prints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Markdown, Static

from tbtriage.analysis.render_markdown import side_by_side_markdown
from tbtriage.analysis.side_by_side import SideBySide, side_by_side
from tbtriage.analysis.text import step
from tbtriage.tui.ascii_mode import apply_ascii
from tbtriage.tui.bindings import bindings
from tbtriage.tui.chart_data import PreparedChart, SeriesRequest
from tbtriage.tui.safe_text import multiline, plain
from tbtriage.tui.state import DataChange, ViewState
from tbtriage.tui.widgets.key_bar import KeyBar
from tbtriage.tui.widgets.series_style import series_style
from tbtriage.tui.widgets.tag_chart import TagChart, _rgb

if TYPE_CHECKING:
    from tbtriage.tui.state import HostApp

#: Theme variable the parting markers are drawn in.
PARTING_COLOUR = "accent"


class PartingChart(TagChart):
    """The overlaid curves, plus a vertical marker at each step where a run's curve parts from the first's."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.parting_steps: tuple[int, ...] = ()

    def _draw(self, chart: PreparedChart) -> None:
        super()._draw(chart)
        if self.options.x_axis != "step" or chart.x_range is None:
            return  # the text below says the step; on a time axis the marker would need each run's clock
        colour = _rgb(self.app.theme_variables, PARTING_COLOUR)
        for at in self.parting_steps:
            if chart.x_range[0] <= at <= chart.x_range[1]:
                if self.ascii_only and chart.y_range is not None:
                    self.plt.scatter([at, at], list(chart.y_range), marker="|", color=colour)
                else:
                    self.plt.vline(at, color=colour)


class CompareScreen(Screen):
    """Redraws when the chart options change, or when one of its runs is read or analysed again."""

    SCREEN = "compare"  # its name in the binding table's `screens`
    app: HostApp

    BINDINGS = bindings("compare")

    def __init__(self, runs: tuple[str, ...]) -> None:
        super().__init__()
        self.runs = runs
        self.comparison: SideBySide | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="compare-title")
        with Vertical(id="compare-chart-pane", classes="pane"):
            yield PartingChart(ascii_only=self.app.ascii_only, id="compare-chart", empty_message="No common curve.")
            yield Static(id="compare-legend")
        with VerticalScroll(id="compare-text", classes="pane"):
            # `--ascii`: the Markdown source as it is (pipes for the table), not box-drawn tables and bullets.
            yield Static(id="compare-markdown") if self.app.ascii_only else Markdown(id="compare-markdown")
        yield KeyBar(show_command_palette=not self.app.ascii_only)

    def on_mount(self) -> None:
        if self.app.ascii_only:
            apply_ascii(self)
        self.query_one("#compare-text").border_title = "Side by side"
        self.watch(self.app, "view", self._view_changed, init=False)
        self.watch(self.app, "data", self._data_changed, init=False)
        self.watch(self.app, "theme", lambda _: self.refresh_comparison(), init=False)
        self.query_one("#compare-text").focus()
        self.refresh_comparison()

    def _view_changed(self, old: ViewState, new: ViewState) -> None:
        if old.options != new.options:
            self.refresh_chart()

    def _data_changed(self, change: DataChange) -> None:
        if change.touches(list(self.runs)):
            self.refresh_comparison()

    def action_close(self) -> None:
        self.dismiss()

    def refresh_comparison(self) -> None:
        app = self.app
        reports = [app.store.reports[name] for name in self.runs if name in app.store.reports]
        sep = app.separator
        names = " vs ".join(plain(name) for name in self.runs)
        self.query_one("#compare-title", Static).update(Text(f" Compare{sep}{names}", no_wrap=True))
        if len(reports) < len(self.runs):
            self.comparison = None
            text = "Waiting for the runs' analysis..."
        else:
            self.comparison = side_by_side(reports)
            lines = side_by_side_markdown(self.comparison, heading="##")[2:]  # the title bar names the runs
            text = multiline("\n".join(lines))
        shown = self.query_one("#compare-markdown")
        if isinstance(shown, Markdown):
            shown.update(text)
        else:
            cast(Static, shown).update(Text(text))
        self.refresh_chart()

    def refresh_chart(self) -> None:
        app, comparison = self.app, self.comparison
        chart = self.query_one(PartingChart)
        tag = comparison.tag if comparison is not None else None
        requests = []
        for name in self.runs:
            series = app.store.runs[name].scalars.get(tag) if tag is not None and name in app.store.runs else None
            if series is not None:
                requests.append(SeriesRequest(name, app.store.slots.slot(name), series))
        partings = comparison.partings.values() if comparison is not None else ()
        chart.parting_steps = tuple(sorted({p.step for p in partings if p is not None}))
        chart.set_data(requests, app.view.options)
        title = Text(plain(tag) if tag else "No curve every run logs")
        title.append(f"  {app.view.options.describe(app.separator)}", style="dim")
        self.query_one("#compare-chart-pane").border_title = title
        self.query_one("#compare-legend", Static).update(self._legend(requests, chart.parting_steps))

    def _legend(self, requests: list[SeriesRequest], partings: tuple[int, ...]) -> Text:
        legend = Text(no_wrap=True, overflow="ellipsis")
        for request in requests:
            style = series_style(request.slot, self.app.theme_variables, self.app.ascii_only)
            legend.append(style.sample + " ", style=style.swatch)
            legend.append(plain(request.run) + "   ")
        if partings:
            where = ", ".join(step(s) for s in partings)
            legend.append(f"| parts at step {where}", style=self.app.theme_variables.get(PARTING_COLOUR, ""))
        return legend
