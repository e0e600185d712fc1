"""The local model's explanation of one run, streamed token by token into a Markdown area.

    widget = LLMExplanation(report, config=app.config)   # mount it anywhere, then:
    widget.start()                                       # load (once), prompt, stream; escape cancels

The pipeline is `analysis.explain.ExplainSession`; this widget only presents it. Everything slow
happens in one thread worker (`group="llm"`, exclusive: a new explanation cancels the previous one):
finding and loading the model, building the prompt, generating. The worker never touches widgets; it
posts typed messages (`Status`, `Chunk`, `Finished`, `Failed`) that the UI thread turns into text.
The answer auto-scrolls only while the user is at the bottom of it. The border shows the model and
its speed; after the answer, the grounding check marks every cited step or value that is not in the
evidence. The rule-based findings sit beside the answer, always, unless the widget is mounted under
a pane that already shows them (the app's DiagnosisPane, which has `#rule-based`).
"""

from __future__ import annotations

import threading
import time

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Markdown, Static

from tbtriage.analysis.config import Config
from tbtriage.analysis.datamodel import RunReport
from tbtriage.analysis.explain import ExplainSession, Explanation
from tbtriage.analysis.grounding import Grounding
from tbtriage.analysis.llm import Settings
from tbtriage.tui.safe_text import multiline, plain

#: How close to the end (in lines) still counts as "at the bottom" for auto-scrolling.
BOTTOM_SLACK = 1
#: The worker sends what the model wrote at most this often: a 40 tok/s model still shows every token
#: or two as it comes, while a fast one cannot flood the UI thread with a message per token (which
#: would also delay the escape that stops it).
CHUNK_INTERVAL_S = 0.05


