"""The runs pane: one row per run, worst health first; `space` selects runs to overlay.

A virtual table: it holds the rows (`RunRow`s) in the order shown and draws only the lines on the
screen (Textual's Line API), so a change costs the same for ten runs as for ten thousand. Textual's
DataTable, which this replaced, recomputes every row's offset on each change, and a logdir of
thousands of runs changes several times a second while it loads. It looks and keys like a DataTable
with a row cursor: the same component classes, styles, cell padding and keys.
"""

from __future__ import annotations

import bisect
from typing import ClassVar

from rich.cells import cell_len
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Region, Size, Spacing
from textual.message import Message
from textual.renderables.styled import Styled
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tbtriage.tui.bindings import bindings
from tbtriage.tui.run_rows import (
    ASCII_GLYPHS,
    GLYPHS,
    LIVE_SECONDS,
    STATUS_COLOURS,
    RunRow,
    age_of,
    format_age,
    is_live,
)
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

#: Blank cells on each side of a cell's content, as in a DataTable.
CELL_PADDING = 1
#: Lines above the rows that do not scroll: the header.
HEADER_LINES = 1
#: Rendered lines kept; a screenful is ~50, so scrolling back and forth over a few pages redraws nothing.
LINE_CACHE = 400
#: Drawn cells kept: a screenful has ~350, of which names and steps differ from row to row.
CELL_CACHE = 4000


#: The ages `format_age` writes in one unit each, split where a run stops being live: (from, to) seconds, live.
_AGE_SPANS = (
    (0.0, 60.0, True), (60.0, LIVE_SECONDS, True),
    (LIVE_SECONDS, 3600.0, False), (3600.0, 86400.0, False), (86400.0, float("inf"), False),
)  # fmt: skip


def widest_ages(walls: list[float], now: float) -> tuple[int, int]:
    """The cells of the widest age `format_age` writes at `now` for the sorted wall times `walls`: (of the live
    runs, of the others). Within a unit the text grows with the age, so each is the oldest age of one of the
    units; a bisection finds it, whatever the number of runs."""
    widest = [0, 0]
    for low, high, live in _AGE_SPANS:
        # The walls whose age is in [low, high) are those in (now - high, now - low]; with low 0, any later one
        # too (a clock behind the run's reads age 0).
        at = bisect.bisect_right(walls, now - high)
        while at < len(walls) and max(now - walls[at], 0.0) >= high:  # rounding at the bound
            at += 1
        if at == len(walls):
            continue
        age = max(now - walls[at], 0.0)
        if age < low:
            continue
        widest[not live] = max(widest[not live], len(format_age(age)))
    return widest[0], widest[1]


