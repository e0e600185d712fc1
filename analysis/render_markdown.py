"""The morning report as Markdown: readable raw in a terminal, and pasted into a lab chat.

`render_markdown` is the whole report (ranked table, findings per run with evidence and suggestions,
groups, hyperparameters); `run_markdown` explains one run's findings in words, for the TUI's Diagnosis
pane. Rule-based: everything said here comes from the findings' own fields.

Names and text from event files are untrusted: control, bidi and invisible characters become visible
escapes (`text.clean`) and names sit in code spans, so neither a terminal nor a Markdown renderer
interprets them. Numbers and steps are written by `text.number` and `text.step`, as in every view.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .causes import cause_text
from .compare import BestMetric, Comparison, GroupSummary, HparamsTable, Stat, best_metric
from .datamodel import Finding, RunReport
from .findings import BY_NAME, SEVERITIES, finding_order, timeline_order, worst
from .health import score_label
from .side_by_side import SideBySide
from .text import MISSING, clean, step, step_span
from .text import number as num

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


# ---- safe text ---------------------------------------------------------------------------------------


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


def stat(s: Stat) -> str:
    if s.mean is None:
        return MISSING
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
        return MISSING
    return f"{code(best.tag, in_table)} {num(best.value)} @ {step(best.step)}"


def finding_title(finding: Finding) -> str:
    at = f" @ {step_span(finding.step, finding.end_step)}" if finding.step is not None else ""
    return f"{finding.severity} {finding.kind}{at}"


# ---- one run -----------------------------------------------------------------------------------------


def _ordered(findings: Sequence[Finding]) -> list[Finding]:
    """Findings in the order they happened (`findings.timeline_order`: those without a step last)."""
    return sorted(findings, key=timeline_order)


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
    first = min(serious, key=timeline_order)
    worst_one = min(serious, key=finding_order)
    assert first.step is not None and worst_one.step is not None  # `serious` keeps only findings with a step
    if first is worst_one or first.step >= worst_one.step:
        return None
    gap = worst_one.step - first.step
    return (
        f"The first sign, **{first.kind}** at step {step(first.step)}, came {gap} steps before "
        f"**{worst_one.kind}** at step {step(worst_one.step)}: look there first; later findings are often its "
        "consequences."
    )


def finding_markdown(finding: Finding, number: int | None = None, explain: bool = False) -> str:
    """One finding as a list item: title, tags and message, then evidence, meaning and suggestion."""
    tags = ", ".join(code(t) for t in finding.tags)
    on = f" on {tags}" if tags else ""
    bullet = f"{number}." if number is not None else "-"
    lines = [f"{bullet} **{finding_title(finding)}**{on}: {prose(finding.message)}"]
    if explain and finding.kind in BY_NAME:
        lines.append(f"   - what it means: {BY_NAME[finding.kind].meaning}")
    lines += [f"   - {line}" for line in evidence_lines(finding.evidence)]
    if (why := cause_text(finding.causes)) is not None:
        lines.append(f"   - why: {prose(why.why)}")
        if why.signals:
            lines.append(f"   - signals, in order: {prose(why.signals)}")
        if why.others:
            lines.append(f"   - also possible: {prose(why.others)}")
        lines.append(f"   - fix the cause: {prose(why.fix)}")
    if finding.suggestion:
        lines.append(f"   - try: {prose(finding.suggestion)}")
    return "\n".join(lines)


def run_summary_line(report: RunReport, best: BestMetric | None = None) -> str:
    run = report.run
    points = report.tag_points()
    best = best if best is not None else best_metric(report)
    best_part = f"best {best_text(best)} · " if best is not None else ""
    return f"{best_part}last step {step(run.last_step)} · {len(points)} scalar tags, {sum(points.values())} points"


def _score(report: RunReport) -> str:
    score = report.health.score
    return score_label(score) if score is None else f"{score}/100"


def run_markdown(report: RunReport, heading: str = "###", best: BestMetric | None = None) -> str:
    """One run explained in words: health, what happened in order, evidence and what to try."""
    first = worst(report.findings)
    verdict = first.severity if first is not None else "healthy"
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
        first = worst(report.findings)
        worst_text = finding_title(first) if first is not None else MISSING
        lines.append(
            f"| {score_label(report.health.score)} | {code(report.name, True)} | {worst_text} | "
            f"{best_text(best.get(report.name), True)} | {step(report.run.last_step)} |"
        )
    return lines


def _groups_table(groups: Sequence[GroupSummary]) -> list[str]:
    lines = [
        "| group | runs | best metric (mean ± std) | final loss (mean ± std) | worst health | findings c/w/i |",
        "|---|---:|---|---|---|---|",
    ]
    for g in groups:
        metric = f"{code(g.metric_tag, True)} {stat(g.best_metric)}" if g.metric_tag else MISSING
        worst_run = f"{g.worst_health} ({code(g.worst_run, True)})" if g.worst_run is not None else MISSING
        counts = "/".join(str(g.severity_counts.get(s, 0)) for s in SEVERITIES)
        lines.append(
            f"| {code(g.name, True)} | {len(g.runs)} | {metric} | {stat(g.final_loss)} | {worst_run} | {counts} |"
        )
    return lines


def _value_text(value: Any) -> str:
    """A setting's value as plain text: numbers by the one number rule, the rest cleaned."""
    if isinstance(value, (int, float)):
        return num(value)
    return clean(value) if value is not None else MISSING


def _cell(value: Any) -> str:
    return _value_text(value).replace("|", "\\|")


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


def _best_cell(value: float | None, at: int | None) -> str:
    return f"{num(value)} @ {step(at)}" if value is not None else MISSING


