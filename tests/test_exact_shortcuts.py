"""The per-run analysis's shortcuts give the long way's answer: every bound that skips a running median or a MAD,
every number read back from the features instead of measured again, on the labelled scenarios, random healthy
runs and hand-made edge cases (ties, signed zeros, constants, infinities, the fewest points)."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from tbtriage.analysis import causes
from tbtriage.analysis.datamodel import Series
from tbtriage.analysis.detectors import base, divergence, gradients, learning, spikes, warmup
from tbtriage.analysis.engine import analyze_run, logdir_context, run_data
from tbtriage.analysis.features import finite_view
from tbtriage.analysis.run_config import MAX_CONFIG_BYTES, read_config_file
from tbtriage.analysis.smoothing import mad_sigma, median, running_median
from tests._engine_data import SCENARIOS, RunSpec, random_healthy, runs_in_memory, to_run


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal value for value, NaN for NaN, and the same sign of every zero."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(
        np.all((a == b) | (np.isnan(a) & np.isnan(b))) and np.array_equal(np.signbit(a), np.signbit(b))
    )


def _awkward(rng: np.random.Generator, n: int, case: int) -> np.ndarray:
    """Values of the shapes the shortcuts must survive: noise, falls, steps, ties, zeros of both signs."""
    shape = case % 8
    t = np.linspace(0, 1, n)
    if shape == 0:
        return rng.normal(size=n)
    if shape == 1:
        return 2.0 + 3.0 * np.exp(-6 * t) * np.exp(rng.normal(0, 0.05, n))
    if shape == 2:
        return np.round(rng.normal(size=n), 1)  # many ties
    if shape == 3:
        return np.where(rng.random(n) < 0.5, 0.0, -0.0)
    if shape == 4:
        return np.full(n, 1.5)
    if shape == 5:
        return np.cumsum(rng.normal(size=n))  # a random walk: rises and falls
    if shape == 6:
        return np.where(t < 0.5, 1.0, 4.0) + rng.normal(0, 0.01, n)  # a jump up
    return np.sort(rng.normal(size=n))[:: 1 if case % 16 < 8 else -1]  # monotone


# ---- the whole engine, with and without the shortcuts ------------------------------------------------------


def _long_finite(self, tag):
    view = self._finite.get(tag)
    if view is None:
        view = self._finite[tag] = finite_view(self.run.scalars[tag])
    return view


def _long_edge_levels(feats, direction, values, tail_count):
    worse_up = values * (-direction)
    return median(worse_up[: max(3, int(np.ceil(divergence.EDGE_FRAC * values.size)))]), median(worse_up[-tail_count:])


def _long_way(monkeypatch):
    """Every shortcut off: each question answered the way it was before the shortcut."""
    monkeypatch.setattr(base.RunData, "finite", _long_finite)
    monkeypatch.setattr(divergence, "_edge_levels", _long_edge_levels)
    monkeypatch.setattr(divergence, "_no_rise", lambda *a: False)
    monkeypatch.setattr(warmup, "_no_early_rise", lambda *a: False)
    monkeypatch.setattr(causes, "_running_median", running_median)
    monkeypatch.setattr(learning.Pace, "surely_levelled_off", lambda self: False)
    monkeypatch.setattr(gradients, "_below_spike", lambda y: False)


def _verdicts(runs):
    context = logdir_context(SimpleNamespace(runs=runs))
    with np.errstate(all="ignore"):
        return {
            name: repr((r.findings, r.health))
            for name, r in ((n, analyze_run(run, None, context)) for n, run in runs.items())
        }


def _edge_runs():
    """Hand-made runs at the shortcuts' edges: NaN tails, a loss rising from its start, constant and tiny series,
    a metric that ends at zero, signed zeros, a loss that blows up early, a few points only."""
    rng = np.random.default_rng(5)
    steps = np.arange(0, 4000, 10)
    t = steps / steps[-1]
    falling = 2.0 + 3.0 * np.exp(-6 * t) * np.exp(rng.normal(0, 0.03, t.size))
    out = {}
    out["nan_tail"] = {"train/loss": (steps, np.where(t > 0.8, np.nan, falling))}
    out["rising"] = {"train/loss": (steps, 1.0 + 4 * t + rng.normal(0, 0.01, t.size))}
    out["early_bump"] = {"train/loss": (steps, falling * np.where((t > 0.02) & (t < 0.05), 2.5, 1.0))}
    out["constant"] = {"train/loss": (steps, np.full(t.size, 1.386)), "eval/accuracy": (steps[::40], np.full(10, 0.25))}
    out["zeros"] = {"train/loss": (steps, np.where(rng.random(t.size) < 0.5, 0.0, -0.0)), "eval/acc": (steps, -falling)}
    out["metric_to_zero"] = {"train/loss": (steps, falling), "eval/accuracy": (steps, np.maximum(0.9 - 2 * t, 0.0))}
    out["blowup"] = {"train/loss": (steps, np.where(t > 0.6, falling * (1 + 20 * (t - 0.6)), falling))}
    out["few"] = {"train/loss": (steps[:9], falling[:9]), "lr": (steps[:9], np.full(9, 1e-3))}
    out["monotone_lr_nan"] = {
        "train/loss": (steps, np.where(t > 0.7, np.inf, falling)),
        "train/lr": (steps, 1e-3 * (1 - t)),
        "eval/loss": (steps[::20], falling[::20] * 1.1),
    }
    out["negative_loss"] = {"train/loss": (steps, -falling), "train/lr": (steps, np.full(t.size, 3e-4))}
    return {name: to_run(name, RunSpec(tags)) for name, tags in out.items()}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_every_scenario_gets_the_same_verdicts_with_and_without_the_shortcuts(scenario, monkeypatch):
    for seed in (0, 1):
        runs = runs_in_memory(scenario, seed)
        fast = _verdicts(runs)
        with monkeypatch.context() as m:
            _long_way(m)
            assert _verdicts(runs_in_memory(scenario, seed)) == fast, (scenario.name, seed)


def test_random_healthy_runs_and_edge_cases_get_the_same_verdicts_with_and_without_the_shortcuts(monkeypatch):
    runs = {f"healthy_{seed}": to_run(f"healthy_{seed}", random_healthy(seed)[0]["."]) for seed in range(12)}
    runs.update(_edge_runs())
    fast = _verdicts(runs)
    with monkeypatch.context() as m:
        _long_way(m)
        slow = _verdicts(runs)
    assert slow == fast


# ---- each shortcut against the long way -------------------------------------------------------------------------


def test_a_finite_view_from_the_features_is_the_series_own_finite_points():
    rng = np.random.default_rng(1)
    steps = np.arange(50, dtype=np.int64)
    for values in (rng.normal(size=50), np.where(rng.random(50) < 0.2, np.nan, 1.0), np.full(50, np.inf)):
        run = to_run("r", RunSpec({"train/loss": (steps, values)}))
        data = run_data(run)
        got, expected = data.finite("train/loss"), finite_view(run.scalars["train/loss"])
        assert _same(got[0], expected[0]) and _same(got[1], expected[1])
    # A series whose features do not describe it (another length) is read the long way.
    data = run_data(to_run("r", RunSpec({"train/loss": (steps, np.ones(50))})))
    data.run.scalars["train/loss"] = Series(steps[:10], np.zeros(10), np.r_[np.nan, np.ones(9)])
    assert data.finite("train/loss")[1].size == 9


@pytest.mark.parametrize("direction", [-1, 1])
def test_edge_levels_from_the_features_are_the_turned_curves_medians(direction):
    rng = np.random.default_rng(2)
    for case in range(120):
        n = int(rng.choice([3, 4, 5, 8, 59, 60, 61, 400, 1025]))
        values = _awkward(rng, n, case).astype(np.float32).astype(np.float64)
        run = to_run("r", RunSpec({"train/loss": (np.arange(n, dtype=np.int64), values)}))
        data = run_data(run)
        feats, (_, finite) = data.features["train/loss"], data.finite("train/loss")
        tail_count = max(3, int(np.ceil(divergence.SUSTAIN_FRAC * n)), int(np.ceil(divergence.EDGE_FRAC * n)))
        got = divergence._edge_levels(feats, direction, finite, tail_count)
        expected = _long_edge_levels(feats, direction, finite, tail_count)
        assert _same(np.array(got), np.array(expected)), (case, n)


def _long_rise_passes(start: float, end: float, medians: np.ndarray, scale: float) -> bool:
    smooth = running_median(medians, 5) if medians.size >= 5 else medians
    best = float(smooth[int(np.argmin(smooth))])
    rise, progress = end - best, start - best
    needed = (
        divergence.BLOWUP_FRACTION * progress
        if progress > divergence.NO_PROGRESS * scale
        else divergence.BLOWUP_SCALE_FRACTION * scale
    )
    return rise <= needed


def test_no_rise_is_said_only_where_the_running_median_agrees():
    rng = np.random.default_rng(3)
    said = 0
    for case in range(3000):
        n = int(rng.choice([2, 4, 5, 6, 30, 1024]))
        medians = _awkward(rng, n, case) * float(rng.choice([1e-6, 1.0, 1e6]))
        start = float(medians[0] + rng.normal(0, 2))
        end = float(medians[-1] + rng.normal(0, 0.3))
        scale = float(abs(rng.normal())) + 1e-12
        if case % 5 == 0:  # at the bound's edge: the end exactly half the scale above the lowest level
            end = float(medians.min()) + divergence.BLOWUP_SCALE_FRACTION * scale
        if divergence._no_rise(start, end, float(medians.min()), scale):
            said += 1
            assert _long_rise_passes(start, end, medians, scale), case
    assert said > 300  # the bound decides often, or this test proves nothing


def _long_early_rise_any(v: np.ndarray, positive: bool, scale: float) -> bool:
    """Whether any point passes `_early_loss_rise`'s first test for any of its bars (the lowest bar: RISE_REL)."""
    smooth = running_median(v, warmup.SMOOTH_POINTS)
    rise = smooth - np.minimum.accumulate(smooth)
    bar = (
        np.log1p(warmup.RISE_REL)
        if positive
        else warmup.RISE_REL * np.maximum(np.abs(np.minimum.accumulate(smooth)), 0.5 * scale)
    )
    return bool(np.any(rise >= bar))


