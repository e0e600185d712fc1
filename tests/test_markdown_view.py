"""The Diagnosis pane's Markdown, drawn by one widget (`tui.widgets.markdown_view`): what it draws matches what
Textual's Markdown widget drew for the same report, its text is never read as markup, a document as tall as the last
one is redrawn without laying the screen out again, a theme change redraws it in the theme's colours, and a mouse
selection is highlighted and copied as drawn."""

from __future__ import annotations

import numpy as np
import pytest
from textual.app import App, ComposeResult
from textual.widgets import Markdown

from tbtriage.analysis.datamodel import Finding, Run, Series
from tbtriage.analysis.render_markdown import run_markdown
from tbtriage.tui.safe_text import multiline
from tbtriage.tui.widgets.markdown_view import MarkdownView, _blocks, _parser, iter_text, parse
from tests._app_data import drive, report_for


def _report(name: str = "gpt_lr1e-3"):
    steps = np.arange(300, dtype=np.int64)
    loss = Series(steps, steps.astype(np.float64), np.linspace(2.0, 0.5, 300))
    run = Run(name=name, path=f"/logs/{name}", scalars={"train/loss": loss, "val/loss": loss})
    findings = [
        Finding(
            "exploding_gradients",
            "critical",
            name,
            ("train/grad_norm", "grad_norm/embed", "grad_norm/layer0"),
            36140,
            44990,
            {"max": 1.604e5, "ratio": 160400.0, "steps": [36140, 36150, 36160, 36170, 36180, 36190, 36200, 36210]},
            "exploded from step 36140 (×1.604e+05)",
            "clip gradients (e.g. max-norm 1.0) and lower the learning rate",
        ),
        Finding(
            "overfitting",
            "warning",
            name,
            ("val/loss", "train/loss"),
            200,
            None,
            {"gap": 0.31},
            "val/loss rose 12% from its best while train/loss kept falling",
            "stop at the best checkpoint, or add weight decay / augmentation",
        ),
    ]
    return report_for(run, findings, score=40)


class _Both(App):
    """Textual's Markdown widget and the view, each given the same width, one above the other."""

    CSS = "Markdown, MarkdownView { width: 1fr; }"

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        yield Markdown(self.text)
        yield MarkdownView(self.text)


def _lines(widget) -> list[str]:
    """What the screen shows in `widget`'s region (children included), line by line."""
    region = widget.region
    screen = widget.screen._compositor.render_strips()  # the screen as drawn: Markdown's blocks are its children
    return [strip.crop(region.x, region.right).text.rstrip() for strip in screen[region.y : region.bottom]]


def _colour_of(words: str, widget):
    """The foreground colour the screen draws `words` in, inside `widget`'s region."""
    region = widget.region
    for strip in widget.screen._compositor.render_strips()[region.y : region.bottom]:
        for segment in strip.crop(region.x, region.right):
            if words in segment.text:
                return segment.style.color
    return None


@pytest.mark.parametrize("width", [44, 72, 120])
def test_a_report_is_drawn_line_for_line_as_textuals_markdown_widget_drew_it(width):
    text = multiline(run_markdown(_report()))
    assert "1. " in text and "   - " in text  # a numbered list of findings, each with its bullets
    app = _Both(text)

    async def scenario(app, pilot):
        await pilot.pause()
        markdown, view = app.query_one(Markdown), app.query_one(MarkdownView)
        assert view.size.height == markdown.size.height > 10
        assert _lines(view) == _lines(markdown)
        assert [f"  {line}".rstrip() for line in iter_text(view)] == _lines(view)  # inside its padding of 2
        # The heading in the theme's Markdown heading colour, as Textual's widget draws it.
        assert _colour_of("· health", markdown) == _colour_of("· health", view) is not None

    drive(app, scenario, size=(width, 80), wait=False)


def test_text_from_event_files_is_drawn_as_written_never_as_markup():
    name = "[bold red]run[/] $accent [link=x]y[/link] \x1b[31m"
    report = _report(name)
    app = _Both(multiline(run_markdown(report)))

    async def scenario(app, pilot):
        await pilot.pause()
        drawn = "\n".join(iter_text(app.query_one(MarkdownView)))
        assert "[bold red]run[/] $accent [link=x]y[/link]" in drawn
        assert "\x1b" not in drawn  # the escape is shown as a visible escape (`text.clean`), not sent

    drive(app, scenario, size=(120, 60), wait=False)


