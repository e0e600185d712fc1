"""The command palette (`ctrl+p`): the binding table's actions plus commands for what is on screen.

Action commands come from `tui.bindings.KEY_ACTIONS`, each offered on exactly the screens its
table row names (so the palette, the footer and the keys never disagree); context adds one
"open" per run on the main screen, and a theme switch per theme. Run names are untrusted and
are matched and shown as plain text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content

from tbtriage.themes import THEME_ORDER
from tbtriage.tui.bindings import effective_key, palette_actions
from tbtriage.tui.safe_text import plain
from tbtriage.tui.state import TriageHost


@dataclass(frozen=True)
class PaletteCommand:
    text: str  # plain text, matched against the query
    help: str
    run: Callable[[], object]


class TriageCommands(Provider):
    app: TriageHost

    def commands(self) -> list[PaletteCommand]:
        app = self.app
        screen = getattr(self.screen, "SCREEN", None)
        found = []
        for action in palette_actions(screen):
            key = effective_key(action, app.keymap)
            found.append(PaletteCommand(action.help, f"key: {key}", partial(app.run_action, action.action)))
        for theme in THEME_ORDER:
            found.append(
                PaletteCommand(
                    f"Switch theme to {theme}", "colours of panes and charts", partial(setattr, app, "theme", theme)
                )
            )
        if screen == "main":
            for name in app.store.runs:
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