#: A piece of a side-by-side sentence: ("text", s) as it is, ("prose", s) untrusted prose, ("code", s) a name.
Segment = tuple[str, str]


def side_by_side_points(pair: SideBySide) -> list[list[Segment]]:
    """What a comparison says, one point per list: why each sick run differs from its twin, then where each
    curve parts from the first run's. Renderers turn the segments into Markdown or HTML."""
    points: list[list[Segment]] = []
    for e in pair.explanations:
        point = [("code", e.run), ("text", f" has {e.finding} at step {step(e.step)}: "), ("prose", e.sentence)]
        if e.summary:
            point += [
                ("text", "; likeliest cause: "),
                ("prose", e.summary),
                ("text", f" (confidence {e.confidence:.2f})"),
            ]
        points.append([*point, ("text", ".")])
    if pair.tag is not None:
        for run, parting in pair.partings.items():
            if parting is None:
                where = "stay within their noise band throughout"
            else:
                where = (f"part at step {step(parting.step)} ({num(parting.value_a)} vs {num(parting.value_b)}, "
                         f"noise band ±{num(parting.band)})")  # fmt: skip
            points.append([("code", pair.tag), ("text", ": "), ("code", run), ("text", " and "),
                           ("code", pair.runs[0]), ("text", f" {where}.")])  # fmt: skip
    return points


def side_by_side_rows(pair: SideBySide) -> list[tuple[list[Segment], list[str]]]:
    """The comparison's table, one (label, a cell per run) row each: health, the settings that differ, then
    best and final metrics. Cells are plain text."""
    rows: list[tuple[list[Segment], list[str]]] = [([("text", "health")], [score_label(h) for h in pair.health])]
    for key, values in pair.differs.items():
        rows.append(([("code", key)], [_value_text(v) for v in values]))
    for m in pair.metrics:
        if m.direction:
            label = [("text", "best "), ("code", m.tag), ("text", f" ({'max' if m.direction > 0 else 'min'})")]
            rows.append((label, [_best_cell(b, at) for b, at in zip(m.best, m.best_step)]))
        rows.append(([("text", "final "), ("code", m.tag)], [num(v) for v in m.final]))
    return rows


def side_by_side_note(pair: SideBySide) -> str:
    """The line under a comparison's table: where its settings came from, and how many are shared."""
    notes = []
    if not pair.differs:
        notes.append("No recorded setting tells these runs apart.")
    elif pair.source == "name":
        notes.append("Settings read off the run names (no hyperparameters recorded).")
    if pair.shared:
        notes.append(f"{pair.shared} other setting{'s' if pair.shared != 1 else ''} the same in every run.")
    return " ".join(notes)


def _segments_markdown(segments: Sequence[Segment], in_table: bool = False) -> str:
    out = {"text": lambda t: t, "prose": prose, "code": lambda t: code(t, in_table)}
    return "".join(out[kind](t) for kind, t in segments)


def side_by_side_markdown(pair: SideBySide, heading: str = "##") -> list[str]:
    """Two or more runs side by side: why they differ and where their curves part first, then the table of
    differing settings and metrics."""
    lines = [f"{heading} " + " vs ".join(code(r) for r in pair.runs), ""]
    lines += [f"- {_segments_markdown(point)}" for point in side_by_side_points(pair)]
    if lines[-1]:
        lines.append("")
    lines.append("| | " + " | ".join(code(r, True) for r in pair.runs) + " |")
    lines.append("|---|" + "---:|" * len(pair.runs))
    for label, cells in side_by_side_rows(pair):
        lines.append(
            f"| {_segments_markdown(label, True)} | " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
        )
    note = side_by_side_note(pair)
    return [*lines, "", note] if note else lines


def _counts_line(reports: Sequence[RunReport]) -> str:
    firsts = [worst(r.findings) for r in reports]
    critical = sum(1 for w in firsts if w is not None and w.severity == "critical")
    warning = sum(1 for w in firsts if w is not None and w.severity == "warning")
    healthy = sum(1 for w in firsts if w is None or w.severity == "info")
    runs = f"{len(reports)} run{'s' if len(reports) != 1 else ''}"
    return f"{runs} · {critical} critical · {warning} warning · {healthy} without warnings"


def render_markdown(
    reports: Sequence[RunReport],
    *,
    logdir: str,
    comparison: Comparison | None = None,
    warnings: Sequence[str] = (),
    pairs: Sequence[SideBySide] = (),
) -> str:
    """The whole morning report for runs ranked worst first; `pairs` (`side_by_side.twin_pairs`) compared."""
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
        # A blank line first: right after the table, Markdown would draw this line as one more row.
        lines += ["", "No findings: " + ", ".join(code(n) for n in quiet) + "."]
    groups = [g for g in comparison.groups if len(g.runs) > 1] if comparison is not None else []
    if groups and comparison is not None:
        alone = len(comparison.groups) - len(groups)
        lines += ["", "## Groups", "", *_groups_table(groups)]
        if alone:
            lines += ["", f"{alone} other run{'s' if alone != 1 else ''} share no group."]
    if comparison is not None and comparison.hparams is not None:
        lines += ["", "## Hyperparameters", "", *_hparams_table(comparison.hparams, [r.name for r in reports])]
    if pairs:
        lines += ["", "## Comparisons", "", "Each run with a warning beside its healthy twin.", ""]
        for pair in pairs:
            lines += [*side_by_side_markdown(pair, heading="###"), ""]
    if warnings:
        lines += ["", "## Reading problems", ""] + [f"- {prose(w)}" for w in warnings]
    return "\n".join(lines).rstrip() + "\n"
