"""A Markdown document drawn by one widget, line by line: the Diagnosis pane's rule-based findings.

Textual's `Markdown` widget mounts a widget per block: a run's diagnosis made ~70 of the main screen's ~107 widgets.
Each cursor move re-filled or re-mounted them, each mount styled them anew, and each change laid out the whole
screen again (25-45 ms a time here, the more the widgets), which a key pressed during a warm reopen's first second
waited for (100-200 ms). Here the document is parsed once per change (markdown-it, as Textual's widget parses it),
wrapped once per width into lines, and drawn as the widget's lines: one widget to style and lay out, whatever the
document holds, and no layout at all when a new document is as tall as the last.

It draws the blocks a report is made of as Textual's widget draws them: the same margins (a heading's, the blank line
after a paragraph or a list, nested lists tight), bullets and right-aligned numbers with wrapped lines hanging under
their text, and the same inline styles (bold, italic, strike, code spans, theme-coloured headings). Code blocks are
shown as written, cropped; a table as padded columns; a quote behind a bar; raw HTML as text. Nothing in the text is
read as Rich or Textual markup: its words become plain text with styles laid over them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget

if TYPE_CHECKING:
    from rich.console import Console
    from textual.geometry import Size
    from textual.selection import Selection

#: A run of inline text and the component classes that style it ("strong", "code", ...).
Run = tuple[str, tuple[str, ...]]

#: Unordered lists' bullets by how many unordered items enclose them (Textual's `Markdown.BULLETS`).
BULLETS = ("• ", "▪ ", "‣ ", "⭑ ", "◦ ")
#: Inline styles, as markdown-it opens them, and the component class each one takes.
INLINE_STYLES = {"strong_open": "strong", "em_open": "em", "s_open": "strike", "link_open": "link"}
#: A one-line note with nothing Markdown would read in it ("Analysing this run…"): drawn without the parser, so the
#: first frame needs none.
PLAIN = re.compile(r"[^\W\d_][^\n\\`*_\[\]<>&|~#!=+-]*")


@dataclass
class Block:
    """One block of the document: `kind` is "heading", "paragraph", "list", "quote", "code", "rule" or "table"."""

    kind: str
    runs: list[Run] = field(default_factory=list)  # a heading's or paragraph's words
    level: int = 0  # a heading's level
    ordered: bool = False  # a list's numbering, from `start`
    start: int = 1
    items: list[list[Block]] = field(default_factory=list)  # a list's items, a quote's blocks (one item)
    code: str = ""  # a code block's text
    rows: list[list[list[Run]]] = field(default_factory=list)  # a table's rows of cells, the header first


def parse(markdown: str) -> list[Block]:
    """The document's blocks."""
    text = markdown.strip()
    if not text:
        return []
    if PLAIN.fullmatch(text):
        return [Block("paragraph", [(re.sub(r"\s+", " ", text), ())])]
    blocks, _ = _blocks(_parser().parse(markdown), 0, None)
    return blocks


@functools.cache
def _parser() -> Any:
    from markdown_it import MarkdownIt  # not on the way to the first frame (`tui.warm_up` imports it)

    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _blocks(tokens: list[Any], i: int, until: str | None) -> tuple[list[Block], int]:
    """The blocks from `tokens[i]` up to the token that closes them (`until`), and the index after it."""
    blocks: list[Block] = []
    while i < len(tokens):
        token = tokens[i]
        kind = token.type
        if kind == until:
            return blocks, i + 1
        if kind == "heading_open":
            blocks.append(Block("heading", _runs(tokens[i + 1]), level=int(token.tag[1:])))
            i += 3
        elif kind == "paragraph_open":
            blocks.append(Block("paragraph", _runs(tokens[i + 1])))
            i += 3
        elif kind in ("bullet_list_open", "ordered_list_open"):
            ordered = kind == "ordered_list_open"
            block = Block("list", ordered=ordered, start=int((token.attrs or {}).get("start", 1)))
            close = kind.replace("_open", "_close")
            i += 1
            while tokens[i].type != close:  # list items
                item, i = _blocks(tokens, i + 1, "list_item_close")
                block.items.append(item)
            blocks.append(block)
            i += 1
        elif kind == "blockquote_open":
            inner, i = _blocks(tokens, i + 1, "blockquote_close")
            blocks.append(Block("quote", items=[inner]))
        elif kind in ("fence", "code_block"):
            blocks.append(Block("code", code=token.content.rstrip("\n")))
            i += 1
        elif kind == "hr":
            blocks.append(Block("rule"))
            i += 1
        elif kind == "html_block":
            blocks.append(Block("paragraph", [(token.content.strip(), ())]))
            i += 1
        elif kind == "table_open":
            block = Block("table")
            i += 1
            while tokens[i].type != "table_close":
                if tokens[i].type == "tr_open":
                    block.rows.append([])
                elif tokens[i].type == "inline":
                    block.rows[-1].append(_runs(tokens[i]))
                i += 1
            blocks.append(block)
            i += 1
        else:  # a closing token of an enclosing block, or one this does not draw
            i += 1
    return blocks, i


