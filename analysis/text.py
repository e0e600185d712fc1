r"""Text for people and for the model, written one way: untrusted text made safe, numbers and steps spelled once.

Tag names, run names, text summaries and the model's own output are untrusted: anyone could have written
them. Some characters in them act instead of showing: ESC starts a terminal sequence (retitle the pane,
clear the screen), BEL rings, CR rewrites the line, a C1 CSI is an escape on its own, bidi overrides and
isolates reorder what follows (`loss` + U+202E + `gnp.exe` reads as `lossexe.png`), zero-width and other format
characters make two different tags look alike, line and paragraph separators break a line, and Unicode
tag characters carry text a reader cannot see but a model reads. `UNSAFE` matches all of them (Unicode
categories Cc, Cf, Zl and Zp); each view picks what happens to them:

    clean(text)       each shown as its visible escape (`\x1b`, `\u202e`): views for people, so they see
                      what is really in the file (terminal, Markdown, HTML, the app, `watch`)
    strip(text)       each dropped: the model's answer, where an escape would be noise
    one_line(text)    each a space, whitespace collapsed, cut to a length: the prompt

What goes to a file as data (`export --out`, the JSON report) stays exact; only views clean.
"""

from __future__ import annotations

import math
import re
import sys
from typing import Any

# Cc (C0, DEL, C1), Zl, Zp and every Cf character of Unicode 15.1 (tests/test_text.py checks this list
# against the running Python's `unicodedata`, so a newer Unicode cannot slip a new format character past).
_UNSAFE_CLASS = (
    "\x00-\x1f\x7f-\x9f"  # C0 controls, DEL, C1 controls
    "\xad"  # soft hyphen: invisible unless a line breaks there
    "\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"  # Arabic/Syriac format marks, ALM (a bidi mark)
    "\u180e"  # Mongolian vowel separator (invisible)
    "\u200b-\u200f"  # zero-width space/non-joiner/joiner, LRM, RLM
    "\u2028-\u202e"  # line and paragraph separators, bidi embeddings and overrides (LRE RLE PDF LRO RLO)
    "\u2060-\u2064\u2066-\u206f"  # word joiner, invisible operators, bidi isolates (LRI RLI FSI PDI), deprecated
    "\ufeff\ufff9-\ufffb"  # zero-width no-break space (BOM), interlinear annotation
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f"  # language tag and tag characters (invisible ASCII)
)
#: One character that must not reach a reader as itself.
UNSAFE = re.compile(f"[{_UNSAFE_CLASS}]")
_UNSAFE_RUN = re.compile(f"[{_UNSAFE_CLASS}]+")
_LAYOUT = frozenset("\n\t")

#: Significant digits a person is shown; the prompt asks for fewer to save tokens.
DIGITS = 4
#: Integer-valued numbers below this are written whole. Event files store float32, whose integers are exact
#: only up to 2**24 (16,777,216): above 1e7 an integer-looking value may be a rounded one, so it is written
#: with significant digits like any other instead of claiming digits the file does not hold.
WHOLE_BELOW = 1e7
#: Written where a number or a step is missing.
MISSING = "—"


def _escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def clean(text: Any, *, keep_layout: bool = False) -> str:
    r"""Untrusted text with every unsafe character shown as its escape (`\x1b`, `\u202e`).

    One line by default; `keep_layout` keeps newlines and tabs (prose, Markdown).
    """
    if keep_layout:
        return UNSAFE.sub(lambda m: m.group() if m.group() in _LAYOUT else _escape(m.group()), str(text))
    return UNSAFE.sub(lambda m: _escape(m.group()), str(text))


def strip(text: Any, *, keep_layout: bool = True) -> str:
    """Untrusted text with every unsafe character dropped (newlines and tabs kept unless `keep_layout=False`)."""
    if keep_layout:
        return UNSAFE.sub(lambda m: m.group() if m.group() in _LAYOUT else "", str(text))
    return UNSAFE.sub("", str(text))


def one_line(text: Any, limit: int | None = None) -> str:
    """Untrusted text as one short line: unsafe characters become spaces, runs of whitespace one space,
    and a line longer than `limit` is cut with `…`."""
    line = " ".join(_UNSAFE_RUN.sub(" ", str(text)).split())
    if limit is None or len(line) <= limit:
        return line
    return line[: limit - 1] + "…"


def _as_float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def number(value: Any, digits: int = DIGITS) -> str:
    """A number as a person quotes it: integers whole (below `WHOLE_BELOW`), others to `digits`
    significant digits (scientific when tiny or large), `NaN`, `+Inf`, `-Inf`, and `—` when missing.

    Anything that is not a number comes back `clean`ed.
    """
    if value is None:
        return MISSING
    np = sys.modules.get("numpy")  # not imported yet: no value is one of its scalars (the app's first screen)
    if isinstance(value, bool) or np is not None and isinstance(value, np.bool_):
        return "true" if value else "false"
    if isinstance(value, int) or np is not None and isinstance(value, np.integer):
        return str(int(value))
    v = _as_float(value)
    if v is None:
        return clean(value)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v.is_integer() and abs(v) < WHOLE_BELOW:
        return str(int(v))
    return f"{v:.{digits}g}"


#: Axis-tick suffixes, largest first: thousands, millions, billions, trillions.
_TICK_SUFFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def tick(value: Any) -> str:
    """A number on a chart axis, short: `250`, `2k`, `1.5M`, `0.3` (3 significant digits from a thousand up)."""
    v = _as_float(value)
    if v is None or not math.isfinite(v):
        return number(value)
    for scale, suffix in _TICK_SUFFIXES:
        if abs(v) >= scale * 0.9995:  # 999,999 is `1M`, not `1e+03k`
            return f"{v / scale:.3g}{suffix}"
    return number(round(v, 12))  # 0.30000000000000004 from tick arithmetic is 0.3


def step(value: Any) -> str:
    """A training step: always whole, never rounded (a step is an address, not a measurement)."""
    if value is None:
        return MISSING
    try:
        return str(int(value))
    except (TypeError, ValueError, OverflowError):
        return clean(value)


def step_span(start: Any, end: Any = None) -> str:
    """`600`, or `600–900` when a finding has an end step after its start."""
    if end is None or end == start:
        return step(start)
    return f"{step(start)}–{step(end)}"


def duration(seconds: float) -> str:
    """A span of time in the largest unit that keeps it readable: `40 s`, `17 min`, `5 h`, `3 days`, `4.1 years`
    (no "2175576 min" for a run silent since 2022)."""
    s = max(float(seconds), 0.0)
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 48 * 3600:
        return f"{s / 3600:.0f} h"
    days = s / 86400
    return f"{days:.0f} days" if days < 730 else f"{days / 365.25:.1f} years"
