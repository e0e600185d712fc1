"""The morning walk through the app: open a logdir, find the bad runs, overlay two of them."""

from __future__ import annotations

import numpy as np
import pytest

from tbtriage.tui.app import make_app
from tbtriage.tui.widgets.run_table import RunTable
from tbtriage.tui.widgets.tag_chart import TagChart
from tbtriage.tui.widgets.tag_tree import TagTree
from tests._app_data import HandAnalyzer, decaying_loss, drive, fixed_clock, write_run
from tests._report_data import finding


@pytest.fixture
def logdir(tmp_path):
    loss = decaying_loss(60)
    diverged = loss.copy()
    diverged[40:] = np.nan
    write_run(tmp_path, "baseline_lr1e-3", {"train/loss": loss, "val/loss": loss + 0.1})
    write_run(tmp_path, "big_lr3e-2", {"train/loss": diverged, "val/loss": loss + 0.2})
    write_run(tmp_path, "small_batch", {"train/loss": loss * 1.1, "val/loss": loss + 0.4})
    return tmp_path


def _analyzer():
    return HandAnalyzer({
        "big_lr3e-2": (12, [finding("big_lr3e-2", "divergence", "critical", 40, tags=("train/loss",))]),
        "small_batch": (61, [finding("small_batch", "overfitting", "warning", 30, tags=("val/loss",))]),
    })  # fmt: skip


def test_opening_a_logdir_lists_every_run_worst_health_first(logdir):
    app = make_app(logdir, follow=False, clock=fixed_clock, analyzer=_analyzer())

    async def scenario(app, pilot):
        table = app.screen.query_one(RunTable)

        assert table.names == ["big_lr3e-2", "small_batch", "baseline_lr1e-3"]
        first_row = [cell.plain for cell in table.cells_at(0)]
        assert first_row[1] == "✖" and first_row[2] == "12" and first_row[-1] == "divergence@40"
        assert app.view.current_tag == "train/loss"  # the headline loss is charted without asking

    drive(app, scenario)


def test_a_slash_regex_filter_narrows_the_runs_and_escape_brings_them_back(logdir):
    app = make_app(logdir, follow=False, clock=fixed_clock, analyzer=_analyzer())

    async def scenario(app, pilot):
        table = app.screen.query_one(RunTable)

        await pilot.press("slash", *"LR\\d", "enter")
        assert sorted(table.names) == ["baseline_lr1e-3", "big_lr3e-2"]  # case-insensitive
        assert app.focused is table

        await pilot.press("slash", "backspace", "backspace", "backspace", "backspace", "[")
        assert len(table.names) == 3 and app.screen.query_one("#run-filter").has_class("-invalid")

        await pilot.press("escape")
        assert len(table.names) == 3 and app.view.run_filter == ""

    drive(app, scenario)


def test_space_selects_two_runs_and_the_chart_overlays_them_in_their_own_colours(logdir):
    app = make_app(logdir, follow=False, clock=fixed_clock, analyzer=_analyzer())

    async def scenario(app, pilot):
        await pilot.press("space", "j", "j", "space")
        chart = app.screen.query_one(TagChart)

        assert [r.run for r in chart.requests] == ["big_lr3e-2", "baseline_lr1e-3"]
        assert len({r.slot for r in chart.requests}) == 2
        legend = str(app.screen.query_one("#legend").render())
        assert "big_lr3e-2" in legend and "baseline_lr1e-3" in legend
        # The diverged run's NaN tail is drawn as markers, not dropped.
        drawn = chart.prepared()
        assert drawn.lines[0].raw.nan_x.size > 0 and drawn.lines[0].raw.nan_x.min() == 40

    drive(app, scenario)


def test_markup_and_escape_sequences_in_names_show_literally(tmp_path):
    write_run(tmp_path, "[bold red]evil", {"[bold red]x": decaying_loss(10), "loss\x1b[31m": decaying_loss(10)})
    app = make_app(tmp_path, follow=False, clock=fixed_clock, analyzer=HandAnalyzer())

    async def scenario(app, pilot):
        table = app.screen.query_one(RunTable)
        tree = app.screen.query_one(TagTree)

        assert table.cells_at(0)[3].plain == "[bold red]evil"
        leaves = [str(node.label) for node in tree.root.children]
        assert any(label.startswith("[bold red]x") for label in leaves)
        assert any(label.startswith("loss\\x1b[31m") for label in leaves)
        screen = app.export_screenshot()
        assert "red]evil" in screen and "\x1b" not in screen

    drive(app, scenario)


def test_vim_keys_move_through_the_lists_and_shift_s_cycles_the_sort(logdir):
    app = make_app(logdir, follow=False, clock=fixed_clock, analyzer=_analyzer())

    async def scenario(app, pilot):
        table = app.screen.query_one(RunTable)
        await pilot.press("G")
        assert app.view.current_run == "baseline_lr1e-3"
        await pilot.press("g")
        assert app.view.current_run == "big_lr3e-2"
        await pilot.press("k", "j")
        assert app.view.current_run == "small_batch"

        await pilot.press("S")
        assert app.view.sort_key == "name" and table.names == ["baseline_lr1e-3", "big_lr3e-2", "small_batch"]
        assert app.view.current_run == "small_batch"  # the cursor stays with its run

    drive(app, scenario)


def test_slash_in_the_tags_pane_filters_the_tags(logdir):
    app = make_app(logdir, follow=False, clock=fixed_clock, analyzer=_analyzer())

    async def scenario(app, pilot):
        tree = app.screen.query_one(TagTree)
        tree.focus()
        await pilot.press("slash", *"^val", "enter")
        leaves = [node.data for node in tree.root.children[0].children]
        assert leaves == ["val/loss"] and len(tree.root.children) == 1
        assert len(app.screen.query_one(RunTable).names) == 3  # the runs are not filtered

        assert tree.current_tag is None  # the charted tag is filtered out: no leaf pretends to be charted
        await pilot.press("G")  # onto the val/loss leaf: the chart follows the highlighted tag
        await pilot.pause()
        assert app.view.current_tag == "val/loss"
        assert app.screen.query_one(TagChart).prepared().lines[0].raw.y.min() > 0.2  # val = train + 0.1..0.4

    drive(app, scenario)