class RunTable(ScrollView, can_focus=True):
    """Rows are run names in the order the app gives; the app owns selection, order and filtering."""

    DEFAULT_CSS = """
    RunTable {
        background: $surface;
        color: $foreground;
        height: auto;
        max-height: 100%;

        &:focus {
            background-tint: $foreground 5%;
            & > .datatable--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .datatable--header {
                background-tint: $foreground 5%;
            }
        }
        & > .datatable--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .datatable--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .datatable--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        & > .datatable--hover {
            background: $block-hover-background;
        }
    }
    """
    # The DataTable's names, so a stylesheet written for the table still applies.
    COMPONENT_CLASSES: ClassVar[set[str]] = {"datatable--cursor", "datatable--header", "datatable--hover"}

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("ctrl+home", "first", "Top", show=False),
        Binding("ctrl+end", "last", "Bottom", show=False),
        Binding("home", "scroll_home", "Home", show=False),
        Binding("end", "scroll_end", "End", show=False),
        *bindings("lists"),
        # `enter` first, so the footer shows Dashboard before Select as it did when this was a DataTable
        # (whose own bindings begin with `enter`).
        *sorted(bindings("runs"), key=lambda binding: getattr(binding, "key", "") != "enter"),
    ]

    class Highlighted(Message):
        """The cursor is on `run` now (moved by a key, a click, or because the rows changed under it)."""

        def __init__(self, table: RunTable, run: str) -> None:
            super().__init__()
            self.table = table
            self.run = run

        @property
        def control(self) -> RunTable:
            return self.table

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
        super().__init__(**kwargs)
        self.ascii_only = ascii_only
        self.cursor_row = 0
        self._rows: list[RunRow] = []
        self._swatches: dict[str, str] = {}  # selected run -> its colour
        # Content widths of the columns sized to fit: they grow and never shrink while runs arrive.
        self._widths = {key: (width if width is not None else cell_len(label)) for key, label, width in COLUMNS}
        self._looks = 0  # bumped when the theme changes: every cached line is stale
        self._lines: LRUCache[tuple, Strip] = LRUCache(LINE_CACHE)
        self._cells_drawn: LRUCache[tuple, list[Segment]] = LRUCache(CELL_CACHE)
        self._hover: int | None = None  # the row under the mouse
        self._now = 0.0  # the clock the rows' ages are drawn at (`sync_rows`)

    # What the table shows ------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self._rows)

    @property
    def names(self) -> list[str]:
        """The runs, top to bottom as shown."""
        return [row.name for row in self._rows]

    @property
    def current_run(self) -> str | None:
        return self._rows[self.cursor_row].name if self._rows else None

    def index_of(self, run: str) -> int | None:
        return next((index for index, row in enumerate(self._rows) if row.name == run), None)

    def cells_at(self, index: int) -> list[Text]:
        """The cells of the row at `index`, as drawn."""
        row = self._rows[index]
        return self._cells(row, self._swatches.get(row.name))

    def sync_rows(
        self,
        rows: list[RunRow],
        swatches: dict[str, str],
        keep: str | None = None,
        restyle: bool = False,
        *,
        now: float,
        fresh: list[RunRow] | None = None,
        walls: list[float] | None = None,
    ) -> None:
        """Show `rows` in their order, the cursor on `keep` (default: the run it is on), their ages at `now`.

        `swatches` maps selected runs to their colour; `restyle` redraws every line (the theme changed). The
        columns grow to fit the rows: `fresh`, the rows not shown before, and `walls`, every row's wall time,
        sorted, are enough to measure them (None: measure every row). Only the lines on the screen are drawn, so
        with `fresh` this costs little more than finding the cursor's run: a logdir of thousands of runs gets a
        batch of verdicts several times a second.
        """
        keep = keep if keep is not None else self.current_run
        previous = self._rows[self.cursor_row] if self._rows else None
        self._rows = rows
        self._swatches = swatches
        self._now = now
        if restyle:
            self._looks += 1
        if fresh is None or walls is None:
            self._grow_columns(rows, sorted(row.wall for row in rows if row.wall is not None))
        else:
            self._grow_columns(fresh, walls)
        self.virtual_size = Size(self._table_width(), len(rows) + HEADER_LINES)
        kept = self._index_in(rows, keep, previous)
        if kept is not None:
            moved = kept != self.cursor_row
            self.cursor_row = kept
            if moved:  # the user's own scrolling stays while the run under the cursor keeps its row
                self._scroll_cursor_into_view()
        else:
            self.cursor_row = min(self.cursor_row, max(len(rows) - 1, 0))
        self.refresh()
        if rows and self.current_run != keep:  # the kept run was filtered out, or the first rows arrived
            self.post_message(self.Highlighted(self, rows[self.cursor_row].name))

    def _index_in(self, rows: list[RunRow], run: str | None, previous: RunRow | None) -> int | None:
        """Where run `run` is in `rows`. Its row as the cursor was on it (`previous`) is most often still the same
        object, found where it was or by `list.index`, which compares in C; else a search by name."""
        if run is None:
            return None
        if previous is not None and previous.name == run:
            if self.cursor_row < len(rows) and rows[self.cursor_row] is previous:
                return self.cursor_row
            try:
                return rows.index(previous)
            except ValueError:
                pass
        return next((index for index, row in enumerate(rows) if row.name == run), None)

    def _grow_columns(self, rows: list[RunRow], walls: list[float]) -> None:
        """Widen the content-sized columns to the widest cell of `rows` and of the ages of `walls` (what `_cells`
        draws, measured without drawing each row's)."""
        widths = self._widths
        scores = {row.health for row in rows}
        health = max((1 if score is None else len(str(score)) for score in scores), default=0)
        steps = [row.last_step for row in rows if row.last_step is not None]
        step = max((len(str(v)) for v in (min(steps), max(steps))), default=0) if steps else 0
        if len(steps) < len(rows):
            step = max(step, 1)  # "-"
        live, idle = widest_ages(walls, self._now)
        live = max(live + 2 if live else 0, idle, 1 if any(row.wall is None for row in rows) else 0)  # "-"
        worst = max((cell_len(label) for label in {row.worst for row in rows}), default=0)
        for key, width in (("health", health), ("step", step), ("live", live), ("worst", worst)):
            widths[key] = max(widths[key], width)

    def _render_widths(self) -> list[int]:
        return [self._widths[key] + 2 * CELL_PADDING for key, _, _ in COLUMNS]

    def _table_width(self) -> int:
        return sum(self._render_widths())

    def _cells(self, row: RunRow, swatch: str | None) -> list[Text]:
        variables = self.app.theme_variables
        glyphs = ASCII_GLYPHS if self.ascii_only else GLYPHS
        status_colour = variables.get(STATUS_COLOURS[row.status], "")
        sel = Text(ASCII_SWATCH if self.ascii_only else SWATCH, style=swatch) if swatch else Text(" ")
        live_mark = ASCII_LIVE_MARK if self.ascii_only else LIVE_MARK
        age = age_of(row, self._now)
        live = (
            Text(f"{live_mark} {format_age(age)}", style=variables.get("success", ""))
            if is_live(age)
            else Text(format_age(age), style="dim")
        )
        return [
            sel,
            Text(glyphs[row.status], style=status_colour),
            Text(glyphs["pending"] if row.health is None else str(row.health), justify="right"),
            Text(plain(row.name), no_wrap=True, overflow="ellipsis"),
            Text("-" if row.last_step is None else str(row.last_step), justify="right"),
            live,
            Text(row.worst, style=status_colour if row.worst else ""),
        ]

    # Drawing (the Line API) ------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        """Line `y` of the widget: the header on top, then the rows scrolled to."""
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        index = -1 if y < HEADER_LINES else y - HEADER_LINES + scroll_y
        if index >= len(self._rows):
            return Strip.blank(width, self.rich_style)
        base_style = self.rich_style
        cursor_style = self.get_component_rich_style("datatable--cursor")
        header_style = self.get_component_styles("datatable--header").rich_style
        hover_style = self.get_component_rich_style("datatable--hover")
        widths = tuple(self._render_widths())
        if index < 0:
            key: tuple = ("header", widths, header_style)
        else:
            row = self._rows[index]
            swatch = self._swatches.get(row.name)
            age = age_of(row, self._now)
            look = (row.status, row.health, row.worst, row.last_step, format_age(age), is_live(age), swatch)
            key = (index, row.name, look, index == self.cursor_row, index == self._hover, widths)
        key = (*key, width, scroll_x, base_style, cursor_style, hover_style, self._looks)
        strip = self._lines.get(key)
        if strip is None:
            segments = self._header_segments(widths, header_style) if index < 0 else self._row_segments(index, widths)
            strip = Strip(segments).crop(scroll_x, scroll_x + width).adjust_cell_length(width, base_style).simplify()
            self._lines[key] = strip
        return strip

    def _header_segments(self, widths: tuple[int, ...], header_style: Style) -> list[Segment]:
        labels = [Text.from_markup(label) for _, label, _ in COLUMNS]
        return self._line(-1, labels, widths, header_style, Style(), Style(), header_style)

    def _row_segments(self, index: int, widths: tuple[int, ...]) -> list[Segment]:
        """A row as a DataTable with a row cursor draws it: cursor and hover styles over the row's cells."""
        row = self._rows[index]
        component = Style()
        if index == self._hover:
            component += self.get_component_rich_style("datatable--hover")
        if index == self.cursor_row:
            component += self.get_component_rich_style("datatable--cursor")
        # The cursor's colour wins over a cell's own; its background yields to a cell's (a DataTable's defaults).
        post = Style.from_color(color=component.color)
        base_style = self.rich_style
        return self._line(index, self._cells(row, self._swatches.get(row.name)), widths, base_style, component, post)

    def _line(
        self,
        index: int,
        cells: list[Text],
        widths: tuple[int, ...],
        row_style: Style,
        component: Style,
        post: Style,
        extend: Style | None = None,
    ) -> list[Segment]:
        """The cells padded to their columns' widths, then the row's style out to the widget's edge."""
        segments: list[Segment] = []
        for column, (cell, width) in enumerate(zip(cells, widths)):
            meta = Style.from_meta({"row": index, "column": column})  # where a click lands
            for text, style, _ in self._cell(cell, width, row_style + component, post):
                segments.append(Segment(text, meta if style is None else style + meta))
        remaining = max(0, self.size.width - sum(widths))
        fill = (row_style + component if extend is None else extend) + Style.from_meta(
            {"row": index, "column": 0, "out_of_bounds": True}
        )
        segments.append(Segment(" " * remaining, fill))
        return segments

    def _cell(self, cell: Text, width: int, pre: Style, post: Style) -> list[Segment]:
        """`cell` padded to `width` as a DataTable draws it; cached, since most cells repeat from row to row
        (a glyph, a score, an age) and drawing them through Rich is most of a line's time."""
        key = (cell.plain, str(cell.style), tuple(cell.spans), cell.justify, cell.overflow, width, pre, post)
        segments = self._cells_drawn.get(key)
        if segments is None:
            options = self.app.console_options.update_dimensions(width, 1).update(no_wrap=True)
            padded = Styled(Padding(cell, (0, CELL_PADDING)), pre_style=pre, post_style=post)
            segments = self.app.console.render_lines(padded, options)[0]
            self._cells_drawn[key] = segments
        return segments

    def _refresh_row(self, index: int) -> None:
        self.refresh_line(index + HEADER_LINES)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._lines.clear()
        self._cells_drawn.clear()

    # The cursor ------------------------------------------------------------------------------

    def move_cursor(self, row: int, *, scroll: bool = True) -> None:
        """Put the cursor on row `row` (kept within the rows) and say which run it is on now."""
        if not self._rows:
            return
        row = min(max(row, 0), len(self._rows) - 1)
        old, self.cursor_row = self.cursor_row, row
        if old != row:
            self._refresh_row(old)
            self._refresh_row(row)
            self.post_message(self.Highlighted(self, self._rows[row].name))
        if scroll:
            self._scroll_cursor_into_view()

    def _scroll_cursor_into_view(self) -> None:
        region = Region(int(self.scroll_x), self.cursor_row + HEADER_LINES, self._table_width(), 1)
        self.scroll_to_region(region, animate=False, spacing=Spacing(HEADER_LINES, 0, 0, 0), force=True)

    def _page_rows(self) -> int:
        return max(self.scrollable_content_region.height - HEADER_LINES, 1)

    def on_click(self, event: events.Click) -> None:
        row = event.style.meta.get("row")
        if isinstance(row, int) and row >= 0:
            self.move_cursor(row)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        row = event.style.meta.get("row")
        self._set_hover(row if isinstance(row, int) and row >= 0 else None)

    def on_leave(self, event: events.Leave) -> None:
        self._set_hover(None)

    def _set_hover(self, row: int | None) -> None:
        if row != self._hover:
            for old in (self._hover, row):
                if old is not None:
                    self._refresh_row(old)
            self._hover = row

    # Actions (keys from the binding table) ---------------------------------------------------

    def action_cursor_up(self) -> None:
        self._set_hover(None)
        self.move_cursor(self.cursor_row - 1)

    def action_cursor_down(self) -> None:
        self._set_hover(None)
        self.move_cursor(self.cursor_row + 1)

    def action_page_up(self) -> None:
        self.scroll_relative(y=-self._page_rows(), animate=False, force=True)
        self.move_cursor(self.cursor_row - self._page_rows(), scroll=False)

    def action_page_down(self) -> None:
        self.scroll_relative(y=self._page_rows(), animate=False, force=True)
        self.move_cursor(self.cursor_row + self._page_rows(), scroll=False)

    def action_scroll_home(self) -> None:
        self.scroll_x = 0  # as in a DataTable with a row cursor: home and end scroll sideways

    def action_scroll_end(self) -> None:
        self.scroll_x = self.max_scroll_x

    def action_toggle_select(self) -> None:
        if self.current_run is not None:
            self.post_message(self.ToggleSelect(self.current_run))

    def action_open_dashboard(self) -> None:
        if self.current_run is not None:
            self.post_message(self.OpenRun(self.current_run))

    def action_cycle_sort(self) -> None:
        self.post_message(self.CycleSort())

    def action_first(self) -> None:
        self.move_cursor(0)

    def action_last(self) -> None:
        self.move_cursor(len(self._rows) - 1)
