"""The chart pane: one tag for the selected runs, drawn with plotext.

The widget owns its plotext figure and rebuilds it in `render()` (textual-plotext's model),
from a `PreparedChart` cached per size and options, so a resize or a redraw costs one plotext
build and never re-reads or re-smooths the data.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from functools import partial

import numpy as np
from rich.text import Text
from textual.app import RenderResult
from textual.color import Color
from textual.geometry import Size
from textual.message import Message
from textual.worker import get_current_worker
from textual_plotext import PlotextPlot

from tbtriage.analysis.downsample import Downsampled
from tbtriage.tui.chart_data import (
    Box,
    BucketedLines,
    ChartCaches,
    ChartOptions,
    PreparedChart,
    SeriesRequest,
    bucket_lines_cached,
    clip_polyline,
    drawing_box,
    finish_chart,
    inside,
)
from tbtriage.tui.safe_text import plain
from tbtriage.tui.widgets.chart_canvas import built_text, draw_line
from tbtriage.tui.widgets.chart_placeholder import EMPTY_MESSAGE
from tbtriage.tui.widgets.series_style import series_style

#: Width of the y tick labels plotext puts left of the canvas; the rest is the plot area.
Y_LABEL_CELLS = 8

#: The smallest zoom window, as a fraction of the full x range (deeper zoom shows single points).
MIN_ZOOM_FRACTION = 1e-4

#: Bucketed line sets kept (least recently used dropped first): the current view and recent ones, so
#: toggling log-y or the outlier range, or zooming back out, reuses them instead of re-bucketing
#: millions of points.
BUCKETED_CACHE_SIZE = 6

#: Severity -> theme variable for finding-onset markers.
SEVERITY_COLOURS = {"critical": "error", "warning": "warning", "info": "primary"}

NAN_MARKER, ASCII_NAN_MARKER = "×", "x"


class TagChart(PlotextPlot):
    """Draws `requests` (one series per run) under `options`."""

    #: Lines drawn by `chart_canvas` (numpy) rather than dot by dot by plotext: the same picture (a bench's baseline).
    numpy_lines = True

    def __init__(
        self,
        *,
        ascii_only: bool = False,
        empty_message: str = EMPTY_MESSAGE,
        legend: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.ascii_only = ascii_only
        self.legend = legend  # label lines inside the plot (the main screen draws its own legend line)
        self.empty_message = empty_message
        self.requests: tuple[SeriesRequest, ...] = ()
        self.options = ChartOptions()
        self._prepared: tuple[tuple, PreparedChart] | None = None
        self._caches = ChartCaches()
        self._preparing: set[int] = set()  # threads preparing (or warming caches) for this chart now
        self._bucketed: dict[tuple, tuple[tuple[SeriesRequest, ...], BucketedLines]] = {}

    # What to draw --------------------------------------------------------------------------

    def set_data(self, requests: Sequence[SeriesRequest], options: ChartOptions) -> None:
        self.requests = tuple(requests)
        self.options = options
        self._schedule()

    def on_resize(self) -> None:
        self._schedule()

    def full_x_range(self) -> tuple[float, float] | None:
        return self._caches.full_x_range(self.requests, self.options.x_axis)

    def zoomed(self, factor: float) -> ChartOptions:
        """Options with the x window scaled by `factor` around its centre, within the data."""
        full = self.full_x_range()
        if full is None:
            return self.options
        lo, hi = self.options.window or full
        span = (full[1] - full[0]) or 1.0
        half = min(max((hi - lo) * factor, span * MIN_ZOOM_FRACTION), span) / 2
        centre = min(max((lo + hi) / 2, full[0] + half), full[1] - half)
        window = (centre - half, centre + half)
        return replace(self.options, window=None if half * 2 >= span else window)

    def panned(self, fraction: float) -> ChartOptions:
        """Options with the x window moved by `fraction` of its width, kept inside the data."""
        full = self.full_x_range()
        if full is None or self.options.window is None:
            return self.options
        lo, hi = self.options.window
        shift = (hi - lo) * fraction
        shift = min(max(shift, full[0] - lo), full[1] - hi)
        return replace(self.options, window=(lo + shift, hi + shift))

    # Drawing -------------------------------------------------------------------------------

    class Prepared(Message):
        """A worker finished preparing the chart for `key` (width, options, requests)."""

        def __init__(self, key: tuple, chart: PreparedChart) -> None:
            super().__init__()
            self.key = key
            self.chart = chart

    def _key(self) -> tuple:
        """What a prepared chart depends on: plot width, options, and each request by identity (findings
        are compared by count: their evidence may hold arrays, which have no plain equality)."""
        fingerprint = tuple((r.run, r.slot, id(r.series), len(r.series), len(r.findings)) for r in self.requests)
        return (max(self.size.width - Y_LABEL_CELLS, 1), self.options, fingerprint)

    def _schedule(self) -> None:
        """Prepare what is now asked for in a thread (smoothing a million points must not freeze the keys)."""
        if not self.size.width:
            return  # not laid out yet: the first resize schedules it
        key = self._key()
        if self._prepared is not None and self._prepared[0] == key:
            self.refresh()
            return
        self.run_worker(
            partial(self._prepare_in_thread, key, self.requests),
            thread=True,
            exclusive=True,
            group=f"prepare-{id(self)}",
            exit_on_error=False,
        )

    @property
    def preparing(self) -> bool:
        """True while a thread prepares this chart or warms its caches."""
        return bool(self._preparing)

    def _prepare_in_thread(self, key: tuple, requests: tuple[SeriesRequest, ...]) -> None:
        thread = threading.get_ident()
        self._preparing.add(thread)
        try:
            self.post_message(self.Prepared(key, self._compute(key, requests)))
            # Then, still off the UI thread, what the next keys will ask for: every smoothing weight's curve
            # and pyramid, the other x axes, the outlier ranking; so each key press only reads caches.
            worker = get_current_worker()
            for request in requests:
                self._caches(request.series).warm(key[1].x_axis, lambda: worker.is_cancelled)
        finally:
            self._preparing.discard(thread)

    def _compute(self, key: tuple, requests: tuple[SeriesRequest, ...]) -> PreparedChart:
        """The chart for `key`, re-bucketing only when the x axis, window, smoothing, width or data changed."""
        width, options, fingerprint = key
        bucket_key = (width, fingerprint, options.x_axis, options.window, options.smoothing)
        cached = self._bucketed.pop(bucket_key, None)  # re-inserted below: least recently used goes first
        # The requests are kept with their lines: ids in the key cannot then be reused by other series.
        if cached is None or any(a.series is not b.series for a, b in zip(cached[0], requests)):
            cached = (requests, bucket_lines_cached(requests, options, width, self._caches))
        while len(self._bucketed) >= BUCKETED_CACHE_SIZE:
            self._bucketed.pop(next(iter(self._bucketed)), None)
        self._bucketed[bucket_key] = cached
        return finish_chart(cached[1], options)

    def on_tag_chart_prepared(self, message: Prepared) -> None:
        message.stop()
        if message.key == self._key():  # an older request's result is dropped
            self._prepared = (message.key, message.chart)
            self.refresh()

    def prepared(self) -> PreparedChart:
        """The chart for what is asked now, prepared here and now if no worker has done it yet."""
        key = self._key()
        if self._prepared is None or self._prepared[0] != key:
            self._prepared = (key, self._compute(key, self.requests))
        return self._prepared[1]

    def render(self) -> RenderResult:
        if not self.requests:
            return Text(self.empty_message, style="dim")
        if self._prepared is None:
            return Text("Drawing…", style="dim")
        chart = self._prepared[1]  # possibly the previous view, until the worker delivers the new one
        if chart.empty:
            if self.options.log_y:
                return Text("No positive values to draw on a log scale.", style="dim")
            return Text("No finite points in this range." if self.options.window else "No points yet.", style="dim")
        self._draw(chart)
        return self._built()

    def _built(self) -> Text:
        """What `PlotextPlot.render` returns (the figure sized to the widget, in the app's theme, built), with the Text
        made from plotext's matrix (`matrix_text`) rather than written as ANSI text and parsed back."""
        plot = self.plt
        plot.plotsize(self.size.width, self.size.height)
        plot._set_size(self.size.width, self.size.height)  # as PlotextPlot.render: plotsize alone does not resize
        plot.theme(self._get_plotext_theme_name(self.app.theme))
        return built_text(plot)

    def _draw(self, chart: PreparedChart) -> None:
        draw_chart(self.plt, chart, self.app.theme_variables, self.size, ascii_only=self.ascii_only, legend=self.legend,
                   numpy_lines=self.numpy_lines)  # fmt: skip


def draw_chart(
    plt, chart: PreparedChart, variables: dict[str, str], size: Size, *, ascii_only: bool, legend: bool,
    clip: bool = True, numpy_lines: bool = True,
) -> None:  # fmt: skip
    """Turn `chart` into plotext calls for a plot of `size` cells. With `clip`, lines are cut to what the plot can show
    first: plotext draws a segment dot by dot however far it runs outside, so a narrow y range (the outlier range,
    a zoom) would otherwise cost it most of its time on dots it then throws away; the canvas is the same. With
    `numpy_lines` too, the lines' cells are computed with numpy (`chart_canvas`) instead of dot by dot in plotext:
    the same picture, at a cost that does not grow with the dots a dense view draws."""
    plt.clear_figure()
    if ascii_only:
        plt.frame(False)
    # plotext's canvas is the plot less the frame, x ticks and x label rows, and the y tick labels' columns.
    box = drawing_box(chart, size.width - 2 * Y_LABEL_CELLS, size.height - 4) if clip else None
    # The numpy path needs the limits plotext maps points with, and points near the canvas (clipped to the box).
    limits = _limits(chart) if numpy_lines and box is not None else None
    for line in chart.lines:
        style = series_style(line.slot, variables, ascii_only)
        label = plain(line.run) if legend else None
        if line.smooth is not None:
            # Raw points as a faint cloud (each cell's min and max) under the smoothed line: joining
            # them costs plotext ~3x the time of the smoothed line itself, and the envelope reads the same.
            x, y = line.raw.x, line.raw.y
            if box is not None:
                shown = inside(x, y, box)
                x, y = x[shown], y[shown]
            if len(x):
                _draw(plt, x, y, limits, joined=False, color=style.faint, marker=style.marker, label=None)
            _plot(plt, chart, line.smooth, box, limits, style.colour, style.marker, label)
        else:
            _plot(plt, chart, line.raw, box, limits, style.colour, style.marker, label)
    if chart.y_range is not None:
        _draw_markers(plt, chart, chart.y_range, variables, ascii_only, size.height)
        plt.ylim(*chart.y_range)
    if chart.x_range is not None and chart.x_range[1] > chart.x_range[0]:
        plt.xlim(*chart.x_range)
    if chart.y_ticks is not None:
        plt.yticks(list(chart.y_ticks[0]), list(chart.y_ticks[1]))
    if chart.x_ticks is not None:
        plt.xticks(list(chart.x_ticks[0]), list(chart.x_ticks[1]))
    plt.xlabel(plain(chart.x_label))


def _draw_markers(
    plt, chart: PreparedChart, y_range: tuple[float, float], variables: dict[str, str], ascii_only: bool, height: int
) -> None:
    """NaN and +Inf at the top edge, -Inf at the bottom, finding onsets as vertical lines."""
    lo, hi = y_range
    error = _rgb(variables, "error")
    marker = ASCII_NAN_MARKER if ascii_only else NAN_MARKER
    for line in chart.lines:
        top = np.concatenate([line.raw.nan_x, line.raw.posinf_x])
        if top.size:
            plt.scatter(top.tolist(), [hi] * top.size, marker=marker, color=error)
        if line.raw.neginf_x.size:
            plt.scatter(line.raw.neginf_x.tolist(), [lo] * line.raw.neginf_x.size, marker=marker, color=error)
    rows = max(height, 2)
    for onset in chart.onsets:
        colour = _rgb(variables, SEVERITY_COLOURS.get(onset.severity, "primary"))
        if ascii_only:  # plotext's vline is drawn with a box glyph
            ys = np.linspace(lo, hi, rows).tolist()
            plt.scatter([onset.x] * len(ys), ys, marker="|", color=colour)
        else:
            plt.vline(onset.x, color=colour)


def _plot(plt, chart: PreparedChart, d: Downsampled, box: Box | None, limits: Limits | None, colour, marker,
          label: str | None) -> None:  # fmt: skip
    x, y = (d.x, d.y) if box is None else clip_polyline(d.x, d.y, box)
    if label is not None and not _shows(chart, x, y):
        label = None  # plotext's legend fails on a labelled line with no dot on the canvas
    if len(x):
        _draw(plt, x, y, limits, joined=True, color=colour, marker=marker, label=label)


Limits = tuple[tuple[float, float], tuple[float, float]]


def _limits(chart: PreparedChart) -> Limits | None:
    """The x and y limits `draw_chart` gives plotext, when it gives both (else plotext takes them from the data)."""
    if chart.x_range is None or not chart.x_range[1] > chart.x_range[0]:
        return None
    if chart.y_range is None or not chart.y_range[1] > chart.y_range[0]:
        return None
    return chart.x_range, chart.y_range


def _draw(plt, x: np.ndarray, y: np.ndarray, limits: Limits | None, *, joined: bool, color, marker: str,
          label: str | None) -> None:  # fmt: skip
    """`plt.plot` (`joined`) or `plt.scatter` of the points; with `limits`, drawn by `chart_canvas`."""
    if limits is not None:
        draw_line(plt, x, y, joined=joined, marker=marker, color=color, label=label, x_lim=limits[0], y_lim=limits[1])
    elif joined:
        plt.plot(x.tolist(), y.tolist(), color=color, marker=marker, label=label)
    else:
        plt.scatter(x.tolist(), y.tolist(), color=color, marker=marker, label=label)


def _shows(chart: PreparedChart, x: np.ndarray, y: np.ndarray) -> bool:
    """Whether some part of the line runs inside the chart's ranges (where plotext puts its dots)."""
    if chart.y_range is None or not len(x):
        return bool(len(x))
    x_lo, x_hi = chart.x_range if chart.x_range is not None else (-np.inf, np.inf)
    return bool(len(clip_polyline(x, y, (x_lo, x_hi, *chart.y_range))[0]))


def _rgb(variables: dict[str, str], name: str) -> tuple[int, int, int]:
    return Color.parse(variables.get(name, "#ff0000")).rgb
