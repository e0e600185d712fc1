"""The model's diagnosis of one run, streamed token by token into a Markdown area.

    widget = LLMDiagnosis(report, config=app.config)   # mount it anywhere, then:
    widget.start()                                     # load (once), prompt, stream; escape cancels

Everything slow happens in one thread worker (`group="llm"`, exclusive: a new diagnosis cancels the
previous one): finding and loading the model, counting prompt tokens, generating. The worker never
touches widgets; it posts typed messages (`Status`, `Chunk`, `Finished`, `Failed`) that the UI thread
turns into text. The answer auto-scrolls only while the user is at the bottom of it. The border shows
the model and its speed; after the answer, the grounding check marks every cited step or value that
is not in the evidence. The rule-based findings sit beside the answer, always — unless the widget is
mounted under a pane that already shows them (the app's DiagnosisPane, which has `#rule-based`).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Markdown, Static

from tbtriage.analysis.datamodel import RunReport
from tbtriage.tui.safe_text import multiline, plain

#: Model files below this size are ~135M-parameter models; the pane says what to expect of them.
SMALL_MODEL_BYTES = 300 * 1024 * 1024
#: How close to the end (in lines) still counts as "at the bottom" for auto-scrolling.
BOTTOM_SLACK = 1
#: The worker sends what the model wrote at most this often: a 40 tok/s model still shows every token
#: or two as it comes, while a fast one cannot flood the UI thread with a message per token (which
#: would also delay the escape that stops it).
CHUNK_INTERVAL_S = 0.05


class LLMDiagnosis(Widget, can_focus=True):
    """A streamed, grounded model diagnosis of one run."""

    DEFAULT_CSS = """
    LLMDiagnosis {
        height: auto;
        min-height: 8;
        border: round $primary;
        border-title-color: $text;
        border-subtitle-color: $text-muted;
        padding: 0 1;
    }
    LLMDiagnosis:focus { border: round $accent; }
    LLMDiagnosis #llm-body { height: auto; }
    LLMDiagnosis #llm-answer-column { width: 2fr; height: auto; }
    LLMDiagnosis #llm-rules-column { width: 1fr; height: auto; padding-left: 1; border-left: vkey $primary-darken-2; }
    LLMDiagnosis.-no-rules #llm-rules-column { display: none; }
    LLMDiagnosis #llm-status { color: $text-muted; }
    LLMDiagnosis #llm-grounding { margin-top: 1; }
    LLMDiagnosis #llm-grounding.-empty { display: none; }
    LLMDiagnosis.-standalone { height: 1fr; }
    LLMDiagnosis.-standalone #llm-body { height: 1fr; }
    LLMDiagnosis.-standalone #llm-answer-column { height: 1fr; }
    LLMDiagnosis.-standalone #llm-rules-column { height: 1fr; }
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

    class Finished(Message):
        """The answer is complete (or was cancelled); `grounding` checks it against the evidence."""

        def __init__(self, answer: str, grounding: Any, stats: Any, cancelled: bool) -> None:
            super().__init__()
            self.answer = answer
            self.grounding = grounding
            self.stats = stats
            self.cancelled = cancelled

    class Failed(Message):
        """No answer: one line saying why (no llama.cpp, no model, a broken model file)."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    # ---- widget --------------------------------------------------------------------------------------

    def __init__(
        self,
        report: RunReport,
        config: Any = None,
        *,
        settings: Any = None,
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
        self.grounding: Any = None
        self._cancel = threading.Event()
        self._model_label = "local model"
        self._anchored_here: Widget | None = None  # the scroller we pinned to the bottom while streaming
        self._ready = False  # composed and mounted: start() can run now
        self._start_requested = False
        self.border_title = "Model diagnosis"

    def compose(self) -> ComposeResult:
        with Horizontal(id="llm-body"):
            with VerticalScroll(id="llm-answer-column"):
                yield Static(Text("Waiting for the model…"), id="llm-status")
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
        """Begin the diagnosis; right after `mount()` is fine (it then starts once mounted).

        A diagnosis still running in this widget is cancelled first.
        """
        if not self._ready:
            self._start_requested = True
            return
        self._start_requested = False
        self._cancel.set()
        self._cancel = threading.Event()
        self.answer = ""
        self.grounding = None
        self.cancelled = False
        self.running = True
        self.query_one("#llm-answer", Markdown).update("")
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

    def _resolve(self):
        """(runner, lang, max_tokens), or raises LLMUnavailable / LLMError."""
        from tbtriage.analysis import llm
        from tbtriage.analysis.prompt import default_lang

        cfg = dict(getattr(self.config, "llm", {}) or {})
        settings = self.settings or llm.settings_from(None, cfg)
        if not llm.llama_available():
            raise llm.LLMUnavailable(llm.enable_hint())
        runner = llm.get_runner(settings)
        lang = self.lang or cfg.get("lang") or default_lang()
        return runner, lang if lang in ("en", "zh") else "en", self.max_tokens or llm.DEFAULT_MAX_TOKENS_MD

    @work(thread=True, exclusive=True, group="llm", exit_on_error=False)
    def _generate(self, cancel: threading.Event) -> None:
        from tbtriage.analysis import llm
        from tbtriage.analysis.compare import hparams_of
        from tbtriage.analysis.grounding import check_text
        from tbtriage.analysis.prompt import build_prompt, default_budget

        try:
            runner, lang, max_tokens = self._resolve()
            self._model_label = runner.name
            if not runner.loaded:
                self.post_message(self.Status(f"Loading {runner.name}…", runner.name))
            runner.load()
            if cancel.is_set():
                return
            prompt = build_prompt(
                self.report,
                lang=lang,
                budget=default_budget(runner.settings.n_ctx),
                count_tokens=runner.count_tokens,
                count_chat=runner.count_chat,
                hparams=hparams_of(self.report)[0],
            )
            note = ""
            if runner.info is not None and runner.info.file_size < SMALL_MODEL_BYTES:
                note = (
                    " · a ~135M model gives hints, not answers: trust the rule-based findings; copy a stronger "
                    f"GGUF to {llm.models_dir()}"
                )
            self.post_message(self.Status(f"Reading the prompt ({prompt.tokens} tokens)…{note}", runner.name))
            pieces: list[str] = []
            unsent, last_sent = "", 0.0
            for piece in runner.stream(prompt, max_tokens=max_tokens, cancel=cancel):
                pieces.append(piece)
                unsent += piece
                now = time.monotonic()
                if now - last_sent >= CHUNK_INTERVAL_S:
                    self.post_message(self.Chunk(unsent, runner.stats.tokens_per_s))
                    unsent, last_sent = "", now
            if unsent:
                self.post_message(self.Chunk(unsent, runner.stats.tokens_per_s))
            answer = "".join(pieces)
            stopped = runner.stats.finish_reason == "cancelled"
            self.post_message(self.Finished(answer, check_text(answer, prompt.evidence), runner.stats, stopped))
        except (llm.LLMUnavailable, llm.LLMError) as exc:
            self.post_message(self.Failed(str(exc)))
        except Exception as exc:  # the pane must say something rather than die with the worker
            self.post_message(self.Failed(f"the model failed: {type(exc).__name__}: {exc}"))

    # ---- UI thread: messages --------------------------------------------------------------------------

    def _set_status(self, text: str) -> None:
        self.query_one("#llm-status", Static).update(Text(plain(text)))

    def on_llmdiagnosis_status(self, message: Status) -> None:
        if message.model:
            self.border_title = plain(message.model)
        self._set_status(message.text)

    async def on_llmdiagnosis_chunk(self, message: Chunk) -> None:
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

    async def on_llmdiagnosis_finished(self, message: Finished) -> None:
        from tbtriage.analysis.grounding import mark_unsupported

        self.running = False
        self.cancelled = message.cancelled
        self.grounding = message.grounding
        stats = message.stats
        if stats.tokens_per_s:
            self.border_subtitle = f"{stats.tokens_per_s:.1f} tok/s"
        ttft = f", first token after {stats.time_to_first_token_s:.1f} s" if stats.time_to_first_token_s else ""
        ended = "Stopped." if message.cancelled else "Done."
        self._set_status(f"{ended} {stats.completion_tokens} tokens, prompt {stats.prompt_tokens} tokens{ttft}")
        await self.query_one("#llm-answer", Markdown).update(mark_unsupported(message.answer, message.grounding))
        self._show_grounding(message.grounding)
        # Still anchored for one more layout, so a reader who followed also sees the grounding lines.
        self.call_after_refresh(self._release_scroller)

    def _show_grounding(self, grounding: Any) -> None:
        widget = self.query_one("#llm-grounding", Static)
        checked, bad = len(grounding.claims), grounding.unsupported
        text = Text()
        if not checked:
            text.append("Grounding: the answer cites no steps or values to check.", style="dim")
        elif not bad:
            text.append(f"Grounding: all {checked} cited steps and values are in the evidence.", style="green")
        else:
            text.append(
                f"Grounding: {len(bad)} of {checked} cited steps and values are not in the evidence\n",
                style="bold yellow",
            )
            lines = [f"  ⚠ {plain(claim.text)}: {plain(claim.reason)}" for claim in bad]
            text.append("\n".join(lines), style="yellow")
        widget.update(text)
        widget.set_class(False, "-empty")

    def on_llmdiagnosis_failed(self, message: Failed) -> None:
        self.running = False
        self._release_scroller()
        self._set_status(message.text)
        self.border_subtitle = "unavailable"
