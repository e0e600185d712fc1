"""Per-layer gradient norms over time as a heatmap: one row per layer, one column per step bucket.

Colour and shade both encode log10 of the bucket's largest norm on one scale shared by all
layers, so a vanishing early layer reads dark next to healthy ones and a spike stays visible
(the largest value of a bucket wins, as in min/max downsampling). Shade glyphs keep it readable
without colour (NO_COLOR, monochrome); non-finite norms are marked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from rich.text import Text
from textual.color import Color
from textual.widget import Widget

from tbtriage.analysis.datamodel import Series
from tbtriage.analysis.text import number
from tbtriage.themes import heatmap_ends
from tbtriage.tui.safe_text import plain
from tbtriage.tui.widgets.cell_runs import append_cells

SHADES = " ░▒▓█"
ASCII_SHADES = " .:=#"
NONFINITE, ASCII_NONFINITE = "×", "x"

#: Widest layer label; longer names keep their end (the layer index sits there).
MAX_LABEL_CELLS = 24


@dataclass(frozen=True, eq=False)
class HeatmapGrid:
    labels: tuple[str, ...]
    levels: np.ndarray  # (layers, columns) in [0, 1], NaN where a bucket has no point
    nonfinite: np.ndarray  # (layers, columns) bool
    low: float  # log10 of the smallest finite norm
    high: float
    first_step: int
    last_step: int


def layer_labels(tags: list[str]) -> list[str]:
    """Tags without the prefix they all share (`grad_norm/`), so the layer names remain."""
    prefix = os.path.commonprefix(tags) if len(tags) > 1 else ""
    prefix = prefix[: prefix.rfind("/") + 1]
    return [tag[len(prefix) :] or tag for tag in tags]


def heatmap_grid(layers: dict[str, Series], columns: int) -> HeatmapGrid | None:
    """Bucket every layer's norms into `columns` equal step ranges (shared across layers); max per bucket."""
    layers = {tag: s for tag, s in layers.items() if len(s)}
    if not layers or columns < 1:
        return None
    tags = sorted(layers)
    first = min(int(layers[t].steps[0]) for t in tags)
    last = max(int(layers[t].steps[-1]) for t in tags)
    span = max(last - first, 1)
    peaks = np.full((len(tags), columns), np.nan)
    nonfinite = np.zeros((len(tags), columns), bool)
    for row, tag in enumerate(tags):  # one pass per layer, vectorised over its points
        series = layers[tag]
        bucket = np.minimum(((series.steps - first) * columns) // span, columns - 1).astype(np.int64)
        values = np.asarray(series.values, dtype=np.float64)
        finite = np.isfinite(values) & (values > 0)
        np.fmax.at(peaks[row], bucket[finite], np.log10(values[finite]))
        nonfinite[row, bucket[~np.isfinite(values)]] = True
    known = peaks[np.isfinite(peaks)]
    low, high = (float(known.min()), float(known.max())) if known.size else (0.0, 0.0)
    levels = (peaks - low) / (high - low) if high > low else np.where(np.isfinite(peaks), 1.0, np.nan)
    labels = tuple(_fit_label(plain(label)) for label in layer_labels(tags))
    return HeatmapGrid(labels, levels, nonfinite, low, high, first, last)


def _fit_label(label: str) -> str:
    return label if len(label) <= MAX_LABEL_CELLS else "…" + label[-(MAX_LABEL_CELLS - 1) :]


class GradHeatmap(Widget):
    """Renders `layers` (tag -> grad-norm series) to fit its size."""

    DEFAULT_CSS = "GradHeatmap { height: 1fr; width: 1fr; }"

    def __init__(self, layers: dict[str, Series], *, ascii_only: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.grad_layers = layers
        self.ascii_only = ascii_only
        self.cursor_step: int | None = None  # marked under the heatmap (the gradient flow view's step)
        # (the layers it was drawn for, the size and options, what `_rows` drew): redrawn when any changes.
        self._drawn: tuple[dict[str, Series], tuple, tuple[HeatmapGrid, int, Text, str] | None] | None = None

    def set_layers(self, layers: dict[str, Series], cursor_step: int | None = None) -> None:
        self.grad_layers = layers
        self.cursor_step = cursor_step
        self.refresh()

    def render(self) -> Text:
        # The rows depend on the layers, the size and the theme, not on the marked step: drawn once per change.
        key = (self.size.width, self.size.height, self.cursor_step is not None, self.app.theme, self.ascii_only)
        if self._drawn is None or self._drawn[0] is not self.grad_layers or self._drawn[1] != key:
            self._drawn = (self.grad_layers, key, self._rows())
        drawn = self._drawn[2]
        if drawn is None:
            return Text("No per-layer gradient norms or gradient histograms in this run.", style="dim")
        grid, label_cells, rows, scale = drawn
        out = rows.copy()
        if self.cursor_step is not None:
            columns = grid.levels.shape[1]
            span = max(grid.last_step - grid.first_step, 1)
            at = min(max((self.cursor_step - grid.first_step) * columns // span, 0), columns - 1)
            marker, label = "^" if self.ascii_only else "▲", f" step {self.cursor_step}"
            at += label_cells + 1
            line = " " * at + marker + label  # the label after the marker, or before it near the right edge
            if len(line) > self.size.width:
                line = " " * max(at - len(label), 0) + label.strip() + " " + marker
            out.append(line[: self.size.width] + "\n", style="bold")
        out.append(scale, style="dim")
        return out

    def _rows(self) -> tuple[HeatmapGrid, int, Text, str] | None:
        """(the grid, label width, one shaded line per layer shown, the scale line); None without layers."""
        label_cells = min(
            max((len(plain(t)) for t in layer_labels(sorted(self.grad_layers))), default=0), MAX_LABEL_CELLS
        )
        # Two lines for the scale and the step range, one more for the step marker when there is one.
        rows_available = max(self.size.height - 2 - (self.cursor_step is not None), 1)
        grid = heatmap_grid(self.grad_layers, max(self.size.width - label_cells - 1, 1))
        if grid is None:
            return None
        variables = self.app.theme_variables
        low, high = (Color.parse(c) for c in heatmap_ends(variables))
        shades = ASCII_SHADES if self.ascii_only else SHADES
        mark = ASCII_NONFINITE if self.ascii_only else NONFINITE
        error = variables.get("error", "red")
        out = Text(no_wrap=True, overflow="crop")
        shown = min(len(grid.labels), rows_available)
        # One colour per shade (the level its glyph stands for), so a row is a few runs of one style each.
        steps = len(shades) - 1
        colours = [low.blend(high, k / max(steps - 1, 1)).hex for k in range(steps)]
        for row in range(shown):
            out.append(grid.labels[row].rjust(label_cells) + " ", style="dim")
            cells = []
            for level, bad in zip(grid.levels[row].tolist(), grid.nonfinite[row].tolist()):
                if bad:
                    cells.append((mark, f"bold {error}"))
                elif level != level:  # NaN: no point in this bucket
                    cells.append((" ", ""))
                else:
                    k = min(int(level * steps), steps - 1)
                    cells.append((shades[1 + k], colours[k]))
            append_cells(out, cells)
            out.append("\n")
        hidden = len(grid.labels) - shown
        more = f" (+{hidden} layers)" if hidden > 0 else ""
        scale = (
            f"{'':>{label_cells}} steps {grid.first_step}-{grid.last_step} "
            f"{10**grid.low:.0e}{shades[1:]}{10**grid.high:.0e}{more}"
        )
        return grid, label_cells, out, scale[: self.size.width]


def values_at(layers: dict[str, Series], step: int) -> dict[str, float]:
    """Each layer's value at its last point at or before `step` (NaN where it has none yet)."""
    out = {}
    for tag, series in layers.items():
        at = int(np.searchsorted(series.steps, step, side="right")) - 1
        out[tag] = float(series.values[at]) if at >= 0 else float("nan")
    return out


class LayerBars(Widget):
    """Gradient flow at one step: a bar per layer, on a log scale shared by every layer and step, so a layer
    whose gradient vanishes reads short next to the others and a bar is comparable from step to step."""

    DEFAULT_CSS = "LayerBars { height: 1fr; width: 1fr; }"

    def __init__(self, *, ascii_only: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.ascii_only = ascii_only
        self.grad_layers: dict[str, Series] = {}
        self.step: int | None = None
        self._range: tuple[float, float] | None = None  # log10 of the smallest and largest positive value

    def show(self, layers: dict[str, Series], step: int | None) -> None:
        if layers is not self.grad_layers:
            logs = [np.log10(v[np.isfinite(v) & (v > 0)]) for v in (s.values for s in layers.values())]
            logs = [x for x in logs if x.size]
            self._range = (min(float(x.min()) for x in logs), max(float(x.max()) for x in logs)) if logs else None
        self.grad_layers, self.step = layers, step
        self.refresh()

    def render(self) -> Text:
        if not self.grad_layers or self.step is None:
            return Text("No per-layer gradient norms or gradient histograms in this run.", style="dim")
        tags = sorted(self.grad_layers)
        labels = [_fit_label(plain(label)) for label in layer_labels(tags)]
        label_cells = max(len(label) for label in labels)
        values = values_at(self.grad_layers, self.step)
        texts = [number(values[t]) for t in tags]
        value_cells = max(len(t) for t in texts)
        bar_cells = max(self.size.width - label_cells - value_cells - 3, 1)
        low, high = self._range or (0.0, 0.0)
        variables = self.app.theme_variables
        start, end = (Color.parse(c) for c in heatmap_ends(variables))
        error = variables.get("error", "red")
        glyph = "#" if self.ascii_only else "█"
        out = Text(no_wrap=True, overflow="crop")
        for row, tag in enumerate(tags[: max(self.size.height, 1)]):
            value = values[tag]
            out.append(labels[row].rjust(label_cells) + " ", style="dim")
            if not np.isfinite(value):
                bar, style = (
                    (NONFINITE if not self.ascii_only else ASCII_NONFINITE) if not np.isnan(value) else "",
                    error,
                )
            elif value <= 0 or high <= low:
                bar, style = glyph if value > 0 else "", end.hex
            else:
                level = min(max((np.log10(value) - low) / (high - low), 0.0), 1.0)
                bar, style = glyph * max(1, round(level * bar_cells)), start.blend(end, level).hex
            out.append(bar.ljust(bar_cells), style=style)
            out.append(" " + texts[row].rjust(value_cells) + "\n", style="dim")
        return out
