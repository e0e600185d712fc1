"""Lines drawn by numpy (`chart_canvas`) make the very chart plotext draws dot by dot: same characters, same colours;
and the Text made from plotext's matrix is the one Rich reads from its ANSI text."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.text import Text
from textual.geometry import Size
from textual_plotext import Plot

from tbtriage.analysis.datamodel import Series
from tbtriage.analysis.smoothing import ema
from tbtriage.themes import load_themes
from tbtriage.tui.chart_data import ChartOptions, Onset, PreparedChart, SeriesRequest, full_x_range, prepare_chart
from tbtriage.tui.widgets.chart_canvas import CanvasMatrix, built_text, draw_line
from tbtriage.tui.widgets.tag_chart import Y_LABEL_CELLS, draw_chart

SIZES = (Size(100, 24), Size(47, 13), Size(160, 42), Size(24, 8))


def _variables() -> dict[str, str]:
    theme = load_themes()["dark"]
    return {**theme.to_color_system().generate(), **theme.variables}


VARIABLES = _variables()


def _build(chart: PreparedChart, size: Size, numpy_lines: bool, **kwargs) -> tuple[str, Plot]:
    plot = Plot()
    draw_chart(plot, chart, VARIABLES, size, numpy_lines=numpy_lines, **kwargs)
    plot.plotsize(size.width, size.height)
    return plot.build(), plot


def _assert_same_chart(chart: PreparedChart, size: Size, **kwargs) -> bool:
    """The chart built with numpy lines is plotext's, byte for byte (ANSI colours included); True if numpy drew
    lines (False: every line was handed to plotext, as when the chart has no x or y range)."""
    kwargs = {"ascii_only": False, "legend": False, **kwargs}
    ours, plot = _build(chart, size, True, **kwargs)
    theirs, _ = _build(chart, size, False, **kwargs)
    assert ours == theirs
    # The chart widget's Text, made from the matrix, is the one Rich reads from plotext's ANSI text: same spans.
    again = Plot()
    draw_chart(again, chart, VARIABLES, size, **kwargs)
    again.plotsize(size.width, size.height)
    assert built_text(again) == Text.from_ansi(ours)
    return isinstance(plot.monitor.matrix, CanvasMatrix) and bool(plot.monitor.matrix.lines)


def _series(kind: str, n: int, seed: int) -> Series:
    """A loss curve: noisy, spiky (far out of the outlier range, a dive below zero, an Inf), with NaN stretches, or
    a random walk; steps with a gap, wall times with a restart (the clock steps back)."""
    rng = np.random.default_rng(seed)
    steps = np.arange(n, dtype=np.int64) * 2
    steps[n // 3 :] += 500  # a gap in the logged steps
    wall = 1.7e9 + 0.25 * np.arange(n)
    values = 0.3 + 2.0 * np.exp(-np.arange(n) / (n / 4)) + 0.05 * rng.standard_normal(n)
    if kind == "spiky":
        values[rng.integers(0, n, 25)] *= rng.uniform(5, 1e4, 25)
        values[n // 2] = -40.0
        values[n // 5] = np.inf
        wall[n // 2 :] -= 100.0
    elif kind == "nan":
        values[int(n * 0.6) : int(n * 0.7)] = np.nan
        values[rng.integers(0, n, 40)] = np.nan
    elif kind == "walk":
        values = np.cumsum(rng.standard_normal(n))
    return Series(steps, wall, values)


KINDS = ("noisy", "spiky", "nan", "walk")


@pytest.fixture(scope="module")
def requests_():
    return [SeriesRequest(f"run_{kind}", i, _series(kind, 30_000 + 7_000 * i, i)) for i, kind in enumerate(KINDS)]


def _chart(requests, options: ChartOptions, size: Size) -> PreparedChart:
    return prepare_chart(requests, options, size.width - Y_LABEL_CELLS, lambda r, w: ema(r.series.values, w))


def _window(requests, axis: str, at: float, width: float) -> tuple[float, float]:
    full = full_x_range(requests, axis)
    assert full is not None
    span = full[1] - full[0]
    return full[0] + at * span, full[0] + (at + width) * span


VIEWS = [
    ChartOptions(smoothing=0.0),
    ChartOptions(),
    ChartOptions(smoothing=0.0, log_y=True),
    ChartOptions(smoothing=0.0, ignore_outliers=True),
    ChartOptions(smoothing=0.9, log_y=True, ignore_outliers=True),
    ChartOptions(smoothing=0.0, x_axis="wall", ignore_outliers=True),
    ChartOptions(smoothing=0.6, x_axis="relative", log_y=True),
]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s.width}x{s.height}")
@pytest.mark.parametrize("view", range(len(VIEWS)))
def test_every_view_of_overlaid_runs_is_drawn_the_same(requests_, size, view):
    assert _assert_same_chart(_chart(requests_, VIEWS[view], size), size)


@pytest.mark.parametrize("size", SIZES[:2], ids=lambda s: f"{s.width}x{s.height}")
@pytest.mark.parametrize(
    ("at", "width"), [(0.4, 0.2), (0.0, 0.05), (0.55, 0.001), (0.75, 0.1), (0.3333, 0.00011)], ids=str
)
def test_zoomed_and_panned_views_are_drawn_the_same(requests_, size, at, width):
    for smoothing, log_y, outliers in ((0.0, True, True), (0.6, False, True), (0.0, False, False)):
        window = _window(requests_, "step", at, width)
        options = ChartOptions(smoothing=smoothing, log_y=log_y, ignore_outliers=outliers, window=window)
        assert _assert_same_chart(_chart(requests_, options, size), size)


@pytest.mark.parametrize("ascii_only", [False, True])
def test_the_legend_finding_onsets_and_nan_markers_are_layered_the_same(requests_, ascii_only):
    size = SIZES[0]
    chart = _chart(requests_, ChartOptions(smoothing=0.0, ignore_outliers=True), size)
    assert chart.x_range is not None
    lo, hi = chart.x_range
    # Onsets are drawn before the lines (a line crossing one hides it there), the NaN markers and legend after.
    onsets = tuple(Onset(lo + f * (hi - lo), severity, "divergence")
                   for f, severity in ((0.1, "critical"), (0.5, "warning"), (0.77, "info")))  # fmt: skip
    chart = replace(chart, onsets=onsets)
    assert any(line.raw.nan_x.size for line in chart.lines)
    assert _assert_same_chart(chart, size, legend=True, ascii_only=ascii_only)
    # A run named with the character that stands for a line until plotext inserts it is text, drawn as it is.
    named = replace(chart, lines=tuple(replace(line, run="\U000f0000\U000f0001") for line in chart.lines))
    assert _assert_same_chart(named, size, legend=True, ascii_only=ascii_only)


def test_markers_beyond_the_palette_are_drawn_the_same():
    # Slots past the seven colours get plotext's "dot", "+", "x", "o" markers (one character a cell, no braille).
    series = [_series(KINDS[i % 4], 5_000, i) for i in range(32)]
    requests = [SeriesRequest(f"r{i}", i, s) for i, s in enumerate(series)]
    for options in (ChartOptions(smoothing=0.0), ChartOptions()):
        assert _assert_same_chart(_chart(requests, options, SIZES[0]), SIZES[0], legend=True)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 400),
    kind=st.sampled_from(KINDS),
    size=st.sampled_from(SIZES),
    smoothing=st.sampled_from([0.0, 0.6]),
    log_y=st.booleans(),
    outliers=st.booleans(),
    zoom=st.one_of(st.none(), st.tuples(st.floats(0.0, 0.95), st.floats(0.001, 0.5))),
)
def test_random_short_series_are_drawn_the_same(seed, n, kind, size, smoothing, log_y, outliers, zoom):
    requests = [SeriesRequest(f"run{i}", i, _series(kind, n + 17 * i, seed + i)) for i in range(3)]
    window = _window(requests, "step", *zoom) if zoom is not None and n > 1 else None
    options = ChartOptions(smoothing=smoothing, log_y=log_y, ignore_outliers=outliers, window=window)
    _assert_same_chart(_chart(requests, options, size), size, legend=seed % 2 == 0)


def _line_build(x: list[float], y: list[float], numpy_lines: bool, size: Size, *, joined: bool, marker: str) -> str:
    plot = Plot()
    plot.xlim(0.0, 1.0)
    plot.ylim(0.0, 1.0)
    if numpy_lines:
        draw_line(plot, np.asarray(x), np.asarray(y), joined=joined, marker=marker, color=(10, 200, 30), label=None,
                  x_lim=(0.0, 1.0), y_lim=(0.0, 1.0))  # fmt: skip
    elif joined:
        plot.plot(x, y, marker=marker, color=(10, 200, 30))
    else:
        plot.scatter(x, y, marker=marker, color=(10, 200, 30))
    plot.plotsize(size.width, size.height)
    return plot.build()


def _rounding_points(size: Size) -> tuple[list[float], list[float]]:
    """Points a hair either side of dot edges: plotext maps a value to floor(round(0.5 + (dots - 1) * t, 8)), so
    values just below an edge are carried up by the rounding and values a little further below are not."""
    columns, rows = size.width - 2 - 3, size.height - 3  # less the frame, the y labels (3 wide), ticks and label
    x_dots, y_dots = columns * 2, rows * 4
    x, y = [], []
    for k in range(1, x_dots - 1, 3):
        for offset in (-4e-9, -6e-9, -2e-7, 0.0, 3e-9):
            x.append((k - 0.5 + offset) / (x_dots - 1))
            y.append((k % y_dots - 0.5 + offset) / (y_dots - 1))
    return x, y


#: Segments running a little off the canvas on every side, steep ones from just off the left edge and shallow ones
#: from just below the bottom: plotext truncates the dots between toward zero (int()), so those a fraction of a dot
#: off the canvas land on its first column or row. NaN points break the line between them.
EDGE_X = [-0.03, 0.5, 1.02, math.nan, 0.2, 0.2, 0.21, -0.01, 1.01, math.nan, -0.012, 0.02, math.nan, 0.996, 1.006,
          math.nan, 0.3, 0.9, math.nan, 0.1, 0.95]  # fmt: skip
EDGE_Y = [0.5, 1.04, 0.5, 0.3, math.nan, -0.02, 1.03, 0.99, 0.0, math.nan, 0.1, 0.9, math.nan, 0.95, 0.05,
          math.nan, -0.03, 0.01, math.nan, 0.02, -0.015]  # fmt: skip


@pytest.mark.parametrize("marker", ["braille", "hd", "fhd", "dot", "*"])
@pytest.mark.parametrize("joined", [True, False])
@pytest.mark.parametrize("case", ["rounding", "edges"])
def test_points_on_the_edge_of_a_dot_or_of_the_canvas_land_where_plotext_puts_them(marker, joined, case):
    size = Size(40, 12)
    x, y = _rounding_points(size) if case == "rounding" else (EDGE_X, EDGE_Y)
    ours = _line_build(x, y, True, size, joined=joined, marker=marker)
    assert ours == _line_build(x, y, False, size, joined=joined, marker=marker)
