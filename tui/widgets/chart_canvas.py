"""A chart line's cells computed with numpy, where plotext computes them dot by dot in Python.

plotext turns a line into dots one at a time: each segment becomes one dot per dot row or column it spans
(`get_lines`), each dot is grouped into its character cell (`hd_group`), and each step is a Python loop over
dots. A zoomed view of five noisy runs is a few hundred thousand dots, most of a key press's time. `draw_line`
hands plotext one placeholder point instead of the line; when plotext's build inserts that point into its
character matrix, the line's cells are inserted there, in its place among the other signals, so what is drawn
over what does not change. The cells come from the same arithmetic plotext does, on the same float64 values, with
the canvas size plotext has just laid out: the picture is the one plotext draws, cell for cell and colour for
colour (tests/test_chart_canvas.py builds both and compares them).

`matrix_text` turns plotext's built matrix into the Rich Text the chart widget shows, the Text that Rich's ANSI
decoder reads from the text plotext would write, without writing and parsing it.

It follows plotext 5.3.2 (pinned in pyproject.toml): `get_matrix_data`, `get_lines`/`get_line`, `hd_group`,
`remove_outsiders` and the order `build_plot` inserts signals in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np
import plotext._utility as plotext_utility
from plotext._matrix import matrix_class
from rich.ansi import AnsiDecoder
from rich.style import Style
from rich.text import Text

#: First of the private-use characters that stand for a line until plotext inserts it (one per line of a chart).
PLACEHOLDER = 0xF0000

#: `round(change, 8)` in `get_matrix_data` can carry a value this close below an integer up to it; those few are
#: mapped with plotext's own Python expression instead of numpy's floor.
_NEAR_INTEGER = 1e-7


@dataclass(frozen=True, eq=False)
class Line:
    """One signal to draw: finite points (NaN points break the line, as in plotext), joined or not."""

    x: np.ndarray
    y: np.ndarray
    joined: bool  # plotext's `plot` (segments between consecutive points) rather than `scatter`
    marker: str  # as plotext's `check_marker` returns it: a dot-marker name ("braille") or one character
    x_lim: tuple[float, float]
    y_lim: tuple[float, float]

    def cells(self, columns: int, rows: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """Column, row (from the canvas' bottom left) and character of every cell plotext fills for this line on
        a canvas `columns` x `rows` cells."""
        x_factor = plotext_utility.marker_factor(self.marker, 2, 2, 2)
        y_factor = plotext_utility.marker_factor(self.marker, 2, 3, 4)
        numeric = np.isfinite(self.x) & np.isfinite(self.y)
        dot_x = _matrix_coords(self.x, numeric, self.x_lim, columns * x_factor)
        dot_y = _matrix_coords(self.y, numeric, self.y_lim, rows * y_factor)
        if self.joined:
            dot_x, dot_y = _line_dots(dot_x, dot_y, numeric)
        else:
            dot_x, dot_y = dot_x[numeric], dot_y[numeric]
        cell_x, cell_y = dot_x // x_factor, dot_y // y_factor  # floor division, as plotext's on Python ints
        shown = (cell_x >= 0) & (cell_x < columns) & (cell_y >= 0) & (cell_y < rows)  # `remove_outsiders`
        dots_per_cell = x_factor * y_factor
        # Bit i of a cell's code is element i of plotext's marker code: dot rows top first, then columns.
        bit = (y_factor - 1 - dot_y[shown] % y_factor) * x_factor + dot_x[shown] % x_factor
        cell = cell_y[shown] * columns + cell_x[shown]
        lit = np.bincount(cell * dots_per_cell + bit, minlength=columns * rows * dots_per_cell) > 0
        lit = lit.reshape(columns * rows, dots_per_cell)
        filled = np.flatnonzero(lit.any(axis=1))
        if dots_per_cell == 1:
            return filled % columns, filled // columns, [self.marker] * filled.size
        codes = lit[filled] @ (1 << np.arange(dots_per_cell))
        glyphs = _glyphs(dots_per_cell)
        return filled % columns, filled // columns, [glyphs[c] for c in codes.tolist()]


def _matrix_coords(v: np.ndarray, numeric: np.ndarray, lim: tuple[float, float], bins: int) -> np.ndarray:
    """plotext's `get_matrix_data` of the `numeric` values: floor(round(0.5 + (bins - 1) (v - lo) / (hi - lo), 8)),
    the same float64 operations in the same order (other entries are left 0: they draw nothing)."""
    lo, hi = lim
    change = np.zeros(v.shape)
    change[numeric] = 0.5 + (bins - 1) * (v[numeric] - lo) / (hi - lo)
    found = np.floor(change)
    for i in np.flatnonzero(numeric & (found + 1 - change < _NEAR_INTEGER)).tolist():
        found[i] = math.floor(round(float(change[i]), 8))
    return found.astype(np.int64)


def _line_dots(x: np.ndarray, y: np.ndarray, numeric: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The dots of plotext's `get_lines` over the dot coordinates `x`, `y`: between two numeric neighbours every
    dot of `linspace(start, end, steps + 1)` truncated to integers but the end (the next segment starts there),
    steps being the larger of the two distances; a point next to a non-numeric one as it is; the last point."""
    both = numeric[:-1] & numeric[1:]
    alone = np.flatnonzero(np.r_[numeric[:-1] & ~both, numeric[-1:]])
    start = np.flatnonzero(both)
    dx, dy = x[start + 1] - x[start], y[start + 1] - y[start]
    steps = np.maximum(np.abs(dx), np.abs(dy))
    moves = steps > 0  # a segment of one dot adds nothing: its end is the next segment's start
    start, dx, dy, steps = start[moves], dx[moves], dy[moves], steps[moves]
    owner = np.repeat(np.arange(start.size), steps)
    k = np.arange(owner.size) - np.repeat(np.cumsum(steps) - steps, steps)
    # linspace's `lower + k * slope`, slope = (upper - lower) / (length - 1), then int(): truncation toward zero.
    line_x = np.trunc(x[start][owner] + k * (dx / steps)[owner]).astype(np.int64)
    line_y = np.trunc(y[start][owner] + k * (dy / steps)[owner]).astype(np.int64)
    return np.r_[line_x, x[alone]], np.r_[line_y, y[alone]]


@cache
def _glyphs(dots_per_cell: int) -> tuple[str, ...]:
    """plotext's character for each code (bit i set: element i of its marker code is 1)."""
    return tuple(
        plotext_utility.get_hd_marker(tuple((code >> i) & 1 for i in range(dots_per_cell)))
        for code in range(1 << dots_per_cell)
    )


class CanvasMatrix(matrix_class):
    """plotext's character matrix, which inserts a `Line`'s cells where plotext inserts its placeholder point."""

    def __init__(self) -> None:
        self.lines: dict[str, Line] = {}
        self._inserted: set[str] = set()
        super().__init__()

    def set_matrices(self) -> None:  # called at the start of every build
        self._inserted = set()
        super().set_matrices()

    def insert_element(self, col, row, marker, fullground=None, style=None, background=None, check_canvas=False):
        line = self.lines.get(marker)
        if line is None or marker in self._inserted:  # once a build: a later label with that character is text
            return super().insert_element(col, row, marker, fullground, style, background, check_canvas)
        self._inserted.add(marker)
        left, bottom = self.Cols_canvas.start, self.Rows_canvas.start
        columns, rows, glyphs = line.cells(len(self.Cols_canvas), len(self.Rows_canvas))
        # `insert_element` for each cell, inlined: the cells lie on the canvas, so inside the matrix.
        for c, r, glyph in zip((columns + left).tolist(), (rows + bottom).tolist(), glyphs):
            if 0 <= c < self.cols and 0 <= r < self.rows:
                self.marker[r][c] = glyph
                if fullground is not None:
                    self.fullground[r][c] = fullground
                if background is not None:
                    self.background[r][c] = background
                if style is not None:
                    self.style[r][c] = style
        return None


def draw_line(
    plt,
    x: np.ndarray,
    y: np.ndarray,
    *,
    joined: bool,
    marker: str,
    color,
    label: str | None,
    x_lim: tuple[float, float],
    y_lim: tuple[float, float],
) -> None:
    """What `plt.plot(x, y, ...)` (`joined`) or `plt.scatter` draws, for a figure whose limits are set to `x_lim` and
    `y_lim` (hi > lo) and whose points are few cells off the canvas at most (lines clipped to the plot): plotext is
    handed one point that lands on the canvas, in the line's colour, which the figure's matrix replaces by the line.
    """
    monitor = plt.monitor
    if not isinstance(monitor.matrix, CanvasMatrix):
        monitor.matrix = CanvasMatrix()
    matrix = monitor.matrix
    checked = monitor.check_marker(marker)
    placeholder = chr(PLACEHOLDER + len(matrix.lines))
    # plotext's limits are floats in ascending order; the point at the low corner maps to the canvas' first cell.
    x_lim, y_lim = (float(min(x_lim)), float(max(x_lim))), (float(min(y_lim)), float(max(y_lim)))
    matrix.lines[placeholder] = Line(
        np.asarray(x, np.float64), np.asarray(y, np.float64), joined, checked, x_lim, y_lim
    )
    xs, ys, markers = [x_lim[0]], [y_lim[0]], [placeholder]
    if label is not None:
        # The legend shows a signal's first three markers: points that land nowhere, with the line's legend marker.
        legend = plotext_utility.hd_symbols.get(checked, checked)
        xs, ys, markers = [math.nan] * 3 + xs, [math.nan] * 3 + ys, [legend] * 3 + markers
    plt.scatter(xs, ys, marker=markers, color=color, label=label)


def built_text(plot) -> Text:
    """`Text.from_ansi(plot.build())`: plotext's `build` (sizes, then the matrix), the Text made from the matrix."""
    plot._set_sizes()
    plot._build_matrix()
    return matrix_text(plot.monitor.matrix)


def matrix_text(matrix: matrix_class) -> Text:
    """`Text.from_ansi(plot.build())` for a plot whose matrix is built, without writing and parsing the ANSI text:
    the rows as plotext's `set_canvas` writes them (top first, a run of cells per colour, style and background), each
    run's style the one Rich's decoder reads from plotext's escape codes for it."""
    lines = []
    for row in matrix.Rows[::-1]:
        line = Text()
        markers, colours = (
            matrix.marker[row],
            list(zip(matrix.fullground[row], matrix.style[row], matrix.background[row])),
        )
        start = 0
        for col in range(1, matrix.cols + 1):
            if col == matrix.cols or colours[col] != colours[start]:
                line.append("".join(markers[start:col]), _run_style(colours[start]))
                start = col
        lines.append(line)
    lines.append(Text())  # the text ends with a newline: the decoder reads an empty last line
    return Text("\n", end="\n", tab_size=8, style="").join(lines)


_STYLES: dict[str, Style | None] = {}


def _run_style(colours: tuple) -> Style | None:
    """The style Rich's ANSI decoder gives a run plotext writes in `colours` (foreground, style, background)."""
    key = repr(colours)  # a colour can be a list (plotext's themes), which no dict takes as a key
    if key not in _STYLES:
        decoded = AnsiDecoder().decode_line(plotext_utility.colors_to_ansi(*colours) + "x")
        _STYLES[key] = decoded.spans[0].style if decoded.spans else None  # type: ignore[assignment]
    return _STYLES[key]
