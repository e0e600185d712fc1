"""The chart pane in use: smoothing, log-y, x axis, zoom, a jump from a finding, and the CSV export."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from tbtriage.tui.app import make_app
from tbtriage.tui.chart_data import SMOOTHING_WEIGHTS
from tbtriage.tui.widgets.findings_list import FindingsList
from tbtriage.tui.widgets.tag_chart import TagChart
from tests._app_data import HandAnalyzer, decaying_loss, drive, fixed_clock, settle, write_run
from tests._report_data import finding

SPIKE_STEP = 150


@pytest.fixture
def logdir(tmp_path):
    loss = decaying_loss(300)
    loss[SPIKE_STEP] = 50.0
    write_run(tmp_path, "spiky", {"train/loss": loss, "train/grad_norm": np.full(300, 2.0)})
    write_run(tmp_path, "calm", {"train/loss": decaying_loss(300, seed=1)})
    return tmp_path


def _analyzer():
    spike = finding("spiky", "loss_spike", "warning", SPIKE_STEP, tags=("train/loss",))
    return HandAnalyzer({"spiky": (55, [spike])})


def test_s_l_x_and_o_change_the_chart_and_log_y_survives_rebuilds(logdir):
    app = make_app(logdir, follow=False, clock=fixed_clock, analyzer=_analyzer())

    async def scenario(app, pilot):
        chart = app.screen.query_one(TagChart)
        assert app.view.options.smoothing == SMOOTHING_WEIGHTS[0] and chart.prepared().lines[0].smooth is not None

        await pilot.press("s")
        assert app.view.options.smoothing == SMOOTHING_WEIGHTS[1]
        assert chart.options is app.view.options  # the chart redraws with what the key chose

        await pilot.press("l")
        drawn = chart.prepared()
        assert app.view.options.log_y and drawn.y_ticks is not None
        assert drawn.lines[0].raw.y.max() == pytest.approx(np.log10(50.0), rel=1e-6)  # the spike, on a log axis
        # plotext's own log scale fails on a second build; ours must survive resizes and redraws.
        for size in ((120, 40), (90, 30), (160, 48)):
            await pilot.resize_terminal(*size)
            await pilot.pause()
            chart.render()
            chart.render()

        await pilot.press("x")
        assert app.view.options.x_axis == "relative" and chart.prepared().x_label.startswith("relative time")
        await pilot.press("x")
        assert app.view.options.x_axis == "wall" and chart.prepared().x_ticks is not None

        await pilot.press("o")
        assert app.view.options.ignore_outliers
        low, high = chart.prepared().y_range
        assert high < np.log10(50.0)  # the 5-95 % range ignores the spike

    drive(app, scenario)


def test_zoom_and_pan_stay_inside_the_data_and_zero_resets(logdir):
    app = make_app(logdir, follow=False, clock=fixed_clock, analyzer=_analyzer())

    async def scenario(app, pilot):
        await pilot.press("plus")
        lo, hi = app.view.options.window
        assert (lo, hi) == pytest.approx((74.75, 224.25))  # the middle half of steps 0-299

        await pilot.press("right_square_bracket", "right_square_bracket", "right_square_bracket")
        lo, hi = app.view.options.window
        assert hi == pytest.approx(299.0) and hi - lo == pytest.approx(149.5)

        await pilot.press("0")
        assert app.view.options.window is None

    drive(app, scenario)


def test_enter_on_a_finding_charts_its_run_and_tag_around_its_step(logdir):
    app = make_app(logdir, follow=False, clock=fixed_clock, analyzer=_analyzer())

    async def scenario(app, pilot):
        await pilot.press("j")  # the calm run: the finding is about the other one
        await pilot.press("a")  # findings of every run
        app.screen.query_one(FindingsList).focus()
        await pilot.press("enter")

        assert app.view.current_run == "spiky" and app.view.current_tag == "train/loss"
        lo, hi = app.view.options.window
        assert lo < SPIKE_STEP < hi and hi - lo < 100
        onsets = app.screen.query_one(TagChart).prepared().onsets
        assert [(o.x, o.kind) for o in onsets] == [(SPIKE_STEP, "loss_spike")]

    drive(app, scenario)


def test_e_exports_raw_and_smoothed_series_of_the_selected_runs_to_the_current_directory(logdir, tmp_path, monkeypatch):
    out_dir = tmp_path.parent / f"{tmp_path.name}-out"  # outside the logdir: tbtriage never writes into it
    out_dir.mkdir()
    monkeypatch.chdir(out_dir)
    app = make_app(logdir, follow=False, clock=fixed_clock, analyzer=_analyzer())
    notes = []

    async def scenario(app, pilot):
        await pilot.press("space", "j", "space", "e")
        await settle(app, pilot)
        notes.extend(n.message for n in app._notifications)

    drive(app, scenario)
    (written,) = out_dir.glob("tbtriage-train_loss-*.csv")
    rows = list(csv.DictReader(written.open()))
    assert {r["run"] for r in rows} == {"spiky", "calm"} and len(rows) == 600
    spike = next(r for r in rows if r["run"] == "spiky" and r["step"] == str(SPIKE_STEP))
    assert float(spike["value"]) == 50.0 and float(spike["smoothed"]) < 50.0
    assert any(str(written) in note for note in notes)
