"""`json_safe.dumps` with an indent writes its own indented text: it must be `json.dumps`'s, byte for byte."""

from __future__ import annotations

import enum
import json
import math

import numpy as np
import pytest

from tbtriage.analysis.json_safe import dumps, json_safe

VALUES = [
    {},
    [],
    (),
    {"a": []},
    [{}],
    {"a": {"b": [1, 2.5, None, True, False, 'x\u00e9\n"\\ \x01', [[]], {}]}},
    3,
    -0.0,
    "s",
    None,
    [1e300, -0.0, 1e-7, 2**70, float("nan"), math.inf, -math.inf],
    {1: 2, None: 3, 2.5: "k"},
    (1, (2, 3)),
    {"arr": np.arange(3, dtype=np.float32), "n": np.int64(7), "f": np.float64(0.1)},
    {"deep": [[[{"x": [{"y": {}}]}]]]},
    {1: "int key", "1": "text key"},  # json_safe makes both "1": the later one wins
    [np.float64("nan"), np.array([[1.5, np.inf]]), np.str_("s"), np.bool_(True), b"bytes", enum.IntEnum("E", "A")(1)],
    {"nested": ({"t": (1, [2, (3,)])}, float("-inf"))},
    type("Text", (str,), {})("a str subclass"),
]


@pytest.mark.parametrize("indent", [None, 1, 2, 4])
@pytest.mark.parametrize("value", VALUES)
def test_same_text_as_json(value, indent):
    expected = json.dumps(json_safe(value), indent=indent, allow_nan=False, ensure_ascii=False)
    assert dumps(value, indent=indent) == expected


def test_unknown_object_written_as_its_text():
    class Odd:
        def __str__(self) -> str:
            return "odd"

    # json_safe turns the unknown object into its text first: written, never dropped
    assert dumps({"o": Odd()}, indent=1) == '{\n "o": "odd"\n}'
