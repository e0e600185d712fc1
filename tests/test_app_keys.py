"""Keys, help, palette, themes and the command line: one binding table behind all of them."""

from __future__ import annotations

import argparse

import pytest

from tbtriage.analysis.config import Config
from tbtriage.cli import app as cmd_app
from tbtriage.themes import THEME_ORDER, load_themes, series_colours
from tbtriage.tui.app import make_app
from tbtriage.tui.bindings import KEY_ACTIONS
from tbtriage.tui.commands import TriageCommands
from tbtriage.tui.screens.help import HelpScreen
from tbtriage.tui.widgets.series_style import series_style
from tests._app_data import HandAnalyzer, decaying_loss, drive, fixed_clock, write_run


@pytest.fixture
def logdir(tmp_path):
    write_run(tmp_path, "run_a", {"train/loss": decaying_loss(20)})
    write_run(tmp_path, "run_b", {"train/loss": decaying_loss(20, seed=2)})
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
        assert not app.options.log_y
        await pilot.press("L")
        assert app.options.log_y

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
        assert widget.report is app.reports[app.current_run] and note.has_class("-empty")
        widget.cancel()

    drive(app, scenario, size=(80, 24))  # narrow: the folded-away pane unfolds for the answer
