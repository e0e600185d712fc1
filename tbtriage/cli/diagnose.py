"""`tbtriage diagnose LOGDIR --run NAME`: one run's findings, explained by an offline llama.cpp model.

The rule-based findings are printed first, always: they are the ground truth. Then the model's
answer streams in (Markdown), followed by the grounding check: every step and number the model
cited, held against the evidence it was shown. `--format json` asks for a schema-constrained
answer and prints one JSON object.

Exit codes: 0 the run was diagnosed, including when the LLM is not available (no llama-cpp-python,
no model: the rule-based diagnosis is printed and one line on stderr says how to enable the model);
2 bad usage, an unreadable logdir, no such run, or a model file that is missing, truncated or not
GGUF (one line on stderr naming it); 130 interrupted with Ctrl-C.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any, TextIO

EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED = 0, 2, 130
#: Model files below this size are ~135M-parameter models: say plainly what to expect from them.
SMALL_MODEL_BYTES = 300 * 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logdir", metavar="LOGDIR", help="directory of runs (or one run, or one event file)")
    parser.add_argument("--run", required=True, metavar="NAME", help="the run to diagnose (its path under LOGDIR)")
    parser.add_argument("--model", metavar="FILE.gguf", help="GGUF model file (default: see README, 'Models')")
    parser.add_argument("--format", choices=("md", "json"), default="md", help="md (streamed, default) or json")
    parser.add_argument("--lang", choices=("en", "zh"), help="answer language (default: from the locale)")
    parser.add_argument("--max-tokens", type=int, metavar="N", help="longest answer in tokens")
    parser.add_argument("--threads", type=int, metavar="N", help="CPU threads for the model (default: few)")
    parser.add_argument("--config", metavar="FILE", help="config file (default ~/.config/tbtriage/config.toml)")


def _fail(message: str) -> int:
    print(f"tbtriage diagnose: {message}", file=sys.stderr)
    return EXIT_USAGE


def _load_report(args: argparse.Namespace, config: Any):
    """The engine's RunReport for `--run`, reading only that run; (report, None) or (None, error line)."""
    from tbtriage.analysis.engine import diagnose
    from tbtriage.analysis.logdir import LogdirError

    from .report import unreadable

    logdir = Path(args.logdir).expanduser()
    if not logdir.exists():
        return None, f"{args.logdir}: no such file or directory"
    problem = unreadable(logdir)
    if problem:
        return None, f"{args.logdir}: {problem}"
    try:
        result = diagnose(str(args.logdir), config=config, runs=f"^{re.escape(args.run)}$")
    except LogdirError as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"{exc.filename or args.logdir}: {exc.strerror or exc}"
    for report in result.runs:
        if report.name == args.run:
            return report, None
    from tbtriage.analysis.discover import find_runs

    names = sorted(find_runs(logdir))
    listed = ", ".join(names[:8]) + (", …" if len(names) > 8 else "")
    return None, f"no run named {args.run!r} under {args.logdir}" + (f" (runs: {listed})" if names else "")


def _stats_line(stats: Any, model_label: str) -> str:
    parts = [f"{model_label}", f"prompt {stats.prompt_tokens} tokens"]
    if stats.load_s:
        parts.append(f"loaded in {stats.load_s:.1f} s")
    if stats.time_to_first_token_s is not None:
        parts.append(f"first token after {stats.time_to_first_token_s:.1f} s")
    if stats.tokens_per_s:
        parts.append(f"{stats.tokens_per_s:.1f} tokens/s")
    if stats.finish_reason == "length":
        parts.append("stopped at --max-tokens")
    return "_" + ", ".join(parts) + "_"


