"""The `/` filter of the lists: a case-insensitive regex, forgiving while it is being typed."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

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
