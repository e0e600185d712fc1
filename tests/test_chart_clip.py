"""Clipping lines to the plot before plotext draws them: nothing visible is lost, nothing is added, the canvas is kept."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.text import Text
from textual.geometry import Size
from textual_plotext import Plot

from tbtriage.analysis.datamodel import Series
from tbtriage.analysis.downsample import Downsampled
from tbtriage.analysis.smoothing import ema
from tbtriage.themes import load_themes
from tbtriage.tui.chart_data import (
    ChartLine,
    ChartOptions,
    PreparedChart,
    SeriesRequest,
    clip_polyline,
    drawing_box,
    prepare_chart,
)
from tbtriage.tui.widgets.series_style import series_style
from tbtriage.tui.widgets.tag_chart import draw_chart

SIZE = Size(100, 24)


# ---- the geometry -------------------------------------------------------------------------------------


def _segments(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end points of the drawn segments (none across a NaN point; a point alone is one of no length)."""
    points = np.column_stack([x, y])
    finite = np.isfinite(points).all(axis=1)
    joined = finite[:-1] & finite[1:]
    alone = finite & ~np.r_[False, joined] & ~np.r_[joined, False]
    return np.r_[points[:-1][joined], points[alone]], np.r_[points[1:][joined], points[alone]]


def _distance(points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Each point's distance to the nearest of the segments (infinite when there are none)."""
    if not starts.size:
        return np.full(len(points), np.inf)
    d = ends - starts
    length = np.maximum((d**2).sum(axis=1), 1e-300)
    t = np.clip(((points[:, None, :] - starts[None]) * d[None]).sum(axis=2) / length, 0.0, 1.0)
    nearest = starts[None] + t[..., None] * d[None]
    return np.sqrt(((points[:, None, :] - nearest) ** 2).sum(axis=2)).min(axis=1)


def _along(starts: np.ndarray, ends: np.ndarray, samples: int = 33) -> np.ndarray:
    t = np.linspace(0.0, 1.0, samples)[None, :, None]
    return (starts[:, None, :] + t * (ends - starts)[:, None, :]).reshape(-1, 2)


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(0, 40),
    seed=st.integers(0, 2**32 - 1),
    spread=st.sampled_from([0.5, 3.0, 50.0, 1e6]),
    gaps=st.booleans(),
    flat=st.booleans(),
)
def test_clipping_keeps_exactly_the_parts_of_the_line_inside_the_box(n, seed, spread, gaps, flat):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-spread, spread, n)) if not flat else np.repeat(rng.uniform(-1, 1), n)
    y = rng.uniform(-spread, spread, n)
    if n and flat:
        y[rng.integers(0, n)] = 0.0  # a point on the box's edge
    if gaps and n > 2:
        y[rng.integers(0, n, size=max(n // 8, 1))] = np.nan
    box = (-1.0, 1.0, 0.0, 1.0)
    cx, cy = clip_polyline(x, y, box)
    finite = np.isfinite(cx)
    assert np.array_equal(finite, np.isfinite(cy))
    tol = 1e-9 * max(spread, 1.0)
    # Everything kept lies in the box ...
    assert np.all((cx[finite] >= box[0] - tol) & (cx[finite] <= box[1] + tol))
    assert np.all((cy[finite] >= box[2] - tol) & (cy[finite] <= box[3] + tol))
    # ... every original point in the box is kept bit for bit ...
    kept = (x >= box[0]) & (x <= box[1]) & (y >= box[2]) & (y <= box[3])
    originals = set(zip(x[kept].tolist(), y[kept].tolist()))
    assert originals <= set(zip(cx[finite].tolist(), cy[finite].tolist()))
    # ... every part of a segment inside the box is drawn (a segment crossing the box with both ends outside too) ...
    starts, ends = _segments(x, y)
    clipped_starts, clipped_ends = _segments(cx, cy)
    samples = _along(starts, ends) if starts.size else np.empty((0, 2))
    strictly_inside = (
        (samples[:, 0] > box[0] + tol) & (samples[:, 0] < box[1] - tol)
        & (samples[:, 1] > box[2] + tol) & (samples[:, 1] < box[3] - tol)
    )  # fmt: skip
    if strictly_inside.any():
        assert _distance(samples[strictly_inside], clipped_starts, clipped_ends).max() <= tol * 10
    # ... and nothing else: every drawn segment lies on the original line (pieces are not joined across a gap).
    if clipped_starts.size:
        assert _distance(_along(clipped_starts, clipped_ends), starts, ends).max() <= tol * 10


def test_a_line_inside_the_box_comes_back_as_it_is():
    x, y = np.arange(5.0), np.array([0.1, 0.5, 0.9, 0.2, 0.3])
    cx, cy = clip_polyline(x, y, (0.0, 4.0, 0.0, 1.0))
    assert cx is x and cy is y


def test_a_line_that_leaves_the_box_and_comes_back_is_two_pieces():
    cx, cy = clip_polyline(np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.5, 10.0, 10.0, 0.5]), (0.0, 3.0, 0.0, 1.0))
    pieces = np.split(cx, np.flatnonzero(np.isnan(cx)))
    assert len(pieces) == 2
    assert cx[0] == 0.0 and cy[0] == 0.5 and cx[-1] == 3.0 and cy[-1] == 0.5
    assert np.allclose(cy[np.isfinite(cy)], [0.5, 1.0, 1.0, 0.5])


# ---- the canvas -----------------------------------------------------------------------------------------


def _variables() -> dict[str, str]:
    theme = load_themes()["dark"]
    return {**theme.to_color_system().generate(), **theme.variables}


def _canvas(chart: PreparedChart, clip: bool, ascii_only: bool = False, legend: bool = False) -> list[str]:
    plot = Plot()
    draw_chart(plot, chart, _variables(), SIZE, ascii_only=ascii_only, legend=legend, clip=clip)
    plot.plotsize(SIZE.width, SIZE.height)
    return Text.from_ansi(plot.build()).plain.splitlines()


_BRAILLE = 0x2800
#: Braille dot bits by (column, row) inside a cell.
_DOT_BITS = {
    (0, 0): 0x01,
    (0, 1): 0x02,
    (0, 2): 0x04,
    (1, 0): 0x08,
    (1, 1): 0x10,
    (1, 2): 0x20,
    (0, 3): 0x40,
    (1, 3): 0x80,
}


def _dots_and_glyphs(lines: list[str]) -> tuple[set[tuple[int, int]], dict[tuple[int, int], str]]:
    """The braille dots on the canvas (row, column in dots) and every other non-blank character by cell."""
    dots, glyphs = set(), {}
    for row, line in enumerate(lines):
        for col, char in enumerate(line):
            code = ord(char) - _BRAILLE
            if 0 < code < 256:
                dots |= {(row * 4 + r, col * 2 + c) for (c, r), bit in _DOT_BITS.items() if code & bit}
            elif char != " ":
                glyphs[(row, col)] = char
    return dots, glyphs


def _near(a: set[tuple[int, int]], b: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The dots of `a` with no dot of `b` at most one dot away."""
    return {(r, c) for r, c in a if not any((r + i, c + j) in b for i in (-1, 0, 1) for j in (-1, 0, 1))}


def _assert_same_canvas(chart: PreparedChart, ascii_only: bool = False) -> None:
    """Ticks, labels, frame and markers alike, and each line's dots the same but where a segment crossing the plot's
    edge was cut: plotext draws a segment between whole dots, so a cut end can move the dots by one. Each line (raw
    points, smoothed line) is compared drawn alone: where two cross, plotext shows the last one's dots in a cell,
    and a dot moved by one can change which that is."""
    if not ascii_only:
        clipped, whole = _canvas(chart, True), _canvas(chart, False)
        assert _dots_and_glyphs(clipped)[1] == _dots_and_glyphs(whole)[1]
    for line in chart.lines:
        marker = series_style(line.slot, _variables(), ascii_only).marker
        for alone in _signals(line):
            clipped, whole = (_marks(_canvas(replace(chart, lines=(alone,)), clip, ascii_only), marker)
                              for clip in (True, False))  # fmt: skip
            assert not _near(clipped, whole) and not _near(whole, clipped)


def _signals(line: ChartLine) -> list[ChartLine]:
    """`line` as the plotext signals it is drawn with, one each: the raw curve, and the smoothed line over it."""
    if line.smooth is None:
        return [line]
    nothing = Downsampled(*(np.empty(0),) * 5)
    return [replace(line, smooth=nothing), replace(line, raw=nothing)]


def _marks(lines: list[str], marker: str) -> set[tuple[int, int]]:
    """Where the line is: its braille dots, or the cells holding its ASCII marker."""
    if marker == "braille":
        return _dots_and_glyphs(lines)[0]
    return {(r, c) for r, line in enumerate(lines) for c, char in enumerate(line) if char == marker}


def _spiky(n: int, seed: int) -> Series:
    """A decaying loss with spikes far above it, a dive below, a NaN stretch and an Inf: lines that leave the range."""
    rng = np.random.default_rng(seed)
    values = 0.3 + 2.0 * np.exp(-np.arange(n) / (n / 4)) + 0.05 * rng.standard_normal(n)
    values[rng.integers(0, n, 12)] *= 30  # tens of plots high: plotext drawing them whole stays quick
    values[n // 2] = -50.0
    values[int(n * 0.8) : int(n * 0.85)] = np.nan
    values[n // 3] = np.inf
    wall = 1.7e9 + 0.5 * np.arange(n)
    wall[n // 2 :] -= 300.0  # a restart: the clock steps back
    return Series(np.arange(n, dtype=np.int64) * 3, wall, values)


@pytest.fixture(scope="module")
def requests_():
    return [SeriesRequest(f"run{i}", i, _spiky(20_000 + 3_000 * i, i)) for i in range(3)]


def _prepared(requests_, options: ChartOptions) -> PreparedChart:
    return prepare_chart(requests_, options, SIZE.width - 8, lambda r, w: ema(r.series.values, w))


@pytest.mark.parametrize(
    ("smoothing", "log_y", "axis", "outliers", "ascii_only"),
    [
        *itertools.product((0.0, 0.6), (False, True), ("step", "wall"), (True,), (False,)),
        (0.0, False, "relative", True, True),
        (0.6, True, "step", True, True),
    ],
)
def test_the_clipped_canvas_is_the_whole_canvas(requests_, smoothing, log_y, axis, outliers, ascii_only):
    options = ChartOptions(smoothing=smoothing, log_y=log_y, x_axis=axis, ignore_outliers=outliers)
    _assert_same_canvas(_prepared(requests_, options), ascii_only)


def test_lines_inside_the_range_draw_the_very_same_canvas(requests_):
    calm = [SeriesRequest("calm", 0, Series(np.arange(5000, dtype=np.int64), 1.7e9 + np.arange(5000.0),
                                             np.sin(np.arange(5000) / 300.0)))]  # fmt: skip
    for smoothing in (0.0, 0.6):
        for options in (ChartOptions(smoothing=smoothing), ChartOptions(smoothing=smoothing, log_y=True)):
            chart = _prepared(calm, options)
            assert _canvas(chart, True) == _canvas(chart, False)


def _line_chart(x: list[float], y: list[float], y_range=(0.0, 1.0)) -> PreparedChart:
    empty = np.empty(0)
    raw = Downsampled(np.asarray(x), np.asarray(y), empty, empty, empty)
    return PreparedChart((ChartLine("r", 0, raw, None),), (), (0.0, 10.0), y_range, "step")


def test_a_segment_crossing_the_whole_plot_with_both_ends_outside_is_drawn():
    # From far below to far above the range and back: no point of the line is inside, every segment crosses it.
    chart = _line_chart([0.0, 5.0, 10.0], [-40.0, 40.0, -40.0])
    _assert_same_canvas(chart)
    box = drawing_box(chart, SIZE.width - 16, SIZE.height - 4)
    assert box is not None
    assert len(clip_polyline(chart.lines[0].raw.x, chart.lines[0].raw.y, box)[0]) == 5  # two pieces and a gap
    rows, whole_rows = ({r for r, _ in _dots_and_glyphs(_canvas(chart, clip))[0]} for clip in (True, False))
    assert rows == whole_rows and len(rows) >= (SIZE.height - 6) * 4  # from the plot's bottom to its top


def test_a_labelled_line_wholly_outside_the_range_draws_without_its_legend_entry():
    chart = _line_chart([0.0, 5.0, 10.0], [5.0, 6.0, 7.0])
    assert not _dots_and_glyphs(_canvas(chart, True, legend=True))[0]
