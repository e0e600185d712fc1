"""The key bar (`tui.widgets.key_footer`): re-composed when the keys it shows change, and only then."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets._footer import FooterKey

from tbtriage.tui.widgets.key_footer import KeyFooter
from tests._app_data import drive


class _Pane(Widget, can_focus=True):
    BINDINGS = [Binding("x", "noop", "Same")]


class _Other(Widget, can_focus=True):
    BINDINGS = [Binding("y", "noop", "Other")]


class _App(App):
    def compose(self) -> ComposeResult:
        yield _Pane(id="a")
        yield _Pane(id="b")
        yield _Other(id="c")
        yield KeyFooter(show_command_palette=False)


def test_the_footer_is_composed_again_only_when_its_keys_change():
    app = _App()

    async def scenario(app, pilot):
        footer = app.query_one(KeyFooter)
        app.query_one("#a").focus()
        await pilot.pause()
        recomposed: list[bool] = []
        recompose = footer.recompose

        async def counted():
            recomposed.append(True)
            await recompose()

        footer.recompose = counted
        app.query_one("#b").focus()  # another pane with the same keys
        await pilot.pause()
        app.screen.refresh_bindings()  # a refresh that changes nothing
        await pilot.pause()
        assert recomposed == []
        assert [key.key for key in footer.query(FooterKey)] == ["x"]

        app.query_one("#c").focus()  # other keys
        await pilot.pause()
        await pilot.pause()
        assert recomposed == [True]
        assert [key.key for key in footer.query(FooterKey)] == ["y"]

    drive(app, scenario, size=(60, 5), wait=False)
