"""`?`: every key and what it does, generated from the binding table with the user's remapping applied."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.ascii_mode import apply_ascii
from tui.bindings import KEY_ACTIONS, PALETTE_ID, PALETTE_KEY, SCOPE_TITLES, SCOPES, effective_key, key_caption

if TYPE_CHECKING:
    from tui.app import TriageApp

def help_table(keymap: dict[str, str], ascii_only: bool = False) -> Table:
    """Every action by scope: key, name (the id to remap in config [keys]) and what it does."""
    from rich import box

    table = Table(box=box.ASCII if ascii_only else box.SIMPLE_HEAD, expand=True, show_edge=False)
    table.add_column("key", no_wrap=True, style="bold")
    table.add_column("action (config [keys] name)", no_wrap=True)
    table.add_column("what it does")
    for scope in SCOPES:
        actions = [a for a in KEY_ACTIONS if a.scope == scope]
        table.add_row(Text(SCOPE_TITLES[scope], style="bold underline"), "", "")
        for action in actions:
            table.add_row(key_caption(effective_key(action, keymap)), action.id, action.help)
        if scope == "app":
            table.add_row(key_caption(keymap.get(PALETTE_ID, PALETTE_KEY)), PALETTE_ID, "Open the command palette")
            table.add_row("tab", "", "Move to the next pane")
    return table


class HelpScreen(ModalScreen):
    app: "TriageApp"

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", show=True)]

    def compose(self) -> ComposeResult:
        self.table = help_table(self.app.keymap, self.app.ascii_only)
        with VerticalScroll(id="help-box"):
            yield Static(self.table, id="help-table")

    def on_mount(self) -> None:
        if self.app.ascii_only:
            apply_ascii(self)
        box = self.query_one("#help-box")
        box.border_title = "Keys"
        box.border_subtitle = f"esc to close{self.app.separator}remap any action under [keys] in config.toml"
