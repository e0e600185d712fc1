"""What the main screen's chart pane shows for its first frame: the chart widget itself (`TagChart`: plotext, numpy
and the chart's data pipeline) is imported and mounted in its place just after that frame, off the way from the
shell to the first screen. It looks exactly like an empty chart until there is a series to draw, and then says the
chart is on its way (the app's warm-up mounts it a step at a time, `tui.warm_up`)."""

from __future__ import annotations

from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget

#: What an empty chart says (`TagChart`'s default), in the placeholder and the chart alike.
EMPTY_MESSAGE = "Select a run and a tag to chart."
#: What the placeholder says once a series waits for the chart.
COMING_MESSAGE = "Drawing the chart…"


class ChartPlaceholder(Widget):
    """Sized and drawn as `TagChart` is while no run is charted."""

    DEFAULT_CSS = """
    ChartPlaceholder {
        width: 1fr;
        height: 1fr;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.coming = False  # a series waits for the chart

    def expect_chart(self) -> None:
        """Say that the chart is on its way."""
        if not self.coming:
            self.coming = True
            self.refresh()

    def render(self) -> RenderResult:
        return Text(COMING_MESSAGE if self.coming else EMPTY_MESSAGE, style="dim")
