"""Why is this run worse than that one: compare two selected runs, read a pane maximised, filter runs by value."""

from __future__ import annotations

import numpy as np
import pytest
from textual.widgets import Markdown

from tbtriage.tui.app import make_app
from tbtriage.tui.screens.compare import CompareScreen, PartingChart
from tbtriage.tui.widgets.markdown_view import MarkdownView
from tbtriage.tui.widgets.run_table import RunTable
from tests._app_data import decaying_loss, drive, fixed_clock, write_run

POINTS = 300


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    """A sweep the real engine judges: one lr diverges at step 200, its twin beside it trains fine."""
    root = tmp_path_factory.mktemp("sweep")
    loss = decaying_loss(POINTS, seed=1)
    diverged = decaying_loss(POINTS, seed=1)
    diverged[200:] = np.nan
    accuracy = np.linspace(0.1, 0.9, POINTS)
    write_run(root, "gpt_lr1e-3", {"train/loss": loss, "val/accuracy": accuracy})
    write_run(root, "gpt_lr3e-2", {"train/loss": diverged, "val/accuracy": accuracy * 0.5})
    write_run(root, "vit_small", {"train/loss": loss * 1.5, "val/accuracy": accuracy * 0.8})
    return root


async def _select(pilot, table: RunTable, *names: str) -> None:
    for name in names:
        table.move_cursor(table.index_of(name))
        await pilot.press("space")


def _markdown(screen) -> str:
    return screen.query_one("#compare-markdown", Markdown).source


def test_selecting_two_runs_and_pressing_C_shows_what_differs_and_where_they_part(logdir):
    app = make_app(logdir, follow=False, clock=fixed_clock)

    async def scenario(app, pilot):
        table = app.screen.query_one(RunTable)
        await _select(pilot, table, "gpt_lr3e-2", "gpt_lr1e-3")
        await pilot.press("C")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen) and screen.runs == ("gpt_lr3e-2", "gpt_lr1e-3")
        text = _markdown(screen)
        assert "| `lr` | 0.03 | 0.001 |" in text  # the setting that differs, read off the names
        assert "part at step 200" in text
        assert "likeliest cause" in text  # the engine's explanation from the healthy twin
        chart = screen.query_one(PartingChart)
        assert chart.parting_steps == (200,)
        assert [r.run for r in chart.requests] == ["gpt_lr3e-2", "gpt_lr1e-3"]
        assert "parts at step 200" in str(screen.query_one("#compare-legend").render())
        await pilot.press("escape")
        assert not isinstance(app.screen, CompareScreen)

    drive(app, scenario)


def test_C_with_fewer_than_two_selected_runs_says_how_to_compare(logdir):
    app = make_app(logdir, follow=False, clock=fixed_clock)

    async def scenario(app, pilot):
        await pilot.press("C")
        await pilot.pause()
        assert not isinstance(app.screen, CompareScreen)
        assert any("Select two or more runs" in str(n.message) for n in app._notifications)

    drive(app, scenario)


def test_z_maximises_the_focused_pane_and_restores_it(logdir):
    app = make_app(logdir, follow=False, clock=fixed_clock)

    async def scenario(app, pilot):
        screen = app.screen
        await pilot.press("z")
        assert screen.maximized is screen.query_one("#runs-pane")
        await pilot.press("z")
        assert screen.maximized is None
        screen.query_one("#chart-pane").focus()
        await pilot.press("z")
        await pilot.pause()
        assert screen.maximized is screen.query_one("#chart-pane")
        assert screen.query_one("#chart-pane").outer_size.width == 160  # the whole screen's width
        await pilot.press("z")
        assert screen.maximized is None
        screen.query_one("#diagnosis").focus()  # a scrolling pane: arrows and page keys scroll it
        await pilot.press("z")
        await pilot.pause()
        assert screen.maximized is screen.query_one("#diagnosis")
        assert screen.query_one("#rule-based").size.width <= 100  # prose wraps at a readable width

    drive(app, scenario)


def test_the_filter_keeps_runs_by_value_and_ranks_them(logdir):
    app = make_app(logdir, follow=False, clock=fixed_clock)

    async def scenario(app, pilot):
        table = app.screen.query_one(RunTable)
        await pilot.press("slash", *"best:val/accuracy>0.6", "enter")
        assert sorted(table.names) == ["gpt_lr1e-3", "vit_small"]
        await pilot.press("slash", *["backspace"] * 30, *"top 2 by accuracy", "enter")
        assert table.names == ["gpt_lr1e-3", "vit_small"]  # best first, whatever the sort
        await pilot.press("slash", *["backspace"] * 30, *"bottom 1 by best:val/accuracy", "enter")
        assert table.names == ["gpt_lr3e-2"]

    drive(app, scenario)


def test_a_bad_filter_expression_says_why_in_the_filter_bar_and_keeps_every_run(logdir):
    app = make_app(logdir, follow=False, clock=fixed_clock)

    async def scenario(app, pilot):
        table = app.screen.query_one(RunTable)
        await pilot.press("slash", *"val/accuracy>")
        await pilot.pause()
        error = app.screen.query_one("#run-filter-error")
        assert error.has_class("-show") and "expected TAG>NUMBER" in str(error.render())
        assert len(table.names) == 3
        await pilot.press(*"0.6")
        await pilot.pause()
        assert not error.has_class("-show") and len(table.names) == 2

    drive(app, scenario)


def test_the_help_lists_the_filter_syntax_and_the_compare_and_maximise_keys():
    import io

    from rich.console import Console

    from tbtriage.tui.screens.help import help_tables

    console = Console(width=160, file=io.StringIO(), color_system=None)
    for table in help_tables({}):
        console.print(table)
    text = console.file.getvalue()
    assert "top 10 by TAG" in text and "best:TAG>=0.8" in text
    assert "Compare the selected runs side by side" in text and "Maximise the focused pane" in text


def test_a_long_diagnosis_scrolls_from_the_keyboard(logdir):
    app = make_app(logdir, follow=False, clock=fixed_clock)

    async def scenario(app, pilot):
        pane = app.screen.query_one("#diagnosis")
        pane.query_one("#rule-based", MarkdownView).update("\n\n".join(f"paragraph {i}" for i in range(200)))
        pane.focus()
        await pilot.pause()
        assert pane.max_scroll_y > 0 and pane.scroll_y == 0
        await pilot.press("pagedown")
        await pilot.pause()
        assert pane.scroll_y > 0

    drive(app, scenario)
