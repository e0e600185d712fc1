"""The distributions screen as a user drives it: `h` opens it on the run under the cursor, the chart shows
the highlighted histogram tag's percentile bands, `[`/`]` move the histogram at a step through the logged
steps, `v` switches to the gradient flow, `esc` goes back. Event files are real (tensorboardX)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tensorboardX import SummaryWriter

from tbtriage.analysis.config import Config
from tbtriage.analysis.histograms import summarise
from tbtriage.tui.app import make_app
from tbtriage.tui.bindings import palette_actions
from tbtriage.tui.screens.dashboard import RunDashboard
from tbtriage.tui.screens.distributions import DistributionsScreen, histogram_order
from tbtriage.tui.screens.main import MainScreen
from tbtriage.tui.widgets.distribution_chart import DistributionChart, HistogramAtStep, band_depths, rebucket
from tbtriage.tui.widgets.grad_heatmap import GradHeatmap, LayerBars
from tests._app_data import HandAnalyzer, decaying_loss, drive, fixed_clock, write_run

STEPS = np.arange(0, 200, 10)


def _histogram_run(logdir: Path, name: str = "hist_run", extra: tuple[str, ...] = ()) -> Path:
    """Loss every step; gradient, weight and ReLU histograms (and `extra` ones) every 10 steps; layer 0's
    gradient shrinks."""
    write_run(logdir, name, {"train/loss": decaying_loss(200)})
    rng = np.random.default_rng(0)
    writer = SummaryWriter(str(logdir / name))
    for step in STEPS:
        for k in range(3):
            scale = 0.01 * (0.5 ** (step / 40) if k == 0 else 1.0)
            writer.add_histogram(f"grads/fc{k}.weight", scale * rng.standard_normal(500), int(step))
            writer.add_histogram(f"weights/fc{k}.weight", 0.1 * rng.standard_normal(500), int(step))
        writer.add_histogram("activations/relu1", np.maximum(rng.standard_normal(500), 0), int(step))
        for tag in extra:
            writer.add_histogram(tag, rng.standard_normal(100), int(step))
    writer.close()
    return logdir / name


def _app(logdir: Path):
    return make_app(logdir, config=Config(), follow=False, clock=fixed_clock, analyzer=HandAnalyzer())


def test_h_opens_the_distributions_of_the_run_under_the_cursor_and_brackets_move_the_step(tmp_path):
    _histogram_run(tmp_path)
    seen = {}

    async def scenario(app, pilot):
        await pilot.press("h")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DistributionsScreen) and screen.run_name == "hist_run"
        chart, at_step = screen.query_one(DistributionChart), screen.query_one(HistogramAtStep)
        # Gradients first: where trouble shows first.
        assert screen.tag == "grads/fc0.weight" and chart.series is app.store.runs["hist_run"].histograms[screen.tag]
        seen["start"] = (chart.cursor, at_step.index)
        await pilot.press("left_square_bracket", "left_square_bracket")
        await pilot.pause()
        seen["back"] = (chart.cursor, at_step.index, screen.step)
        await pilot.press("right_square_bracket")
        await pilot.pause()
        seen["forward"] = at_step.index
        await pilot.press("down")
        await pilot.pause()
        seen["next_tag"] = (screen.tag, chart.series is app.store.runs["hist_run"].histograms["grads/fc1.weight"])
        seen["title"] = str(screen.query_one("#histogram-pane").border_title)
        await pilot.press("escape")
        await pilot.pause()
        seen["back_to"] = type(app.screen)

    drive(_app(tmp_path), scenario, size=(120, 36))
    assert seen["start"] == (len(STEPS) - 1, len(STEPS) - 1)  # the last step first
    assert seen["back"] == (len(STEPS) - 3, len(STEPS) - 3, int(STEPS[-3]))
    assert seen["forward"] == len(STEPS) - 2
    assert seen["next_tag"] == ("grads/fc1.weight", True)
    assert seen["title"].startswith(f"grads/fc1.weight at step {int(STEPS[-2])} ({len(STEPS) - 1}/{len(STEPS)})")
    assert seen["back_to"] is MainScreen


def test_v_shows_the_gradient_flow_from_gradient_histograms_with_the_weak_layer_shortest(tmp_path):
    _histogram_run(tmp_path)
    seen = {}

    async def scenario(app, pilot):
        await pilot.press("h", "v")
        await pilot.pause()
        screen = app.screen
        bars, heatmap = screen.query_one(LayerBars), screen.query_one(GradHeatmap)
        seen["layers"] = sorted(bars.grad_layers)
        seen["step"] = (bars.step, heatmap.cursor_step)
        seen["source"] = screen.grad_source
        seen["text"] = str(bars.render())
        await pilot.press("left_square_bracket")
        await pilot.pause()
        seen["moved"] = (bars.step, heatmap.cursor_step)
        seen["shown"] = (screen.query_one("#flow-bars-pane").display, screen.query_one("#distribution-pane").display)

    drive(_app(tmp_path), scenario, size=(120, 36))
    assert seen["layers"] == ["grads/fc0.weight", "grads/fc1.weight", "grads/fc2.weight"]
    assert seen["step"] == (int(STEPS[-1]), int(STEPS[-1])) and seen["source"] == "histograms"
    assert seen["moved"] == (int(STEPS[-2]), int(STEPS[-2]))
    assert seen["shown"] == (True, False)
    rows = {line.split()[0]: line.count("█") for line in seen["text"].splitlines() if line.strip()}
    assert rows["fc0.weight"] < rows["fc1.weight"] and rows["fc0.weight"] < rows["fc2.weight"]


def test_the_dashboard_draws_gradient_histograms_when_the_run_has_no_per_layer_norm_scalars(tmp_path):
    _histogram_run(tmp_path)
    seen = {}

    async def scenario(app, pilot):
        app.open_dashboard("hist_run")
        await pilot.pause()
        dashboard = app.screen
        assert isinstance(dashboard, RunDashboard)
        seen["empty"] = dashboard.query_one("#panel-grads").has_class("-empty")
        seen["layers"] = sorted(dashboard.query_one(GradHeatmap).grad_layers)
        seen["title"] = str(dashboard.query_one("#panel-grads").border_title)
        await pilot.press("h")
        await pilot.pause()
        seen["opened"] = type(app.screen)

    drive(_app(tmp_path), scenario)
    assert seen["empty"] is False and seen["title"].endswith("from gradient histograms")
    assert seen["layers"] == ["grads/fc0.weight", "grads/fc1.weight", "grads/fc2.weight"]
    assert seen["opened"] is DistributionsScreen


def test_h_on_a_run_without_histograms_says_so_and_stays(tmp_path):
    write_run(tmp_path, "plain", {"train/loss": decaying_loss(50)})
    seen = {}

    async def scenario(app, pilot):
        await pilot.press("h")
        await pilot.pause()
        seen["screen"] = type(app.screen)
        seen["notes"] = [n.message for n in app._notifications]

    drive(_app(tmp_path), scenario)
    assert seen["screen"] is MainScreen
    assert any("no histograms" in note for note in seen["notes"])


def test_the_palette_offers_histograms_where_a_run_is_chosen_and_chart_keys_only_on_scalar_charts():
    offered = {screen: {a.id for a in palette_actions(screen)} for screen in ("main", "dashboard", "distributions")}
    assert "histograms" in offered["main"] and "histograms" in offered["dashboard"]
    assert "histograms" not in offered["distributions"]
    assert not {"smoothing", "log_y", "x_axis", "outliers"} & offered["distributions"]
    assert {"help", "quit", "theme"} <= offered["distributions"]


def test_bands_nest_inwards_and_the_median_sits_inside_the_innermost(tmp_path):
    histograms = _histogram_run(tmp_path)
    import tbtriage

    series = tbtriage.load(histograms.parent).runs["hist_run"].histograms["weights/fc1.weight"]
    depth, median_row, shown = band_depths(summarise(series), columns=40, rows=20)
    assert shown[-1] == len(series) - 1 and (shown >= 0).all()
    for column in range(40):
        rows = depth[:, column]
        inner = np.flatnonzero(rows == 4)
        assert inner.size and inner[0] <= median_row[column] <= inner[-1]
        peak = int(np.argmax(rows))
        assert (np.diff(rows[: peak + 1]) >= 0).all() and (np.diff(rows[peak:]) <= 0).all()  # nested bands
    edges, counts = rebucket(series, 3, 12)
    assert counts.sum() == series.counts[3].sum() and edges.size == 13


def test_histogram_tags_list_gradients_then_weights_then_activations_then_the_rest():
    tags = ["loss_distribution", "activations/relu1", "weights/fc0.weight", "grads/fc1.weight", "grads/fc0.weight"]
    assert histogram_order(tags) == [
        "grads/fc0.weight",
        "grads/fc1.weight",
        "weights/fc0.weight",
        "activations/relu1",
        "loss_distribution",
    ]


def test_with_ascii_the_charts_bars_and_tag_list_use_printable_ascii_only(tmp_path):
    _histogram_run(tmp_path, extra=("activations/a_very_long_module_name.block3.relu",))  # wider than the list
    seen = {}

    async def scenario(app, pilot):
        await pilot.press("h", "left_square_bracket")
        await pilot.pause()
        screen = app.screen
        options = screen.query_one("#hist-tags")
        seen["distributions"] = [str(screen.query_one(w).render()) for w in (DistributionChart, HistogramAtStep)]
        seen["tags"] = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        await pilot.press("v")
        await pilot.pause()
        seen["flow"] = [str(screen.query_one(w).render()) for w in (LayerBars, GradHeatmap)]

    app = make_app(tmp_path, config=Config(), follow=False, clock=fixed_clock, analyzer=HandAnalyzer(), ascii=True)
    drive(app, scenario, size=(120, 36))
    for text in seen["distributions"] + seen["tags"] + seen["flow"]:
        assert text.isascii(), text
    assert "^" in seen["distributions"][0] and "#" in seen["flow"][0]
    assert any(tag.startswith("~") and tag.endswith("block3.relu") for tag in seen["tags"])