class LLMExplanation(Widget, can_focus=True):
    """A streamed, grounded explanation of one run by the local model."""

    DEFAULT_CSS = """
    LLMExplanation {
        height: auto;
        min-height: 8;
        border: round $primary;
        border-title-color: $text;
        border-subtitle-color: $text-muted;
        padding: 0 1;
    }
    LLMExplanation:focus { border: round $accent; }
    LLMExplanation #llm-body { height: auto; }
    LLMExplanation #llm-answer-column { width: 2fr; height: auto; }
    LLMExplanation #llm-rules-column { width: 1fr; height: auto; padding-left: 1; border-left: vkey $primary-darken-2; }
    LLMExplanation.-no-rules #llm-rules-column { display: none; }
    LLMExplanation #llm-status { color: $text-muted; }
    LLMExplanation #llm-warnings { color: $warning; }
    LLMExplanation #llm-warnings.-empty { display: none; }
    LLMExplanation #llm-grounding { margin-top: 1; }
    LLMExplanation #llm-grounding.-empty { display: none; }
    LLMExplanation.-standalone { height: 1fr; }
    LLMExplanation.-standalone #llm-body { height: 1fr; }
    LLMExplanation.-standalone #llm-answer-column { height: 1fr; }
    LLMExplanation.-standalone #llm-rules-column { height: 1fr; }
    """

    BINDINGS = [Binding("escape", "cancel", "Stop", tooltip="Stop the model's answer", id="llm.cancel")]

    # ---- messages from the worker ------------------------------------------------------------------

    class Status(Message):
        """What the worker is doing (loading the model, reading the prompt)."""

        def __init__(self, text: str, model: str | None = None) -> None:
            super().__init__()
            self.text = text
            self.model = model

    class Chunk(Message):
        """A piece of the answer, and the speed so far."""

        def __init__(self, text: str, tokens_per_s: float | None) -> None:
            super().__init__()
            self.text = text
            self.tokens_per_s = tokens_per_s

    class Warned(Message):
        """Something about the model file the user should know (no chat template, a base model)."""

        def __init__(self, lines: tuple[str, ...]) -> None:
            super().__init__()
            self.lines = lines

    class Finished(Message):
        """The answer is complete or was cancelled, or there was nothing to explain."""

        def __init__(self, explanation: Explanation) -> None:
            super().__init__()
            self.explanation = explanation

    class Failed(Message):
        """No answer: one line saying why (no llama.cpp, no model, a broken model file)."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    # ---- widget --------------------------------------------------------------------------------------

    def __init__(
        self,
        report: RunReport,
        config: Config | None = None,
        *,
        settings: Settings | None = None,
        lang: str | None = None,
        max_tokens: int | None = None,
        show_rules: bool | None = None,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.report = report
        self.config = config
        self.settings = settings  # analysis.llm.Settings; None: from the config's [llm] table
        self.lang = lang
        self.max_tokens = max_tokens
        self.show_rules = show_rules  # None: beside the answer unless the parent already shows them
        self.answer = ""
        self.running = False
        self.cancelled = False
        self.grounding: Grounding | None = None
        self.explanation: Explanation | None = None
        self._cancel = threading.Event()
        self._model_label = "local model"
        self._anchored_here: Widget | None = None  # the scroller we pinned to the bottom while streaming
        self._ready = False  # composed and mounted: start() can run now
        self._start_requested = False
        self.border_title = "Model explanation"

    def compose(self) -> ComposeResult:
        with Horizontal(id="llm-body"):
            with VerticalScroll(id="llm-answer-column"):
                yield Static(Text("Waiting for the model…"), id="llm-status")
                yield Static("", id="llm-warnings", classes="-empty")
                yield Markdown("", id="llm-answer", open_links=False)
                yield Static("", id="llm-grounding", classes="-empty")
            with VerticalScroll(id="llm-rules-column"):
                yield Markdown("", id="llm-rules", open_links=False)

    def on_mount(self) -> None:
        show = self.show_rules
        if show is None:
            parent = self.parent
            show = not (parent is not None and any(w.id == "rule-based" for w in parent.children))
        self.set_class(not show, "-no-rules")
        # Under a scrolling pane the pane scrolls; on its own the widget fills its space and scrolls itself.
        self.set_class(not self._scrolling_ancestor_exists(), "-standalone")
        if show:
            from tbtriage.analysis.render_markdown import run_markdown

            self.query_one("#llm-rules", Markdown).update(multiline(run_markdown(self.report, heading="###")))
        self._ready = True
        if self._start_requested:
            self.start()

    def _scrolling_ancestor_exists(self) -> bool:
        node = self.parent
        while node is not None and isinstance(node, Widget):
            if isinstance(node, VerticalScroll):
                return True
            node = node.parent
        return False

    def _scroller(self) -> Widget:
        """The container that scrolls the answer: the nearest scrolling ancestor, else our answer column."""
        if self.has_class("-standalone"):
            return self.query_one("#llm-answer-column", VerticalScroll)
        node = self.parent
        while node is not None and not isinstance(node, VerticalScroll):
            node = node.parent
        return node if isinstance(node, Widget) else self.query_one("#llm-answer-column", VerticalScroll)

    # ---- control ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Begin the explanation; right after `mount()` is fine (it then starts once mounted).

        An explanation still running in this widget is cancelled first.
        """
        if not self._ready:
            self._start_requested = True
            return
        self._start_requested = False
        self._cancel.set()
        self._cancel = threading.Event()
        self.answer = ""
        self.grounding = None
        self.explanation = None
        self.cancelled = False
        self.running = True
        self.query_one("#llm-answer", Markdown).update("")
        warnings = self.query_one("#llm-warnings", Static)
        warnings.update("")
        warnings.set_class(True, "-empty")
        grounding = self.query_one("#llm-grounding", Static)
        grounding.update("")
        grounding.set_class(True, "-empty")
        self._set_status("Finding the model…")
        self.focus()
        # The user asked for this answer: bring it into view (in a pane that puts them at the bottom,
        # so the answer is followed as it streams, until they scroll away).
        self.call_after_refresh(self.scroll_visible, animate=False)
        self._generate(self._cancel)

    def cancel(self) -> None:
        """Stop the answer at the next token (the part already written stays)."""
        if self.running:
            self._cancel.set()
            self._set_status("Stopping…")

    def action_cancel(self) -> None:
        self.cancel()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel":
            return self.running  # escape passes on to the app when there is nothing to stop
        return True

    def on_unmount(self) -> None:
        self._cancel.set()
        self._release_scroller()

    # ---- the worker -----------------------------------------------------------------------------------

    def _session(self) -> ExplainSession:
        return ExplainSession(
            self.report,
            config_llm=getattr(self.config, "llm", None),
            settings=self.settings,
            lang=self.lang,
            max_tokens=self.max_tokens,
        )

    @work(thread=True, exclusive=True, group="llm", exit_on_error=False)
    def _generate(self, cancel: threading.Event) -> None:
        from tbtriage.analysis import llm

        try:
            session = self._session()
            if session.nothing_to_explain:
                self.post_message(self.Finished(session.nothing()))
                return
            runner = session.find_model()
            self._model_label = runner.name
            if session.warnings:
                self.post_message(self.Warned(session.warnings))
            if not runner.loaded:
                self.post_message(self.Status(f"Loading {runner.name}…", runner.name))
            session.load()
            if cancel.is_set():
                return
            prompt = session.build_prompt()
            note = f" · {session.note}" if session.note else ""
            self.post_message(self.Status(f"Reading the prompt ({prompt.tokens} tokens)…{note}", runner.name))
            unsent, last_sent = "", 0.0
            for piece in session.stream(cancel):
                unsent += piece
                now = time.monotonic()
                if now - last_sent >= CHUNK_INTERVAL_S:
                    self.post_message(self.Chunk(unsent, runner.stats.tokens_per_s))
                    unsent, last_sent = "", now
            if unsent:
                self.post_message(self.Chunk(unsent, runner.stats.tokens_per_s))
            self.post_message(self.Finished(session.finish()))
        except (llm.LLMUnavailable, llm.LLMError) as exc:
            self.post_message(self.Failed(str(exc)))
        except Exception as exc:  # the pane must say something rather than die with the worker
            self.post_message(self.Failed(f"the model failed: {type(exc).__name__}: {exc}"))

    # ---- UI thread: messages --------------------------------------------------------------------------

    def _set_status(self, text: str) -> None:
        self.query_one("#llm-status", Static).update(Text(plain(text)))

    def on_llmexplanation_status(self, message: Status) -> None:
        if message.model:
            self.border_title = plain(message.model)
        self._set_status(message.text)

    async def on_llmexplanation_chunk(self, message: Chunk) -> None:
        scroller = self._scroller()
        # Follow the answer only while the user is at its end: anchor the scroller then (Textual keeps an
        # anchored view at the bottom through every re-layout, lets go when the user scrolls away, and
        # takes hold again when they come back down). A reader further up is left where they are.
        if not scroller.is_anchored and scroller.scroll_y >= scroller.max_scroll_y - BOTTOM_SLACK:
            self._anchored_here = scroller
            scroller.anchor()
        if not self.answer:
            self._set_status("Answering…  (escape stops)")
        self.answer += message.text
        if message.tokens_per_s:
            self.border_subtitle = f"{message.tokens_per_s:.1f} tok/s"
        await self.query_one("#llm-answer", Markdown).append(message.text)

    def _release_scroller(self) -> None:
        """Stop anchoring the scroller we anchored (a pane we are mounted in is not ours to keep pinned)."""
        if self._anchored_here is not None:
            self._anchored_here.anchor(False)
            self._anchored_here = None

    def on_llmexplanation_warned(self, message: Warned) -> None:
        warnings = self.query_one("#llm-warnings", Static)
        warnings.update(Text("\n".join(f"⚠ {plain(line)}" for line in message.lines)))
        warnings.set_class(False, "-empty")

    async def on_llmexplanation_finished(self, message: Finished) -> None:
        explanation = message.explanation
        self.running = False
        self.explanation = explanation
        if explanation.nothing_to_explain:
            self._set_status(f"Nothing to explain: {explanation.nothing_to_explain}.")
            self.border_subtitle = "not asked"
            return
        self.cancelled = explanation.cancelled
        self.grounding = explanation.grounding
        stats = explanation.stats
        if stats.tokens_per_s:
            self.border_subtitle = f"{stats.tokens_per_s:.1f} tok/s"
        loaded = f", loaded in {explanation.load_s:.1f} s" if explanation.load_s else ""
        ttft = f", first token after {stats.time_to_first_token_s:.1f} s" if stats.time_to_first_token_s else ""
        ended = "Stopped." if explanation.cancelled else "Done."
        self._set_status(f"{ended} {stats.completion_tokens} tokens, prompt {stats.prompt_tokens} tokens{loaded}{ttft}")
        await self.query_one("#llm-answer", Markdown).update(explanation.marked_text)
        self._show_grounding(explanation)
        # Still anchored for one more layout, so a reader who followed also sees the grounding lines.
        self.call_after_refresh(self._release_scroller)

    def _show_grounding(self, explanation: Explanation) -> None:
        widget = self.query_one("#llm-grounding", Static)
        grounding = explanation.grounding
        text = Text()
        summary = f"Grounding: {explanation.grounding_summary}"
        if not grounding.claims:
            text.append(summary, style="dim")
        elif not grounding.unsupported:
            text.append(summary, style="green")
        else:
            text.append(summary + "\n", style="bold yellow")
            lines = [f"  ⚠ {plain(claim.text)}: {plain(claim.reason)}" for claim in grounding.unsupported]
            text.append("\n".join(lines), style="yellow")
        widget.update(text)
        widget.set_class(False, "-empty")

    def on_llmexplanation_failed(self, message: Failed) -> None:
        self.running = False
        self._release_scroller()
        self._set_status(message.text)
        self.border_subtitle = "unavailable"
