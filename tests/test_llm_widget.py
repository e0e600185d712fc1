"""The model's answer streams into the pane, token by token; escape stops it; the grounding shows after."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Markdown, Static

from tbtriage.analysis import llm
from tbtriage.tui.widgets.llm_explanation import LLMExplanation
from tests._app_data import until
from tests._llm_data import blowup_report
from tests.tiny_gguf import build_tiny_gguf


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return build_tiny_gguf(tmp_path_factory.mktemp("models") / "tiny-random-llama.gguf")


def settings_for(path: Path, **kw) -> llm.Settings:
    return llm.Settings(llm.ModelChoice(path, "--model"), threads=1, **kw)


class OneWidget(App):
    """The widget on its own, filling the screen; records the chunks that bubble up from it."""

    def __init__(self, widget: LLMExplanation) -> None:
        super().__init__()
        self.widget = widget
        self.chunks: list[str] = []

    def compose(self) -> ComposeResult:
        yield self.widget

    def on_llmexplanation_chunk(self, message: LLMExplanation.Chunk) -> None:
        self.chunks.append(message.text)


class InPane(App):
    """The widget the way the app's Diagnosis pane holds it: below the rule-based Markdown, in a scroll."""

    def __init__(self, widget: LLMExplanation) -> None:
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="pane"):
            yield Markdown("rules here", id="rule-based")
            yield self.widget


def drive(app: App, scenario, size=(120, 40)) -> None:
    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await scenario(pilot)

    asyncio.run(main())


def test_the_answer_streams_into_the_pane_with_model_speed_and_grounding(tiny_model):
    pytest.importorskip("llama_cpp")
    widget = LLMExplanation(blowup_report(), settings=settings_for(tiny_model), max_tokens=400)
    app = OneWidget(widget)

    async def scenario(pilot):
        chunks = app.chunks
        widget.start()
        await until(pilot, lambda: widget.answer and not widget.running)
        await pilot.pause()
        assert len(chunks) >= 3 and "".join(chunks) == widget.answer  # in pieces as it is written, in order
        assert widget.border_title == "tiny-random-llama"
        assert widget.border_subtitle.endswith("tok/s")
        assert widget.grounding is not None
        grounding = widget.query_one("#llm-grounding", Static)
        assert not grounding.has_class("-empty") and "Grounding:" in str(grounding.render())
        status = str(widget.query_one("#llm-status", Static).render())
        assert status.startswith("Done.") and "prompt" in status
        # Standalone, the rule-based findings sit beside the answer.
        assert not widget.has_class("-no-rules")
        rules = widget.query_one("#llm-rules", Markdown).source
        assert "divergence" in rules

    drive(app, scenario)


def test_escape_stops_the_answer_mid_stream(tiny_model):
    pytest.importorskip("llama_cpp")
    # A long answer (the random model writes ~2000 tokens here), with the room a context of 4096 leaves.
    widget = LLMExplanation(blowup_report(), settings=settings_for(tiny_model, n_ctx=4096), max_tokens=3000)

    async def scenario(pilot):
        widget.start()
        await until(pilot, lambda: len(widget.answer) > 20)
        assert widget.running and widget.has_focus
        await pilot.press("escape")
        await until(pilot, lambda: not widget.running)
        await pilot.pause()
        assert widget.cancelled
        status = str(widget.query_one("#llm-status", Static).render())
        assert status.startswith("Stopped.")
        tokens = int(status.split()[1])
        assert tokens < 3000
        # Nothing left to stop: escape is no longer the widget's.
        assert widget.check_action("cancel", ()) is False

    drive(OneWidget(widget), scenario)


def test_in_the_diagnosis_pane_the_rules_are_not_repeated(tiny_model):
    pytest.importorskip("llama_cpp")
    widget = LLMExplanation(blowup_report(), settings=settings_for(tiny_model), max_tokens=30)

    async def scenario(pilot):
        assert widget.has_class("-no-rules") and not widget.has_class("-standalone")
        widget.start()
        await until(pilot, lambda: widget.answer and not widget.running)

    drive(InPane(widget), scenario)


def test_the_answer_follows_the_bottom_only_while_the_user_is_there():
    widget = LLMExplanation(blowup_report(), show_rules=False)

    async def scenario(pilot):
        scroller = widget.query_one("#llm-answer-column", VerticalScroll)
        widget.running = True
        for i in range(40):
            widget.post_message(LLMExplanation.Chunk(f"line {i}\n\n", 30.0))
        # Following along: the view stays at the end as the answer grows.
        await until(pilot, lambda: "line 39" in widget.answer and scroller.max_scroll_y > 20)
        await until(pilot, lambda: scroller.scroll_y == scroller.max_scroll_y)
        scroller.scroll_home(animate=False)
        await pilot.pause()
        height_before = scroller.max_scroll_y
        for i in range(40, 60):
            widget.post_message(LLMExplanation.Chunk(f"line {i}\n\n", 30.0))
        await until(pilot, lambda: "line 59" in widget.answer and scroller.max_scroll_y > height_before)
        await pilot.pause(0.1)
        assert scroller.scroll_y == 0, "the user scrolled up to read: the pane must not pull them down"
        assert widget.border_subtitle == "30.0 tok/s"

    drive(OneWidget(widget), scenario, size=(80, 20))


