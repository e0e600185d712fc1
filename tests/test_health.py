"""The health score: components with data, penalties for findings, caps by the worst finding."""

from __future__ import annotations

import numpy as np

from tbtriage.analysis.datamodel import Finding
from tbtriage.analysis.health import health
from tests._engine_data import analyze_scenario, analyze_tags, steps_every


def _finding(kind, severity):
    return Finding(kind, severity, "r", (), 10, None, {}, "m", "s")


def test_a_clean_run_scores_100_and_unmeasured_components_are_null_not_zero():
    report = analyze_scenario("healthy_hf_cosine")["."]
    assert report.health.score == 100
    components = report.health.components
    assert components["resource_efficiency"] is None  # no gpu_util or timing tags: unmeasured
    assert components["convergence"] == components["stability"] == components["overfitting_risk"] == 100


def test_a_critical_finding_caps_the_score_at_40_and_a_warning_at_80():
    report = analyze_scenario("divergence_nan")["."]
    assert report.health.score <= 40 and report.health.components["convergence"] <= 40
    warned = analyze_scenario("overfitting")["."]
    assert warned.health.score <= 80 and warned.health.components["overfitting_risk"] <= 70


def test_each_component_counts_only_its_own_kinds():
    report = analyze_scenario("healthy_step_decay")["."]
    findings = [_finding("exploding_gradients", "warning"), _finding("loss_spike", "info")]
    scored = health(findings, report.features, {t: (r, 0) for t, r in report.roles.items()})
    assert scored.components["gradient_health"] == 70 and scored.components["stability"] == 92
    assert scored.components["convergence"] == 100 and scored.score <= 80


def test_low_gpu_utilisation_lowers_resource_efficiency_without_any_finding():
    steps = steps_every(1000, 10)
    busy = analyze_tags({"gpu/util": (steps, np.full(steps.size, 95.0))})
    idle = analyze_tags({"gpu/util": (steps, np.full(steps.size, 45.0))})
    assert busy.health.components["resource_efficiency"] == 100
    assert idle.health.components["resource_efficiency"] == 50


def test_a_run_with_nothing_to_judge_scores_100_with_every_component_null():
    report = analyze_tags({"my/counter": (np.arange(10), np.arange(10.0))})
    assert report.health.score == 100 and set(report.health.components.values()) == {None}


def test_a_loss_ending_above_its_start_costs_convergence():
    steps = steps_every(1000, 10)
    report = analyze_tags({"train/loss": (steps, 1.0 + 0.1 * steps / 1000)})
    assert report.health.components["convergence"] <= 70
