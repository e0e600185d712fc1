"""`json_safe`: plain JSON types out of whatever a report holds, the plain ones (most of a report) unchanged."""

from __future__ import annotations

import enum
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tbtriage.analysis.json_safe import dumps, json_safe


class Severity(enum.IntEnum):
    WARNING = 2


class Tag(str):
    pass


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("loss", "loss"),
        (3, 3),
        (True, True),
        (None, None),
        (0.25, 0.25),
        (-0.0, -0.0),
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        (np.float64(math.nan), "NaN"),
        (np.float32(1.5), 1.5),
        (np.int64(7), 7),
        (np.bool_(True), True),
        (np.array([1.0, np.inf, np.nan]), [1.0, "Infinity", "NaN"]),
        ((1, math.nan), [1, "NaN"]),
        ({1: {"x": [math.inf]}}, {"1": {"x": ["Infinity"]}}),
        (Severity.WARNING, Severity.WARNING),
        (Tag("train/loss"), Tag("train/loss")),  # kept as it is, a str
        (Path("a/b"), "a/b"),
    ],
)
def test_each_kind_of_value(value, expected):
    got = json_safe(value)
    assert got == expected
    assert type(got) is type(expected)
    json.dumps(got, allow_nan=False)  # strict JSON: a NaN left anywhere raises


def test_a_report_shaped_value_is_strict_json_and_the_same_text_as_before():
    value = {"runs": [{"run": "a", "score": 97, "final": math.nan, "steps": np.arange(3), "ok": True, "x": None}]}
    assert dumps(value, indent=1) == json.dumps(
        {"runs": [{"run": "a", "score": 97, "final": "NaN", "steps": [0, 1, 2], "ok": True, "x": None}]}, indent=1
    )


_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and ±Infinity too
    st.text(),  # escapes, control characters and non-ASCII text
    st.builds(np.float64, st.floats()),
    st.builds(np.float32, st.floats(width=32)),
    st.builds(np.int64, st.integers(-(2**63), 2**63 - 1)),
    st.builds(np.bool_, st.booleans()),
    st.builds(lambda xs: np.array(xs, np.float64), st.lists(st.floats(), max_size=4)),
    st.just(Severity.WARNING),
    st.builds(Tag, st.text(max_size=5)),
    st.builds(Path, st.sampled_from(["a/b", "ü"])),
)
_keys = st.one_of(
    st.text(max_size=6), st.integers(-3, 3), st.booleans(), st.none(), st.builds(Tag, st.text(max_size=3))
)
_values = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(_keys, inner, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(_values, st.sampled_from([0, 1, 2, "\t"]))
def test_indented_text_is_what_json_dumps_writes_of_the_safe_values(value, indent):
    assert dumps(value, indent=indent) == json.dumps(
        json_safe(value), indent=indent, allow_nan=False, ensure_ascii=False
    )
    assert dumps(value) == json.dumps(json_safe(value), allow_nan=False, ensure_ascii=False)
