"""The morning report as Markdown: readable raw in a terminal, and pasted into a lab chat.

`render_markdown` is the whole report (ranked table, findings per run with evidence and suggestions,
groups, hyperparameters); `run_markdown` explains one run's findings in words, for the TUI's Diagnosis
pane. Rule-based: everything said here comes from the findings' own fields.

Names and text from event files are untrusted: control characters become visible `\\xNN` escapes and
names sit in code spans, so neither a terminal nor a Markdown renderer interprets them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from .compare import BestMetric, Comparison, GroupSummary, HparamsTable, Stat, best_metric, worst_finding
from .datamodel import SEVERITIES, Finding, RunReport
from .health import score_label

#: What each finding kind means, in a sentence (the vocabulary of shared/DESIGN.md).
KIND_MEANINGS = {
    "divergence": "the loss or a metric became NaN/Inf, or blew up and never recovered",
    "loss_spike": "isolated sudden jumps in the loss that recover",
    "periodic_spikes": "spikes recur at a fixed period, often once per epoch (a bad shard, or no shuffling)",
    "oscillation": "the loss keeps bouncing with an amplitude large against its trend (lr too high, batch too small)",
    "no_learning": "the loss never fell below its start or chance level, or a metric stayed at chance or identical",
    "slow_convergence": "the loss falls far too slowly (lr too low, bad init, poor optimizer settings)",
    "plateau": "the loss stayed flat for a long stretch",
    "overfitting": "training loss keeps falling while the validation loss or metric gets worse",
    "exploding_gradients": "the gradient norm spiked far above its own baseline",
    "vanishing_gradients": "gradient norms (often of early layers) near zero while learning stalls",
    "dead_units": "activations mostly zero (dead ReLUs) or saturated",
    "weight_growth": "weight norms growing fast late in training",
    "warmup_instability": "instability in the first steps that a warmup would prevent",
    "input_bottleneck": "data loading dominates the step time, or the device sits idle",
    "task_imbalance": "one loss term dominates the total while the others stall",
    "amp_overflow": "the mixed-precision loss scale keeps collapsing (overflow skips)",
    "lr_anomaly": "the learning rate does something its schedule shouldn't",
    "run_restart": "the run restarted: steps went backwards and the overlap was resolved",
    "data_integrity": "an event file is truncated, corrupt or empty; intact data was kept",
    "stalled": "the run stopped writing while others continue",
}
#: Component names of `Health` as a reader would say them.
COMPONENT_LABELS = {
    "convergence": "convergence",
    "stability": "stability",
    "gradient_health": "gradients",
    "resource_efficiency": "resources",
    "overfitting_risk": "overfitting",
}
#: Evidence lists longer than this are cut (the JSON report keeps them whole).
MAX_EVIDENCE_ITEMS = 6

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}


# ---- safe text ---------------------------------------------------------------------------------------


def clean(text: Any) -> str:
    """One line of untrusted text with every control character (ESC, BEL, CR, newline) shown as `\\xNN`."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def code(text: Any, in_table: bool = False) -> str:
    """A Markdown code span that shows `text` literally, whatever backticks or pipes it holds."""
    body = clean(text)
    if in_table:
        body = body.replace("|", "\\|")  # GFM splits cells on | even inside code spans
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip() else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def prose(text: Any) -> str:
    """Untrusted prose (a message, a suggestion): control characters visible, HTML-ish tags defused."""
    return clean(text).replace("<", "&lt;").replace(">", "&gt;")


# ---- numbers -----------------------------------------------------------------------------------------


def num(value: Any) -> str:
    """A number as a person would quote it: 4 significant digits, NaN/Inf spelled out, — for missing."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    try:
        v = float(value)
    except (TypeError, ValueError):
        return clean(value)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == 0:
        return "0"
    if v.is_integer() and abs(v) < 1e7:
        return str(int(v))
    if 1e-3 <= abs(v) < 1e5:
        return f"{v:.4g}"
    return f"{v:.3e}"


def stat(s: Stat) -> str:
    if s.mean is None:
        return "—"
    text = num(s.mean) if s.std is None else f"{num(s.mean)} ± {num(s.std)}"
    return text if s.finite == s.count else f"{text} ({s.finite}/{s.count} finite)"


def _evidence_value(v: Any) -> str:
    if isinstance(v, dict):
        return (
            "{" + ", ".join(f"{clean(k)}: {_evidence_value(x)}" for k, x in list(v.items())[:MAX_EVIDENCE_ITEMS]) + "}"
        )
    if isinstance(v, (list, tuple)) or (hasattr(v, "tolist") and not isinstance(v, (str, bytes))):
        items = list(v.tolist() if hasattr(v, "tolist") else v)
        shown = ", ".join(_evidence_value(x) for x in items[:MAX_EVIDENCE_ITEMS])
        more = f", … {len(items) - MAX_EVIDENCE_ITEMS} more" if len(items) > MAX_EVIDENCE_ITEMS else ""
        return f"[{shown}{more}]"
    if isinstance(v, str):
        return prose(v)
    return num(v)


def evidence_text(evidence: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    """`key value · key value`, lists cut to their first items, nested dicts inline."""
    return " · ".join(f"{clean(k)} {_evidence_value(v)}" for k, v in evidence.items() if k not in skip)


#: Evidence keys a reader of the Markdown does not need spelled out: the detector's own sentence is shown
#: on its own line, and the ±5-point context windows are for the LLM and the JSON report.
EVIDENCE_SHOWN_APART = ("summary", "context", "context_tags", "tag")


def evidence_lines(evidence: dict[str, Any]) -> list[str]:
    """The detector's summary sentence (when it wrote one), then the remaining scalar numbers."""
    lines = []
    if isinstance(evidence.get("summary"), str):
        lines.append(f"evidence: {prose(evidence['summary'])}")
    rest = {k: v for k, v in evidence.items() if k not in EVIDENCE_SHOWN_APART}
    if rest:
        lines.append(("numbers: " if lines else "evidence: ") + evidence_text(rest))
    return lines


