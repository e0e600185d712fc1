"""Values made strict-JSON safe: what every JSON the tool writes (report, diagnosis, alerts) goes through."""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring
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


def dumps(value: Any, indent: int | str | None = None) -> str:
    """The one JSON encoder of every JSON the tool writes: `json_safe` values, strictly (a NaN left anywhere
    is a bug that raises, never `NaN` in the output), non-ASCII text kept readable.

    Indented, it is `_indented`: the text `json.dumps(json_safe(value), indent=indent, ...)` writes, made in one pass
    (Python's C encoder cannot indent, and its Python one took 0.3 s of a 2,000-run report's serial end)."""
    if indent is None:
        return json.dumps(json_safe(value), allow_nan=False, ensure_ascii=False)
    return _indented(value, " " * indent if isinstance(indent, int) else str(indent))


def _indented(value: Any, step: str) -> str:
    """`json.dumps(json_safe(value), indent=step, allow_nan=False, ensure_ascii=False)`, byte for byte: each value
    made `json_safe` as it is written (the same rules, in the same order), containers laid out as `json.dumps`
    lays them out with an indent (one item a line, `", "`-free separators `","` and `": "`)."""
    out: list[str] = []
    put = out.append
    text, number, real = encode_basestring, int.__repr__, float.__repr__

    def write(o: Any, pad: str) -> None:
        kind = type(o)
        if kind is str:
            put(text(o))
        elif kind is float and math.isfinite(o):
            put(real(o))
        elif kind is int:
            put(number(o))
        elif o is None:
            put("null")
        elif o is True:
            put("true")
        elif o is False:
            put("false")
        elif isinstance(o, dict):
            if not o:
                put("{}")
                return
            inner = pad + step
            items = o.items() if all(type(k) is str for k in o) else {str(k): v for k, v in o.items()}.items()
            first = True
            for k, v in items:
                put(("{\n" if first else ",\n") + inner + text(k) + ": ")
                first = False
                write(v, inner)
            put("\n" + pad + "}")
        elif isinstance(o, (list, tuple)):
            if not o:
                put("[]")
                return
            inner = pad + step
            first = True
            for v in o:
                put(("[\n" if first else ",\n") + inner)
                first = False
                write(v, inner)
            put("\n" + pad + "]")
        else:
            safe = json_safe(o)  # a numpy value, a non-finite float, a subclass, anything else: as `json_safe` has it
            if type(safe) is type(o) and safe is o:
                put(json.dumps(safe, allow_nan=False, ensure_ascii=False))  # a str/int/float subclass
            else:
                write(safe, pad)

    write(value, "")
    return "".join(out)
