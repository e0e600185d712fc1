"""The Diagnosis pane: the selected run's findings explained in words, and room for the local model.

The rule-based Markdown (`analysis.render_markdown.run_markdown`) is always there. `explain()`
mounts the LLM widget (`tui.widgets.llm_explanation.LLMExplanation`, from the `llm` extra) below
it, where the model's explanation streams in; without llama.cpp installed it says so in one line.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from tbtriage.tui.safe_text import multiline

if TYPE_CHECKING:
    from textual.widget import AwaitMount
    from textual.widgets import Markdown

    from tbtriage.analysis.datamodel import RunReport
    from tbtriage.tui.state import HostApp


def llm_available() -> bool:
    """True when both llama.cpp's bindings and the streaming widget can be imported."""
    return (
        importlib.util.find_spec("llama_cpp") is not None
        and importlib.util.find_spec("tbtriage.tui.widgets.llm_explanation") is not None
    )


#: Markdown tokens whose blocks `update_in_place` knows: each holds its words in one `inline` token, drawn by a
#: paragraph or heading widget. Tables, code and the rest re-mount.
IN_PLACE_TOKENS = frozenset(
    f"{block}_{end}"
    for block in ("heading", "paragraph", "bullet_list", "ordered_list", "list_item", "blockquote")
    for end in ("open", "close")
) | {"inline", "hr"}


def _shape(tokens: list) -> tuple:
    """A document's blocks without its words: two documents of one shape are drawn by the same widgets."""
    return tuple(
        (t.type, t.tag, t.level, t.markup, t.info, tuple(sorted((t.attrs or {}).items())))
        for t in tokens
        if t.type != "inline"
    )


def update_in_place(widget: Markdown, text: str) -> bool:
    """Show `text` in `widget` by re-filling its paragraphs and headings, when it has the shape of what is shown.

    Re-mounting a Markdown document (what `Markdown.update` does) re-styles and re-lays out the whole screen,
    ~100 ms on a busy machine: the diagnosis changes on every cursor move, and the next key waited for it.
    Reports of runs look alike (heading, summary, a numbered list of findings), so most moves keep the
    shape. False (nothing changed) when the shape differs or holds blocks this does not know.
    """
    from markdown_it import MarkdownIt
    from textual.widgets._markdown import MarkdownBlock

    if not hasattr(MarkdownBlock, "build_from_token"):  # a Textual without it: re-mount
        return False
    parser = MarkdownIt("gfm-like")
    tokens = parser.parse(text)
    if any(t.type not in IN_PLACE_TOKENS for t in tokens) or _shape(tokens) != _shape(parser.parse(widget.source)):
        return False
    leaves = list(widget.query("MarkdownParagraph, MarkdownHeader").results(MarkdownBlock))
    inline = [t for t in tokens if t.type == "inline"]
    if len(leaves) != len(inline):
        return False
    with widget.app.batch_update():
        for leaf, token in zip(leaves, inline):
            leaf.build_from_token(token)
    widget._markdown = text  # what `Markdown.source` reads; `update` sets it the same way
    return True


#: What the pane says while its run is being analysed.
ANALYSING = "Analysing this run…"


class DiagnosisNote(Static):
    """A one-paragraph note (the pane's placeholder, "Analysing this run…"), drawn as the Markdown widget draws such a
    paragraph (its padding, the paragraph's margin), until that widget is mounted: the worst run's pane says it just
    after a warm reopen's first frame, and importing and mounting Markdown for one line held the UI thread ~50-180 ms
    then, which a key pressed at once waited for."""

    DEFAULT_CSS = """
    DiagnosisNote {
        height: auto;
        padding: 0 2;
        margin: 0 0 1 0;
    }
    """


class DiagnosisPane(VerticalScroll):
    """Rule-based Markdown on top; the LLM's streamed explanation (or why there is none) below."""

    app: HostApp

    PLACEHOLDER = "Select a run to read its diagnosis."

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.report: RunReport | None = None
        self._markdown = ""  # what the rule-based Markdown shows
        self._note = ""  # what the note shows until the Markdown widget is mounted

    def compose(self) -> ComposeResult:
        # The Markdown widget comes after the first frame (`prepare`, from the app's warm-up, or with the first report):
        # importing it (its parser and highlighter) is not on the way from the shell to the first screen.
        yield DiagnosisNote("", id="diagnosis-note", markup=False)
        yield Static("", id="llm-note", classes="-empty")

    def prepare(self) -> AwaitMount | None:
        """Mount the rule-based Markdown widget unless it is (`tui.warm_up`), showing what the note shows: awaitable
        until it is mounted."""
        return None if self.query("#rule-based") else self._mount_rule_based(self._note or self.PLACEHOLDER)

    def _mount_rule_based(self, text: str) -> AwaitMount:
        from textual.widgets import Markdown

        self._markdown = text
        return self.mount(Markdown(text, id="rule-based"), before="#llm-note")

    def on_markdown_table_of_contents_updated(self, event: Markdown.TableOfContentsUpdated) -> None:
        """The Markdown widget has drawn its document (Textual posts this once it has): it takes over from the note."""
        if event.markdown.id == "rule-based":
            self.query_one(DiagnosisNote).display = False

    def show_report(self, report: RunReport | None) -> None:
        """Explain `report`'s findings (None: the run is still being analysed)."""
        if not self.is_mounted:
            return  # the app is closing: no pane to show it in
        found = self.query("#rule-based")  # by id: its class is not imported until it is needed
        rule_based = cast("Markdown | None", found.first() if found else None)
        if rule_based is not None and not rule_based.is_mounted:  # an update before its own mount would be lost
            self.call_after_refresh(self.show_report, report)
            return
        changed_run = report is None or self.report is None or report.name != self.report.name
        self.report = report
        if report is None:
            text = ANALYSING
        else:
            from tbtriage.analysis.render_markdown import run_markdown  # not on the way to the first frame

            text = multiline(run_markdown(report))
        if rule_based is None and report is None:
            if text != self._note:  # one line: the note says it, no Markdown needed yet
                self._note = text
                self.query_one(DiagnosisNote).update(text)
        elif rule_based is None:
            self._mount_rule_based(text)
        elif text != self._markdown:  # re-parsing Markdown re-mounts its blocks: skip it when nothing changed
            self._markdown = text
            if not update_in_place(rule_based, text):
                rule_based.update(text)
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