def test_no_early_rise_is_said_only_where_no_running_median_rises_enough():
    rng = np.random.default_rng(4)
    said = 0
    for case in range(3000):
        n = int(rng.choice([4, 5, 6, 10, 37, 360]))
        v = _awkward(rng, n, case) * float(rng.choice([0.01, 0.1, 1.0]))
        positive = bool(case % 2)
        scale = float(abs(rng.normal())) + 1e-9
        if warmup._no_early_rise(v, positive, scale):
            said += 1
            assert not _long_early_rise_any(v, positive, scale), case
    assert said > 300


def test_a_monotone_stretch_is_its_own_running_median():
    rng = np.random.default_rng(6)
    for case in range(600):
        n = int(rng.choice([1, 2, 3, 5, 9, 100, 901]))
        values = _awkward(rng, n, case)
        if case % 7 == 0:
            values = np.r_[values, np.inf]  # a last point that overflowed
        if case % 11 == 0:
            values = np.r_[np.nan, values]
        for width in (1, 3, 5, 9):
            assert _same(causes._running_median(values, width), running_median(values, width)), (case, width)


def _old_slope(x, y, mask):
    """`slope` as it was written before its line and its standard error were taken apart."""
    x, y = x[mask].astype(np.float64, copy=False), y[mask]
    if x.size < 3:
        return 0.0, float("inf")
    x = x - x.mean()
    denominator = float((x * x).sum())
    if denominator <= 0:
        return 0.0, float("inf")
    centred = y - y.mean()
    rate = float((x * centred).sum()) / denominator
    residual = centred - rate * x
    return rate, mad_sigma(residual) / np.sqrt(denominator)