def best_text(best: BestMetric | None, in_table: bool = False) -> str:
    if best is None:
        return "—"
    return f"{code(best.tag, in_table)} {num(best.value)} @ {best.step}"


def finding_title(finding: Finding) -> str:
    at = f" @ {finding.step}" if finding.step is not None else ""
    until = f"–{finding.end_step}" if finding.end_step is not None and finding.end_step != finding.step else ""
    return f"{finding.severity} {finding.kind}{at}{until}"


# ---- one run -----------------------------------------------------------------------------------------


def _ordered(findings: Sequence[Finding]) -> list[Finding]:
    """Findings in the order they happened (those without a step last), severity breaking ties."""
    return sorted(
        findings,
        key=lambda f: (f.step is None, f.step if f.step is not None else 0, _SEVERITY_RANK.get(f.severity, 9)),
    )


def _components_line(report: RunReport) -> str:
    parts = []
    for name, score in report.health.components.items():
        label = COMPONENT_LABELS.get(name, name.replace("_", " "))
        parts.append(f"{clean(label)} {num(score)}")
    return " · ".join(parts)


def _chronology(findings: Sequence[Finding]) -> str | None:
    """When the earliest warning+ finding precedes the worst one, say so: it is often the cause."""
    serious = [f for f in findings if f.severity in ("critical", "warning") and f.step is not None]
    if len(serious) < 2:
        return None
    first = min(serious, key=lambda f: (f.step, _SEVERITY_RANK[f.severity]))
    worst = min(serious, key=lambda f: (_SEVERITY_RANK[f.severity], f.step))
    if first is worst or first.step >= worst.step:
        return None
    gap = worst.step - first.step
    return (
        f"The first sign, **{first.kind}** at step {first.step}, came {gap} steps before **{worst.kind}** at "
        f"step {worst.step}: look there first; later findings are often its consequences."
    )


def finding_markdown(finding: Finding, number: int | None = None, explain: bool = False) -> str:
    """One finding as a list item: title, tags and message, then evidence, meaning and suggestion."""
    tags = ", ".join(code(t) for t in finding.tags)
    on = f" on {tags}" if tags else ""
    bullet = f"{number}." if number is not None else "-"
    lines = [f"{bullet} **{finding_title(finding)}**{on}: {prose(finding.message)}"]
    if explain and finding.kind in KIND_MEANINGS:
        lines.append(f"   - what it means: {KIND_MEANINGS[finding.kind]}")
    lines += [f"   - {line}" for line in evidence_lines(finding.evidence)]
    if finding.suggestion:
        lines.append(f"   - try: {prose(finding.suggestion)}")
    return "\n".join(lines)


def run_summary_line(report: RunReport, best: BestMetric | None = None) -> str:
    run = report.run
    points = sum(len(s) for s in run.scalars.values())
    best = best if best is not None else best_metric(report)
    best_part = f"best {best_text(best)} · " if best is not None else ""
    last = run.last_step if run.last_step is not None else "—"
    return f"{best_part}last step {last} · {len(run.scalars)} scalar tags, {points} points"


def _score(report: RunReport) -> str:
    score = report.health.score
    return score_label(score) if score is None else f"{score}/100"


def run_markdown(report: RunReport, heading: str = "###", best: BestMetric | None = None) -> str:
    """One run explained in words: health, what happened in order, evidence and what to try."""
    worst = worst_finding(report)
    verdict = worst.severity if worst is not None else "healthy"
    lines = [f"{heading} {code(report.name)} · health {_score(report)} ({verdict})", ""]
    components = _components_line(report)
    if components:
        lines += [components, ""]
    lines += [run_summary_line(report, best), ""]
    findings = _ordered(report.findings)
    if not findings:
        lines.append("No findings: nothing in this run's curves matches a known training problem.")
        return "\n".join(lines).rstrip() + "\n"
    counts = [f"{n} {s}" for s in SEVERITIES if (n := sum(f.severity == s for f in findings))]
    lines.append(f"{len(findings)} finding{'s' if len(findings) != 1 else ''} ({', '.join(counts)}), in order:")
    lines.append("")
    lines += [finding_markdown(f, i, explain=True) for i, f in enumerate(findings, 1)]
    story = _chronology(findings)
    if story:
        lines += ["", story]
    return "\n".join(lines).rstrip() + "\n"