def test_without_llama_cpp_the_pane_says_how_to_enable_it(monkeypatch, tiny_model):
    monkeypatch.setattr(llm, "llama_available", lambda: False)
    widget = LLMExplanation(blowup_report(), settings=settings_for(tiny_model))

    async def scenario(pilot):
        widget.start()
        await until(pilot, lambda: not widget.running)
        await pilot.pause()
        status = str(widget.query_one("#llm-status", Static).render())
        assert "pip install 'tbtriage[llm]'" in status and "\n" not in status.strip()
        assert widget.border_subtitle == "unavailable"

    drive(OneWidget(widget), scenario)


def test_a_run_with_no_findings_gets_nothing_to_explain_and_no_model(tiny_model):
    from tbtriage.analysis.explain import NO_FINDINGS
    from tests._report_data import loss_curve, make_report

    healthy = make_report("healthy", {"train/loss": ("train_loss", loss_curve())})
    widget = LLMExplanation(healthy, settings=settings_for(tiny_model))

    async def scenario(pilot):
        widget.start()
        await until(pilot, lambda: not widget.running)
        await pilot.pause()
        status = str(widget.query_one("#llm-status", Static).render())
        assert status == f"Nothing to explain: {NO_FINDINGS}."
        assert widget.answer == "" and widget.border_subtitle == "not asked"

    drive(OneWidget(widget), scenario)


def test_a_base_model_without_a_chat_template_is_flagged_above_its_answer(tmp_path):
    pytest.importorskip("llama_cpp")
    base = build_tiny_gguf(tmp_path / "tiny-base.gguf", chat_template=False, finetune="base")
    widget = LLMExplanation(blowup_report(), settings=settings_for(base), max_tokens=30)

    async def scenario(pilot):
        widget.start()
        await until(pilot, lambda: not widget.running)
        await pilot.pause()
        warnings = widget.query_one("#llm-warnings", Static)
        text = str(warnings.render())
        assert not warnings.has_class("-empty") and text.count("⚠") == 1
        assert "base model" in text and "plain-text prompt is used (best effort)" in text
        assert str(widget.query_one("#llm-status", Static).render()).startswith("Done.")

    drive(OneWidget(widget), scenario)


def test_a_broken_model_file_gives_one_line_and_a_live_screen(tmp_path, tiny_model):
    pytest.importorskip("llama_cpp")
    bad = tmp_path / "half.gguf"
    bad.write_bytes(tiny_model.read_bytes()[:200_000])  # a download that stopped halfway
    widget = LLMExplanation(blowup_report(), settings=settings_for(bad))

    async def scenario(pilot):
        widget.start()
        await until(pilot, lambda: not widget.running)
        await pilot.pause()
        status = str(widget.query_one("#llm-status", Static).render())
        assert status.startswith(str(bad)) and "truncated GGUF file" in status

    drive(OneWidget(widget), scenario)


def test_pressing_d_in_the_app_streams_a_diagnosis_into_the_diagnosis_pane(tmp_path, tiny_model):
    """The whole path: the app's `d` binding, its Diagnosis pane, this widget, the model from the config."""
    pytest.importorskip("llama_cpp")
    import numpy as np

    from tbtriage.analysis.config import Config
    from tbtriage.tui.app import make_app
    from tbtriage.tui.widgets.diagnosis import DiagnosisPane
    from tests._app_data import HandAnalyzer, decaying_loss, fixed_clock, settle, write_run
    from tests._app_data import drive as drive_app
    from tests._report_data import finding

    loss = decaying_loss(60)
    loss[40:] = np.nan
    write_run(tmp_path, "big_lr", {"train/loss": loss})
    analyzer = HandAnalyzer({"big_lr": (12, [finding("big_lr", "divergence", "critical", 40)])})
    config = Config(llm={"model": str(tiny_model), "threads": 1})
    app = make_app(tmp_path, follow=False, clock=fixed_clock, analyzer=analyzer, config=config)

    async def scenario(app, pilot):
        await pilot.press("d")
        pane = app.screen.query_one(DiagnosisPane)
        await until(pilot, lambda: bool(pane.query(LLMExplanation)))
        widget = pane.query_one(LLMExplanation)
        await until(pilot, lambda: widget.answer and not widget.running)
        await settle(app, pilot)
        assert widget.border_title == "tiny-random-llama" and widget.grounding is not None
        assert widget.has_class("-no-rules")  # the pane shows the rule-based findings above it

    drive_app(app, scenario)
