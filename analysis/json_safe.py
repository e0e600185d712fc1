"""Values made strict-JSON safe: what every JSON the tool writes (report, diagnosis, alerts) goes through."""

from __future__ import annotations

import json
import math
from typing import Any


def json_safe(value: Any) -> Any:
    """Plain JSON types: numpy scalars and arrays unwrapped, NaN/±Inf as the strings "NaN"/"Infinity"/"-Infinity".

    Strict JSON has no NaN; a consumer (jq, a webhook) must not choke on the very value that diverged.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value  # most of a report (~230,000 values for 2,000 runs): before the checks below, same answer
    if kind is float and math.isfinite(value):
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return json_safe(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def dumps(value: Any, indent: int | None = None) -> str:
    """The one JSON encoder of every JSON the tool writes: `json_safe` values, strictly (a NaN left anywhere
    is a bug that raises, never `NaN` in the output), non-ASCII text kept readable."""
    return json.dumps(json_safe(value), indent=indent, allow_nan=False, ensure_ascii=False)
