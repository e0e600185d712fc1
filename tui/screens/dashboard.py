"""The run dashboard (`enter` on a run): the four panels practitioners lay out for one run.

Train vs validation loss; per-layer gradient norms as a heatmap over time; learning rate and
momentum; device utilisation with step and data time. Tags are picked by role, so any logger's
names work; a panel with nothing to show says so in one line instead of drawing empty axes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.screen import Screen
from textual.widgets import Static

from tbtriage.analysis.datamodel import Series
from tbtriage.analysis.histograms import gradient_layers
from tbtriage.tui.ascii_mode import apply_ascii
from tbtriage.tui.bindings import bindings
from tbtriage.tui.chart_data import SeriesRequest
from tbtriage.tui.safe_text import plain
from tbtriage.tui.state import DataChange, ViewState
from tbtriage.tui.widgets.grad_heatmap import GradHeatmap
from tbtriage.tui.widgets.key_bar import KeyBar
from tbtriage.tui.widgets.tag_chart import TagChart

if TYPE_CHECKING:
    from tbtriage.tui.state import HostApp

#: (panel id, title, [(chart id, roles charted together on one y axis)], one line when none is there)
PANELS: tuple[tuple[str, str, list[tuple[str, tuple[str, ...]]], str], ...] = (
    ("loss", "Train vs validation loss", [("loss-chart", ("train_loss", "val_loss"))], "No training or validation loss in this run."),
    ("grads", "Gradient norm by layer", [], "No per-layer gradient norms or gradient histograms in this run."),
    ("lr", "Learning rate & momentum", [("lr-chart", ("lr",)), ("momentum-chart", ("momentum",))], "No learning rate or momentum in this run."),
    ("device", "Device utilisation & step time", [("util-chart", ("gpu_util",)), ("time-chart", ("step_time", "data_time"))],
     "No device utilisation or step/data time in this run."),
)  # fmt: skip


class RunDashboard(Screen):
    """Redraws when the chart options change, or when its run is read or analysed again."""

    SCREEN = "dashboard"  # its name in the binding table's `screens`
    app: HostApp

    BINDINGS = bindings("dashboard")

    def __init__(self, run_name: str) -> None:
        super().__init__()
        self.run_name = run_name

    def compose(self) -> ComposeResult:
        ascii_only = self.app.ascii_only
        yield Static(id="dashboard-title")
        with Grid(id="dashboard"):
            for panel_id, _title, charts, empty in PANELS:
                with Vertical(id=f"panel-{panel_id}", classes="pane panel"):
                    yield Static(Text(empty, style="dim"), classes="panel-empty")
                    if panel_id == "grads":
                        yield GradHeatmap({}, ascii_only=ascii_only, id="grad-heatmap")
                    for chart_id, _roles in charts:
                        yield TagChart(ascii_only=ascii_only, id=chart_id, empty_message="", legend=True)
        yield KeyBar(show_command_palette=not ascii_only)

    def on_mount(self) -> None:
        if self.app.ascii_only:
            apply_ascii(self)
        for panel_id, title, _charts, _empty in PANELS:
            self.query_one(f"#panel-{panel_id}").border_title = title
        self.watch(self.app, "view", self._view_changed, init=False)
        self.watch(self.app, "data", self._data_changed, init=False)
        self.watch(self.app, "theme", lambda _: self.refresh_panels(), init=False)
        self.refresh_panels()

    def _view_changed(self, old: ViewState, new: ViewState) -> None:
        if old.options != new.options:
            self.refresh_panels()

    def _data_changed(self, change: DataChange) -> None:
        if change.touches([self.run_name]):
            self.refresh_panels()

    def action_close(self) -> None:
        self.dismiss()

    def tags_by_role(self) -> dict[str, list[str]]:
        """The run's tags for each role the panels use; losses narrowed to the headline pair."""
        app = self.app
        run = app.store.runs[self.run_name]
        roles = app.store.roles_of(self.run_name)
        scalars = dict(run.scalars)
        primary = app.store.primary_of(self.run_name)
        by_role: dict[str, list[str]] = {}
        for tag in sorted(scalars):
            if (role := roles.get(tag)) is not None:
                by_role.setdefault(role, []).append(tag)
        by_role["train_loss"] = [primary.train_loss] if primary.train_loss else []
        by_role["val_loss"] = [primary.val_loss] if primary.val_loss else []
        return by_role

    def refresh_panels(self) -> None:
        app = self.app
        run = app.store.runs.get(self.run_name)
        if run is None:
            return
        report = app.store.reports.get(self.run_name)
        sep = app.separator
        health = f"health {report.health.score}" if report is not None else "analysing"
        self.query_one("#dashboard-title", Static).update(
            Text(sep.join([f"Run {plain(self.run_name)}", health, "esc: back"]), style="bold")
        )
        scalars = dict(run.scalars)
        by_role = self.tags_by_role()
        options = replace(app.view.options, window=None)  # zoom belongs to the main chart
        for panel_id, title, charts, _empty in PANELS:
            panel = self.query_one(f"#panel-{panel_id}")
            if panel_id == "grads":
                # Per-layer norm scalars, else the norms of the run's gradient histograms.
                layers, source = gradient_layers(scalars, dict(run.histograms), app.store.roles_of(self.run_name))
                self.query_one(GradHeatmap).set_layers(layers)
                panel.border_title = title + (f"{sep}from gradient histograms" if source == "histograms" else "")
                has_data = bool(layers)
            else:
                has_data = False
                for chart_id, roles in charts:
                    requests = _requests(scalars, [tag for role in roles for tag in by_role.get(role, [])])
                    chart = self.query_one(f"#{chart_id}", TagChart)
                    chart.set_data(requests, options)
                    chart.display = bool(requests)
                    has_data |= bool(requests)
            panel.set_class(not has_data, "-empty")


def _requests(scalars: dict[str, Series], tags: list[str]) -> list[SeriesRequest]:
    """One request per tag, each in its own colour slot (the legend is the tag name)."""
    return [SeriesRequest(tag, slot, scalars[tag]) for slot, tag in enumerate(tags) if len(scalars[tag])]
