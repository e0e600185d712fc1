"""The model's explanation of one run, from start to end, with no terminal in it.

One pipeline for the app's pane and `tbtriage diagnose`: decide whether there is anything to explain,
find the model, choose the language, build the prompt, stream the answer, ground it, summarise it.
The presenters only show it (the pane from a thread worker, the command on stdout).

    session = ExplainSession(report, config_llm=config.llm, model="m.gguf")
    explanation = session.run(on_chunk=print)   # everything at once, or stage by stage:

    if session.nothing_to_explain: ...          # no data or no findings: the model is never asked
    session.find_model()                        # LLMUnavailable (how to enable it) / LLMError (a bad file)
    session.load(); session.build_prompt()
    for piece in session.stream(cancel): ...    # cancel: a threading.Event, checked between tokens
    explanation = session.finish()              # grounded, summarised, the JSON answer validated

"Diagnose" names the rules' verdict (`tbtriage.diagnose()`) and the command; inside the code the
model's part is an explanation, and the rules' part is analysis and findings.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any

from . import llm
from .datamodel import RunReport
from .gguf_check import GGUFInfo
from .grounding import Grounding, check_answer, check_text, mark_unsupported, summarize
from .llm_answer import Answer, AnswerError
from .prompt import LANGS, Prompt, build_prompt, default_budget, default_lang

MODES = ("md", "json")
#: Models below this many parameters give hints, not answers (SmolLM2-135M, measured on real runs in
#: issue 11: its top cause was right only where it copied the rules). The cut is the earlier file-size
#: rule (300 MB, a Q4 GGUF of about 0.5B parameters) restated in parameters, which do not depend on
#: the quantisation; the README advises 1.5B instruct models and up.
SMALL_MODEL_PARAMETERS = 600_000_000

NO_DATA = "no data was read from this run, so a model could only invent"
NO_FINDINGS = "the rules found nothing wrong in this run, and a model asked to explain it would invent a problem"
ONLY_NOTES = (
    "the rules found only notes (info) in this run, nothing to act on, and a model asked to explain them would "
    "invent a problem"
)

# A Markdown code fence: up to three spaces, then three or more backticks or tildes (CommonMark).
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)


def choose_lang(lang: str | None, config_llm: Mapping[str, Any] | None = None) -> str:
    """The answer language: the flag, then the config's `[llm] lang`, then the locale; `en` if unknown."""
    chosen = lang or (config_llm or {}).get("lang") or default_lang()
    return chosen if chosen in LANGS else "en"


def nothing_to_explain(report: RunReport) -> str | None:
    """Why the model should not be asked about `report`, or None when there is something to explain."""
    if not any(len(s) for s in report.run.scalars.values()):
        return NO_DATA
    if not report.findings:
        return NO_FINDINGS
    if all(f.severity == "info" for f in report.findings):
        return ONLY_NOTES
    return None


def fence_closer(text: str) -> str:
    """What closes a code fence `text` leaves open ("" when none is open).

    A small model in Markdown mode sometimes opens a fence and never closes it; everything printed after
    it (the grounding line) would then render as code. The closer matches the opening fence's character
    and length, as CommonMark requires.
    """
    open_fence: str | None = None
    for m in _FENCE.finditer(text):
        fence = m.group(1)
        if open_fence is None:
            open_fence = fence
        elif fence[0] == open_fence[0] and len(fence) >= len(open_fence) and not text[m.end() :].split("\n")[0].strip():
            open_fence = None
    if open_fence is None:
        return ""
    return ("\n" if text and not text.endswith("\n") else "") + open_fence + "\n"


def parameters_text(count: int) -> str:
    """A parameter count as people say it: 135M, 1.5B."""
    if count >= 1e9:
        return f"{count / 1e9:.2g}B"
    return f"{count / 1e6:.3g}M"


