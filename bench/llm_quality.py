"""How right the "why" is on real training runs: the engine's ranked causes and the local model's answer, both
against the configuration that caused each corpus run's pathology.

    python bench/llm_quality.py                      # the model tbtriage would use (SmolLM2 by default)
    python bench/llm_quality.py --model m.gguf --threads 2 --limit 30

For each labelled run of `bench/corpus/runs/` (see `bench/accuracy.py` for the labels and `LABEL_CAUSES`):

- engine: its top cause for the labelled finding is right, `unclear`, or wrong;
- model (JSON mode, through the product's own pipeline): its first cause is right when it names the labelled
  cause (or the engine's right cause id), whether it agrees with the engine's top cause, how many of its cited
  steps and numbers the grounding check could not find in the evidence, and its time to first token;
- healthy runs: how many were sent to the model at all (a run with no findings must not be).

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from accuracy import CORPUS, LABEL_CAUSES, Scored, _labelled_finding, score_corpus  # noqa: E402


def _report_of(result: Scored, reports: dict, finding) -> object:
    run = next(name for name, f in result.findings if f is finding)
    return reports[run]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="GGUF file (default: tbtriage's own resolution order)")
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: tbtriage's default)")
    parser.add_argument("--limit", type=int, help="at most this many labelled runs (spread over the labels)")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--no-model", action="store_true", help="score the engine only")
    args = parser.parse_args(argv)

    import tbtriage
    from tbtriage.analysis import llm
    from tbtriage.analysis.explain import ExplainSession

    results = score_corpus(args.corpus)
    reports = {r.name: r for r in tbtriage.diagnose(tbtriage.load(args.corpus)).runs}
    labelled = [r for r in results if not r.label.get("healthy") and r.label.get("cause") in LABEL_CAUSES]
    if args.limit:  # round-robin over the labels, so a limit still covers every cause
        by_label: dict[str, list[Scored]] = {}
        for r in labelled:
            by_label.setdefault(r.label["cause"], []).append(r)
        spread = [r for i in range(max(map(len, by_label.values()))) for rs in by_label.values() if i < len(rs)
                  for r in [rs[i]]]  # fmt: skip
        labelled = spread[: args.limit]
    healthy = [r for r in results if r.label.get("healthy")]

    engine = {"right": 0, "unclear": 0, "wrong": 0, "no finding": 0}
    model = {"asked": 0, "right": 0, "agrees with engine": 0, "unsupported": 0, "claims": 0, "invalid": 0}
    ttft: list[float] = []
    print(f"{'run':52s} {'label':20s} {'engine top':26s} {'model top':26s} unsupp  ttft")
    for result in labelled:
        label = result.label["cause"]
        finding = _labelled_finding(result)
        if finding is None:
            engine["no finding"] += 1
            print(f"{result.folder[:52]:52s} {label:20s} {'(finding missed)':26s}")
            continue
        top = finding.causes[0].cause if finding.causes else "unclear"
        engine["right" if top in LABEL_CAUSES[label] else "unclear" if top == "unclear" else "wrong"] += 1
        line = f"{result.folder[:52]:52s} {label:20s} {top[:26]:26s}"
        if args.no_model:
            print(line)
            continue
        session = ExplainSession(_report_of(result, reports, finding), model=args.model, threads=args.threads,
                                 mode="json")  # fmt: skip
        if session.nothing_to_explain:
            print(f"{line} (nothing to explain: {session.nothing_to_explain})")
            continue
        try:
            explanation = session.run()
        except (llm.LLMUnavailable, llm.LLMError) as exc:
            print(f"bench/llm_quality.py: {exc}", file=sys.stderr)
            return 1
        model["asked"] += 1
        if explanation.answer is None or not explanation.answer.causes:
            model["invalid"] += 1
            print(f"{line} {'(invalid answer)':26s}")
            continue
        said = explanation.answer.causes[0].cause
        model["right"] += said in LABEL_CAUSES[label]
        model["agrees with engine"] += said == top
        assert explanation.grounding is not None
        bad, total = len(explanation.grounding.unsupported), len(explanation.grounding.claims)
        model["unsupported"] += bad
        model["claims"] += total
        if explanation.stats and explanation.stats.time_to_first_token_s is not None:
            ttft.append(explanation.stats.time_to_first_token_s)
        first = f"{explanation.stats.time_to_first_token_s:.1f}s" if ttft else "-"
        print(f"{line} {said[:26]:26s} {bad:2d}/{total:<3d} {first}")

    healthy_runs = [r for r in reports.values() if r.name.split("/", 1)[0] in {h.folder for h in healthy}]
    sent_healthy = sum(not ExplainSession(r, model=args.model, mode="json").nothing_to_explain for r in healthy_runs)
    found = len(labelled) - engine["no finding"]
    print(f"\nlabelled runs {len(labelled)}; the labelled finding was found in {found}")
    print(f"engine top cause: right {engine['right']}/{found}, unclear {engine['unclear']}, wrong {engine['wrong']}")
    if not args.no_model:
        asked = model["asked"]
        print(
            f"model first cause: right {model['right']}/{asked}, same as the engine's top {model['agrees with engine']}"
            f"/{asked}, invalid answers {model['invalid']}; cited steps/numbers not in the evidence "
            f"{model['unsupported']}/{model['claims']}"
        )
        if ttft:
            print(f"time to first token: median {statistics.median(ttft):.1f} s, max {max(ttft):.1f} s")
    print(
        f"healthy runs sent to the model: {sent_healthy} of {len(healthy_runs)} (only warnings and criticals are explained)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
