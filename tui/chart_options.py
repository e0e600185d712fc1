"""How the user asked to see a chart (`ChartOptions`) and what it is asked to draw (`SeriesRequest`): the view state
holds them from the first frame, while the chart's numpy pipeline (`chart_data`) is imported only once there is a
chart to draw."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tbtriage.analysis.datamodel import Finding, Series

X_AXES = ("step", "relative", "wall")
X_AXIS_TITLES = {"step": "step", "relative": "relative time", "wall": "wall time"}

#: `s` cycles these EMA weights. 0.6 first: TensorBoard's default, the smoothing users already read.
SMOOTHING_WEIGHTS = (0.6, 0.9, 0.99, 0.0)


@dataclass(frozen=True)
class ChartOptions:
    """How the user asked to see the chart; shared by the main chart and the dashboard."""

    smoothing: float = SMOOTHING_WEIGHTS[0]
    log_y: bool = False
    x_axis: str = "step"
    ignore_outliers: bool = False
    window: tuple[float, float] | None = None  # zoomed x range in the current axis' units

    def next_smoothing(self) -> ChartOptions:
        weights = SMOOTHING_WEIGHTS
        index = weights.index(self.smoothing) if self.smoothing in weights else -1
        return replace(self, smoothing=weights[(index + 1) % len(weights)])

    def next_x_axis(self) -> ChartOptions:
        # The zoom window is in the old axis' units, so it cannot carry over.
        return replace(self, x_axis=X_AXES[(X_AXES.index(self.x_axis) + 1) % len(X_AXES)], window=None)

    def describe(self, sep: str = " · ") -> str:
        parts = [f"smooth {self.smoothing:g}" if self.smoothing else "raw", X_AXIS_TITLES[self.x_axis]]
        if self.log_y:
            parts.append("log-y")
        if self.ignore_outliers:
            parts.append("5-95%")
        if self.window is not None:
            parts.append("zoomed")
        return sep.join(parts)


@dataclass(frozen=True)
class SeriesRequest:
    """One run's curve to chart, with the colour slot the run keeps for the whole session."""

    run: str
    slot: int
    series: Series
    findings: tuple[Finding, ...] = ()
    tag: str = ""  # the charted tag: a Keras epoch_* series places findings at their epoch (`axes.series_step`)