def small_model_note(info: GGUFInfo | None, lang: str) -> str | None:
    """What to expect of a small model, with its real size; None for a model at or above the cut."""
    if info is None or info.parameter_count >= SMALL_MODEL_PARAMETERS:
        return None
    size = parameters_text(info.parameter_count)
    if lang == "zh":
        return f"小模型（约 {size} 参数）只能给出提示，请以规则发现为准；更强的 GGUF 模型可复制到 {llm.models_dir()}。"
    return (
        f"A small model (~{size} parameters) gives hints, not answers: the rule-based findings are the ground "
        f"truth. For better explanations copy a stronger GGUF (e.g. a 1.5B instruct model) to {llm.models_dir()}."
    )


@dataclass(frozen=True)
class Explanation:
    """The outcome of one session: the answer, how it held up against the evidence, and its figures."""

    run: str
    mode: str
    lang: str
    text: str = ""  # the model's answer as written (control characters removed, ends stripped)
    grounding: Grounding | None = None
    stats: llm.GenerationStats | None = None
    prompt: Prompt | None = None
    model: llm.ModelChoice | None = None
    answer: Answer | None = None  # JSON mode: the validated answer
    answer_error: str | None = None  # JSON mode: why the text is not a valid answer
    nothing_to_explain: str | None = None  # why the model was not asked
    warnings: tuple[str, ...] = ()  # about the model file (no chat template, a base model)
    note: str | None = None  # what to expect of a small model
    load_s: float = 0.0  # seconds this session spent loading the model (0: it was already loaded)

    @property
    def cancelled(self) -> bool:
        return self.stats is not None and self.stats.finish_reason == "cancelled"

    @property
    def fence_closer(self) -> str:
        """Written after a streamed Markdown answer, before anything else, to close a fence it left open."""
        return fence_closer(self.text) if self.mode == "md" else ""

    @property
    def marked_text(self) -> str:
        """The Markdown answer with each unsupported claim marked and any open fence closed."""
        marked = mark_unsupported(self.text, self.grounding) if self.grounding is not None else self.text
        return marked + self.fence_closer

    @property
    def grounding_summary(self) -> str | None:
        return summarize(self.grounding) if self.grounding is not None else None


