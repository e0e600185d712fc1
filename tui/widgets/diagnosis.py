"""The Diagnosis pane: the selected run's findings explained in words, and room for the local model.

The rule-based Markdown (`analysis.render_markdown.run_markdown`) is always there. `explain()`
mounts the LLM widget (`tui.widgets.llm_explanation.LLMExplanation`, from the `llm` extra) below
it, where the model's explanation streams in; without llama.cpp installed it says so in one line.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from tbtriage.tui.safe_text import multiline
from tbtriage.tui.widgets.markdown_view import MarkdownView

if TYPE_CHECKING:
    from tbtriage.analysis.datamodel import RunReport
    from tbtriage.tui.state import HostApp


def llm_available() -> bool:
    """True when both llama.cpp's bindings and the streaming widget can be imported."""
    return (
        importlib.util.find_spec("llama_cpp") is not None
        and importlib.util.find_spec("tbtriage.tui.widgets.llm_explanation") is not None
    )


#: What the pane says while its run is being analysed.
ANALYSING = "Analysing this run…"


class DiagnosisPane(VerticalScroll):
    """The rule-based findings in words on top; the LLM's streamed explanation (or why there is none) below."""

    app: HostApp

    PLACEHOLDER = "Select a run to read its diagnosis."

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.report: RunReport | None = None

    def compose(self) -> ComposeResult:
        # One widget draws the whole document (`markdown_view`): a run's diagnosis as Textual's Markdown widget mounted
        # it was ~70 widgets, which every cursor move restyled and laid out again.
        yield MarkdownView(self.PLACEHOLDER, id="rule-based")
        yield Static("", id="llm-note", classes="-empty")

    def show_report(self, report: RunReport | None) -> None:
        """Explain `report`'s findings (None: the run is still being analysed)."""
        if not self.is_mounted:
            return  # the app is closing: no pane to show it in
        changed_run = report is None or self.report is None or report.name != self.report.name
        self.report = report
        if report is None:
            text = ANALYSING
        else:
            from tbtriage.analysis.render_markdown import run_markdown  # not on the way to the first frame

            text = multiline(run_markdown(report))
        self.query_one("#rule-based", MarkdownView).update(text)
        if changed_run:
            self._clear_llm()

    def explain(self, report: RunReport) -> None:
        """Ask the local model to explain `report`'s findings, streaming its answer into this pane."""
        self._clear_llm()
        if not llm_available():
            from tbtriage.analysis.llm import enable_hint

            self._say(enable_hint())
            return
        from tbtriage.tui.widgets.llm_explanation import LLMExplanation

        widget = LLMExplanation(report, config=self.app.config)
        self.mount(widget)
        widget.start()

    def _say(self, line: str) -> None:
        status = self.query_one("#llm-note", Static)
        status.update(Text(line))
        status.set_class(False, "-empty")

    def _clear_llm(self) -> None:
        status = self.query_one("#llm-note", Static)
        if not status.has_class("-empty"):
            status.update("")
            status.set_class(True, "-empty")
        for widget in self.query("LLMExplanation"):
            widget.remove()