def _runs(inline: Any) -> list[Run]:
    """An inline token's words and their styles, whitespace collapsed as Textual's widget does."""
    runs: list[Run] = []
    styles: list[str] = []
    for child in inline.children or ():
        kind = child.type
        if kind in ("text", "html_inline"):
            runs.append((re.sub(r"\s+", " ", child.content), tuple(styles)))
        elif kind == "softbreak":
            runs.append((" ", tuple(styles)))
        elif kind == "hardbreak":
            runs.append(("\n", tuple(styles)))
        elif kind == "code_inline":
            runs.append((child.content, (*styles, "code")))
        elif kind == "image":
            runs.append((f"🖼  ({child.content})" if child.content else "🖼  ", tuple(styles)))
        elif kind in INLINE_STYLES:
            styles.append(INLINE_STYLES[kind])
        elif kind.endswith("_close") and styles:
            styles.pop()
    return runs


# ---- layout ------------------------------------------------------------------------------------------


#: (top, bottom) margins of a block at the document's top level and nested in a list item or quote (Textual's CSS:
#: `Markdown > MarkdownParagraph` alone has a margin, nested lists have none); adjacent margins collapse.
HEADING_MARGINS = {1: (2, 1), 2: (2, 1)}
MARGINS = {"paragraph": ((0, 1), (0, 0)), "list": ((0, 1), (0, 0)), "quote": ((1, 1), (1, 1))}
DEFAULT_MARGINS = ((1, 1), (1, 1))


class Layout:
    """Lays blocks out in lines of a given width: `style(name)` gives a component's style ("strong", "h2", ...)."""

    def __init__(self, console: Console, style: Callable[[str], Style]) -> None:
        self.console = console
        self.style = style
        self._combined: dict[tuple[str, ...], Style] = {}

    def lines(self, blocks: Sequence[Block], width: int, nested: bool = False, bullets: int = 0) -> list[Text]:
        """`blocks` in lines at most `width` cells wide, margins collapsed; `bullets`: unordered items around them."""
        out: list[Text] = []
        below: int | None = None
        for block in blocks:
            top, bottom = self._margins(block, nested)
            out += [Text() for _ in range(top if below is None else max(below, top))]
            out += self._block(block, max(width, 1), bullets)
            below = bottom
        out += [Text() for _ in range(below or 0)]
        return out

    def _margins(self, block: Block, nested: bool) -> tuple[int, int]:
        if block.kind == "heading":
            return HEADING_MARGINS.get(block.level, (1, 1))
        return MARGINS.get(block.kind, DEFAULT_MARGINS)[nested]

    def _block(self, block: Block, width: int, bullets: int) -> list[Text]:
        if block.kind == "heading":
            return self._wrap(block.runs, width, self.style(f"h{min(block.level, 6)}"))
        if block.kind == "paragraph":
            return self._wrap(block.runs, width)
        if block.kind == "list":
            return self._list(block, width, bullets)
        if block.kind == "quote":
            bar = Text("▌ ", self.style("quote-bar"))
            inner = self.lines(block.items[0], width - 2, nested=True, bullets=bullets)
            return [Text.assemble(bar.copy(), line) for line in inner]
        if block.kind == "code":
            fence = self.style("fence")
            lines = ["", *block.code.split("\n"), ""]
            return [_fit(Text("  " + line.expandtabs(4), fence), width, fence) for line in lines]
        if block.kind == "rule":
            return [Text("─" * width, self.style("rule"))]
        return self._table(block, width)

    def _list(self, block: Block, width: int, bullets: int) -> list[Text]:
        if block.ordered:
            numbers = range(block.start, block.start + len(block.items))
            size = max(len(f"{n}. ") for n in numbers) + 1
            marks = [f"{n}. ".rjust(size) for n in numbers]
        else:
            marks = [BULLETS[bullets % len(BULLETS)]] * len(block.items)
        inner_bullets = bullets + (not block.ordered)
        out: list[Text] = []
        for mark, item in zip(marks, block.items):
            lines = self.lines(item, width - len(mark), nested=True, bullets=inner_bullets) or [Text()]
            pad = " " * len(mark)
            out.append(Text.assemble((mark, self.style("bullet")), lines[0]))
            out += [Text.assemble(pad, line) for line in lines[1:]]
        return out

    def _table(self, block: Block, width: int) -> list[Text]:
        cells = [[self._text(cell) for cell in row] for row in block.rows]
        columns = max((len(row) for row in cells), default=0)
        widths = [max((row[c].cell_len for row in cells if c < len(row)), default=0) for c in range(columns)]
        out = []
        for r, row in enumerate(cells):
            line = _fit(Text(" ").join(_fit(cell, w) for cell, w in zip(row, widths)), width)
            if r == 0:
                line.stylize(self.style("table-header"))
            out.append(line)
        return out

    def _text(self, runs: Iterable[Run], base: Style | None = None) -> Text:
        text = Text(style=base or "", end="")
        for words, names in runs:
            text.append(words, self._styled(names))
        return text

    def _styled(self, names: tuple[str, ...]) -> Style | None:
        if not names:
            return None
        if names not in self._combined:
            self._combined[names] = Style.combine(self.style(name) for name in names)
        return self._combined[names]

    def _wrap(self, runs: list[Run], width: int, base: Style | None = None) -> list[Text]:
        return list(self._text(runs, base).wrap(self.console, width, overflow="fold"))


