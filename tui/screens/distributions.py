"""Distributions and gradient flow of one run (`h` on the main screen or a run's dashboard).

Distributions: the run's histogram tags on the left (gradients, then weights, activations and the rest);
for the highlighted one, TensorBoard's distribution chart over steps and, under it, the histogram at the
selected step. Gradient flow (`v`): every layer's gradient magnitude at the selected step as bars, over the
layers × steps heatmap; from per-layer gradient-norm scalars when the run logs them, else from its gradient
histograms. `[` and `]` move the selected step through the logged ones in both views.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from tbtriage.analysis.datamodel import HistogramSeries, Series
from tbtriage.analysis.histograms import HISTOGRAM_KINDS, gradient_layers, histogram_kind, summarise
from tbtriage.analysis.text import number
from tbtriage.tui.ascii_mode import apply_ascii
from tbtriage.tui.bindings import bindings
from tbtriage.tui.safe_text import plain
from tbtriage.tui.state import DataChange
from tbtriage.tui.widgets.distribution_chart import DistributionChart, HistogramAtStep
from tbtriage.tui.widgets.grad_heatmap import GradHeatmap, LayerBars
from tbtriage.tui.widgets.key_bar import KeyBar

if TYPE_CHECKING:
    from tbtriage.tui.state import HostApp


def histogram_order(tags: list[str]) -> list[str]:
    """Gradients first (where trouble shows first), then weights, activations and the rest, each by name."""
    rank = {kind: i for i, kind in enumerate(HISTOGRAM_KINDS)}
    return sorted(tags, key=lambda tag: (rank.get(histogram_kind(tag) or "", len(rank)), tag))


#: Widest tag in the list (the pane is 28 cells); longer ones keep their end, where the layer is named.
TAG_CELLS = 24


def _fit_tag(tag: str, ascii_only: bool) -> str:
    cut = "~" if ascii_only else "…"
    return tag if len(tag) <= TAG_CELLS else cut + tag[-(TAG_CELLS - 1) :]


def nearest_index(steps: np.ndarray, step: int | None) -> int:
    """The index of the last point at or before `step` (the first point when none is; the last when None)."""
    if step is None or not steps.size:
        return max(int(steps.size) - 1, 0)
    return max(int(np.searchsorted(steps, step, side="right")) - 1, 0)


class DistributionsScreen(Screen):
    """Redraws on `[`/`]`, a new tag, `v`, or when its run is read again."""

    SCREEN = "distributions"  # its name in the binding table's `screens`
    app: HostApp

    BINDINGS = bindings("distributions")

    def __init__(self, run_name: str) -> None:
        super().__init__()
        self.run_name = run_name
        self.hist_tags: list[str] = []
        self.tag: str | None = None
        self.step: int | None = None  # the selected step; None: the last one
        self.flow = False
        self.grad_layers: dict[str, Series] = {}
        self.grad_source: str | None = None
        self._shown_flow: bool | None = None  # the view the layout and title were last set for

    def compose(self) -> ComposeResult:
        ascii_only = self.app.ascii_only
        yield Static(id="distributions-title")
        with Horizontal(id="distributions-body"):
            with Vertical(id="hist-tags-pane", classes="pane"):
                yield OptionList(id="hist-tags")
            with Vertical(id="distributions-right"):
                with Vertical(id="distribution-pane", classes="pane"):
                    yield DistributionChart(ascii_only=ascii_only, id="distribution")
                with Vertical(id="histogram-pane", classes="pane"):
                    yield HistogramAtStep(ascii_only=ascii_only, id="histogram")
                with Vertical(id="flow-bars-pane", classes="pane"):
                    yield LayerBars(ascii_only=ascii_only, id="flow-bars")
                with Vertical(id="flow-heatmap-pane", classes="pane"):
                    yield GradHeatmap({}, ascii_only=ascii_only, id="flow-heatmap")
        yield KeyBar(show_command_palette=not ascii_only)

    def on_mount(self) -> None:
        if self.app.ascii_only:
            apply_ascii(self)
        self.watch(self.app, "data", self._data_changed, init=False)
        self.watch(self.app, "theme", lambda _: self.redraw(), init=False)
        self.reload()
        self.flow = not self.hist_tags and bool(self.grad_layers)  # a run with per-layer norms but no histograms
        self.query_one("#hist-tags", OptionList).focus()
        self.redraw()
        self.summarise_ahead()

    @work(thread=True, exclusive=True, group="summaries", exit_on_error=False)
    def summarise_ahead(self) -> None:
        """Summarise every tag in the list order in a thread (`summarise` caches them), so moving to the next
        tag redraws from the cache instead of computing its 1000 points on the key press."""
        run = self.app.store.runs.get(self.run_name)
        worker = get_current_worker()
        for tag in list(self.hist_tags):
            if worker.is_cancelled or run is None:
                return
            series = run.histograms.get(tag)
            if series is not None and len(series):
                summarise(series)

    def _data_changed(self, change: DataChange) -> None:
        if change.touches([self.run_name]):
            self.reload()
            self.redraw()
            self.summarise_ahead()

    def reload(self) -> None:
        """Take the run's histogram tags and per-layer gradients afresh (a live run gains points)."""
        app = self.app
        run = app.store.runs.get(self.run_name)
        if run is None:
            return
        histograms = dict(run.histograms)
        tags = histogram_order([tag for tag, series in histograms.items() if len(series)])
        if tags != self.hist_tags:
            self.hist_tags = tags
            options = self.query_one("#hist-tags", OptionList)
            options.clear_options()
            options.add_options([Option(Text(_fit_tag(plain(tag), app.ascii_only), no_wrap=True)) for tag in tags])
            if self.tag not in tags:
                self.tag = tags[0] if tags else None
            if self.tag is not None:
                options.highlighted = tags.index(self.tag)
        self.grad_layers, self.grad_source = gradient_layers(
            dict(run.scalars), histograms, app.store.roles_of(self.run_name)
        )

    @property
    def series(self) -> HistogramSeries | None:
        run = self.app.store.runs.get(self.run_name)
        return run.histograms.get(self.tag) if run is not None and self.tag is not None else None

    def steps(self) -> np.ndarray:
        """The steps `[`/`]` move through: the tag's points, or every layer's in the gradient flow."""
        if self.flow:
            if not self.grad_layers:
                return np.empty(0, np.int64)
            return np.unique(np.concatenate([s.steps for s in self.grad_layers.values()]))
        series = self.series
        return series.steps if series is not None else np.empty(0, np.int64)

    @on(OptionList.OptionHighlighted, "#hist-tags")
    def _tag_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if 0 <= event.option_index < len(self.hist_tags) and self.hist_tags[event.option_index] != self.tag:
            self.tag = self.hist_tags[event.option_index]
            self.redraw()

    def action_step(self, delta: int) -> None:
        steps = self.steps()
        if not steps.size:
            return
        at = min(max(nearest_index(steps, self.step) + delta, 0), steps.size - 1)
        self.step = int(steps[at])
        self.redraw()

    def action_toggle_flow(self) -> None:
        self.flow = not self.flow
        self.redraw()

    def action_close(self) -> None:
        self.dismiss()

    def redraw(self) -> None:
        sep = self.app.separator
        if self._shown_flow != self.flow:  # a step key changes neither the layout nor the title
            self._shown_flow = self.flow
            for pane in ("#hist-tags-pane", "#distribution-pane", "#histogram-pane"):
                self.query_one(pane).display = not self.flow
            for pane in ("#flow-bars-pane", "#flow-heatmap-pane"):
                self.query_one(pane).display = self.flow
            view = "gradient flow" if self.flow else "distributions"
            other = "distributions" if self.flow else "gradient flow"
            title = [f"Run {plain(self.run_name)}", view, "[ ]: step", f"v: {other}", "esc: back"]
            self.query_one("#distributions-title", Static).update(Text(sep.join(title), style="bold"))
        if self.flow:
            self._redraw_flow()
        else:
            self._redraw_distribution()

    def _redraw_distribution(self) -> None:
        series = self.series
        chart = self.query_one(DistributionChart)
        at_step = self.query_one(HistogramAtStep)
        chart_pane, step_pane = self.query_one("#distribution-pane"), self.query_one("#histogram-pane")
        self.query_one("#hist-tags-pane").border_title = f"Histograms ({len(self.hist_tags)})"
        if series is None or not len(series):
            chart.show(None, None)
            at_step.show(None, 0)
            chart_pane.border_title = "No histograms in this run"
            step_pane.border_title = ""
            return
        index = nearest_index(series.steps, self.step)
        chart.show(series, index)
        at_step.show(series, index)
        sep = self.app.separator
        tag = plain(self.tag or "")
        chart_pane.border_title = f"{tag}{sep}percentiles 0 7 16 31 50 69 84 93 100"
        summary = summarise(series)
        facts = [
            f"{tag} at step {int(series.steps[index])} ({index + 1}/{len(series)})",
            f"{number(float(series.nums[index]))} values",
            f"mean |x| {number(float(summary.mean_abs[index]))}",
            f"norm {number(float(summary.norm[index]))}",
            f"at zero {summary.zero_mass[index]:.0%}" if np.isfinite(summary.zero_mass[index]) else "",
        ]
        step_pane.border_title = sep.join(f for f in facts if f)

    def _redraw_flow(self) -> None:
        bars, heatmap = self.query_one(LayerBars), self.query_one(GradHeatmap)
        steps = self.steps()
        step = int(steps[nearest_index(steps, self.step)]) if steps.size else None
        bars.show(self.grad_layers, step)
        heatmap.set_layers(self.grad_layers, step)
        sep = self.app.separator
        source = {"scalars": "per-layer gradient norms", "histograms": "norms of the gradient histograms"}
        what = source.get(self.grad_source or "", "no per-layer gradients")
        self.query_one("#flow-bars-pane").border_title = sep.join(
            [f"Gradient by layer at step {step}" if step is not None else "Gradient by layer", what]
        )
        self.query_one("#flow-heatmap-pane").border_title = "Layers × steps (log10 of the largest per bucket)"
