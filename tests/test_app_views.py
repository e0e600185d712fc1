"""What the panes show, computed without a terminal: chart data, run rows, tag groups, heatmap, safe text."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tbtriage.analysis.datamodel import Run, Series
from tbtriage.analysis.smoothing import ema
from tbtriage.tui.chart_data import (
    ChartOptions,
    SeriesRequest,
    labelled,
    log_ticks,
    nice_ticks,
    prepare_chart,
    wall_ticks,
)
from tbtriage.tui.csv_export import export_filename
from tbtriage.tui.regex_filter import regex_filter
from tbtriage.tui.run_rows import LIVE_SECONDS, age_of, format_age, is_live, run_row, sort_rows
from tbtriage.tui.safe_text import literal, multiline, plain
from tbtriage.tui.widgets.grad_heatmap import heatmap_grid, layer_labels
from tbtriage.tui.widgets.tag_tree import group_tags
from tests._app_data import NOW, report_for
from tests._report_data import finding


def _smoother(request: SeriesRequest, weight: float) -> np.ndarray:
    return ema(request.series.values, weight)


def _series(values, wall0: float = 1000.0, dt: float = 10.0) -> Series:
    values = np.asarray(values, dtype=np.float64)
    steps = np.arange(values.size, dtype=np.int64) * 5
    return Series(steps, wall0 + dt * np.arange(values.size), values)


def test_a_million_point_series_prepares_for_a_100_column_chart_with_its_spike_and_nan_kept():
    values = np.linspace(3.0, 1.0, 1_000_000)
    values[777_777] = 90.0
    values[900_000] = np.nan
    request = SeriesRequest("run", 0, _series(values))

    chart = prepare_chart([request], ChartOptions(smoothing=0.0), 100, _smoother)

    line = chart.lines[0]
    assert len(line.raw) <= 2 * 100 and line.smooth is None  # a min and a max per cell
    assert line.raw.y.max() == 90.0 and line.raw.nan_x.tolist() == [4_500_000.0]
    assert chart.y_range[1] > 90.0  # NaN markers sit at the top edge, above every point


def test_log_y_uses_log10_values_drops_non_positive_points_and_labels_decades():
    request = SeriesRequest("run", 0, _series([1e-3, 1e-2, 0.0, -1.0, 1e1, 1e2]))

    chart = prepare_chart([request], ChartOptions(smoothing=0.0, log_y=True), 80, _smoother)

    assert chart.lines[0].raw.y.tolist() == pytest.approx([-3.0, -2.0, 1.0, 2.0])
    assert chart.y_ticks[1] == ("0.001", "0.01", "0.1", "1", "10", "100")
    assert log_ticks(0.1, 0.9)[1] == ("2", "3", "4", "5", "6", "7")  # under a decade: every digit


def test_outlier_range_keeps_the_5th_to_95th_percentile_and_zoom_windows_the_points():
    values = np.concatenate([np.full(98, 1.0) + np.linspace(0, 0.1, 98), [500.0, -500.0]])
    request = SeriesRequest("run", 0, _series(values))

    wide = prepare_chart([request], ChartOptions(smoothing=0.0), 80, _smoother)
    calm = prepare_chart([request], ChartOptions(smoothing=0.0, ignore_outliers=True), 80, _smoother)
    zoomed = prepare_chart([request], ChartOptions(smoothing=0.0, window=(100.0, 200.0)), 80, _smoother)

    assert wide.y_range[1] > 500 and calm.y_range[1] < 2.0
    assert zoomed.lines[0].raw.x.min() >= 100 and zoomed.lines[0].raw.x.max() <= 200
    assert zoomed.x_range == (100.0, 200.0)


def test_time_axes_and_finding_onsets_follow_the_x_axis_choice():
    spike = finding("run", "loss_spike", "warning", 50, tags=("loss",))
    request = SeriesRequest("run", 0, _series(np.ones(100), wall0=5000.0, dt=60.0), (spike,))

    by_step = prepare_chart([request], ChartOptions(), 80, _smoother)
    relative = prepare_chart([request], ChartOptions(x_axis="relative"), 80, _smoother)

    assert [(o.x, o.severity) for o in by_step.onsets] == [(50.0, "warning")]
    # step 50 is the 11th point, 600 s after the first: 10 minutes on a minutes axis (the run spans 99 min)
    assert relative.x_label == "relative time (min)" and [o.x for o in relative.onsets] == [10.0]
    ticks, labels = wall_ticks(0.0, 3600.0, tz=time.gmtime)
    assert labels == ("00:00", "00:20", "00:40", "01:00")


def test_options_cycle_like_tensorboard_and_reset_the_zoom_when_the_axis_changes():
    options = ChartOptions(window=(1.0, 2.0))
    assert [options.smoothing, options.next_smoothing().smoothing] == [0.6, 0.9]
    assert options.next_x_axis().x_axis == "relative" and options.next_x_axis().window is None


def _run(name: str, last_wall: float | None, last_step: int | None = 100) -> Run:
    return Run(name=name, path=None, last_step=last_step, last_wall_time=last_wall)


def test_run_rows_rank_worst_health_first_and_mark_live_runs_by_the_injected_clock():
    live = _run("live", NOW - 30)
    stale = _run("stale", NOW - 3 * 3600)
    broken = _run("broken", NOW - LIVE_SECONDS - 1)
    reports = {
        "live": report_for(live, [], 90),
        "broken": report_for(
            broken, [finding("broken", "divergence", "critical", 7), finding("broken", "plateau", "warning", 3)], 20
        ),
    }
    rows = [run_row(run, reports.get(run.name)) for run in (live, stale, broken)]

    ranked = sort_rows(rows, "health")
    assert [r.name for r in ranked] == ["broken", "live", "stale"]  # unanalysed last
    assert ranked[0].status == "critical" and ranked[0].worst == "divergence@7"
    assert [is_live(age_of(r, NOW)) for r in ranked] == [False, True, False]
    assert [format_age(age_of(r, NOW)) for r in ranked] == ["5m", "30s", "3h"]
    assert ranked[2].status == "pending" and ranked[2].health is None
    assert [r.name for r in sort_rows(rows, "liveness")] == ["live", "broken", "stale"]
    assert [r.name for r in regex_filter(rows, "^(LIVE|stale)$", lambda r: r.name)[0]] == ["live", "stale"]
    kept, error = regex_filter(rows, "(", lambda r: r.name)  # half-typed: everything stays, and why
    assert kept == rows and error.startswith("not a valid regex")


def test_tags_group_by_prefix_and_names_lose_their_shared_prefix():
    groups = group_tags(["train/loss", "lr", "train/acc", "val/loss"])
    assert groups == {"train": ["train/acc", "train/loss"], "val": ["val/loss"], "": ["lr"]}
    assert layer_labels(["grad_norm/encoder.0", "grad_norm/encoder.1"]) == ["encoder.0", "encoder.1"]


def test_the_heatmap_keeps_each_buckets_largest_norm_on_one_scale_for_all_layers():
    steps = np.arange(100, dtype=np.int64)
    early = Series(steps, steps.astype(float), np.full(100, 1e-8))
    late = Series(steps, steps.astype(float), np.where(steps == 42, 1e3, 1.0))
    late.values[90] = np.nan

    grid = heatmap_grid({"g/layer0": early, "g/layer1": late}, 10)

    assert grid.labels == ("layer0", "layer1")
    assert grid.low == pytest.approx(-8.0) and grid.high == pytest.approx(3.0)
    assert np.nanmax(grid.levels[0]) == pytest.approx(0.0)  # vanishing layer: bottom of the shared scale
    assert grid.levels[1][4] == pytest.approx(1.0)  # the spike at step 42 owns its bucket
    assert grid.nonfinite[1][9] and not grid.nonfinite[0].any()


def test_untrusted_text_is_shown_literally_and_file_names_are_safe():
    assert plain("ok\x1b[31mred\x07") == "ok\\x1b[31mred\\x07"
    assert multiline("a\nb\tc\x1b") == "a\nb\tc\\x1b"
    assert literal("[bold]x").plain == "[bold]x" and not literal("[bold]x").spans
    assert export_filename("train/loss [a]", 0.0).startswith("tbtriage-train_loss_a-")


def test_step_axes_tick_at_round_steps_with_k_and_m_suffixes():
    assert labelled(nice_ticks(10.0, 4000.0, integer=True)) == (
        (1000.0, 2000.0, 3000.0, 4000.0),
        ("1k", "2k", "3k", "4k"),
    )
    assert labelled(nice_ticks(0.0, 1_500_000.0, integer=True))[1] == ("0", "500k", "1M", "1.5M")
    assert nice_ticks(0.0, 2.0, integer=True) == (0.0, 1.0, 2.0)  # never a fractional step
    assert labelled(nice_ticks(0.0, 0.35))[1] == ("0", "0.1", "0.2", "0.3")
    chart = prepare_chart([SeriesRequest("run", 0, _series(np.ones(601)))], ChartOptions(), 80, _smoother)
    assert chart.x_ticks == ((0.0, 1000.0, 2000.0, 3000.0), ("0", "1k", "2k", "3k"))  # steps 0 to 3000


def test_wall_time_ticks_fall_on_round_clock_times():
    assert wall_ticks(100.0, 130.0, tz=time.gmtime)[1] == ("00:01:40", "00:01:50", "00:02:00", "00:02:10")
    assert wall_ticks(1000.0, 3 * 86400.0, tz=time.gmtime)[1] == ("01-02 00:00", "01-03 00:00", "01-04 00:00")


def test_a_non_negative_series_gets_no_axis_below_zero():
    lr = np.concatenate([np.linspace(0.0, 3e-3, 100), np.full(100, 3e-3)])  # warmup from zero
    chart = prepare_chart([SeriesRequest("run", 0, _series(lr))], ChartOptions(smoothing=0.0), 80, _smoother)
    assert chart.y_range[0] == 0.0 and chart.y_range[1] > 3e-3
    flat = prepare_chart([SeriesRequest("run", 0, _series(np.zeros(50)))], ChartOptions(), 80, _smoother)
    assert flat.y_range[0] == 0.0 < flat.y_range[1]
    signed = prepare_chart([SeriesRequest("run", 0, _series(np.linspace(-1, 1, 50)))], ChartOptions(), 80, _smoother)
    assert signed.y_range[0] < -1.0  # a series that goes negative keeps its margin


def test_rows_sorted_and_measured_the_fast_way_match_the_plain_definitions():
    # With 10,000 runs the table's rows are sorted and measured on every batch of verdicts: one stable sort on a
    # number over rows in name order, and the ages' widths from each unit's oldest age found by bisecting the sorted
    # wall times. Both must equal the plain definitions.
    import random

    from rich.cells import cell_len

    from tbtriage.tui.run_rows import RunRow
    from tbtriage.tui.widgets.run_table import RunTable

    rng = random.Random(7)
    rows = []
    for i in range(3000):
        age = rng.choice([None, rng.uniform(-5, 70), rng.uniform(0, 4000), rng.uniform(0, 9e4), rng.uniform(0, 9e7)])
        rows.append(
            RunRow(
                f"run{rng.randrange(10_000):05d}-{i}",
                rng.choice(["ok", "pending", "critical"]),
                rng.choice([None, rng.randrange(0, 101)]),
                rng.choice(["", "divergence@12", "plateau@123456"]),
                rng.choice([None, rng.randrange(-50, 10 ** rng.randrange(1, 9))]),
                None if age is None else NOW - age,
            )
        )
    plain_keys = {
        "name": lambda r: r.name,
        "step": lambda r: (r.last_step is None, -(r.last_step or 0), r.name),
        "liveness": lambda r: (r.wall is None, -(r.wall or 0.0), r.name),
        "health": lambda r: (r.health is None, r.health or 0, r.name),
    }
    by_name = sorted(rows, key=lambda r: r.name)
    for key, definition in plain_keys.items():
        assert sort_rows(rows, key) == sorted(rows, key=definition)
        assert sort_rows(by_name, key, by_name=True) == sorted(rows, key=definition)
    samples = (rows, rows[:1], [r for r in rows if r.wall is None or NOW - r.wall < 100], [])
    for sample, now in [(sample, NOW) for sample in samples] + [(rows, NOW + 250.0), (rows[:40], NOW + 86400.0)]:
        table = RunTable()
        table._now = now
        table._grow_columns(sample, sorted(r.wall for r in sample if r.wall is not None))
        start = RunTable()._widths
        ages = [age_of(r, now) for r in sample]
        expected = {
            "health": max([start["health"], *(1 if r.health is None else len(str(r.health)) for r in sample)]),
            "step": max([start["step"], *(1 if r.last_step is None else len(str(r.last_step)) for r in sample)]),
            "live": max([start["live"], *(len(format_age(age)) + (2 if is_live(age) else 0) for age in ages)]),
            "worst": max([start["worst"], *(cell_len(r.worst) for r in sample)]),
        }
        assert {k: table._widths[k] for k in expected} == expected


def test_the_store_builds_again_only_the_rows_of_runs_it_is_told_changed_and_sorts_once_per_change():
    from pathlib import Path

    from tbtriage.analysis.config import Config
    from tbtriage.tui.state import RunStore, ViewState

    store = RunStore(Config())
    for name, wall in (("a", NOW - 30.0), ("b", NOW - 5.0), ("c", None)):
        store.runs[name] = Run(name=name, path=Path(name), last_step=10, last_wall_time=wall)
    rows = store.rows(ViewState())[0]
    assert rows == [run_row(store.runs[name], None) for name in "abc"]
    assert sorted(store.take_fresh() or [], key=lambda r: r.name) == rows and store.take_fresh() == []
    assert store.walls == [NOW - 30.0, NOW - 5.0]
    assert store.rows(ViewState())[0] is rows  # nothing changed: the same rows, not sorted again
    assert [r.name for r in store.rows(ViewState(sort_key="liveness"))[0]] == ["b", "a", "c"]
    rows = store.rows(ViewState())[0]

    store.reports["a"] = report_for(store.runs["a"], [finding("a", "divergence", "critical", 5)], score=12)
    store.runs["b"].last_step, store.runs["b"].last_wall_time = 20, NOW
    assert store.rows(ViewState())[0] is rows  # not told: the rows stay as they were
    store.touch({"a", "b"})
    rows = store.rows(ViewState())[0]
    assert [(r.name, r.status, r.health, r.worst, r.last_step) for r in rows] == [
        ("a", "critical", 12, "divergence@5", 10),
        ("b", "pending", None, "", 20),
        ("c", "pending", None, "", 10),
    ]
    assert sorted(r.name for r in store.take_fresh() or []) == ["a", "b"]
    assert store.walls == [NOW - 30.0, NOW]

    del store.runs["a"]
    store.runs["d"] = Run(name="d", path=Path("d"), last_wall_time=NOW - 1.0)
    assert [r.name for r in store.rows(ViewState())[0]] == ["b", "c", "d"]  # runs gone and come need no telling
    assert store.walls == [NOW - 1.0, NOW]
    store.touch(None)
    assert store.rows(ViewState(run_filter="^[bd]$"))[0] == [run_row(store.runs[n], None) for n in "bd"]


def test_the_store_builds_many_rows_in_pieces_runs_never_shown_first(monkeypatch):
    from pathlib import Path

    from tbtriage.analysis.config import Config
    from tbtriage.tui import state
    from tbtriage.tui.state import RunStore, ViewState

    monkeypatch.setattr(state, "ROWS_AT_ONCE", 4)
    store = RunStore(Config())
    for i in range(6):
        store.runs[f"r{i}"] = Run(name=f"r{i}", path=Path("r"), last_step=i)
    assert len(store.rows(ViewState())[0]) == 4 and store.rows_due  # a run not built yet is not shown
    assert [r.name for r in store.rows(ViewState())[0]] == [f"r{i}" for i in range(6)] and not store.rows_due
    store.runs["new"] = Run(name="new", path=Path("n"), last_step=99)
    for run in store.runs.values():
        run.last_step = 50
    store.touch(None)
    rows = store.rows(ViewState())[0]
    assert "new" in [r.name for r in rows] and len(rows) == 7 and store.rows_due  # the new run among the first
    assert sum(r.last_step == 50 for r in rows if r.name != "new") == 3  # the others as they were until built
    rows = store.rows(ViewState(), whole=True)[0]
    assert all(r.last_step == 50 for r in rows) and not store.rows_due


def test_rows_moved_into_place_one_by_one_are_in_the_order_a_sort_gives():
    # A batch of verdicts changes a few rows of thousands: they are moved by bisection rather than all sorted again.
    import random

    from tbtriage.tui.run_rows import RunRow, place_rows

    rng = random.Random(3)

    def row(name: str) -> RunRow:
        wall = rng.choice([None, NOW - rng.choice([1.0, 5.0, rng.uniform(0, 1e5)])])
        return RunRow(name, "ok", rng.choice([None, 1, 50, rng.randrange(101)]), "", rng.choice([None, 7, 10]), wall)

    rows = {f"r{i:04d}": row(f"r{i:04d}") for i in range(2000)}
    for key in ("health", "name", "step", "liveness"):
        shown = sort_rows(list(rows.values()), key)
        for _ in range(5):
            changed = rng.sample(sorted(rows), 40)
            moves = [(rows[name], row(name)) for name in changed]
            moves.append((None, row(f"new{len(rows)}")))  # a run that came
            rows.update((new.name, new) for _, new in moves)
            assert place_rows(shown, key, moves)
            assert shown == sort_rows(list(rows.values()), key)
        assert not place_rows(shown, key, [(row("r0001"), row("r0001"))])  # not the row shown: sort again
