"""The morning report as ONE self-contained HTML file: no network assets, no JavaScript, inline SVG sparklines.

Mail it, attach it to a ticket, open it on an air-gapped laptop: the file carries its own style sheet
and draws every curve as inline SVG. A Content-Security-Policy meta tag forbids the page from loading
anything or running scripts, so even a hostile tag name cannot make it call out; every string from an
event file (run names, tags, messages that quote them) goes through `e`: control, bidi and invisible format
characters shown as escapes (`text.clean`, as in every view: the page may be printed to a terminal), then
`html.escape`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np

from .causes import cause_text
from .compare import BestMetric, Comparison, best_metric
from .datamodel import Finding, RunReport, Series
from .downsample import minmax_downsample
from .findings import BY_NAME, SEVERITIES, timeline_order, worst
from .health import score_label
from .render_markdown import (
    COMPONENT_LABELS,
    Segment,
    finding_title,
    side_by_side_note,
    side_by_side_points,
    side_by_side_rows,
    stat,
)
from .side_by_side import SideBySide
from .text import MISSING, clean, step
from .text import number as num

#: Sparkline size in CSS pixels: a table cell, not a chart.
SPARK_WIDTH, SPARK_HEIGHT = 140, 30
#: Two points per bucket (min and max), so a 140-px line needs at most 70 buckets: spikes survive.
SPARK_BUCKETS = SPARK_WIDTH // 2
#: The y range ignores the outer 1 % on each side (as TensorBoard ignores outliers when it scales), so one
#: blow-up does not flatten the rest of the curve; points beyond are clamped to the edge and stay visible.
SPARK_RANGE_PERCENTILES = (1.0, 99.0)
_PAD = 2.0

_STYLE = """
:root { color-scheme: light dark; --fg:#1d1f21; --bg:#ffffff; --muted:#6b7280; --line:#d1d5db;
  --crit:#c62828; --warn:#b26a00; --info:#1565c0; --ok:#2e7d32; --spark:#374151; }
@media (prefers-color-scheme: dark) { :root { --fg:#e5e7eb; --bg:#111418; --muted:#9ca3af; --line:#374151;
  --crit:#ef5350; --warn:#ffb74d; --info:#64b5f6; --ok:#81c784; --spark:#d1d5db; } }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg);
  margin: 2rem auto; max-width: 1200px; padding: 0 1rem; }
h1 { font-size: 1.4rem; margin-bottom: .2rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
.meta, .muted { color: var(--muted); }
table { border-collapse: collapse; width: 100%; margin: .5rem 0 1rem; }
th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid var(--line); vertical-align: middle; }
th { font-weight: 600; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code { font: 12.5px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; overflow-wrap: anywhere; }
.badge { display: inline-block; min-width: 2.2em; text-align: center; border-radius: .6em; padding: 0 .4em;
  color: #fff; font-weight: 600; }
.critical { background: var(--crit); } .warning { background: var(--warn); } .info { background: var(--info); }
.healthy { background: var(--ok); }
.sev-critical { color: var(--crit); } .sev-warning { color: var(--warn); } .sev-info { color: var(--info); }
svg.spark { display: block; }
svg.spark polyline { fill: none; stroke: var(--spark); stroke-width: 1.2; }
svg.spark .nonfinite { stroke: var(--crit); stroke-width: 2; }
svg.spark .onset-critical { stroke: var(--crit); } svg.spark .onset-warning { stroke: var(--warn); }
svg.spark .onset-info { stroke: var(--info); }
svg.spark line.onset { stroke-width: 1; stroke-dasharray: 2 2; }
details { border: 1px solid var(--line); border-radius: .4rem; padding: .4rem .8rem; margin: .6rem 0; }
summary { cursor: pointer; font-weight: 600; }
li details { border: none; padding: 0; margin: .2rem 0; } li details summary { font-weight: normal; color: var(--muted); }
ul.findings { padding-left: 1.2rem; } ul.findings li { margin: .5rem 0; }
table.evidence { width: auto; font-size: 13px; margin: .2rem 0; } table.evidence td { padding: .1rem .6rem .1rem 0; }
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def e(text: Any) -> str:
    """Anything made safe for HTML text and attribute values (and for a terminal the page is printed to)."""
    return html.escape(clean(text), quote=True)


# ---- sparklines --------------------------------------------------------------------------------------


def sparkline_svg(series: Series | None, label: str, onsets: Sequence[tuple[int, str]] = ()) -> str:
    """A small inline SVG of one curve: min/max-bucketed line, NaN/Inf ticks, finding onsets as dashed lines.

    `onsets` are (step, severity) pairs. Returns an empty string for a missing or empty series.
    """
    if series is None or len(series) == 0:
        return ""
    steps = series.steps.astype(np.float64)
    values = series.values.astype(np.float64)
    x0, x1 = float(steps.min()), float(steps.max())
    span_x = x1 - x0 if x1 > x0 else 1.0
    finite = values[np.isfinite(values)]
    if finite.size:
        # Halved, so a [-1e308, 1e308] range never overflows to inf (halving is exact for normal floats).
        lo, hi = (2.0 * float(v) for v in np.percentile(finite / 2.0, SPARK_RANGE_PERCENTILES))
        if not hi > lo:
            lo, hi = lo - 0.5, hi + 0.5
    else:
        lo, hi = 0.0, 1.0
    inner_w, inner_h = SPARK_WIDTH - 2 * _PAD, SPARK_HEIGHT - 2 * _PAD

    def px(x: np.ndarray) -> np.ndarray:
        return _PAD + (np.asarray(x, np.float64) - x0) / span_x * inner_w

    reduced = minmax_downsample(steps, values, SPARK_BUCKETS)
    ys = SPARK_HEIGHT - _PAD - (np.clip(reduced.y, lo, hi) / 2 - lo / 2) / (hi / 2 - lo / 2) * inner_h
    points = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(px(reduced.x).tolist(), ys.tolist()))
    parts = [
        f'<svg class="spark" width="{SPARK_WIDTH}" height="{SPARK_HEIGHT}" viewBox="0 0 {SPARK_WIDTH} {SPARK_HEIGHT}"'
        f' role="img" aria-label="{e(label)}">',
        f"<title>{e(label)}: {e(num(finite.min()) if finite.size else 'no finite values')}"
        f" … {e(num(finite.max()) if finite.size else '')} over steps {int(x0)}–{int(x1)}</title>",
    ]
    for onset, severity in onsets:
        if x0 <= onset <= x1:
            x = float(px(np.array([onset]))[0])
            parts.append(
                f'<line class="onset onset-{e(severity)}" x1="{x:.1f}" x2="{x:.1f}" y1="0" y2="{SPARK_HEIGHT}"/>'
            )
    if points:
        parts.append(f'<polyline points="{points}"/>')
    for xs in (reduced.nan_x, reduced.posinf_x, reduced.neginf_x):
        for x in px(xs).tolist():  # one per bucket at most: NaN drawn as a mark, never silently dropped
            parts.append(f'<line class="nonfinite" x1="{x:.1f}" x2="{x:.1f}" y1="0" y2="5"/>')
    parts.append("</svg>")
    return "".join(parts)


def _onsets(report: RunReport, tag: str) -> list[tuple[int, str]]:
    return [(f.step, f.severity) for f in report.findings if f.step is not None and tag in f.tags]


def _spark_cell(report: RunReport, tag: str | None) -> str:
    if tag is None or tag not in report.run.scalars:
        return '<td class="muted">—</td>'
    svg = sparkline_svg(report.run.scalars[tag], tag, _onsets(report, tag))
    return f'<td>{svg}<code class="muted">{e(tag)}</code></td>'


# ---- sections ----------------------------------------------------------------------------------------


def _verdict(report: RunReport) -> str:
    first = worst(report.findings)
    return first.severity if first is not None and first.severity in SEVERITIES else "healthy"


def _anchor(index: int) -> str:
    return f"run-{index}"


def _runs_table(reports: Sequence[RunReport], best: dict[str, BestMetric | None]) -> str:
    rows = []
    for index, report in enumerate(reports):
        first = worst(report.findings)
        worst_text = (
            f'<span class="sev-{e(first.severity)}">{e(finding_title(first))}</span>' if first is not None else MISSING
        )
        b = best.get(report.name)
        best_text = f"<code>{e(b.tag)}</code> {e(num(b.value))} @ {e(step(b.step))}" if b is not None else MISSING
        last = step(report.run.last_step)
        loss = report.primary_tags.loss
        name = (
            f'<a href="#{_anchor(index)}"><code>{e(report.name)}</code></a>'
            if report.findings
            else f"<code>{e(report.name)}</code>"
        )
        rows.append(
            "<tr>"
            f'<td class="num"><span class="badge {_verdict(report)}">{e(score_label(report.health.score))}</span></td>'
            f"<td>{name}</td><td>{worst_text}</td><td>{best_text}</td>"
            f'<td class="num">{e(last)}</td>'
            f"{_spark_cell(report, loss)}"
            f"{_spark_cell(report, b.tag if b is not None and b.tag != loss else None)}"
            "</tr>"
        )
    head = (
        '<tr><th class="num">health</th><th>run</th><th>worst finding</th><th>best metric @ step</th>'
        '<th class="num">last step</th><th>loss</th><th>metric</th></tr>'
    )
    return f'<table class="runs"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def _evidence_table(evidence: dict[str, Any]) -> str:
    def value(v: Any) -> str:
        if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
            v = v.tolist()
        if isinstance(v, (list, tuple)):
            shown = ", ".join(value(x) for x in v[:12])
            return f"[{shown}{', …' if len(v) > 12 else ''}]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{e(k)}: {value(x)}" for k, x in v.items()) + "}"
        return e(v) if isinstance(v, str) else e(num(v))

    rows = "".join(f"<tr><td><code>{e(k)}</code></td><td>{value(v)}</td></tr>" for k, v in evidence.items())
    return f'<table class="evidence">{rows}</table>' if rows else ""


def _finding_item(finding: Finding) -> str:
    tags = ", ".join(f"<code>{e(t)}</code>" for t in finding.tags)
    meaning = BY_NAME[finding.kind].meaning if finding.kind in BY_NAME else None
    summary = finding.evidence.get("summary")
    rest = {k: v for k, v in finding.evidence.items() if k != "summary"}
    table = _evidence_table(rest)
    why = cause_text(finding.causes)
    causes = ""
    if why is not None:
        causes = (
            f"<div><em>Why:</em> {e(why.why)}</div>"
            + (f"<div class=muted>Signals, in order: {e(why.signals)}</div>" if why.signals else "")
            + (f"<div class=muted>Also possible: {e(why.others)}</div>" if why.others else "")
            + f"<div><em>Fix the cause:</em> {e(why.fix)}</div>"
        )
    return (
        "<li>"
        f'<strong class="sev-{e(finding.severity)}">{e(finding_title(finding))}</strong>'
        f"{' on ' + tags if tags else ''}: {e(finding.message)}"
        f"{f'<div class=muted>{e(meaning)}</div>' if meaning else ''}"
        f"{f'<div>Evidence: {e(summary)}</div>' if isinstance(summary, str) else ''}"
        f"{f'<details><summary>all evidence</summary>{table}</details>' if table else ''}"
        f"{causes}"
        f"{f'<div><em>Try:</em> {e(finding.suggestion)}</div>' if finding.suggestion else ''}"
        "</li>"
    )


def _run_section(index: int, report: RunReport, best: BestMetric | None) -> str:
    components = " · ".join(f"{e(COMPONENT_LABELS.get(k, k))} {e(num(v))}" for k, v in report.health.components.items())
    order = sorted(report.findings, key=timeline_order)
    best_line = f"best <code>{e(best.tag)}</code> {e(num(best.value))} @ {e(step(best.step))} · " if best else ""
    return (
        f'<details id="{_anchor(index)}" open><summary><span class="badge {_verdict(report)}">'
        f"{e(score_label(report.health.score))}</span> <code>{e(report.name)}</code></summary>"
        f'<p class="muted">{components}<br>{best_line}last step {e(step(report.run.last_step))}</p>'
        f'<ul class="findings">{"".join(_finding_item(f) for f in order)}</ul></details>'
    )


def _groups_section(comparison: Comparison) -> str:
    groups = [g for g in comparison.groups if len(g.runs) > 1]
    if not groups:
        return ""
    rows = "".join(
        "<tr>"
        f"<td><code>{e(g.name)}</code></td><td class=num>{len(g.runs)}</td>"
        f"<td>{f'<code>{e(g.metric_tag)}</code> ' if g.metric_tag else ''}{e(stat(g.best_metric))}</td>"
        f"<td>{e(stat(g.final_loss))}</td>"
        f"<td>{e(g.worst_health)} (<code>{e(g.worst_run)}</code>)</td>"
        f"<td>{'/'.join(str(g.severity_counts.get(s, 0)) for s in SEVERITIES)}</td>"
        "</tr>"
        for g in groups
    )
    head = (
        "<tr><th>group</th><th class=num>runs</th><th>best metric (mean ± std)</th>"
        "<th>final loss (mean ± std)</th><th>worst health</th><th>findings c/w/i</th></tr>"
    )
    return f"<h2>Groups</h2><table><thead>{head}</thead><tbody>{rows}</tbody></table>"


def _hparams_section(comparison: Comparison, order: Sequence[str]) -> str:
    table = comparison.hparams
    if table is None:
        return ""
    parts = ["<h2>Hyperparameters</h2>"]
    if table.columns:
        head = "<tr><th>run</th>" + "".join(f"<th><code>{e(c)}</code></th>" for c in table.columns) + "</tr>"
        body = "".join(
            f"<tr><td><code>{e(run)}</code></td>"
            + "".join(f"<td>{e(num(table.rows[run][c]) if c in table.rows[run] else '')}</td>" for c in table.columns)
            + "</tr>"
            for run in order
            if run in table.rows
        )
        parts.append(f"<table><thead>{head}</thead><tbody>{body}</tbody></table>")
    if table.constant:
        shared = ", ".join(f"<code>{e(k)}</code> {e(num(v))}" for k, v in table.constant.items())
        parts.append(f'<p class="muted">Same in every run that records it: {shared}.</p>')
    return "".join(parts)


def _segments_html(segments: Sequence[Segment]) -> str:
    return "".join(f"<code>{e(t)}</code>" if kind == "code" else e(t) for kind, t in segments)


def _comparisons_section(pairs: Sequence[SideBySide]) -> str:
    """Each run with a warning beside its healthy twin (`side_by_side.twin_pairs`), as the Markdown report has it."""
    if not pairs:
        return ""
    parts = ["<h2>Comparisons</h2><p>Each run with a warning beside its healthy twin.</p>"]
    for pair in pairs:
        parts.append("<h3>" + " vs ".join(f"<code>{e(r)}</code>" for r in pair.runs) + "</h3>")
        points = side_by_side_points(pair)
        if points:
            parts.append("<ul>" + "".join(f"<li>{_segments_html(p)}</li>" for p in points) + "</ul>")
        head = "<tr><th></th>" + "".join(f"<th class=num><code>{e(r)}</code></th>" for r in pair.runs) + "</tr>"
        body = "".join(
            f"<tr><td>{_segments_html(label)}</td>" + "".join(f"<td class=num>{e(c)}</td>" for c in cells) + "</tr>"
            for label, cells in side_by_side_rows(pair)
        )
        parts.append(f"<table><thead>{head}</thead><tbody>{body}</tbody></table>")
        note = side_by_side_note(pair)
        if note:
            parts.append(f'<p class="muted">{e(note)}</p>')
    return "".join(parts)


def render_html(
    reports: Sequence[RunReport],
    *,
    logdir: str,
    comparison: Comparison | None = None,
    warnings: Sequence[str] = (),
    generated: datetime | None = None,
    pairs: Sequence[SideBySide] = (),
) -> str:
    """The whole report as one HTML document (a string), runs ranked worst first; `pairs`
    (`side_by_side.twin_pairs`) compared."""
    best = comparison.best if comparison is not None else {r.name: best_metric(r) for r in reports}
    when = (generated or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC")
    verdicts = [_verdict(r) for r in reports]
    counts = " · ".join(f"{verdicts.count(v)} {v}" for v in (*SEVERITIES, "healthy") if verdicts.count(v))
    sections = "".join(_run_section(i, r, best.get(r.name)) for i, r in enumerate(reports) if r.findings)
    problems = "".join(f"<li>{e(w)}</li>" for w in warnings)
    body = [
        f"<h1>tbtriage report</h1><p class=meta><code>{e(logdir)}</code> · {len(reports)} runs"
        f"{' · ' + e(counts) if counts else ''} · generated {e(when)}</p>",
        _runs_table(reports, best) if reports else "<p>No runs found under this directory.</p>",
        f"<h2>Findings</h2>{sections}" if sections else "",
        _groups_section(comparison) if comparison is not None else "",
        _hparams_section(comparison, [r.name for r in reports]) if comparison is not None else "",
        _comparisons_section(pairs),
        f"<h2>Reading problems</h2><ul>{problems}</ul>" if problems else "",
    ]
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>tbtriage report: {e(logdir)}</title><style>{_STYLE}</style></head>\n<body>\n"
        + "\n".join(part for part in body if part)
        + "\n</body></html>\n"
    )
