"""The morning report's Markdown and HTML: what a reader sees, and that hostile names cannot hurt them."""

from __future__ import annotations

import re

import numpy as np

from tbtriage.analysis.compare import compare
from tbtriage.analysis.render_html import SPARK_HEIGHT, render_html, sparkline_svg
from tbtriage.analysis.render_markdown import evidence_text, num, render_markdown, run_markdown
from tests._report_data import accuracy_curve, finding, loss_curve, make_report, series

HOSTILE = "<script>alert(1)</script>"


def _reports():
    diverged = make_report(
        "gpt_lr3e-3",
        {"train/loss": ("train_loss", loss_curve()), "eval/acc": ("metric", accuracy_curve(peak_at=1200))},
        [
            finding("gpt_lr3e-3", "divergence", "critical", 1600, first_nonfinite_step=1600, last_finite=11.25),
            finding("gpt_lr3e-3", "exploding_gradients", "warning", 1500, ("train/grad_norm",), peak_ratio=92.4),
        ],
        score=8,
    )
    spiky = make_report(
        "lstm_seed0",
        {"Loss/train": ("train_loss", loss_curve(seed=3))},
        [finding("lstm_seed0", "loss_spike", "warning", 700, ("Loss/train",))],
        score=70,
    )
    healthy = make_report("lstm_seed1", {"Loss/train": ("train_loss", loss_curve(seed=4))}, score=97)
    return [diverged, spiky, healthy]


def test_markdown_ranks_runs_with_health_worst_finding_best_metric_and_last_step():
    reports = _reports()
    text = render_markdown(reports, logdir="runs/", comparison=compare(reports))
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[0] == "| health | run | worst finding | best metric @ step | last step |"
    assert rows[1].startswith("| 8 | `gpt_lr3e-3` | critical divergence @ 1600 | `eval/acc` ")
    assert "@ 1200 | 2000 |" in rows[1]
    assert rows[2].startswith("| 70 | `lstm_seed0` | warning loss_spike @ 700 |")
    assert rows[3].startswith("| 97 | `lstm_seed1` | — |")
    assert "3 runs · 1 critical · 1 warning · 1 without warnings" in text


def test_markdown_explains_each_finding_with_evidence_and_a_suggestion():
    text = render_markdown(_reports(), logdir="runs/")
    assert "**critical divergence @ 1600** on `train/loss`: divergence in gpt_lr3e-3 at 1600" in text
    assert "evidence: first_nonfinite_step 1600 · last_finite 11.25" in text
    assert "try: fix the divergence" in text
    assert "No findings: `lstm_seed1`." in text


def test_markdown_compares_seed_groups():
    reports = _reports()
    text = render_markdown(reports, logdir="runs/", comparison=compare(reports))
    group_rows = [line for line in text.split("## Groups", 1)[1].splitlines() if line.startswith("| `lstm`")]
    assert len(group_rows) == 1
    assert "| 2 |" in group_rows[0]
    assert "70 (`lstm_seed0`)" in group_rows[0]


def test_a_detectors_summary_sentence_leads_the_evidence_and_context_windows_stay_in_the_json():
    f = finding(
        "r",
        "loss_spike",
        "warning",
        300,
        summary="loss 1.2 → 9.8 between steps 290 and 300 (×8)",
        largest_ratio=8.1,
        context={"lr": [[290, 1e-3], [300, 1e-3]]},
        context_tags={"lr": "lr"},
    )
    text = run_markdown(make_report("r", {"train/loss": ("train_loss", loss_curve())}, [f], score=80))
    assert "   - evidence: loss 1.2 → 9.8 between steps 290 and 300 (×8)\n   - numbers: largest_ratio 8.1\n" in text
    assert "context" not in text


def test_run_markdown_tells_the_story_in_order_for_the_diagnosis_pane():
    text = run_markdown(_reports()[0])
    assert text.startswith("### `gpt_lr3e-3` · health 8/100 (critical)")
    assert text.index("exploding_gradients @ 1500") < text.index("divergence @ 1600")
    assert "what it means: the gradient norm spiked far above its own baseline" in text
    assert "The first sign, **exploding_gradients** at step 1500, came 100 steps before **divergence**" in text


def test_run_markdown_of_a_healthy_run_says_so():
    text = run_markdown(_reports()[2])
    assert "health 97/100 (healthy)" in text
    assert "No findings" in text


def test_hostile_names_cannot_break_the_table_or_reach_the_terminal():
    name = "evil|run`\x1b[2J\x07"
    report = make_report(
        name, {"loss|x": ("train_loss", loss_curve())}, [finding(name, "plateau", "warning", 100, ("loss|x",))]
    )
    text = render_markdown([report], logdir="runs/\x1b]0;title\x07")
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b[2J" in text  # shown, not obeyed
    row = next(line for line in text.splitlines() if line.startswith("| 100 |"))
    # Five cells: the pipe inside the name is escaped, so GFM does not split on it.
    assert len(re.findall(r"(?<!\\)\|", row)) == 6


def test_numbers_are_quoted_the_way_a_person_would():
    assert [num(v) for v in (None, float("nan"), float("inf"), -float("inf"), 3, 0.123456, 1234567.0, 1.5e-7)] == [
        "—",
        "NaN",
        "+Inf",
        "-Inf",
        "3",
        "0.1235",
        "1234567",
        "1.5e-07",
    ]
    assert evidence_text({"steps": list(range(10))}) == "steps [0, 1, 2, 3, 4, 5, … 4 more]"


# ---- HTML ----------------------------------------------------------------------------------------------


def test_html_is_one_self_contained_file_without_network_assets_or_scripts():
    reports = _reports()
    page = render_html(reports, logdir="runs/", comparison=compare(reports))
    assert page.startswith("<!doctype html>")
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page.lower()
    assert not re.search(r"\s(src|href)=\"(?!#)", page)  # only in-page anchors
    assert "default-src 'none'" in page  # the page may not load anything even if text tried to
    assert page.count("<svg") >= 3  # a loss sparkline per run (and the metric one)


def test_html_escapes_a_tag_named_like_a_script():
    report = make_report(
        HOSTILE,
        {HOSTILE: ("train_loss", loss_curve())},
        [finding(HOSTILE, "loss_spike", "warning", 300, (HOSTILE,), note=HOSTILE)],
        texts={"args/text_summary": '{{"name": "{}"}}'.format(HOSTILE.replace('"', ""))},
    )
    page = render_html([report], logdir=HOSTILE, comparison=compare([report]))
    assert HOSTILE not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_sparkline_keeps_a_one_point_spike_and_marks_nan():
    steps = np.arange(0, 10_000)
    values = np.full(steps.size, 1.0) + np.sin(steps / 300) * 0.01
    values[4321] = 50.0  # one point among 10k: averaging would hide it
    values[9000:] = np.nan
    svg = sparkline_svg(series(steps, values), "loss", onsets=[(4321, "warning")])
    ys = [float(y) for y in re.findall(r"[\d.]+,([\d.]+)", re.search(r'points="([^"]*)"', svg).group(1))]
    assert min(ys) <= 2.0 + 1e-9  # the spike reaches the top edge (clamped, still visible)
    assert max(ys) > SPARK_HEIGHT / 2
    assert 'class="nonfinite"' in svg
    assert 'class="onset onset-warning"' in svg
    assert len(ys) <= 140  # bucketed to the sparkline's width


def test_an_empty_series_draws_no_sparkline():
    assert sparkline_svg(series([], []), "loss") == ""
