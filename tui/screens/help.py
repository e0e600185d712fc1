"""`?`: every key and what it does, generated from the binding table with the user's remapping applied."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tbtriage.analysis.run_filter import SYNTAX as FILTER_SYNTAX
from tbtriage.tui.ascii_mode import apply_ascii
from tbtriage.tui.bindings import (
    EVERYWHERE,
    KEY_ACTIONS,
    PALETTE_ID,
    PALETTE_KEY,
    SCOPE_TITLES,
    SCOPES,
    effective_key,
    key_caption,
)

if TYPE_CHECKING:
    from tbtriage.tui.state import HostApp

#: Column widths shared by every scope's table, so the keys line up down the screen.
KEY_CELLS, ACTION_CELLS = 10, 20


def help_tables(keymap: dict[str, str], ascii_only: bool = False) -> list[Table]:
    """One table per scope: key, action (the name to remap under config `[keys]`), what it does."""
    tables = []
    for scope in SCOPES:
        table = Table(
            title=SCOPE_TITLES[scope], title_justify="left", title_style="bold",
            box=box.ASCII if ascii_only else box.SIMPLE_HEAD, expand=True, show_edge=False,
        )  # fmt: skip
        table.add_column("key", width=KEY_CELLS, no_wrap=True, style="bold")
        table.add_column(Text("action ([keys] name)"), width=ACTION_CELLS, no_wrap=True)
        table.add_column("what it does", ratio=1)
        for action in (a for a in KEY_ACTIONS if a.scope == scope):
            where = "" if action.screens == EVERYWHERE else f" ({', '.join(sorted(action.screens - {'help'}))} screen)"
            table.add_row(key_caption(effective_key(action, keymap)), action.id, action.help + where)
        if scope == "app":
            table.add_row(key_caption(keymap.get(PALETTE_ID, PALETTE_KEY)), PALETTE_ID, "Open the command palette")
            table.add_row("tab", "", "Move to the next pane")
        if scope == "filter":  # what the runs' filter box accepts besides a regex
            for example, meaning in FILTER_SYNTAX:
                table.add_row("", Text(example), Text(meaning))
        tables.append(table)
    return tables


class HelpScreen(ModalScreen):
    SCREEN = "help"  # its name in the binding table's `screens`
    app: HostApp

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", show=True)]

    def compose(self) -> ComposeResult:
        self.tables = help_tables(self.app.keymap, self.app.ascii_only)
        with VerticalScroll(id="help-box"):
            yield Static(Group(*self.tables), id="help-table")

    def on_mount(self) -> None:
        if self.app.ascii_only:
            apply_ascii(self)
        frame = self.query_one("#help-box")
        frame.border_title = "Keys"
        frame.border_subtitle = Text(f"esc to close{self.app.separator}remap any action under [keys] in config.toml")
