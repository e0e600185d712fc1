"""Rows of one-glyph cells (heatmaps, shaded charts) turned into Rich text with one span per run of a style.

Textual's cost for a line grows with its spans, not its characters: a 140-cell row styled cell by cell
costs ~140 spans to render, the same row as runs of equal style a handful. Charts that colour cells
from a few levels append their cells through `append_cells`.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby

from rich.text import Text


def append_cells(out: Text, cells: Iterable[tuple[str, str]]) -> None:
    """Append (glyph, style) cells to `out`, neighbours of one style as one span."""
    for style, run in groupby(cells, key=lambda cell: cell[1]):
        out.append("".join(glyph for glyph, _ in run), style=style)
