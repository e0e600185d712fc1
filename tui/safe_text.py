"""Untrusted text (tag names, run names, text summaries) made safe to show in the app.

The rule lives in `analysis.text` (control, bidi and invisible format characters shown as their visible
escapes, so the user sees what is really in the file); this adds only what Rich needs: markup in a name
(`[bold red]x`) must show literally, so names go into `Text` objects, never into markup strings.
"""

from __future__ import annotations

from rich.text import Text

from tbtriage.analysis.text import clean


def plain(text: str) -> str:
    """One line with every unsafe character shown as its escape (`\\x1b`, `\\u202e`)."""
    return clean(text)


def multiline(text: str) -> str:
    """Like `plain`, but newlines and tabs keep their meaning (for Markdown and prose)."""
    return clean(text, keep_layout=True)


def literal(text: str, style: str = "") -> Text:
    """A Rich `Text` that shows `text` exactly, never parsed as markup."""
    return Text(plain(text), style=style, no_wrap=True, overflow="ellipsis")