def _fit(text: Text, width: int, style: Style | None = None) -> Text:
    """`text` cut or padded to exactly `width` cells (with `style` over it all, padding included)."""
    text = text.copy()
    text.truncate(width, overflow="crop", pad=True)
    if style is not None:
        text.stylize(style)
    return text


# ---- the widget --------------------------------------------------------------------------------------

#: What the component classes style (`markdown-view--NAME`).
COMPONENTS = (
    *(f"h{level}" for level in range(1, 7)),
    *("strong", "em", "strike", "link", "code", "bullet", "fence", "quote-bar", "rule", "table-header"),
)


class MarkdownView(Widget):
    """A Markdown document in one widget: `update` shows another, `source` is the one shown."""

    COMPONENT_CLASSES = {f"markdown-view--{name}" for name in COMPONENTS}

    DEFAULT_CSS = """
    MarkdownView {
        width: 1fr;
        height: auto;
        padding: 0 2;
        color: $foreground;
        HEADINGS
        & > .markdown-view--strong { text-style: bold; }
        & > .markdown-view--em { text-style: italic; }
        & > .markdown-view--strike { text-style: strike; }
        & > .markdown-view--link { text-style: underline; }
        & > .markdown-view--bullet { color: $text-primary; }
        &:light > .markdown-view--bullet { color: $text-secondary; }
        &:dark > .markdown-view--code { background: $warning 10%; color: $text-warning 95%; }
        &:light > .markdown-view--code { background: $error 5%; color: $text-error 95%; }
        &:ansi > .markdown-view--code { background: ansi_default; }
        & > .markdown-view--fence { color: rgb(210,210,210); background: black 10%; }
        &:light > .markdown-view--fence { background: white 30%; }
        & > .markdown-view--quote-bar { color: $text-primary 50%; }
        & > .markdown-view--rule { color: $secondary; }
        & > .markdown-view--table-header { color: $primary; text-style: bold; }
    }
    """.replace(
        "HEADINGS",
        "\n".join(  # each level in the theme's Markdown colours, as Textual's Markdown headings
            f"& > .markdown-view--h{n} {{ color: $markdown-h{n}-color; background: $markdown-h{n}-background; "
            f"text-style: $markdown-h{n}-text-style; }}"
            for n in range(1, 7)
        ),
    )

    def __init__(self, markdown: str = "", *, name: str | None = None, id: str | None = None) -> None:
        super().__init__(name=name, id=id)
        self._source = markdown
        self._blocks: list[Block] | None = None  # parsed when first drawn
        self._strips: tuple[int, list[Strip]] | None = None  # the lines drawn at a width

    @property
    def source(self) -> str:
        """The Markdown shown."""
        return self._source

    def update(self, markdown: str) -> None:
        """Show `markdown`. A document as tall as the one shown is only redrawn: the screen is laid out again only
        when the height changes."""
        if markdown == self._source:
            return
        shown = self._strips
        self._source, self._blocks, self._strips = markdown, None, None
        if shown is not None and shown[0] == self.size.width and len(self._lines(shown[0])) == len(shown[1]):
            self.refresh()
        else:
            self.refresh(layout=True)

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return container.width

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines(width))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips = None  # another theme, or light and dark swapped: drawn again in its colours

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        lines = self._lines(width)
        if y >= len(lines):
            return Strip.blank(width, self.rich_style)
        line = lines[y].apply_offsets(0, y)  # each cell knows its offset: the mouse selects text by it
        selection = self.text_selection
        if selection is not None and (span := selection.get_span(y)) is not None:  # text selected with the mouse
            start, end = span
            before, chosen, after = line.divide([start, width if end == -1 else end, width])
            style = self.screen.get_component_rich_style("screen--selection")
            line = Strip.join([before, Strip(Segment.apply_style(chosen, post_style=style)), after])
        return line

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        """The text selected with the mouse, as drawn (bullets and numbers included)."""
        return selection.extract("\n".join(iter_text(self))), "\n"

    def _lines(self, width: int) -> list[Strip]:
        if self._strips is None or self._strips[0] != width:
            if self._blocks is None:
                self._blocks = parse(self._source)
            console, base = self.app.console, self.rich_style
            texts = Layout(console, self._component_style).lines(self._blocks, width) if width > 0 else []
            strips = [
                Strip(line.render(console, end="")).crop_extend(0, width, base).apply_style(base) for line in texts
            ]
            self._strips = (width, strips)
        return self._strips[1]

    def _component_style(self, name: str) -> Style:
        return self.get_visual_style(f"markdown-view--{name}").rich_style


def iter_text(view: MarkdownView) -> Iterator[str]:
    """The lines `view` draws at its width, as plain text (what a mouse selection copies)."""
    for strip in view._lines(view.size.width):
        yield strip.text.rstrip()