class ExplainSession:
    """One explanation of one run by the local model; the stages run in order, from any one thread."""

    def __init__(
        self,
        report: RunReport,
        *,
        config_llm: Mapping[str, Any] | None = None,
        model: str | os.PathLike[str] | None = None,
        settings: llm.Settings | None = None,
        lang: str | None = None,
        mode: str = "md",
        max_tokens: int | None = None,
        threads: int | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} (choose from {', '.join(MODES)})")
        self.report = report
        self.mode = mode
        self.config_llm = dict(config_llm or {})
        self.lang = choose_lang(lang, self.config_llm)
        default_max = llm.DEFAULT_MAX_TOKENS_JSON if mode == "json" else llm.DEFAULT_MAX_TOKENS_MD
        self.max_tokens = max_tokens or default_max
        self.nothing_to_explain = nothing_to_explain(report)
        self._model, self._threads, self._settings = model, threads, settings
        self.runner: llm.Runner | None = None
        self.info: GGUFInfo | None = None
        self.prompt: Prompt | None = None
        self.warnings: tuple[str, ...] = ()
        self._pieces: list[str] = []
        self._stats: llm.GenerationStats | None = None
        self.load_s = 0.0

    # ---- stages ---------------------------------------------------------------------------------------

    def find_model(self) -> llm.Runner:
        """The shared runner for the chosen model file, checked but not loaded.

        LLMUnavailable when llama.cpp or any model is missing (the rest of tbtriage works; its message
        says how to enable this); LLMError when the chosen file is missing, broken or not GGUF.
        """
        settings = self._settings or llm.settings_from(self._model, self.config_llm, threads=self._threads)
        if not llm.llama_available():
            raise llm.LLMUnavailable(llm.enable_hint())
        self.info = llm.check_model(settings.model)
        warning = llm.template_warning(self.info)
        self.warnings = (warning,) if warning else ()
        self.runner = llm.get_runner(settings)
        return self.runner

    @property
    def note(self) -> str | None:
        """What to expect of the chosen model (after `find_model`)."""
        return small_model_note(self.info, self.lang)

    def load(self) -> float:
        """Load the model if it is not yet; the seconds it took (0 when it already was)."""
        self.load_s += self._need_runner().load()
        return self.load_s

    def build_prompt(self) -> Prompt:
        """The prompt for this run, within the budget the model's context allows, counted by its tokenizer."""
        from .compare import hparams_of

        runner = self._need_runner()
        self.load()  # counting tokens needs the model: its load time is the session's, not the answer's
        self.prompt = build_prompt(
            self.report,
            lang=self.lang,
            mode=self.mode,
            budget=default_budget(runner.settings.n_ctx),
            count_tokens=runner.count_tokens,
            count_chat=runner.count_chat,
            hparams=hparams_of(self.report)[0],
            max_budget=runner.settings.n_ctx - self.max_tokens,  # the answer must still fit beside it
        )
        return self.prompt

    def stream(self, cancel: threading.Event | None = None) -> Generator[str, None, None]:
        """The answer piece by piece; stops at the next token once `cancel` is set or the caller closes it."""
        runner = self._need_runner()
        prompt = self.prompt or self.build_prompt()
        self._pieces, self._stats = [], None
        if self.mode == "json":
            pieces = runner.answer_json(prompt, max_tokens=self.max_tokens, cancel=cancel)
        else:
            pieces = runner.stream(prompt, max_tokens=self.max_tokens, cancel=cancel)
        try:
            for piece in pieces:
                # The runner is shared: while it yields to us it holds its lock, so its stats are ours.
                # Once our answer ends, another session's generation may replace them.
                if self._stats is None:
                    self._stats = runner.stats
                self._pieces.append(piece)
                yield piece
        finally:
            pieces.close()
            if self._stats is None:
                self._stats = runner.stats

    def finish(self, text: str | None = None) -> Explanation:
        """The explanation of what was streamed (or of `text`): grounded, and validated in JSON mode."""
        runner = self._need_runner()
        prompt = self.prompt or self.build_prompt()
        answer_text = ("".join(self._pieces) if text is None else text).strip()
        answer = error = None
        if self.mode == "json":
            try:
                answer = llm.parse_json_answer(answer_text, prompt, self.max_tokens)
            except AnswerError as exc:
                error = str(exc)
            grounding = check_answer(answer.to_dict(), prompt.evidence) if answer is not None else None
        else:
            grounding = check_text(answer_text, prompt.evidence)
        return Explanation(
            run=self.report.name,
            mode=self.mode,
            lang=self.lang,
            text=answer_text,
            grounding=grounding,
            stats=self._stats or runner.stats,
            prompt=prompt,
            model=runner.settings.model,
            answer=answer,
            answer_error=error,
            warnings=self.warnings,
            note=self.note,
            load_s=self.load_s,
        )

    def nothing(self) -> Explanation:
        """The explanation of a run the model is not asked about (see `nothing_to_explain`)."""
        return Explanation(self.report.name, self.mode, self.lang, nothing_to_explain=self.nothing_to_explain)

    def run(self, on_chunk: Callable[[str], None] | None = None, cancel: threading.Event | None = None) -> Explanation:
        """Every stage in order; `on_chunk` sees each piece of the answer as it is written."""
        if self.nothing_to_explain:
            return self.nothing()
        if self.runner is None:
            self.find_model()
        for piece in self.stream(cancel):
            if on_chunk is not None:
                on_chunk(piece)
        return self.finish()

    def _need_runner(self) -> llm.Runner:
        if self.runner is None:
            raise RuntimeError("find_model() first")  # a programming error, not the user's
        return self.runner


__all__ = [
    "MODES",
    "NO_DATA",
    "NO_FINDINGS",
    "SMALL_MODEL_PARAMETERS",
    "ExplainSession",
    "Explanation",
    "choose_lang",
    "fence_closer",
    "nothing_to_explain",
    "parameters_text",
    "small_model_note",
]
