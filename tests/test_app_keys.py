"""Keys, help, palette, themes and the command line: one binding table behind all of them."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
from tensorboardX import SummaryWriter

from tbtriage.analysis.config import Config
from tbtriage.cli import app as cmd_app
from tbtriage.themes import THEME_ORDER, load_themes, series_colours
from tbtriage.tui.app import make_app
from tbtriage.tui.bindings import KEY_ACTIONS, SCREENS
from tbtriage.tui.commands import TriageCommands
from tbtriage.tui.screens.distributions import DistributionsScreen
from tbtriage.tui.screens.help import HelpScreen
from tbtriage.tui.widgets.series_style import series_style
from tests._app_data import HandAnalyzer, decaying_loss, drive, fixed_clock, settle, write_run


@pytest.fixture
def logdir(tmp_path):
    write_run(tmp_path, "run_a", {"train/loss": decaying_loss(20)})
    write_run(tmp_path, "run_b", {"train/loss": decaying_loss(20, seed=2)})
    with SummaryWriter(str(tmp_path / "run_a")) as writer:  # something for `h` to open
        for step in range(0, 20, 5):
            writer.add_histogram("grads/fc1.weight", np.random.default_rng(step).standard_normal(100), step)
    return tmp_path


def test_question_mark_shows_every_action_of_the_binding_table_with_remapped_keys(logdir):
    config = Config(keys={"log_y": "L", "quit": "ctrl+q"})
    app = make(logdir, config=config)

    async def scenario(app, pilot):
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        rows = {
            (str(k), str(a))
            for table in app.screen.tables
            for k, a in zip(table.columns[0].cells, table.columns[1].cells)
        }
        assert {action.id for action in KEY_ACTIONS} <= {a for _, a in rows}
        assert ("L", "log_y") in rows and ("^q", "quit") in rows
        await pilot.press("escape")

        await pilot.press("l")  # the old key no longer toggles log-y
        assert not app.view.options.log_y
        await pilot.press("L")
        assert app.view.options.log_y

    drive(app, scenario)


def test_unknown_actions_in_config_keys_are_reported_not_fatal(logdir):
    app = make(logdir, config=Config(keys={"teleport": "z"}))

    async def scenario(app, pilot):
        assert any("teleport" in n.message for n in app._notifications)

    drive(app, scenario)


def test_the_palette_offers_context_commands_and_run_names_stay_plain_text(logdir):
    write_run(logdir, "[red]odd", {"train/loss": decaying_loss(5)})
    app = make(logdir)

    async def scenario(app, pilot):
        provider = TriageCommands(app.screen)
        texts = [command.text for command in provider.commands()]
        assert "Toggle a logarithmic y axis" in texts
        assert "Export the charted series (raw and smoothed) to CSV in the current directory" in texts
        assert "Diagnose run with the local model" in texts
        assert {f"Switch theme to {name}" for name in THEME_ORDER} <= set(texts)
        assert "Open run [red]odd" in texts and "Copy the run's report (Markdown) to the clipboard" in texts

        hits = [hit async for hit in provider.search("open run red")]
        assert hits and hits[0].text == "Open run [red]odd"
        assert hits[0].prompt.plain == "Open run [red]odd"  # matched as text, never parsed as markup
        hits[0].command()
        await pilot.pause()
        assert app.screen.run_name == "[red]odd"

        on_dashboard = [command.text for command in TriageCommands(app.screen).commands()]
        assert "Toggle a logarithmic y axis" in on_dashboard
        assert not any(text.startswith("Open run") or text.startswith("Export") for text in on_dashboard)

    drive(app, scenario)


def test_t_cycles_the_themes_and_charts_take_the_new_colours(logdir):
    app = make(logdir)

    async def scenario(app, pilot):
        assert app.theme == "dark"
        dark_first = series_style(0, app.theme_variables, False).swatch
        await pilot.press("t")
        assert app.theme == "light"
        assert series_style(0, app.theme_variables, False).swatch != dark_first
        await pilot.press("t", "t", "t")
        assert app.theme == "dark"

    drive(app, scenario)


def test_no_color_chooses_the_monochrome_theme_unless_one_is_asked_for(logdir, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    assert make(logdir).theme == "monochrome"
    assert make(logdir, theme="light").theme == "light"


def test_monochrome_runs_differ_by_line_style_and_ascii_uses_ascii_markers():
    variables = load_themes()["monochrome"].variables
    styles = [series_style(slot, variables, ascii_only=False) for slot in range(3)]
    assert len({s.colour for s in styles}) == 1 and len({s.marker for s in styles}) == 3
    dark = load_themes()["dark"].variables
    beyond = series_style(len(series_colours(dark)), dark, ascii_only=False)
    assert beyond.colour == series_style(0, dark, False).colour and beyond.marker != series_style(0, dark, False).marker
    assert all(series_style(slot, dark, ascii_only=True).marker.isascii() for slot in range(40))


def test_the_cli_refuses_a_missing_logdir_or_theme_with_one_line(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    cmd_app.add_arguments(parser)

    assert cmd_app.run(parser.parse_args([str(tmp_path / "nope")])) == 2
    assert cmd_app.run(parser.parse_args([str(tmp_path), "--theme", "neon"])) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "nope" in err[0] and "neon" in err[1]
    args = parser.parse_args([])
    assert args.logdir == "." and args.follow and not args.ascii


def make(logdir, **kwargs):
    kwargs.setdefault("config", Config())  # never the developer's own config file
    return make_app(logdir, follow=False, clock=fixed_clock, analyzer=HandAnalyzer(), **kwargs)


def test_d_puts_the_local_models_diagnosis_under_the_rule_based_one_or_says_it_is_not_installed(logdir, monkeypatch):
    from tbtriage.tui.widgets import diagnosis

    app = make(logdir)

    async def scenario(app, pilot):
        monkeypatch.setattr(diagnosis, "llm_available", lambda: False)
        await pilot.press("d")
        pane = app.screen.query_one(diagnosis.DiagnosisPane)
        note = pane.query_one("#llm-note")
        assert "not installed" in str(note.render()) and not note.has_class("-empty")
        assert pane.query_one("#rule-based") is not None and not pane.query("LLMExplanation")
        assert pane.has_class("-show")

        monkeypatch.setattr(diagnosis, "llm_available", lambda: True)
        await pilot.press("d")
        await pilot.pause()
        (widget,) = pane.query("LLMExplanation")
        assert widget.report is app.reports[app.view.current_run] and note.has_class("-empty")
        widget.cancel()

    drive(app, scenario, size=(80, 24))  # narrow: the folded-away pane unfolds for the answer


#: What each palette action visibly does: (probe of the app, whether the probe must change or end true).
_EFFECTS = {
    "help": (lambda app: isinstance(app.screen, HelpScreen), "true"),
    "filter": (lambda app: bool(app.main_screen.query("#run-filter.-open")), "true"),  # mounted when first opened
    "smoothing": (lambda app: app.view.options.smoothing, "changes"),
    "log_y": (lambda app: app.view.options.log_y, "changes"),
    "x_axis": (lambda app: app.view.options.x_axis, "changes"),
    "outliers": (lambda app: app.view.options.ignore_outliers, "changes"),
    "export": (lambda app: any(n.title == "Exported CSV" for n in app._notifications), "true"),
    "follow": (lambda app: app.follow, "changes"),
    "diagnose": (lambda app: app.main_screen.query_one("#diagnosis").has_class("-show"), "true"),
    "all_findings": (lambda app: app.view.all_findings, "changes"),
    "copy_report": (lambda app: any("Copied the report" in n.message for n in app._notifications), "true"),
    "refresh": (lambda app: app.watcher.polls, "changes"),
    "theme": (lambda app: app.theme, "changes"),
    "zoom_in": (lambda app: app.view.options.window, "changes"),
    "zoom_out": (lambda app: app.view.options.window, "changes"),
    "pan_left": (lambda app: app.view.options.window, "changes"),
    "pan_right": (lambda app: app.view.options.window, "changes"),
    "reset_view": (lambda app: app.view.options.window is None, "true"),
    # Nothing is selected on the main screen here: `C` says how to compare (it opens the screen in test_app_compare).
    "compare": (lambda app: any("Select two or more runs" in n.message for n in app._notifications), "true"),
    "maximize": (lambda app: app.screen.maximized, "changes"),
    "histograms": (lambda app: isinstance(app.screen, DistributionsScreen), "true"),
}


@pytest.mark.parametrize("screen", SCREENS)
def test_on_every_screen_the_palette_offers_exactly_the_actions_that_work_there(
    logdir, tmp_path_factory, monkeypatch, screen
):
    from tbtriage.tui.widgets import diagnosis

    monkeypatch.chdir(tmp_path_factory.mktemp("out"))  # where `e` writes its CSV (never the logdir)
    monkeypatch.setattr(diagnosis, "llm_available", lambda: False)  # `d` says the model is not installed
    app = make(logdir)
    open_screen = {
        "main": (),
        "dashboard": ("enter",),
        "help": ("question_mark",),
        "compare": ("space", "j", "space", "C"),
        "distributions": ("h",),
    }[screen]

    async def scenario(app, pilot):
        await pilot.press(*open_screen)
        await settle(app, pilot)
        assert app.screen.SCREEN == screen
        commands = {c.text: c for c in TriageCommands(app.screen).commands() if c.help.startswith("key: ")}
        works_here = [a for a in KEY_ACTIONS if a.palette and screen in a.screens]
        assert sorted(commands) == sorted(a.help for a in works_here)
        for action in KEY_ACTIONS:  # the footer and the keys agree with the palette
            if action.scope == "app":
                assert app.check_action(action.name, ()) == (screen in action.screens), action.id

        # The actions that open a screen over this one last (help the very last): they cover the screen.
        for action in sorted(works_here, key=lambda a: (a.id == "help", a.id == "histograms")):
            if action.id == "quit":
                continue
            if action.id.startswith("pan"):
                await app.run_action("zoom(0.5)")  # a window to pan
            probe, expect = _EFFECTS[action.id]
            before = probe(app)
            await commands[action.help].run()
            await settle(app, pilot)
            assert probe(app) if expect == "true" else probe(app) != before, f"{action.id} on {screen}"

        await commands["Quit tbtriage"].run()
        assert app.return_code == 0

    drive(app, scenario)


def test_x_cycles_the_axis_on_the_dashboard_and_main_screen_keys_do_nothing_there(logdir):
    app = make(logdir)

    async def scenario(app, pilot):
        await pilot.press("enter", "x")
        assert app.view.options.x_axis == "relative"
        await pilot.press("plus", "a")  # zoom and all-findings act on the main screen only
        assert app.view.options.window is None and not app.view.all_findings

    drive(app, scenario)
