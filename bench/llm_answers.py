"""What the local model answers, run by run, through the product's own pipeline (JSON mode).

    python bench/llm_answers.py                       # the model tbtriage would use, on the demo logdir
    python bench/llm_answers.py --model m.gguf --logdir runs/ --threads 2

For each run: the most severe finding, the cause the model put first, how many of its claims the
grounding check could not find in the evidence, and the time to its first token. Runs with nothing to
explain are counted, not asked. Figures are printed, never asserted; the demo's findings are the rules'
verdict, so "top cause = a most severe finding" measures agreement with the rules, not truth.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="GGUF file (default: tbtriage's own resolution order)")
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: tbtriage's default)")
    parser.add_argument("--logdir", help="your own logdir instead of the demo")
    parser.add_argument("--lang", default="en", choices=("en", "zh"))
    args = parser.parse_args(argv)

    from tbtriage.analysis import llm
    from tbtriage.analysis.engine import diagnose
    from tbtriage.analysis.explain import ExplainSession
    from tbtriage.analysis.findings import severity_rank

    with tempfile.TemporaryDirectory() as tmp:
        logdir = args.logdir
        if logdir is None:
            from tbtriage.analysis.demo import write_demo

            logdir = Path(tmp) / "demo"
            write_demo(logdir)
        runs = diagnose(logdir).runs
        asked = agreed = unsupported = claims = 0
        for report in runs:
            session = ExplainSession(report, model=args.model, threads=args.threads, lang=args.lang, mode="json")
            if session.nothing_to_explain:
                print(f"{report.name[:30]:30} not asked: {session.nothing_to_explain}")
                continue
            try:
                explanation = session.run()
            except (llm.LLMUnavailable, llm.LLMError) as exc:
                print(f"bench/llm_answers.py: {exc}", file=sys.stderr)
                return 1
            asked += 1
            rank = min(severity_rank(f.severity) for f in report.findings)
            worst = {f.kind for f in report.findings if severity_rank(f.severity) == rank}
            top = explanation.answer.causes[0].cause if explanation.answer else "(invalid answer)"
            agreed += top in worst
            bad, total = len(explanation.grounding.unsupported), len(explanation.grounding.claims)
            unsupported, claims = unsupported + bad, claims + total
            ttft = explanation.stats.time_to_first_token_s or 0.0
            print(
                f"{report.name[:30]:30} worst {'/'.join(sorted(worst))[:22]:22} model {top[:20]:20} "
                f"unsupported {bad}/{total}  prompt {explanation.prompt.tokens} tok  first token {ttft:.1f} s"
            )
        print(
            f"asked {asked} of {len(runs)} runs; top cause = a most severe finding in {agreed}/{asked}; "
            f"claims not in the evidence {unsupported}/{claims}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
