"""`--ascii`: printable ASCII only, for terminals without braille, block or box-drawing glyphs.

Borders switch to Textual's `ascii` border through the `-ascii` class on each screen (see
app.tcss); charts, glyphs and shades pick their ASCII sets where they are drawn; this module
covers the two places Textual itself draws glyphs: scrollbar thumbs and footer key captions.
"""

from __future__ import annotations

from textual.screen import Screen
from textual.scrollbar import ScrollBarRender

ASCII_CLASS = "-ascii"


class AsciiScrollBarRender(ScrollBarRender):
    """Thumbs drawn with colour alone: no partial-block glyphs at their ends."""

    VERTICAL_BARS = [" "] * 8
    HORIZONTAL_BARS = [" "] * 8


def apply_ascii(screen: Screen) -> None:
    """Mark `screen` for ASCII borders and give its scrollable widgets glyph-free scrollbars."""
    screen.add_class(ASCII_CLASS)
    for widget in screen.query("*"):
        if widget.is_scrollable:
            # Textual declares `renderer` a ClassVar, but an instance attribute is how one bar gets its own.
            widget.vertical_scrollbar.renderer = AsciiScrollBarRender  # type: ignore[misc]
            widget.horizontal_scrollbar.renderer = AsciiScrollBarRender  # type: ignore[misc]