# ---- the whole report --------------------------------------------------------------------------------


def _ranked_table(reports: Sequence[RunReport], best: dict[str, BestMetric | None]) -> list[str]:
    lines = [
        "| health | run | worst finding | best metric @ step | last step |",
        "|---:|---|---|---|---:|",
    ]
    for report in reports:
        worst = worst_finding(report)
        worst_text = finding_title(worst) if worst is not None else "—"
        last = report.run.last_step if report.run.last_step is not None else "—"
        lines.append(
            f"| {score_label(report.health.score)} | {code(report.name, True)} | {worst_text} | "
            f"{best_text(best.get(report.name), True)} | {last} |"
        )
    return lines


def _groups_table(groups: Sequence[GroupSummary]) -> list[str]:
    lines = [
        "| group | runs | best metric (mean ± std) | final loss (mean ± std) | worst health | findings c/w/i |",
        "|---|---:|---|---|---|---|",
    ]
    for g in groups:
        metric = f"{code(g.metric_tag, True)} {stat(g.best_metric)}" if g.metric_tag else "—"
        worst = f"{g.worst_health} ({code(g.worst_run, True)})" if g.worst_run is not None else "—"
        counts = "/".join(str(g.severity_counts.get(s, 0)) for s in SEVERITIES)
        lines.append(f"| {code(g.name, True)} | {len(g.runs)} | {metric} | {stat(g.final_loss)} | {worst} | {counts} |")
    return lines


def _cell(value: Any) -> str:
    if isinstance(value, (int, float)):
        return num(value)
    return clean(value).replace("|", "\\|") if value is not None else "—"


def _hparams_table(table: HparamsTable, order: Sequence[str]) -> list[str]:
    runs = [r for r in order if r in table.rows]
    lines = []
    if table.columns:
        lines.append("| run | " + " | ".join(code(c, True) for c in table.columns) + " |")
        lines.append("|---|" + "---|" * len(table.columns))
        for run in runs:
            row = table.rows[run]
            cells = " | ".join(_cell(row[c]) if c in row else "" for c in table.columns)
            lines.append(f"| {code(run, True)} | {cells} |")
    if table.dropped:
        lines += ["", f"{table.dropped} more differing hyperparameters left out (see the JSON report)."]
    if table.constant:
        shared = ", ".join(f"{code(k)} {_cell(v)}" for k, v in list(table.constant.items())[: MAX_EVIDENCE_ITEMS * 2])
        lines += ["", f"Same in every run that records it: {shared}."]
    return lines


def _counts_line(reports: Sequence[RunReport]) -> str:
    worst = [worst_finding(r) for r in reports]
    critical = sum(1 for w in worst if w is not None and w.severity == "critical")
    warning = sum(1 for w in worst if w is not None and w.severity == "warning")
    healthy = sum(1 for w in worst if w is None or w.severity == "info")
    runs = f"{len(reports)} run{'s' if len(reports) != 1 else ''}"
    return f"{runs} · {critical} critical · {warning} warning · {healthy} without warnings"


def render_markdown(
    reports: Sequence[RunReport],
    *,
    logdir: str,
    comparison: Comparison | None = None,
    warnings: Sequence[str] = (),
) -> str:
    """The whole morning report for runs ranked worst first."""
    best = comparison.best if comparison is not None else {r.name: best_metric(r) for r in reports}
    lines = [f"# tbtriage report: {code(logdir)}", "", _counts_line(reports), ""]
    if not reports:
        lines.append("No runs found: no `events.out.tfevents.*` files under this directory.")
    else:
        lines += _ranked_table(reports, best)
    with_findings = [r for r in reports if r.findings]
    if with_findings:
        lines += ["", "## Findings", ""]
        for report in with_findings:
            lines += [run_markdown(report, heading="###", best=best.get(report.name)).rstrip(), ""]
    quiet = [r.name for r in reports if not r.findings]
    if quiet:
        lines += ["No findings: " + ", ".join(code(n) for n in quiet) + "."]
    groups = [g for g in comparison.groups if len(g.runs) > 1] if comparison is not None else []
    if groups:
        alone = len(comparison.groups) - len(groups)
        lines += ["", "## Groups", "", *_groups_table(groups)]
        if alone:
            lines += ["", f"{alone} other run{'s' if alone != 1 else ''} share no group."]
    if comparison is not None and comparison.hparams is not None:
        lines += ["", "## Hyperparameters", "", *_hparams_table(comparison.hparams, [r.name for r in reports])]
    if warnings:
        lines += ["", "## Reading problems", ""] + [f"- {prose(w)}" for w in warnings]
    return "\n".join(lines).rstrip() + "\n"
