"""The `/` filter of the lists: a case-insensitive regex, forgiving while it is being typed; for the runs, also
values (`val/acc>0.9`, `top 10 by loss`: `analysis.run_filter`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from tbtriage.analysis.run_filter import RunScalars

T = TypeVar("T")


def regex_filter(items: list[T], pattern: str, name: Callable[[T], str] = str) -> tuple[list[T], str | None]:
    """Items whose `name` matches `pattern` (searched, case-insensitive).

    A half-typed pattern is often not a valid regex yet (`[`, `(a|`): then every item stays and the
    second value says why, so the list does not blink empty at each keystroke.
    """
    if not pattern:
        return items, None
    try:
        regex = re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        return items, f"not a valid regex: {exc}"
    return [item for item in items if regex.search(name(item))], None


def value_filter(
    items: list[T], text: str, name: Callable[[T], str], scalars: Callable[[str], RunScalars]
) -> tuple[list[T], str | None, bool]:
    """Runs the filter `text` keeps (`analysis.run_filter`), the one-line error when it is not valid yet
    (then every run stays, as with a half-typed regex), and whether the runs come ranked (`top N by`)."""
    if not text.strip():
        return items, None, False
    # Imported when a filter is first typed: its parser (and the roles it reads) are not on the way to the first frame.
    from tbtriage.analysis.run_filter import FilterError, RunScalars, apply_filter, parse_filter

    try:
        flt = parse_filter(text)
        by_name = {name(item): item for item in items}
        kept = apply_filter(flt, [scalars(n) if flt.by_value else RunScalars(n, {}, {}, {}) for n in by_name])
    except FilterError as exc:
        return items, str(exc), False
    return [by_name[n] for n in kept], None, flt.rank is not None
