"""A histogram tag drawn two ways: TensorBoard's distribution chart over steps, and the histogram at one step.

The distribution chart shades, per column of steps, the nested percentile bands of `analysis.histograms`
(0-100, 7-93, 16-84 and 31-69 %, darker inwards) with the median marked, like TensorBoard's
Distributions tab; a column holds the last point logged in its step range, and carries the one before
it across columns no point falls in. The selected step's column is drawn reversed. The histogram at a step
re-buckets that point's counts into one row per line (the counts of a bucket spread evenly over it) and
draws each as a bar. Both are plain `Text` built from the summary arrays, cached by the analysis module, so
a redraw is array arithmetic on at most a few thousand cells.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
from rich.text import Text
from textual.color import Color
from textual.widget import Widget

from tbtriage.analysis.datamodel import HistogramSeries
from tbtriage.analysis.histograms import HistogramSummary, buckets, summarise
from tbtriage.analysis.text import number
from tbtriage.themes import heatmap_ends
from tbtriage.tui.widgets.cell_runs import append_cells

#: One glyph per depth: outside every band, then inside 0-100, 7-93, 16-84 and 31-69 % of the values.
SHADES = " ░▒▓█"
ASCII_SHADES = " .:=#"
MEDIAN, ASCII_MEDIAN = "━", "-"
#: Value labels on the y axis take this many cells.
AXIS_CELLS = 9
#: Shaded charts kept for tags shown recently: going back to one redraws only its selected column.
SHADED_KEPT = 16
#: Partial block glyphs for the end of a bar (eighths), and the ASCII stand-in.
EIGHTHS = " ▏▎▍▌▋▊▉█"


def band_depths(summary: HistogramSummary, columns: int, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(depth per cell (rows × columns, 0-4, top row first), median row per column (-1: none), the
    point index each column shows (-1: none yet)) for a chart of `columns` × `rows` cells."""
    steps = summary.steps
    first, last = int(steps[0]), int(steps[-1])
    span = max(last - first, 1)
    column = np.minimum(((steps - first) * columns) // span, columns - 1).astype(np.int64)
    shown = np.full(columns, -1, np.int64)
    shown[column] = np.arange(steps.size)  # the last point of each column wins
    shown = np.maximum.accumulate(shown)
    bands = summary.bands
    finite = bands[np.isfinite(bands)]
    depth = np.zeros((rows, columns), np.int64)
    median_row = np.full(columns, -1, np.int64)
    if not finite.size:
        return depth, median_row, shown
    low, high = float(finite.min()), float(finite.max())
    if high <= low:
        low, high = low - 0.5, high + 0.5
    cell = (high - low) / rows
    tops = high - cell * np.arange(rows)  # each row's upper value
    bottoms = tops - cell
    has = shown >= 0
    picked = bands[np.maximum(shown, 0)]  # (columns, 9)
    for k in range(4):  # the k-th band: percentile k from the bottom and k from the top
        lo, hi = picked[:, k], picked[:, -1 - k]
        inside = (lo[None, :] <= tops[:, None]) & (hi[None, :] >= bottoms[:, None]) & has[None, :]
        depth += inside & np.isfinite(lo)[None, :] & np.isfinite(hi)[None, :]
    median = picked[:, len(picked[0]) // 2]
    rows_at = np.clip(((high - median) / cell).astype(np.int64, copy=False), 0, rows - 1) if rows else median
    median_row = np.where(has & np.isfinite(median), rows_at, -1)
    return depth, median_row, shown


def rebucket(series: HistogramSeries, index: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(edges (rows + 1), counts (rows)): point `index` re-bucketed into `rows` equal ranges over its values."""
    b = buckets([series.limits[index]], [series.counts[index]], series.mins[index : index + 1],
                series.maxs[index : index + 1])  # fmt: skip
    left, right, counts = b.left[0], b.right[0], b.counts[0]
    occupied = np.flatnonzero(counts > 0)
    if not occupied.size:
        return np.array([0.0, 1.0]), np.zeros(1)
    low, high = float(left[occupied[0]]), float(right[occupied[-1]])
    if high <= low:  # every value the same: one row holds them all
        return np.array([low, high]), np.array([float(counts.sum())])
    edges = np.linspace(low, high, rows + 1)
    # The cumulative count at each bucket edge, spread evenly inside buckets; a zero-width bucket is a step.
    xs = np.concatenate(([left[0]], right))
    cumulative = np.concatenate(([0.0], np.cumsum(counts)))
    return edges, np.diff(np.interp(edges, xs, cumulative))


class DistributionChart(Widget):
    """The percentile bands of one histogram tag over its steps, with the selected step marked."""

    DEFAULT_CSS = "DistributionChart { height: 1fr; width: 1fr; }"

    def __init__(self, *, ascii_only: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.ascii_only = ascii_only
        self.series: HistogramSeries | None = None
        self.cursor: int | None = None  # index of the selected point
        # What each recently shown tag was drawn for -> its shaded rows (SHADED_KEPT of them, oldest dropped).
        self._shaded: OrderedDict[tuple, Text | None] = OrderedDict()

    def show(self, series: HistogramSeries | None, cursor: int | None) -> None:
        self.series, self.cursor = series, cursor
        self.refresh()

    def render(self) -> Text:
        if self.series is None or not len(self.series):
            return Text("No histogram points in this tag.", style="dim")
        summary = summarise(self.series)
        columns = max(self.size.width - AXIS_CELLS - 1, 1)
        rows = max(self.size.height - 1, 1)
        # The shaded rows depend on the tag, the size and the theme, not on the step: drawn once, then only the
        # selected column is restyled (a key press redraws a few spans, not thousands of cells).
        key = (self.series, columns, rows, self.app.theme, self.ascii_only)
        if key not in self._shaded:
            self._shaded[key] = self._shade(summary, columns, rows)
            while len(self._shaded) > SHADED_KEPT:
                self._shaded.popitem(last=False)
        self._shaded.move_to_end(key)
        shaded = self._shaded[key]
        if shaded is None:
            return Text("This tag's histograms hold no finite values.", style="dim")
        out = shaded.copy()
        cursor_column = -1
        if self.cursor is not None:  # the column the selected step falls in (it may share it with later points)
            origin, span = int(summary.steps[0]), max(int(summary.steps[-1] - summary.steps[0]), 1)
            cursor_column = min(int((summary.steps[self.cursor] - origin) * columns // span), columns - 1)
            line = AXIS_CELLS + 1 + columns + 1  # label, space, cells, newline: every glyph is one character
            for r in range(rows):
                at = r * line + AXIS_CELLS + 1 + cursor_column
                out.stylize("reverse", at, at + 1)
        steps = summary.steps
        first, last = number(int(steps[0])), number(int(steps[-1]))
        axis = list(first.ljust(columns))
        ends = [(columns - len(last), last)]  # the last step at the right edge, unless the marker needs it
        if cursor_column >= 0 and self.cursor is not None:  # the selected step, under its column
            label = f"{'^' if self.ascii_only else '▲'}{int(steps[self.cursor])}"
            at = min(cursor_column, max(columns - len(label), 0))
            if at + len(label) >= columns - len(last):
                ends = []
            ends.append((at, label))
        for at, label in ends:
            axis[max(at, 0) : max(at, 0) + len(label)] = label
        out.append(f"{'step':>{AXIS_CELLS}} " + "".join(axis)[:columns], style="dim")
        return out

    def _shade(self, summary: HistogramSummary, columns: int, rows: int) -> Text | None:
        """The chart's rows (value labels and shaded cells, each line ending in a newline); None: nothing finite."""
        depth, median_row, _shown = band_depths(summary, columns, rows)
        finite = summary.bands[np.isfinite(summary.bands)]
        if not finite.size:
            return None
        low, high = float(finite.min()), float(finite.max())
        variables = self.app.theme_variables
        start, end = (Color.parse(c) for c in heatmap_ends(variables))
        styles = [""] + [start.blend(end, k / 4).hex for k in range(1, 5)]
        median_style = f"bold {variables.get('accent', 'yellow')}"
        shades = ASCII_SHADES if self.ascii_only else SHADES
        mark = ASCII_MEDIAN if self.ascii_only else MEDIAN
        labels = {0: number(high), rows - 1: number(low), rows // 2: number((high + low) / 2)}
        out = Text(no_wrap=True, overflow="crop")
        for r in range(rows):
            out.append(labels.get(r, "")[:AXIS_CELLS].rjust(AXIS_CELLS) + " ", style="dim")
            cells = [
                (mark, median_style) if median_row[c] == r else (shades[d], styles[d]) for c, d in enumerate(depth[r])
            ]
            append_cells(out, cells)
            out.append("\n")
        return out


class HistogramAtStep(Widget):
    """The histogram of one point as horizontal bars, one per row, lowest values at the bottom."""

    DEFAULT_CSS = "HistogramAtStep { height: 1fr; width: 1fr; }"

    def __init__(self, *, ascii_only: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.ascii_only = ascii_only
        self.series: HistogramSeries | None = None
        self.index = 0

    def show(self, series: HistogramSeries | None, index: int) -> None:
        self.series, self.index = series, index
        self.refresh()

    def render(self) -> Text:
        series = self.series
        if series is None or not len(series):
            return Text("")
        rows = max(self.size.height, 1)
        edges, counts = rebucket(series, self.index, rows)
        count_cells = max(len(number(round(float(c)))) for c in counts) if counts.size else 1
        bar_cells = max(self.size.width - AXIS_CELLS - count_cells - 3, 1)
        peak = float(counts.max()) if counts.size and counts.max() > 0 else 1.0
        colour = self.app.theme_variables.get("primary", "blue")
        out = Text(no_wrap=True, overflow="crop")
        for r in range(counts.size - 1, -1, -1):  # highest values on top, as on the distribution chart
            centre = (edges[r] + edges[r + 1]) / 2
            eighths = int(round(counts[r] / peak * bar_cells * 8))
            if self.ascii_only:
                bar = "#" * (eighths // 8)
            else:
                bar = "█" * (eighths // 8) + (EIGHTHS[eighths % 8] if eighths % 8 else "")
            out.append(number(float(centre))[:AXIS_CELLS].rjust(AXIS_CELLS) + " ", style="dim")
            out.append(bar.ljust(bar_cells), style=colour)
            out.append(" " + number(round(float(counts[r]))).rjust(count_cells), style="dim")
            if r:
                out.append("\n")
        return out
