"""`tbtriage diagnose LOGDIR --run NAME`: one run's findings, explained by an offline llama.cpp model.

The rule-based findings are printed first, always: they are the ground truth. Then the model's
explanation streams in (Markdown), followed by the grounding check: every step and number the model
cited, held against the evidence it was shown. `--format json` asks for a schema-constrained
answer and prints one JSON object. The pipeline is `analysis.explain`; this module only prints it.
A run with no data or no findings is not sent to the model: the output says there is nothing to
explain, and why.

Exit codes: 0 the run was diagnosed, including when the LLM is not available (no llama-cpp-python,
no model: the rule-based diagnosis is printed and one line on stderr says how to enable the model);
2 bad usage, an unreadable logdir, no such run, or a model file that is missing, truncated or not
GGUF (one line on stderr naming it); 130 interrupted with Ctrl-C.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # imported when run: the command line starts without the model pipeline
    from tbtriage.analysis.explain import ExplainSession, Explanation

EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED = 0, 2, 130


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .storage_args import LOGDIR_HELP, add_storage_arguments

    parser.add_argument(
        "logdir", metavar="LOGDIR", help="directory of runs (or one run, or one event file)" + LOGDIR_HELP
    )
    add_storage_arguments(parser)
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

    from .storage_args import check_logdir_arg, storage_options

    try:
        options = storage_options(args)
    except ValueError as exc:
        return None, str(exc)
    problem = check_logdir_arg(args.logdir, options)
    if problem:
        return None, problem
    try:
        result = diagnose(str(args.logdir), config=config, runs=f"^{re.escape(args.run)}$", storage_options=options)
    except LogdirError as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"{exc.filename or args.logdir}: {exc.strerror or exc}"
    for report in result.runs:
        if report.name == args.run:
            return report, None
    from tbtriage.analysis.logdir import open_logdir

    try:
        names = sorted(open_logdir(args.logdir, storage_options=options).discover()[0])
    except LogdirError:
        names = []
    listed = ", ".join(names[:8]) + (", …" if len(names) > 8 else "")
    return None, f"no run named {args.run!r} under {args.logdir}" + (f" (runs: {listed})" if names else "")


def _stats_line(explanation: Explanation, model_label: str) -> str:
    stats = explanation.stats
    assert stats is not None  # the model was asked: `ExplainSession.finish` always records its figures
    parts = [f"{model_label}", f"prompt {stats.prompt_tokens} tokens"]
    if explanation.load_s:
        parts.append(f"loaded in {explanation.load_s:.1f} s")
    if stats.time_to_first_token_s is not None:
        parts.append(f"first token after {stats.time_to_first_token_s:.1f} s")
    if stats.tokens_per_s:
        parts.append(f"{stats.tokens_per_s:.1f} tokens/s")
    if stats.finish_reason == "length":
        parts.append("stopped at --max-tokens")
    return "_" + ", ".join(parts) + "_"


def _grounding_md(explanation: Explanation) -> str:
    from tbtriage.analysis.prompt import clean_text

    grounding = explanation.grounding
    assert grounding is not None  # a Markdown answer is always grounded
    lines = [f"**Grounding:** {explanation.grounding_summary}"]
    lines += [f"- ⚠ `{clean_text(c.text, 40)}`: {c.reason}" for c in grounding.unsupported]
    return "\n".join(lines)


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
    session = _session(args, config, report)
    return _print_json(args, session) if args.format == "json" else _print_markdown(session)


def _session(args: argparse.Namespace, config: Any, report: Any) -> ExplainSession:
    from tbtriage.analysis.explain import ExplainSession

    return ExplainSession(
        report,
        config_llm=getattr(config, "llm", None),
        model=args.model,
        lang=args.lang,
        mode=args.format,
        max_tokens=args.max_tokens,
        threads=args.threads,
    )


def _find_model(session: ExplainSession) -> tuple[int, str] | None:
    """None when the model is ready to load; else (exit code, the one line saying why it is not)."""
    from tbtriage.analysis import llm

    try:
        session.find_model()
    except llm.LLMUnavailable as exc:  # the rest of tbtriage works: not an error
        return EXIT_OK, str(exc)
    except llm.LLMError as exc:  # the user named a model file that cannot work
        return EXIT_USAGE, str(exc)
    for warning in session.warnings:
        print(f"tbtriage diagnose: warning: {warning}", file=sys.stderr)
    return None


# ---- Markdown --------------------------------------------------------------------------------------


def _print_markdown(session: ExplainSession, out: TextIO | None = None) -> int:
    from tbtriage.analysis import llm
    from tbtriage.analysis.render_markdown import run_markdown

    out = out or sys.stdout
    _write(out, "## Rule-based findings\n\n" + run_markdown(session.report, heading="###") + "\n")
    if session.nothing_to_explain:
        _write(out, f"## Model diagnosis\n\n_Nothing to explain: {session.nothing_to_explain}._\n")
        return EXIT_OK
    unavailable = _find_model(session)
    if unavailable is not None:
        code, message = unavailable
        if code == EXIT_OK:
            _write(out, f"## Model diagnosis\n\n_Not available: {message}_\n")
        print(f"tbtriage diagnose: {message}", file=sys.stderr)
        return code
    runner = session.runner
    assert runner is not None  # `_find_model` returned None: it found the runner
    try:
        session.load()
        session.build_prompt()
    except llm.LLMError as exc:
        return _fail(str(exc))
    _write(out, f"## Model diagnosis ({runner.name}, offline)\n\n")
    if session.note:
        _write(out, f"> {session.note}\n\n")
    streaming = out.isatty() if hasattr(out, "isatty") else False
    stream = session.stream()
    try:
        for piece in stream:
            if streaming:
                _write(out, piece)
    except KeyboardInterrupt:
        stream.close()
        _write(out, "\n\n_Cancelled._\n")
        return EXIT_INTERRUPTED
    except llm.LLMError as exc:
        return _fail(str(exc))
    explanation = session.finish()
    # A terminal saw the answer as it came (only a fence it left open is closed); a file or a pipe gets
    # it whole, with its unsupported claims marked.
    _write(out, explanation.fence_closer if streaming else explanation.marked_text)
    stats_line = _stats_line(explanation, runner.name)
    _write(out, "\n\n" + _grounding_md(explanation) + "\n\n" + stats_line + "\n")
    return EXIT_OK


# ---- JSON ------------------------------------------------------------------------------------------


def _print_json(args: argparse.Namespace, session: ExplainSession, out: TextIO | None = None) -> int:
    from tbtriage.analysis import __version__, llm
    from tbtriage.analysis.llm_answer import AnswerError

    report = session.report
    data: dict[str, Any] = {
        "tool": "tbtriage",
        "version": __version__,
        "logdir": args.logdir,
        "run": report.name,
        "health": {"score": report.health.score, "components": report.health.components},
        "findings": [f.to_dict() for f in report.findings],
        "llm": {"available": False},
        "diagnosis": None,
        "unsupported_claims": [],
    }
    if session.nothing_to_explain:
        data["llm"] = {"asked": False, "nothing_to_explain": session.nothing_to_explain}
        return _emit(data, out)
    unavailable = _find_model(session)
    if unavailable is not None:
        code, message = unavailable
        if code != EXIT_OK:
            return _fail(message)
        data["llm"]["reason"] = message
        print(f"tbtriage diagnose: {message}", file=sys.stderr)
        return _emit(data, out)
    try:
        explanation = session.run()
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except (llm.LLMError, AnswerError) as exc:
        return _fail(str(exc))
    stats, prompt, model = explanation.stats, explanation.prompt, explanation.model
    # The model was asked (nothing_to_explain returned above), so the session recorded all three.
    assert stats is not None and prompt is not None and model is not None
    data["llm"] = {
        "available": True,
        "model": {"file": str(model.path), "source": model.source, "name": model.label},
        "lang": explanation.lang,
        "warnings": list(explanation.warnings),
        "prompt_tokens": stats.prompt_tokens,
        "prompt_budget": prompt.budget,
        "dropped_from_prompt": list(prompt.dropped),
        "completion_tokens": stats.completion_tokens,
        "load_s": round(explanation.load_s, 3),
        "time_to_first_token_s": None if stats.time_to_first_token_s is None else round(stats.time_to_first_token_s, 3),
        "tokens_per_s": None if stats.tokens_per_s is None else round(stats.tokens_per_s, 2),
        "finish_reason": stats.finish_reason,
    }
    if explanation.answer is None:
        data["llm"]["error"] = explanation.answer_error
        return _emit(data, out)
    data["diagnosis"] = explanation.answer.to_dict()
    assert explanation.grounding is not None  # a valid JSON answer is always grounded
    data["unsupported_claims"] = explanation.grounding.to_json()
    return _emit(data, out)


def _emit(data: dict[str, Any], out: TextIO | None = None) -> int:
    from tbtriage.analysis.json_safe import dumps

    _write(out or sys.stdout, dumps(data, indent=1) + "\n")
    return EXIT_OK
