"""Untrusted text (tag names, run names, text summaries) made safe to show.

Names come from event files anyone could have written. Rich markup in them (`[bold red]x`)
must show literally, and control characters (an ESC starting a terminal sequence, a bell,
a carriage return that rewrites the line) must never reach the terminal: each becomes its
visible `\\xNN` escape, so the user sees what is really in the file.
"""

from __future__ import annotations

import re

from rich.text import Text

# C0 controls (except the layout ones Markdown needs, handled by `keep`), DEL and C1 controls.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_LAYOUT = "\n\t"


def _visible(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def plain(text: str) -> str:
    """One line with every control character shown as its `\\xNN` escape."""
    return _CONTROL.sub(_visible, str(text))


def multiline(text: str) -> str:
    """Like `plain`, but newlines and tabs keep their meaning (for Markdown and prose)."""
    return _CONTROL.sub(lambda m: m.group() if m.group() in _LAYOUT else _visible(m), str(text))


def literal(text: str, style: str = "") -> Text:
    """A Rich `Text` that shows `text` exactly, never parsed as markup."""
    return Text(plain(text), style=style, no_wrap=True, overflow="ellipsis")