def _grounding_md(grounding: Any) -> str:
    from tbtriage.analysis.prompt import clean_text

    checked = len(grounding.claims)
    bad = grounding.unsupported
    if not checked:
        return "**Grounding:** the answer cites no steps or values to check."
    if not bad:
        return f"**Grounding:** all {checked} cited steps and values are in the evidence."
    lines = [f"**Grounding:** {len(bad)} of {checked} cited steps and values are not in the evidence:"]
    lines += [f"- ⚠ `{clean_text(c.text, 40)}`: {c.reason}" for c in bad]
    return "\n".join(lines)


def _honesty_note(info_size: int, lang: str) -> str | None:
    if info_size >= SMALL_MODEL_BYTES:
        return None
    from tbtriage.analysis.llm import models_dir

    if lang == "zh":
        return f"> 小模型（约 1 亿参数）只能给出提示，请以上面的规则发现为准；更强的 GGUF 模型可复制到 {models_dir()}。"
    return (
        f"> A small model (~135M parameters) gives hints, not answers: the rule-based findings above are the "
        f"ground truth. For better diagnoses copy a stronger GGUF (e.g. a 1.5B instruct model) to {models_dir()}."
    )


def _write(out: TextIO, text: str) -> None:
    out.write(text)
    out.flush()


def run(args: argparse.Namespace) -> int:
    from tbtriage.analysis.config import ConfigError, load_config

    if args.max_tokens is not None and args.max_tokens < 1:
        return _fail(f"--max-tokens {args.max_tokens}: must be at least 1")
    if args.threads is not None and args.threads < 1:
        return _fail(f"--threads {args.threads}: must be at least 1")
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return _fail(str(exc))
    report, problem = _load_report(args, config)
    if report is None:
        return _fail(problem)
    return Diagnosis(args, config, report).run()