def test_slopes_and_their_error_bounds():
    rng = np.random.default_rng(7)
    for case in range(1500):
        n = int(rng.choice([2, 3, 4, 5, 8, 250]))
        x = np.sort([rng.normal(size=n) * 100, np.arange(n, dtype=np.float64), np.full(n, 3.0)][case % 3])
        y = _awkward(rng, n, case) + (rng.standard_t(1, n) if case % 4 == 0 else 0.0)  # heavy tails too
        assert _old_slope(x, y, slice(None)) == learning.slope(x, y, slice(None)), case
        _, residual, denominator = learning._line(x, y, slice(None))
        error = learning._standard_error(residual, denominator)
        assert learning._error_bound(residual, denominator) >= error, case


def test_a_curve_surely_levelled_off_is_levelled_off():
    rng = np.random.default_rng(8)
    said = 0
    for case in range(800):
        n = int(rng.choice([20, 21, 40, 1000]))
        steps = np.sort(rng.choice(10 * n, n, replace=False)).astype(np.float64)
        t = (steps - steps[0]) / (steps[-1] - steps[0])
        speed = float(rng.choice([0.3, 1, 3, 10]))
        medians = 1 + np.exp(-speed * t) + rng.normal(0, float(rng.choice([1e-4, 0.01, 0.1])), n)
        lines = learning.pace_lines(steps, medians)
        assert lines is not None and lines.measured() == learning.pace(steps, medians)
        if lines.surely_levelled_off():
            said += 1
            assert learning.levelled_off(lines.measured()), case
    assert said > 100


