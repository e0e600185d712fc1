"""What an offline diagnosis costs with whatever model tbtriage finds: load, prompt, first token, speed.

    python bench/llm.py                          # the model tbtriage would use, on the demo logdir
    python bench/llm.py --model m.gguf --threads 2
    python bench/llm.py --logdir runs/ --run bs256
    python bench/llm.py --tiny                   # the tests' random 0.5 MB GGUF (mechanics only)

Figures, measured in this one process and printed side by side (nothing is asserted):
cold load; the prompt in tokens (by the model's own tokenizer) and what the budget dropped;
time to first token and generation speed for the first run (cold prompt cache), for a second run
(the fixed system prompt comes from llama.cpp's prefix cache), and for a schema-constrained JSON
answer; and the ratio of prompt processing to generation time, the part the budget keeps small.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tbtriage.analysis.explain import ExplainSession, Explanation

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: Demo runs with critical findings (a prompt with windows) and a milder one (a different prompt body).
DEMO_RUNS = ("gpt_small_lr3e-3_noclip", "vit_tiny_no_aug")


def _reports(args: argparse.Namespace, tmp: Path):
    from tbtriage.analysis.engine import diagnose

    if args.logdir:
        result = diagnose(args.logdir)
        reports = [r for r in result.runs if not args.run or r.name == args.run]
        if not reports:
            raise SystemExit(f"no run {args.run!r} under {args.logdir}")
        return reports[:2] if len(reports) > 1 else reports * 2
    from tbtriage.analysis.demo import write_demo

    write_demo(tmp / "demo")
    by_name = {r.name: r for r in diagnose(tmp / "demo").runs}
    return [by_name[name] for name in DEMO_RUNS]


def _generate(session: ExplainSession) -> tuple[Explanation, float]:
    """The session's whole answer (through the product's own pipeline) and the seconds it took."""
    started = time.perf_counter()
    for _ in session.stream():
        pass
    return session.finish(), time.perf_counter() - started


def _row(label: str, stats, total_s: float) -> str:
    ttft = stats.time_to_first_token_s or 0.0
    tps = stats.tokens_per_s or 0.0
    prompt_rate = stats.prompt_eval_tokens / ttft if ttft else 0.0
    return (
        f"{label:<28} prompt {stats.prompt_tokens:>4} tok ({stats.prompt_eval_tokens:>4} evaluated, "
        f"{prompt_rate:6.1f} tok/s)  first token {ttft:6.2f} s  answer {stats.completion_tokens:>4} tok "
        f"at {tps:6.1f} tok/s  total {total_s:6.2f} s  [{stats.finish_reason}]"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="GGUF file (default: tbtriage's own resolution order)")
    parser.add_argument("--tiny", action="store_true", help="use the tests' tiny random GGUF")
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: tbtriage's default)")
    parser.add_argument("--max-tokens", type=int, default=128, help="answer length for the Markdown runs")
    parser.add_argument("--logdir", help="your own logdir instead of the demo")
    parser.add_argument("--run", help="the run to diagnose in --logdir")
    parser.add_argument("--lang", default="en", choices=("en", "zh"))
    args = parser.parse_args(argv)

    from tbtriage.analysis import llm
    from tbtriage.analysis.explain import ExplainSession, parameters_text

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        model = args.model
        if args.tiny:
            from tests.tiny_gguf import build_tiny_gguf

            model = str(build_tiny_gguf(tmp / "tiny-random-llama.gguf"))
        try:
            settings = llm.settings_from(model, None, threads=args.threads)
            llm.import_llama()
        except (llm.LLMUnavailable, llm.LLMError) as exc:
            print(f"bench/llm.py: {exc}", file=sys.stderr)
            return 1
        reports = _reports(args, tmp)

        def session(report, mode: str = "md", max_tokens: int | None = args.max_tokens) -> ExplainSession:
            s = ExplainSession(report, settings=settings, lang=args.lang, mode=mode, max_tokens=max_tokens)
            s.find_model()
            return s

        try:
            sessions = [session(r) for r in reports]
        except llm.LLMError as exc:
            print(f"bench/llm.py: {exc}", file=sys.stderr)
            return 1
        info, runner = sessions[0].info, sessions[0].runner
        print(
            f"model      {settings.model.path} ({settings.model.source}, {info.file_size / 2**20:.1f} MiB, "
            f"{parameters_text(info.parameter_count)} parameters, {info.architecture}, "
            f"trained context {info.context_length})"
        )
        for warning in sessions[0].warnings:
            print(f"warning    {warning}")
        print(
            f"machine    {os.cpu_count()} cores, {runner.threads} threads, n_ctx {settings.n_ctx}, "
            f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}"
        )
        load_s = sessions[0].load()
        print(f"load       {load_s:.3f} s (cold)")

        for report, s in zip(reports, sessions):
            prompt = s.build_prompt()
            print(
                f"prompt     {report.name}: {runner.prompt_tokens(prompt)} tokens with the chat template "
                f"(budget {prompt.budget}); dropped {len(prompt.dropped)} lines, least important first"
            )

        first, total = _generate(sessions[0])
        print(_row(f"md, {reports[0].name[:16]} (cold)", first.stats, total))
        second, total = _generate(sessions[1])
        print(_row(f"md, {reports[1].name[:16]} (cached)", second.stats, total))
        answered, total = _generate(session(reports[0], "json", None))
        verdict = f"INVALID: {answered.answer_error}" if answered.answer is None else "parses and validates"
        print(_row("json (schema-constrained)", answered.stats, total) + f"  {verdict}")

        cold, cached = first.stats, second.stats
        if cold.time_to_first_token_s and cached.time_to_first_token_s:
            print(
                f"ratios     first token cached/cold {cached.time_to_first_token_s / cold.time_to_first_token_s:.2f}; "
                f"prompt share of a {args.max_tokens}-token answer "
                f"{cold.time_to_first_token_s / (cold.time_to_first_token_s + cold.generation_s):.0%}"
            )
        runner.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
