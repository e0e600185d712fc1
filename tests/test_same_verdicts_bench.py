"""bench/same_verdicts.py records features as the engine says them: the order of `extra`'s items (which the
verdict cache does not keep) makes no difference to the text compared, a changed value still does."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import numpy as np

from tbtriage.analysis.datamodel import Series
from tbtriage.analysis.features import series_features

_SPEC = importlib.util.spec_from_file_location(
    "same_verdicts", Path(__file__).resolve().parent.parent / "bench" / "same_verdicts.py"
)
assert _SPEC is not None and _SPEC.loader is not None
same_verdicts = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(same_verdicts)


def _features():
    t = np.arange(400, dtype=np.float64)
    values = 2.0 * np.exp(-t / 80) + 0.3 + 0.02 * np.sin(t)
    values[200] *= 6  # a spike: `extra` holds nested tuples, dicts and arrays
    return series_features("train/loss", Series(np.arange(400) * 10, t, values), "train_loss", -1)


def _differences(before, after) -> list[str]:
    text = same_verdicts.feature_text
    return same_verdicts.differences({"logdir": {"run | tag": text(before)}}, {"logdir": {"run | tag": text(after)}})


def test_extra_items_in_another_order_are_the_same_verdict():
    features = _features()
    before = repr(features)
    shuffled = dict(reversed(list(features.extra.items())))  # the same items, in reverse order
    reordered = replace(features, extra=shuffled)
    assert repr(reordered) != before  # the order shows in a plain repr
    assert _differences(features, reordered) == []


def test_a_changed_value_is_still_a_difference():
    features = _features()
    changed = replace(features, extra={**features.extra, "scale": np.nextafter(features.extra["scale"], np.inf)})
    assert len(_differences(features, changed)) == 1
