"""The key bar (`tui.widgets.key_bar`): the keys that work here in one line, drawn again only when they change; a
click on a key presses it; the command palette's key holds the right edge however narrow the terminal."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widget import Widget

from tbtriage.tui.widgets.key_bar import KeyBar
from tests._app_data import drive


class _Pane(Widget, can_focus=True):
    BINDINGS = [Binding("x", "app.count", "Count"), Binding("z", "app.never", "Never")]


class _Other(Widget, can_focus=True):
    BINDINGS = [Binding("y", "app.count", "Other")]


class _App(App):
    def __init__(self, palette: bool = False) -> None:
        super().__init__()
        self.palette = palette
        self.counted = 0

    def compose(self) -> ComposeResult:
        yield _Pane(id="a")
        yield _Pane(id="b")
        yield _Other(id="c")
        yield KeyBar(show_command_palette=self.palette)

    def action_count(self) -> None:
        self.counted += 1

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return None if action == "never" else True  # shown, but disabled


def _drawn(bar: KeyBar) -> str:
    return bar.render().plain


def test_the_bar_shows_the_focused_widgets_keys_and_draws_again_only_when_they_change():
    app = _App()

    async def scenario(app, pilot):
        bar = app.query_one(KeyBar)
        app.query_one("#a").focus()
        await pilot.pause()
        assert _drawn(bar).startswith(" x Count  z Never ")
        redrawn: list[bool] = []
        refresh = bar.refresh
        bar.refresh = lambda *a, **k: redrawn.append(True) or refresh(*a, **k)
        app.query_one("#b").focus()  # another pane with the same keys
        await pilot.pause()
        app.screen.refresh_bindings()  # a refresh that changes nothing
        await pilot.pause()
        assert redrawn == []
        app.query_one("#c").focus()  # other keys
        await pilot.pause()
        assert redrawn and _drawn(bar).startswith(" y Other ")

    drive(app, scenario, size=(60, 5), wait=False)


def test_a_click_on_a_key_presses_it_and_a_disabled_key_is_dimmed():
    app = _App()

    async def scenario(app, pilot):
        bar = app.query_one(KeyBar)
        app.query_one("#a").focus()
        await pilot.pause()
        text = bar.render()
        await pilot.click(KeyBar, offset=(text.plain.index("Count"), 0))
        await pilot.pause()
        assert app.counted == 1
        never = text.plain.index("Never")
        assert any(span.style.dim for span in text.spans if span.start <= never < span.end)
        await pilot.click(KeyBar, offset=(never, 0))  # disabled: nothing happens
        await pilot.pause()
        assert app.counted == 1

    drive(app, scenario, size=(60, 5), wait=False)


def test_the_palettes_key_holds_the_right_edge_and_the_other_keys_are_cut_before_it():
    app = _App(palette=True)

    async def scenario(app, pilot):
        bar = app.query_one(KeyBar)
        app.query_one("#a").focus()
        await pilot.pause()
        drawn = _drawn(bar)
        width = bar.size.width
        assert len(drawn) == width < 30 and drawn.endswith("▏^p palette ")
        assert drawn == " x Count  z Never "[: width - len("▏^p palette ")] + "▏^p palette "
        await pilot.click(KeyBar, offset=(drawn.index("^p"), 0))  # the palette opens
        await pilot.pause()
        assert type(app.screen).__name__ == "CommandPalette"

    drive(app, scenario, size=(20, 5), wait=False)
