"""The runs pane: one row per run, worst health first; `space` selects runs to overlay."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from tbtriage.tui.bindings import bindings
from tbtriage.tui.run_rows import ASCII_GLYPHS, GLYPHS, STATUS_COLOURS, RunRow, format_age
from tbtriage.tui.safe_text import plain

#: (key, header, width or None for the content's width). Health comes before the name so a narrow
#: pane (80×24) still shows glyph and score; long run names are cut with an ellipsis at RUN_CELLS so
#: step and liveness stay in view; the full name is in the chart legend and the diagnosis title.
#: The worst finding, the widest cell, comes last.
RUN_CELLS = 26
COLUMNS = (
    ("sel", " ", 1), ("status", " ", 1), ("health", "health", None), ("run", "run", RUN_CELLS),
    ("step", "step", None), ("live", "live", None), ("worst", "worst finding", None),
)  # fmt: skip

SWATCH, ASCII_SWATCH = "■", "#"
LIVE_MARK, ASCII_LIVE_MARK = "●", "*"


class RunName(Text):
    """The run column's cell: the name shown as plain text, and the run it names (what rows sort by)."""

    def __init__(self, run: str) -> None:
        super().__init__(plain(run), no_wrap=True, overflow="ellipsis")
        self.run = run


def _look(cell: Text) -> tuple:
    """What a cell shows: its text, base style and styled spans (Text's `==` ignores the base style)."""
    return (cell.plain, str(cell.style), tuple(cell.spans))


class RunTable(DataTable):
    """Rows are keyed by run name; the app owns selection, order and filtering."""

    BINDINGS = bindings("lists") + bindings("runs")

    class ToggleSelect(Message):
        def __init__(self, run: str) -> None:
            super().__init__()
            self.run = run

    class OpenRun(Message):
        def __init__(self, run: str) -> None:
            super().__init__()
            self.run = run

    class CycleSort(Message):
        pass

    def __init__(self, *, ascii_only: bool = False, **kwargs) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self.ascii_only = ascii_only
        # Run -> (what its row shows, how each cell looks): what `sync_rows` compares against.
        self._shown: dict[str, tuple[tuple, list[tuple]]] = {}

    def on_mount(self) -> None:
        for key, label, width in COLUMNS:
            self.add_column(label, key=key, width=width)

    @property
    def current_run(self) -> str | None:
        if self.row_count == 0:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value

    def sync_rows(
        self, rows: list[RunRow], swatches: dict[str, str], keep: str | None = None, restyle: bool = False
    ) -> None:
        """Make the table show `rows` in their order, changing only the cells that differ.

        `swatches` maps selected runs to their colour; the cursor stays on `keep`; `restyle` redraws
        every cell (the theme changed). Rows are updated in place and reordered with one sort, never
        rebuilt: a logdir of thousands of runs gets a verdict every few milliseconds.
        """
        variables = self.app.theme_variables
        glyphs = ASCII_GLYPHS if self.ascii_only else GLYPHS
        keep = keep if keep is not None else self.current_run
        wanted = {row.name for row in rows}
        # Moving rows moves the cursor through other runs; only where it ends up is news.
        with self.prevent(DataTable.RowHighlighted):
            for name in [name for name in self._shown if name not in wanted]:
                self.remove_row(name)
                del self._shown[name]
            for row in rows:
                swatch = swatches.get(row.name)
                shown = self._shown.get(row.name)
                # What the row shows: an age of 61.2 s and one of 61.9 s both read "1m".
                seen = (row.status, row.health, row.worst, row.last_step, format_age(row.age), row.live, swatch)
                if shown is not None and shown[0] == seen and not restyle:
                    continue
                cells = self._cells(row, swatch, glyphs, variables)
                looks = [_look(cell) for cell in cells]
                if shown is None:
                    self.add_row(*cells, key=row.name)
                else:
                    for (column, _, width), cell, look, old in zip(COLUMNS, cells, looks, shown[1]):
                        if look != old or restyle:
                            self.update_cell(row.name, column, cell, update_width=self._widens(column, width, cell))
                self._shown[row.name] = (seen, looks)
            order = [row.name for row in rows]
            if [row.key.value for row in self.ordered_rows] != order:
                rank = {name: index for index, name in enumerate(order)}
                self.sort("run", key=lambda cell: rank[cell.run])
            if keep is not None and keep in self.rows and self.current_run != keep:
                self.move_cursor(row=self.get_row_index(keep), animate=False)
        if self.row_count and self.current_run != keep:  # the kept run was filtered out
            self.post_message(
                DataTable.RowHighlighted(
                    self, self.cursor_row, self.coordinate_to_cell_key(self.cursor_coordinate).row_key
                )
            )

    def _widens(self, column: str, width: int | None, cell: Text) -> bool:
        """Whether `cell` is wider than its content-width column, which must then grow to fit it.

        Columns grow and never shrink while runs arrive: Textual re-measures every row of a column
        when a cell narrower than the column is updated with `update_width`, which is quadratic.
        """
        return width is None and cell.cell_len > self.columns[column].content_width

    def _cells(self, row: RunRow, swatch: str | None, glyphs: dict[str, str], variables: dict[str, str]) -> list:
        status_colour = variables.get(STATUS_COLOURS[row.status], "")
        sel = Text(ASCII_SWATCH if self.ascii_only else SWATCH, style=swatch) if swatch else Text(" ")
        live_mark = ASCII_LIVE_MARK if self.ascii_only else LIVE_MARK
        live = (
            Text(f"{live_mark} {format_age(row.age)}", style=variables.get("success", ""))
            if row.live
            else Text(format_age(row.age), style="dim")
        )
        return [
            sel,
            Text(glyphs[row.status], style=status_colour),
            Text(glyphs["pending"] if row.health is None else str(row.health), justify="right"),
            RunName(row.name),
            Text("-" if row.last_step is None else str(row.last_step), justify="right"),
            live,
            Text(row.worst, style=status_colour if row.worst else ""),
        ]

    # Actions (keys from the binding table) ---------------------------------------------------

    def action_toggle_select(self) -> None:
        if self.current_run is not None:
            self.post_message(self.ToggleSelect(self.current_run))

    def action_open_dashboard(self) -> None:
        if self.current_run is not None:
            self.post_message(self.OpenRun(self.current_run))

    def action_cycle_sort(self) -> None:
        self.post_message(self.CycleSort())

    def action_first(self) -> None:
        self.move_cursor(row=0)

    def action_last(self) -> None:
        self.move_cursor(row=max(self.row_count - 1, 0))
