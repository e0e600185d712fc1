"""The app's view state changes as pure functions of (view, store): no terminal needed."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tbtriage.analysis.config import Config
from tbtriage.analysis.datamodel import Run, Series
from tbtriage.tui.state import RunStore, ViewState, choose_run, choose_tag, jump_to, toggle_selected
from tests._report_data import finding


def _run(name: str, tags: list[str], points: int = 100) -> Run:
    steps = np.arange(points, dtype=np.int64) * 10
    series = {tag: Series(steps, 1e9 + steps.astype(np.float64), np.linspace(2.0, 0.5, points)) for tag in tags}
    return Run(name=name, path=Path(name), scalars=series, last_step=int(steps[-1]), last_wall_time=1e9 + steps[-1])


def _store() -> RunStore:
    store = RunStore(Config())
    store.runs = {
        "bert": _run("bert", ["train/loss", "val/loss", "lr"]),
        "gpt": _run("gpt", ["train/loss", "grad_norm"]),
        "probe": _run("probe", ["val/accuracy"]),
    }
    return store


def test_moving_to_a_run_keeps_the_charted_tag_when_it_has_it_and_else_charts_its_headline():
    store = _store()
    view = choose_run(ViewState(), store, "bert")
    assert view.current_tag == "train/loss"
    view = choose_tag(view, "val/loss")
    assert choose_run(view, store, "gpt").current_tag == "train/loss"  # gpt has no val/loss
    assert choose_run(view, store, "probe").current_tag == "val/accuracy"


def test_choosing_another_tag_drops_the_zoom_window_of_the_old_one():
    view = ViewState(current_tag="train/loss")
    view = jump_to(view, _store(), finding("bert", "loss_spike", "warning", 500, tags=("train/loss",)))
    assert view.options.window is not None
    assert choose_tag(view, "lr").options.window is None


def test_selecting_and_unselecting_runs_overlays_them_in_the_order_picked():
    store = _store()
    view = choose_run(ViewState(), store, "bert")
    view = toggle_selected(toggle_selected(view, store, "gpt"), store, "bert")
    assert view.selected == ("gpt", "bert") and store.charted_runs(view) == ["gpt", "bert"]
    view = toggle_selected(view, store, "gpt")
    assert view.selected == ("bert",)


def test_a_finding_jump_zooms_the_step_axis_around_its_range_with_five_percent_context():
    store = _store()
    view = ViewState(current_run="gpt", options=ViewState().options.next_x_axis())
    spike = finding("bert", "loss_spike", "warning", 500, tags=("val/loss",))
    view = jump_to(view, store, spike)
    assert (view.current_run, view.current_tag, view.options.x_axis) == ("bert", "val/loss", "step")
    assert view.options.window == (500 - 49.5, 500 + 49.5)  # 5 % of the 990-step run on each side
