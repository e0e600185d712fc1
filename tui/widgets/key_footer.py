"""The key bar at the bottom of every screen: Textual's `Footer`, drawn again only when the keys it shows change.

Textual's footer is a widget per key, and it re-composes them all whenever the screen's bindings may have changed: on
every focus change and every binding refresh, three times in a warm reopen's first half second. Each time it removes
and mounts ~15 widgets and styles each of them twice (~40 ms on this 2-core machine), and a key pressed meanwhile
waited for it. Most of those refreshes change nothing it shows (the same keys, the same descriptions, enabled alike).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import Footer

if TYPE_CHECKING:
    from textual.screen import Screen


def shown_keys(screen: Screen) -> tuple:
    """What a footer on `screen` shows: every shown binding's key, label, action, group, state and tooltip, in order."""
    return tuple(
        (binding.key, binding.key_display, binding.description, binding.action, binding.group, enabled, tooltip)
        for (_node, binding, enabled, tooltip) in screen.active_bindings.values()
        if binding.show
    )


class KeyFooter(Footer):
    """A `Footer` that re-composes only when what it shows would change."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._composed_for: tuple | None = None  # `shown_keys` when it last asked to re-compose

    def bindings_changed(self, screen: Screen) -> None:
        if screen.app.app_focus and self.is_attached and screen is self.screen:  # when Footer re-composes
            keys = (shown_keys(screen), self.app.ansi_color, self.show_command_palette)
            if keys == self._composed_for:
                return
            self._composed_for = keys
        super().bindings_changed(screen)