def test_a_config_file_is_read_only_when_it_is_a_small_regular_file(tmp_path):
    (tmp_path / "config.json").mkdir()
    assert read_config_file(tmp_path / "config.json") == {}
    assert read_config_file(tmp_path / "absent.json") == {}
    big = tmp_path / "args.json"
    big.write_text('{"lr": 1}' + " " * MAX_CONFIG_BYTES)
    assert read_config_file(big) == {}
    small = tmp_path / "hparams.yaml"
    small.write_text("lr: 0.001\noptimizer: adam\n")
    assert read_config_file(small) == {"lr": 0.001, "optimizer": "adam"}
    assert math.isclose(read_config_file(small)["lr"], 1e-3)


def _old_left_range_at(steps, values, onset, window):
    """`causes.left_range_at` as it was written before its shortcuts (the running median of a monotone stretch,
    the range's floor before the baseline's MAD)."""
    lo = int(np.searchsorted(steps, onset - window * (1 + causes.BASELINE_WINDOWS), side="right"))
    hi = int(np.searchsorted(steps, onset, side="right"))
    steps, values = steps[lo:hi], values[lo:hi]
    finite = np.isfinite(values)
    before = (steps <= onset - window) & finite
    baseline = int(np.count_nonzero(before))
    if baseline < causes.MIN_BASELINE_POINTS:
        return None
    log = bool(values[before].size) and bool(np.all(values[before] > 0))
    with np.errstate(divide="ignore", invalid="ignore"):
        read = np.log(values) if log else values.astype(np.float64)
    width = max(1, min(causes.SMOOTH_POINTS, baseline // 4)) | 1
    if width > 1 and read.size >= width:
        readable = np.isfinite(read)
        if readable.all():
            read = running_median(read, width)
        else:
            read = np.where(readable, running_median(np.where(readable, read, np.inf), width), read)
    base = read[before]
    centre = median(base)
    sigma = 1.4826 * median(np.abs(base - centre))
    half_width = max(
        causes.RANGE_SIGMAS * sigma, math.log(causes.RANGE_FACTOR) if log else (causes.RANGE_FACTOR - 1) * abs(centre)
    )
    inside = steps > onset - window
    if not inside.any():
        return None
    out = ~np.isfinite(read[inside]) | (np.abs(read[inside] - centre) > half_width)
    hit = np.flatnonzero(out)
    return int(steps[inside][hit[0]]) if hit.size else None


def test_left_range_at_is_what_it_was_before_its_shortcuts():
    rng = np.random.default_rng(9)
    hits = 0
    for case in range(1500):
        n = int(rng.choice([12, 40, 300, 900]))
        steps = np.cumsum(rng.integers(1, 4, n)).astype(np.int64)
        values = _awkward(rng, n, case) + float(rng.choice([0.0, 5.0]))
        if case % 3 == 0:  # a departure: a jump, a drift or an overflow somewhere in the second half
            at = int(rng.integers(n // 2, n))
            values[at:] = [values[at:] * 3, values[at:] + np.linspace(0, 2, n - at), np.inf][case % 9 // 3]
        if case % 13 == 0:
            values[rng.integers(0, n, 3)] = np.nan
        onset = int(steps[int(rng.integers(n // 2, n))])
        window = int(rng.integers(1, max(2, n // 4)))
        with np.errstate(all="ignore"):
            expected = _old_left_range_at(steps, values, onset, window)
            assert causes.left_range_at(steps, values, onset, window) == expected, case
        hits += expected is not None
    assert 100 < hits < 1400  # departures found and dismissed both


def test_an_lr_is_zero_throughout_only_when_no_point_rises_above_zero():
    steps = np.arange(0, 2000, 10)
    for lr in (np.zeros(200), np.r_[np.zeros(150), np.full(50, 1e-3)], np.full(200, 1e-3), np.r_[1e-3, np.zeros(199)]):
        run = to_run("r", RunSpec({"train/loss": (steps, np.linspace(3, 1, 200)), "train/lr": (steps, lr)}))
        data = run_data(run)
        for onset in (0, 500, 1990):
            facts = causes.lr_facts(data, onset)
            assert facts is not None and facts.zero == bool(np.all(data.finite("train/lr")[1] <= causes.LR_ZERO))


def _without_counts(data):
    """`data` with features that do not say how many non-finite points their series hold: the long way."""
    features = {
        t: replace(f, extra={k: v for k, v in f.extra.items() if k != "nonfinite"}) for t, f in data.features.items()
    }
    return replace(data, features=features, _finite={})


def _lr_runs():
    rng = np.random.default_rng(10)
    steps = np.arange(0, 3000, 10)
    t = steps / steps[-1]
    loss = 2 + np.exp(-5 * t) + rng.normal(0, 0.01, t.size)
    for lr in (
        3e-4 * (1 - t),
        np.where(t > 0.5, 0.0, 1e-3),
        np.where((t > 0.3) & (t < 0.6), 0.0, 1e-3),
        np.where(t > 0.9, np.nan, 1e-3),
        np.where(t > 0.7, -1e-4, 1e-3),
        np.zeros(t.size),
        np.full(t.size, 5e-4),
        1e-3 * np.r_[np.ones(100), 10 * np.ones(5), np.ones(t.size - 105)],
    ):
        yield run_data(to_run("r", RunSpec({"train/loss": (steps, loss), "train/lr": (steps, lr)})))


def test_the_lr_detector_gives_the_same_findings_without_the_features_counts():
    from tbtriage.analysis.detectors import lr

    for data in _lr_runs():
        assert repr(lr.detect(data)) == repr(lr.detect(_without_counts(data)))


def _old_accuracy_best(values):
    fractions = values / 100.0 if values.max() > 1.0 else values
    return float(fractions.max())


def test_an_accuracys_best_from_the_features_is_its_largest_fraction():
    rng = np.random.default_rng(11)
    steps = np.arange(0, 2000, 100)
    for case in range(200):
        scale = [1.0, 100.0][case % 2]
        acc = np.clip(rng.uniform(0.1, 0.6) + rng.normal(0, 0.05, steps.size), 0, 1) * scale
        if case % 7 == 0:
            acc[3] = np.nan
        run = to_run("r", RunSpec({"train/loss": (steps, np.full(steps.size, 1.386)), "eval/accuracy": (steps, acc)}))
        data = run_data(run)
        values = data.finite("eval/accuracy")[1]
        top = float(data.features["eval/accuracy"].best)
        assert (top / 100.0 if top > 1.0 else top) == _old_accuracy_best(values), case
        found = learning._accuracy_at_chance(data, data.features["train/loss"])
        assert found is None or found["accuracy_best"] == _old_accuracy_best(values)


def test_roles_remembered_for_a_tag_set_are_each_runs_own():
    from tbtriage.analysis.roles import assign_roles, pair_train_val, primary_tags

    tags = ["epoch_loss", "epoch_accuracy", "learning_rate"]
    first = assign_roles(tags, run_name="m/train")
    first["epoch_loss"] = ("lr", 0)  # a caller's change stays its own
    assert assign_roles(tags, run_name="m/train")["epoch_loss"] == ("train_loss", -1)
    assert assign_roles(tags, run_name="m/validation")["epoch_loss"] == ("val_loss", -1)  # the run's phase counts
    roles = assign_roles(["train/loss", "val/loss", "train/acc", "val/acc", "lr"])
    points = {"train/loss": 100, "val/loss": 10, "train/acc": 100, "val/acc": 10, "lr": 100}
    pairs = pair_train_val(roles, points)
    pairs.append(("x", "y"))
    assert pair_train_val(roles, points) == [("train/acc", "val/acc"), ("train/loss", "val/loss")]
    assert primary_tags(roles, points).val_loss == "val/loss"
    assert primary_tags(roles, points, run_name="a/validation") == primary_tags(roles, points, run_name="b/val")


def _old_hparam_differences(a, b):
    keys = [k for k in a if k in b] + [k for k in a if k not in b] + [k for k in b if k not in a]
    return {k: (a.get(k), b.get(k)) for k in keys if causes.as_number(a.get(k)) != causes.as_number(b.get(k)) or (
        causes.as_number(a.get(k)) is None and str(a.get(k)) != str(b.get(k)))}  # fmt: skip


def test_settings_differ_where_they_did_and_the_search_stops_past_the_most_differences():
    from tbtriage.analysis import twins

    rng = np.random.default_rng(12)
    pool = [0, 1, True, False, 1.0, 0.0, -0.0, "1", "1.0", "adam", "Adam", None, "None", math.nan, math.inf, "inf",
            3e-4, "3e-4", [1, 2], {"a": 1, "b": 2}, {"b": 2, "a": 1}]  # fmt: skip
    for case in range(3000):
        keys = [f"k{i}" for i in range(int(rng.integers(0, 8)))]
        a = {k: pool[int(rng.integers(len(pool)))] for k in keys if rng.random() < 0.8}
        b = {
            k: (a[k] if k in a and rng.random() < 0.6 else pool[int(rng.integers(len(pool)))])
            for k in keys
            if rng.random() < 0.8
        }
        expected = _old_hparam_differences(a, b)
        got = twins._hparam_differences(a, b)
        assert list(got.items()) == list(expected.items()) or repr(got) == repr(expected), case
        capped = twins._hparam_differences(a, b, twins.MAX_DIFFERENCES)
        assert (0 < len(capped) <= twins.MAX_DIFFERENCES) == (0 < len(expected) <= twins.MAX_DIFFERENCES), case
        if len(expected) <= twins.MAX_DIFFERENCES:
            assert repr(capped) == repr(expected), case


def _long_calm_crossings(y: np.ndarray) -> np.ndarray:
    """The buckets `_growth_event` finds at SPIKE_RATIO × the calm level before them (its window medians)."""
    first, width = gradients.CALM_FIRST, min(gradients.BASELINE_BUCKETS, max(3, y.size // 10))
    rolling = np.median(np.lib.stride_tricks.sliding_window_view(y, width), axis=1)[:-1] if y.size > width else []
    growing = [median(y[:k]) for k in range(first, min(width, y.size))]
    calm = np.minimum.accumulate(np.concatenate([growing, rolling]))
    return np.flatnonzero(y[first : first + calm.size] - calm >= np.log10(gradients.SPIKE_RATIO))


def test_below_spike_is_said_only_where_no_bucket_crosses_the_calm_level():
    rng = np.random.default_rng(13)
    said = 0
    for case in range(2000):
        n = int(rng.choice([6, 7, 20, 21, 200, 1024]))
        y = _awkward(rng, n, case) * float(rng.choice([0.1, 0.5, 2.0]))
        if gradients._below_spike(y):
            said += 1
            assert _long_calm_crossings(y).size == 0, case
    assert said > 300


def _old_fit(steps, resid, period):
    """`spikes._fit` as it was, from the steps themselves (`_offset_width`, then `_fold`)."""
    folded = (steps - steps[0]) % period
    width = spikes._width_of(folded, period)
    if width is None:
        return None
    return spikes._fold_bins(((steps - steps[0]) % period) // width, resid), period, width


def test_an_epoch_fold_from_the_offsets_is_the_fold_from_the_steps():
    rng = np.random.default_rng(14)
    for case in range(300):
        n = int(rng.choice([30, 200, 2000]))
        steps = np.sort(rng.choice(20 * n, n, replace=False)).astype(np.int64) + int(rng.integers(0, 1000))
        resid = rng.normal(size=n)
        for period in (4, 7, 32, 100, 333):
            expected, got = _old_fit(steps, resid, period), spikes._fit(steps - steps[0], resid, period)
            assert repr(got) == repr(expected), (case, period)


def test_edge_padded_windows_are_nps_pad_and_sliding_window_view():
    from tbtriage.analysis.smoothing import row_medians, windows

    rng = np.random.default_rng(15)
    for case in range(200):
        medians = _awkward(rng, int(rng.choice([1, 2, 5, 64, 1024])), case)
        for window in (1, 3, 5, 33):
            edge = window // 2
            padded = np.concatenate((np.full(edge, medians[0]), medians, np.full(edge, medians[-1])))
            old = row_medians(np.lib.stride_tricks.sliding_window_view(np.pad(medians, edge, mode="edge"), window))
            assert _same(row_medians(windows(padded, window)), old), (case, window)