class Diagnosis:
    """One `diagnose` invocation: rule-based text, then (when possible) the model's answer."""

    def __init__(self, args: argparse.Namespace, config: Any, report: Any, out: TextIO | None = None):
        from tbtriage.analysis.prompt import default_lang

        self.args, self.config, self.report = args, config, report
        self.out = out or sys.stdout
        llm_cfg = dict(getattr(config, "llm", {}) or {})
        self.llm_cfg = llm_cfg
        self.lang = args.lang or llm_cfg.get("lang") or default_lang()
        if self.lang not in ("en", "zh"):
            self.lang = "en"

    # ---- setup -------------------------------------------------------------------------------------

    def _runner(self):
        """(runner, None), or (None, (exit code, message)) when the model cannot be used."""
        from tbtriage.analysis import llm

        try:
            settings = llm.settings_from(self.args.model, self.llm_cfg, threads=self.args.threads)
        except llm.LLMUnavailable as exc:
            return None, (EXIT_OK, str(exc))
        if not llm.llama_available():
            return None, (EXIT_OK, llm.enable_hint())
        try:
            llm.check_model(settings.model)
        except llm.LLMError as exc:
            return None, (EXIT_USAGE, str(exc))
        return llm.get_runner(settings), None

    def _prompt(self, runner, mode: str):
        from tbtriage.analysis.compare import hparams_of
        from tbtriage.analysis.prompt import build_prompt, default_budget

        return build_prompt(
            self.report,
            lang=self.lang,
            mode=mode,
            budget=default_budget(runner.settings.n_ctx),
            count_tokens=runner.count_tokens,
            count_chat=runner.count_chat,
            hparams=hparams_of(self.report)[0],
        )

    def run(self) -> int:
        return self._run_json() if self.args.format == "json" else self._run_md()

    # ---- Markdown ----------------------------------------------------------------------------------

    def _run_md(self) -> int:
        from tbtriage.analysis import llm
        from tbtriage.analysis.grounding import check_text, mark_unsupported
        from tbtriage.analysis.render_markdown import run_markdown

        out = self.out
        _write(out, "## Rule-based findings\n\n" + run_markdown(self.report, heading="###") + "\n")
        runner, unavailable = self._runner()
        if runner is None:
            code, message = unavailable
            if code == EXIT_OK:
                _write(out, f"## Model diagnosis\n\n_Not available: {message}_\n")
            print(f"tbtriage diagnose: {message}", file=sys.stderr)
            return code
        try:
            prompt = self._prompt(runner, "md")
        except llm.LLMError as exc:
            return _fail(str(exc))
        _write(out, f"## Model diagnosis ({runner.name}, offline)\n\n")
        note = _honesty_note(runner.info.file_size if runner.info else 0, self.lang)
        if note:
            _write(out, note + "\n\n")
        streaming = out.isatty() if hasattr(out, "isatty") else False
        pieces: list[str] = []
        stream = runner.stream(prompt, max_tokens=self.args.max_tokens or llm.DEFAULT_MAX_TOKENS_MD)
        try:
            for piece in stream:
                pieces.append(piece)
                if streaming:
                    _write(out, piece)
        except KeyboardInterrupt:
            stream.close()
            _write(out, "\n\n_Cancelled._\n")
            return EXIT_INTERRUPTED
        except llm.LLMError as exc:
            return _fail(str(exc))
        answer = "".join(pieces).strip()
        grounding = check_text(answer, prompt.evidence)
        if not streaming:  # a file or a pipe gets the answer with its unsupported claims marked
            _write(out, mark_unsupported(answer, grounding))
        _write(out, "\n\n" + _grounding_md(grounding) + "\n\n" + _stats_line(runner.stats, runner.name) + "\n")
        return EXIT_OK

    # ---- JSON --------------------------------------------------------------------------------------

    def _run_json(self) -> int:
        from tbtriage.analysis import __version__, llm
        from tbtriage.analysis.grounding import check_answer
        from tbtriage.analysis.llm_answer import AnswerError

        report = self.report
        data: dict[str, Any] = {
            "tool": "tbtriage",
            "version": __version__,
            "logdir": self.args.logdir,
            "run": report.name,
            "health": {"score": report.health.score, "components": report.health.components},
            "findings": [f.to_dict() for f in report.findings],
            "llm": {"available": False},
            "diagnosis": None,
            "unsupported_claims": [],
        }
        runner, unavailable = self._runner()
        if runner is None:
            code, message = unavailable
            if code != EXIT_OK:
                return _fail(message)
            data["llm"]["reason"] = message
            print(f"tbtriage diagnose: {message}", file=sys.stderr)
            return self._emit(data)
        max_tokens = self.args.max_tokens or llm.DEFAULT_MAX_TOKENS_JSON
        try:
            prompt = self._prompt(runner, "json")
            text = "".join(runner.answer_json(prompt, max_tokens=max_tokens))
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        except (llm.LLMError, AnswerError) as exc:
            return _fail(str(exc))
        stats = runner.stats
        data["llm"] = {
            "available": True,
            "model": {
                "file": str(runner.settings.model.path),
                "source": runner.settings.model.source,
                "name": runner.name,
            },
            "lang": self.lang,
            "prompt_tokens": stats.prompt_tokens,
            "prompt_budget": prompt.budget,
            "dropped_from_prompt": list(prompt.dropped),
            "completion_tokens": stats.completion_tokens,
            "load_s": round(stats.load_s, 3),
            "time_to_first_token_s": None
            if stats.time_to_first_token_s is None
            else round(stats.time_to_first_token_s, 3),
            "tokens_per_s": None if stats.tokens_per_s is None else round(stats.tokens_per_s, 2),
            "finish_reason": stats.finish_reason,
        }
        try:
            answer = llm.parse_json_answer(text, prompt, max_tokens)
        except AnswerError as exc:
            data["llm"]["error"] = str(exc)
            return self._emit(data)
        data["diagnosis"] = answer.to_dict()
        data["unsupported_claims"] = check_answer(data["diagnosis"], prompt.evidence).to_json()
        return self._emit(data)

    def _emit(self, data: dict[str, Any]) -> int:
        from tbtriage.analysis.json_safe import dumps

        _write(self.out, dumps(data, indent=1) + "\n")
        return EXIT_OK
