"""The key bar at the foot of every screen: the keys that work here, drawn by one widget.

Textual's `Footer` is a widget per key (~15 on the main screen), re-composed whenever the screen's bindings may have
changed: on every focus change and binding refresh, three times in a warm reopen's first half second. Each time it
removed and mounted them all and styled each twice (40-56 ms on this 2-core machine), a key pressed meanwhile waited,
and every layout of the screen carried them. This bar draws the same line (each key, then what it does, in the
theme's footer colours; a disabled one dimmed; the command palette's key at the right edge) as one piece of text, drawn
again only when what it shows changes. A click on a key presses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from rich.style import Style
from rich.text import Text
from textual import events
from textual.widget import Widget

if TYPE_CHECKING:
    from textual.screen import Screen


class Key(NamedTuple):
    """One key as the bar shows it."""

    key: str  # what pressing it sends (`App.simulate_key`)
    display: str  # how the key is written ("⏎", "^p")
    description: str
    enabled: bool


def shown_keys(screen: Screen) -> tuple[Key, ...]:
    """The keys of `screen`'s bindings that ask to be shown, one per action (its first key), in binding order."""
    app, seen = screen.app, set()
    keys = []
    for _node, binding, enabled, _tooltip in screen.active_bindings.values():
        if binding.show and binding.action not in seen:
            seen.add(binding.action)
            keys.append(Key(binding.key, app.get_key_display(binding), binding.description, enabled))
    return tuple(keys)


def palette_key(screen: Screen) -> Key | None:
    """The command palette's key, where the app has the palette and the screen binds it."""
    app = screen.app
    found = screen.active_bindings.get(app.COMMAND_PALETTE_BINDING) if app.ENABLE_COMMAND_PALETTE else None
    if found is None:
        return None
    _node, binding, enabled, _tooltip = found
    return Key(binding.key, app.get_key_display(binding), binding.description, enabled)


class KeyBar(Widget):
    """The keys that work on this screen, and what each does, in one line (`show_command_palette`: the palette's
    key at the right edge, as Textual's Footer puts it)."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"key-bar--key", "key-bar--description", "key-bar--edge"}
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
        & > .key-bar--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        & > .key-bar--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        & > .key-bar--edge {
            color: $foreground 20%;
        }
    }
    """

    def __init__(self, show_command_palette: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self.show_command_palette = show_command_palette
        self.keys: tuple[Key, ...] = ()  # what the bar shows, the palette's key aside
        self.palette: Key | None = None
        self._spans: list[tuple[int, int, str]] = []  # each key's cells as last drawn, for clicks

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._bindings_changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen) -> None:
        if screen is not self.screen:
            return
        keys, palette = shown_keys(screen), palette_key(screen) if self.show_command_palette else None
        if (keys, palette) != (self.keys, self.palette):  # most refreshes change nothing shown: no redraw
            self.keys, self.palette = keys, palette
            self.refresh()

    def render(self) -> Text:
        key_style = self.get_component_rich_style("key-bar--key")
        description_style = self.get_component_rich_style("key-bar--description")
        left = Text(end="")
        spans = [self._add(left, key, True, key_style, description_style) for key in self.keys]
        right = Text(end="")
        if self.palette is not None:  # at the right edge, behind a thin bar: "▏^p palette "
            right.append("▏", self.get_component_rich_style("key-bar--edge"))
            spans.append(self._add(right, self.palette, False, key_style, description_style))
        keep = max(0, self.size.width - right.cell_len)
        left.truncate(keep, overflow="crop", pad=True)
        # Where each key is drawn, for clicks: the left ones as cropped, the palette's after them.
        self._spans = [(a, min(b, keep), k) for a, b, k in spans[: len(self.keys)] if a < keep]
        self._spans += [(a + keep, b + keep, k) for a, b, k in spans[len(self.keys) :]]
        return Text.assemble(left, right, no_wrap=True, end="")

    @staticmethod
    def _add(text: Text, key: Key, padded: bool, key_style: Style, description_style: Style) -> tuple[int, int, str]:
        """Append `key` to `text`: " ⏎ Dashboard " (`padded`, as the Footer's keys) or "^p palette " (its palette
        key); the cells it takes there."""
        start, first = text.cell_len, len(text)
        if not key.description:
            text.append(key.display, key_style)
        elif padded:
            text.append(f" {key.display} ", key_style)
            text.append(f"{key.description} ", description_style)
        else:
            text.append(key.display, key_style)
            text.append(f" {key.description} ", description_style)
        if not key.enabled:
            text.stylize(Style(dim=True), first)
        return start, text.cell_len, key.key

    def on_click(self, event: events.Click) -> None:
        """A click on a key presses it (a disabled one rings the bell)."""
        for start, end, name in self._spans:
            if start <= event.x < end:
                key = next((k for k in (*self.keys, self.palette) if k is not None and k.key == name), None)
                if key is not None and not key.enabled:
                    self.app.bell()
                else:
                    self.app.simulate_key(name)
                return
