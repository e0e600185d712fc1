"""How right the engine is on real training runs: per-kind recall, precision and onset accuracy on the labelled
corpus (`bench/corpus/runs/`), the false alarms on healthy runs, and what it says about public real logs.

    python bench/accuracy.py                       # the committed corpus, then ../shared/realworld if present
    python bench/accuracy.py --corpus /tmp/c       # a corpus made with `python -m bench.corpus.generate --out`
    python bench/accuracy.py --runs               # also list every corpus run's findings
    python bench/accuracy.py --no-realworld

Scoring, per labelled run folder (a Keras case's `train/` and `validation/` siblings count as one run):
- recall of kind K: labelled K expectations with at least one K finding (any severity) on the run;
- onset: of those found, the share with a K finding whose step is within the label's tolerance of its onset,
  on the axis the finding states: global steps (against `onset_step`), or epochs when the finding says so
  (`evidence["axis"] == "epoch"`: a run logged per epoch only);
- precision of kind K: runs flagged K that are labelled K, over those plus runs flagged K whose label neither
  expects K nor lists it as fair (`also_ok`);
- false alarms: every warning or critical finding on a run labelled healthy.
Only the public API is used (`tbtriage.load`, `tbtriage.diagnose`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tbtriage  # noqa: E402
from tbtriage.analysis.render_markdown import clean  # noqa: E402

CORPUS = ROOT / "bench" / "corpus" / "runs"
REALWORLD = ROOT.parent / "shared" / "realworld"
#: Kinds a label may name: the engine's vocabulary plus `no_learning` (issue 9 adds it to the engine).
EXTRA_KINDS = ("no_learning",)
ALARM = ("warning", "critical")


@dataclass
class Scored:
    folder: str
    label: dict
    findings: list = field(default_factory=list)  # (run name, Finding)
    health: list = field(default_factory=list)  # (run name, score or None)
    unknown_tags: set = field(default_factory=set)  # tags the engine gave no role


def known_kinds() -> tuple[str, ...]:
    from tbtriage.analysis.datamodel import FINDING_KINDS

    return tuple(dict.fromkeys((*FINDING_KINDS, *EXTRA_KINDS)))


def load_labels(corpus: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(corpus.glob("*/label.json"))}


def score_corpus(corpus: Path) -> list[Scored]:
    labels = load_labels(corpus)
    report = tbtriage.diagnose(tbtriage.load(corpus))
    scored = {name: Scored(name, label) for name, label in labels.items()}
    for run in report.runs:
        folder = run.name.replace("\\", "/").split("/", 1)[0]
        if folder not in scored:
            continue
        scored[folder].health.append((run.name, run.health.score))
        scored[folder].findings += [(run.name, f) for f in run.findings]
        scored[folder].unknown_tags |= {tag for tag, role in run.roles.items() if role is None}
    return [scored[name] for name in sorted(scored)]


def _names(expect: dict) -> set[str]:
    """The kind a label expects and the other names just as right for that run."""
    return {expect["kind"], *expect.get("or", ())}


def _within(finding, expect: dict, label: dict) -> bool:
    """Whether the finding's onset is within the label's tolerance, on the axis the finding states: global steps
    (scored against `onset_step`) or epoch indices (`evidence["axis"] == "epoch"`, scored against the epoch)."""
    if expect["onset"] is None:
        return True  # no step to be right about (a torn file, a run without data)
    if finding.step is None:
        return False
    per_epoch = label["steps_per_epoch"]
    on_epochs = finding.evidence.get("axis") == "epoch"
    if on_epochs == (label["axis"] == "epoch"):
        return abs(finding.step - expect["onset"]) <= expect["tolerance"]
    if on_epochs:  # an epoch index against a label in global steps
        return abs(finding.step - expect["onset_step"] // per_epoch) <= -(-expect["tolerance"] // per_epoch)
    return abs(finding.step - expect["onset_step"]) <= expect["tolerance"] * per_epoch


@dataclass(frozen=True)
class KindRow:
    kind: str
    labelled: int  # expectations of this kind
    found: int  # ... with a finding of the kind (or an equally right name), any severity
    on_time: int  # ... of those, with one inside the label's tolerance
    right: int  # runs flagged with the kind whose label expects it
    wrong: int  # runs flagged with it whose label neither expects nor allows it
    right_alarm: int  # the same two, counting only warning and critical findings
    wrong_alarm: int

    @staticmethod
    def ratio(a: int, b: int) -> float | None:
        return a / b if b else None


def kind_table(results: list[Scored]) -> list[KindRow]:
    counts: dict[str, list[int]] = defaultdict(lambda: [0] * 7)
    for r in results:
        expected = set().union(*(_names(e) for e in r.label["expect"]))
        for e in r.label["expect"]:
            row = counts[e["kind"]]
            row[0] += 1
            same = [f for _, f in r.findings if f.kind in _names(e)]
            if same:
                row[1] += 1
                row[2] += any(_within(f, e, r.label) for f in same)
        for alarms_only, offset in ((False, 3), (True, 5)):
            flagged = {f.kind for _, f in r.findings if not alarms_only or f.severity in ALARM}
            for kind in flagged:
                if kind in expected:
                    counts[kind][offset] += 1
                elif kind not in r.label["also_ok"]:
                    counts[kind][offset + 1] += 1
    return [KindRow(kind, *counts[kind]) for kind in sorted(counts)]


def _pct(x: float | None) -> str:
    return "   -" if x is None else f"{x:4.2f}"


def print_table(results: list[Scored]) -> None:
    rows = kind_table(results)
    print("recall: labelled runs with the kind found (any severity); onset: of those, inside the tolerance;")
    print("prec: flagged runs that are labelled so (all severities | warning and critical only); false+: runs")
    print(
        f"{'kind':22s} {'runs':>4s} {'found':>5s} {'recall':>6s} {'onset':>6s} {'prec':>6s} {'false+':>6s} "
        f"{'prec≥w':>6s} {'false+≥w':>8s}"
    )
    for r in rows:
        print(
            f"{r.kind:22s} {r.labelled:4d} {r.found:5d} {_pct(r.ratio(r.found, r.labelled)):>6s} "
            f"{_pct(r.ratio(r.on_time, r.found)):>6s} {_pct(r.ratio(r.right, r.right + r.wrong)):>6s} {r.wrong:6d} "
            f"{_pct(r.ratio(r.right_alarm, r.right_alarm + r.wrong_alarm)):>6s} {r.wrong_alarm:8d}"
        )
    total = sum(r.labelled for r in rows)
    found = sum(r.found for r in rows)
    on_time = sum(r.on_time for r in rows)
    print(
        f"{'all labelled':22s} {total:4d} {found:5d} {_pct(KindRow.ratio(found, total)):>6s} "
        f"{_pct(KindRow.ratio(on_time, found)):>6s}"
    )


def print_false_alarms(results: list[Scored]) -> None:
    healthy = [r for r in results if r.label["healthy"]]
    alarms = [(r, name, f) for r in healthy for name, f in r.findings if f.severity in ALARM]
    bad_runs = {r.folder for r, _, _ in alarms}
    print(
        f"\nfalse alarms (warning/critical) on healthy runs: {len(bad_runs)} of {len(healthy)} runs, {len(alarms)} findings"
    )
    for _, name, f in alarms:
        print(f"  {clean(name):58s} {f.kind}/{f.severity} @{f.step}: {clean(f.message)[:110]}")


def _finding_text(f) -> str:
    return f"{f.kind}({f.severity[0]})@{f.step}"


def print_runs(results: list[Scored]) -> None:
    print("\nfindings per corpus run (✓ labelled kind found within tolerance, ~ found off-time, ✗ missed)")
    for r in results:
        marks = []
        for e in r.label["expect"]:
            same = [f for _, f in r.findings if f.kind in _names(e)]
            mark = "✓" if any(_within(f, e, r.label) for f in same) else ("~" if same else "✗")
            marks.append(f"{mark}{e['kind']}@{e['onset']}±{e['tolerance']}")
        scores = [s for _, s in r.health]
        health = "/".join("null" if s is None else str(s) for s in scores)
        listed = " ".join(_finding_text(f) for _, f in r.findings) or "-"
        print(f"  {r.folder:52s} h={health:8s} {' '.join(marks) or 'healthy':42s} | {clean(listed)}")


def print_isolation(corpus: Path, results: list[Scored]) -> None:
    """A run's findings must not depend on which other runs were loaded with it: each folder alone vs all. The
    one finding that does by design, an `oscillation` judged against a healthy lr twin (`pattern` "twin"), is
    set aside and counted."""
    changed = []
    for r in results:
        alone = tbtriage.diagnose(tbtriage.load(corpus / r.folder))
        seen = sorted((f.kind, f.severity, f.step) for run in alone.runs for f in run.findings)
        together = sorted((f.kind, f.severity, f.step) for _, f in r.findings if f.evidence.get("pattern") != "twin")
        if seen != together:
            changed.append((r.folder, together, seen))
    twin = sum(1 for r in results if any(f.evidence.get("pattern") == "twin" for _, f in r.findings))
    print(f"\nruns with a finding judged against a healthy twin (set aside below): {twin} of {len(results)}")
    print(f"runs whose findings change when loaded alone: {len(changed)} of {len(results)}")
    for folder, together, seen in changed:
        print(f"  {folder:52s} with all: {together}  alone: {seen}")


def print_no_data(results: list[Scored]) -> None:
    """Runs that hold no data points should get health null ("no data"), never a score."""
    empty = [r for r in results if r.label.get("no_data")]
    if not empty:
        return
    null = [r for r in empty if all(score is None for _, score in r.health)]
    print(f"\nruns without data given health null: {len(null)} of {len(empty)}")
    for r in empty:
        scores = "/".join("null" if s is None else str(s) for _, s in r.health) or "not listed"
        print(f"  {r.folder:58s} health {scores}")


def print_unknown_tags(results: list[Scored]) -> None:
    """Tags the engine could not place, by convention: names real users write that roles.py misses."""
    by_convention: dict[str, set] = defaultdict(set)
    for r in results:
        by_convention[r.label["convention"]] |= r.unknown_tags
    print("\ntags without a role, by convention")
    for convention in sorted(by_convention):
        tags = sorted(by_convention[convention])
        print(f"  {convention:16s} {clean(', '.join(tags)) if tags else '-'}")


def print_realworld(path: Path) -> None:
    """What the tool says about each public log: to read side by side with its curves."""
    if not path.is_dir():
        return
    report = tbtriage.diagnose(tbtriage.load(path))
    print(f"\nreal public logs ({path}): {len(report.runs)} runs")
    for run in sorted(report.runs, key=lambda r: r.name):
        score = "null" if run.health.score is None else run.health.score
        print(f"  {clean(run.name)[:110]}")
        print(f"      health {score}; {len(run.run.scalars)} scalar tags")
        for f in run.findings:
            print(f"      {f.kind}/{f.severity} @{f.step}: {clean(f.message)[:120]}")


#: The corpus labels name the configuration that caused a run's pathology; these are the engine's cause ids
#: (`analysis/causes.py`) that name it correctly. A poisoned shard read at a fixed point of every epoch is
#: rightly called either a bad batch or a data-order problem.
LABEL_CAUSES = {
    "bad_init": {"saturating_activations_or_init"},
    "sigmoid_deep_stack": {"saturating_activations_or_init"},
    "crash_at_start": {"writer_crash"},
    "crash_mid_write": {"writer_crash"},
    "fp16_overflow": {"fp16_overflow"},
    "frozen_params": {"lr_zero_or_frozen"},
    "lr_zero": {"lr_zero_or_frozen"},
    "lr_too_high": {"lr_too_high"},
    "lr_too_low": {"lr_too_low"},
    "nan_in_data": {"nan_in_inputs_or_loss"},
    "no_clipping": {"no_grad_clipping"},
    "no_regularisation": {"insufficient_regularization"},
    "no_shuffle": {"data_order"},
    "no_warmup": {"no_warmup"},
    "poisoned_shard": {"bad_batch", "data_order"},
    "restart": {"resumed"},
    "shuffled_labels": {"labels_or_loss_bug"},
    "slow_data_loading": {"slow_data_loader"},
    "unweighted_loss_sum": {"unweighted_loss_sum"},
    "warmup_uncapped": {"lr_schedule_unbounded"},
}


def _labelled_finding(result: Scored):
    """The finding the label is about: of the expected kinds (first expectation first), the most severe."""
    from tbtriage.analysis.findings import finding_order

    for expect in result.label.get("expect", ()):
        found = [f for _run, f in result.findings if f.kind in _names(expect)]
        if found:
            return min(found, key=finding_order)
    return None


def print_causes(results: list[Scored]) -> None:
    """Top-1 cause against the labelled configuration, per label, over runs whose labelled finding was found."""
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])  # runs, found, right, unclear, wrong
    wrong: list[str] = []
    for result in results:
        label = result.label.get("cause")
        if result.label.get("healthy") or label not in LABEL_CAUSES:
            continue
        row = rows[label]
        row[0] += 1
        finding = _labelled_finding(result)
        if finding is None:
            continue
        row[1] += 1
        causes = finding.causes
        top = causes[0].cause if causes else "unclear"
        if top in LABEL_CAUSES[label]:
            row[2] += 1
        elif top == "unclear":
            row[3] += 1
        else:
            row[4] += 1
            wrong.append(f"  {result.folder:58s} {finding.kind}: {top} {causes[0].confidence:.2f} (label {label})")
    print("\nthe engine's top cause against the labelled configuration (of runs whose labelled finding was found)")
    print(f"{'label':22s} {'runs':>5s} {'found':>5s} {'right':>5s} {'unclear':>7s} {'wrong':>5s}")
    total = [0, 0, 0, 0, 0]
    for label in sorted(rows):
        row = rows[label]
        total = [a + b for a, b in zip(total, row)]
        print(f"{label:22s} {row[0]:5d} {row[1]:5d} {row[2]:5d} {row[3]:7d} {row[4]:5d}")
    runs, found, right, unclear, bad = total
    share = f"{right / found:.2f}" if found else "-"
    print(f"{'all':22s} {runs:5d} {found:5d} {right:5d} {unclear:7d} {bad:5d}   top-1 right {share} of found")
    if wrong:
        print("wrong top causes:")
        print("\n".join(wrong))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--runs", action="store_true", help="list every corpus run's findings")
    parser.add_argument("--no-realworld", action="store_true")
    args = parser.parse_args(argv)
    results = score_corpus(args.corpus)
    healthy = sum(r.label["healthy"] for r in results)
    print(f"corpus {args.corpus}: {len(results)} runs ({healthy} healthy), tbtriage {tbtriage.__version__}\n")
    print_table(results)
    print_false_alarms(results)
    print_causes(results)
    print_no_data(results)
    print_isolation(args.corpus, results)
    print_unknown_tags(results)
    if args.runs:
        print_runs(results)
    if not args.no_realworld:
        print_realworld(REALWORLD)
    return 0


if __name__ == "__main__":
    sys.exit(main())