def test_a_one_line_note_is_drawn_without_the_parser_exactly_as_parsed():
    for note in ("Analysing this run…", "Select a run to read its diagnosis.", "two  spaces\tand a tab"):
        assert parse(note) == _blocks(_parser().parse(note), 0, None)[0]
    # Anything Markdown would read goes through the parser.
    for text in ("**bold**", "- item", "1. one", "`code`", "# title", "a_b_c", "a [link](x)"):
        assert parse(text) == _blocks(_parser().parse(text), 0, None)[0]


def test_lists_tables_code_quotes_and_rules_are_laid_out_in_their_width():
    text = (
        "- first level\n  - second level\n    - third level\n\n"
        "| run | loss |\n|---|---:|\n| a | 0.5 |\n| longer_name | 12.25 |\n\n"
        "```\ndef f(x):  # a code line longer than the width is cropped, never wrapped\n    return x\n```\n\n"
        "> quoted words\n\n---\n\nafter"
    )

    class One(App):
        def compose(self) -> ComposeResult:
            yield MarkdownView(text)

    async def scenario(app, pilot):
        await pilot.pause()
        view = app.query_one(MarkdownView)
        lines = list(iter_text(view))
        assert lines[:3] == ["• first level", "  ▪ second level", "    ‣ third level"]
        assert "run         loss" in lines and "longer_name 12.25" in lines
        assert "  def f(x):  # a code line longer than the width is crop" in lines and "      return x" in lines
        assert "▌ quoted words" in lines
        assert "─" * view.size.width in lines
        assert lines[-2:] == ["after", ""]  # a paragraph's margin below it, as Textual draws it
        assert all(len(line) <= view.size.width for line in lines)

    drive(One(), scenario, size=(60, 40), wait=False)


def test_a_document_as_tall_as_the_last_is_redrawn_without_a_layout():
    class One(App):
        def compose(self) -> ComposeResult:
            yield MarkdownView("### `a` · health 40\n\n1. **plateau** at step 10\n")

    async def scenario(app, pilot):
        await pilot.pause()
        view = app.query_one(MarkdownView)
        asked: list[bool] = []
        refresh = view.refresh
        view.refresh = lambda *a, layout=False, **k: asked.append(layout) or refresh(*a, layout=layout, **k)
        view.update("### `b` · health 41\n\n1. **spikes** at step 12\n")  # another run's report, the same height
        await pilot.pause()
        assert asked == [False] and "spikes at step 12" in "\n".join(iter_text(view))
        view.update("### `b` · health 41\n\n1. **spikes** at step 12\n2. **plateau** at step 30\n")  # one line more
        await pilot.pause()
        assert asked[1] is True and view.size.height == 6

    drive(One(), scenario, size=(60, 20), wait=False)


def test_a_theme_change_redraws_the_document_in_the_themes_colours():
    class One(App):
        def compose(self) -> ComposeResult:
            yield MarkdownView("a `code` span")

    def code_style(view):
        strip = view.render_lines(view.region.reset_offset)[0]
        return next(segment.style for segment in strip if segment.text == "code")

    async def scenario(app, pilot):
        app.theme = "textual-dark"
        await pilot.pause()
        view = app.query_one(MarkdownView)
        dark = code_style(view)
        app.theme = "textual-light"
        await pilot.pause()
        light = code_style(view)
        assert dark != light and dark.bgcolor is not None and light.bgcolor is not None

    drive(One(), scenario, size=(40, 5), wait=False)


def test_text_selected_with_the_mouse_is_highlighted_and_copied_as_drawn():
    class One(App):
        def compose(self) -> ComposeResult:
            yield MarkdownView("### `run_7`\n\n1. **plateau** at step 10\n   - try: a lower lr\n")

    async def scenario(app, pilot):
        await pilot.pause()
        view = app.query_one(MarkdownView)
        before = view.render_line(3)
        view.text_select_all()
        await pilot.pause()
        assert app.screen.get_selected_text().strip("\n") == "\n".join(iter_text(view)).strip("\n")
        assert " 1. plateau at step 10\n    • try: a lower lr" in app.screen.get_selected_text()
        selected = app.screen.get_component_rich_style("screen--selection")
        after = view.render_line(3)
        assert after.text == before.text and [s.style for s in after] != [s.style for s in before]
        assert all(selected.bgcolor in (None, s.style.bgcolor) for s in after if s.text.strip())

    drive(One(), scenario, size=(60, 10), wait=False)
