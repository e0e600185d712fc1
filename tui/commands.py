"""The command palette (`ctrl+p`): the binding table's actions plus commands for what is on screen.

Action commands come from `tui.bindings.KEY_ACTIONS` (so the palette and the keys never
disagree); context adds one "open" and one "copy report" per run on the main screen, and a
theme switch per theme. Run names are untrusted and are matched and shown as plain text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content

from tbtriage.themes import THEME_ORDER
from tbtriage.tui.bindings import KEY_ACTIONS, effective_key
from tbtriage.tui.safe_text import plain

if TYPE_CHECKING:
    from tbtriage.tui.app import TriageApp

#: Actions offered on every screen; the others act on the main screen's chart, lists or filter.
_ANYWHERE = {"help", "log_y", "smoothing", "outliers", "theme", "follow", "refresh", "copy_report", "quit"}


@dataclass(frozen=True)
class PaletteCommand:
    text: str  # plain text, matched against the query
    help: str
    run: Callable[[], object]


class TriageCommands(Provider):
    def commands(self) -> list[PaletteCommand]:
        from tbtriage.tui.screens.main import MainScreen

        app = cast("TriageApp", self.app)  # the only app this provider is registered with
        on_main = isinstance(self.screen, MainScreen)
        found = []
        for action in KEY_ACTIONS:
            if not action.palette or (not on_main and action.id not in _ANYWHERE):
                continue
            key = effective_key(action, app.keymap)
            found.append(PaletteCommand(action.help, f"key: {key}", partial(app.run_action, action.action)))
        for theme in THEME_ORDER:
            found.append(
                PaletteCommand(
                    f"Switch theme to {theme}", "colours of panes and charts", partial(setattr, app, "theme", theme)
                )
            )
        if on_main:
            for name in app.runs:
                found.append(
                    PaletteCommand(
                        f"Open run {plain(name)}",
                        "its dashboard: losses, gradients, lr, device",
                        partial(app.open_dashboard, name),
                    )
                )
        return found

    async def discover(self) -> Hits:
        for command in self.commands():
            yield DiscoveryHit(Content(command.text), command.run, text=command.text, help=command.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command in self.commands():
            score, offsets = matcher.fuzzy_search.match(query, command.text)
            if score > 0:
                display = Content(command.text)
                for offset in offsets:
                    display = display.stylize(matcher.match_style, offset, offset + 1)
                yield Hit(score, display, command.run, text=command.text, help=command.help)
