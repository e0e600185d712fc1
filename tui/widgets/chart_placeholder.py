"""What the main screen's chart pane shows for its first frame: the chart widget itself (`TagChart`: plotext, numpy
and the chart's data pipeline) is imported and mounted in its place just after that frame, off the way from the
shell to the first screen. It looks exactly like an empty chart."""

from __future__ import annotations

from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget

#: What an empty chart says (`TagChart`'s default), in the placeholder and the chart alike.
EMPTY_MESSAGE = "Select a run and a tag to chart."


class ChartPlaceholder(Widget):
    """Sized and drawn as `TagChart` is while no run is charted."""

    DEFAULT_CSS = """
    ChartPlaceholder {
        width: 1fr;
        height: 1fr;
    }
    """

    def render(self) -> RenderResult:
        return Text(EMPTY_MESSAGE, style="dim")
