"""Overfitting: training keeps improving while validation turns worse, in one run or across Keras siblings."""

from __future__ import annotations

import numpy as np
import pytest

from tests._engine_data import (
    RunSpec,
    analyze_scenario,
    analyze_tags,
    diagnose_written,
    kinds,
    scatter,
    steps_every,
    to_run,
    write_tensorboardx_run,
)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_validation_loss_turning_up_at_1200_while_train_falls_is_overfitting_from_1200(seed):
    report = analyze_scenario("overfitting", seed)["."]
    finding = next(f for f in report.findings if f.kind == "overfitting")
    assert finding.severity == "warning" and abs(finding.step - 1200) <= 150  # one validation interval
    summary = finding.evidence["summary"]
    assert summary.startswith("val_loss best ") and "while train_loss fell" in summary
    assert finding.evidence["relative_change"] > 0.1 and finding.evidence["train_improvement"] > 0.1
    assert f"step {finding.step}" in finding.suggestion and "weight decay" in finding.suggestion
    assert "val_acc" in finding.evidence["also"]


def test_keras_overfitting_is_reported_on_the_train_run_naming_its_validation_sibling():
    reports = analyze_scenario("keras_overfit")
    finding = next(f for f in reports["train"].findings if f.kind == "overfitting")
    assert abs(finding.step - 14) <= 1 and finding.tags == ("epoch_loss",)
    assert finding.evidence["val_run"] == "validation" and finding.evidence["val_tag"] == "epoch_loss"
    # The validation run alone shows a rising loss: that is the sibling's overfitting, not divergence.
    assert not kinds(reports["validation"])


def test_a_noisy_validation_loss_that_levels_off_is_not_overfitting():
    steps = steps_every(3000, 10)
    rng = np.random.default_rng(1)
    clean = 0.5 + 1.5 * np.exp(-steps / 500)
    val_steps = steps_every(3000, 100)
    val = np.interp(val_steps, steps, clean) * 1.15 + rng.normal(0, 0.02, val_steps.size)
    report = analyze_tags({"train_loss": (steps, scatter(rng, clean, 0.05)), "val_loss": (val_steps, val)})
    assert "overfitting" not in kinds(report, ("critical", "warning", "info"))


def test_validation_rising_while_training_rises_too_is_not_overfitting():
    steps = steps_every(3000, 10)
    rng = np.random.default_rng(2)
    clean = 1.0 + 0.3 * np.maximum(steps - 1500, 0) / 1500
    val_steps = steps_every(3000, 150)
    val = np.interp(val_steps, steps, clean) * 1.1 + rng.normal(0, 0.005, val_steps.size)
    report = analyze_tags({"train_loss": (steps, scatter(rng, clean, 0.02)), "val_loss": (val_steps, val)})
    assert "overfitting" not in kinds(report, ("critical", "warning", "info"))


def test_validation_accuracy_falling_while_train_loss_falls_is_overfitting():
    steps = steps_every(4000, 10)
    rng = np.random.default_rng(3)
    train = scatter(rng, 0.05 + 2.0 * np.exp(-steps / 600), 0.04)
    val_steps = steps_every(4000, 200)
    acc = 0.85 - 0.4 * np.exp(-val_steps / 500) - np.where(val_steps > 2000, (val_steps - 2000) / 2000 * 0.08, 0)
    report = analyze_tags(
        {"train/loss": (steps, train), "eval/accuracy": (val_steps, acc + rng.normal(0, 0.002, acc.size))}
    )
    finding = next(f for f in report.findings if f.kind == "overfitting")
    assert abs(finding.step - 2000) <= 200 and finding.evidence["val_tag"] == "eval/accuracy"


def test_five_evaluations_are_not_enough_to_warn():
    steps = steps_every(500, 10)
    val_steps = np.array([100, 200, 300, 400, 500])
    report = analyze_tags(
        {
            "train_loss": (steps, 2.0 * np.exp(-steps / 100) + 0.1),
            "val_loss": (val_steps, np.array([1.0, 0.6, 0.7, 0.8, 0.9])),
        }
    )
    assert "overfitting" not in kinds(report)


def test_a_tf_estimator_model_dir_with_an_eval_subdir_is_judged_like_keras_siblings():
    from types import SimpleNamespace

    from tbtriage.analysis.engine import analyze_run, logdir_context
    from tests._engine_data import RunSpec, to_run

    steps = steps_every(20000, 100)
    rng = np.random.default_rng(4)
    eval_steps = steps_every(20000, 1000)
    eval_loss = 0.5 + 1.5 * np.exp(-eval_steps / 3000) + np.maximum(eval_steps - 8000, 0) / 12000 * 0.3
    runs = {
        ".": to_run(".", RunSpec({"loss": (steps, scatter(rng, 0.1 + 2.0 * np.exp(-steps / 3000), 0.03))})),
        "eval": to_run("eval", RunSpec({"loss": (eval_steps, eval_loss)})),
    }
    context = logdir_context(SimpleNamespace(runs=runs))
    finding = next(f for f in analyze_run(runs["."], None, context).findings if f.kind == "overfitting")
    assert finding.evidence["val_run"] == "eval" and abs(finding.step - 8000) <= 1000
    assert not kinds(analyze_run(runs["eval"], None, context))


def _object_detection_run(tmp_path, eval_losses: list[float]):
    """A TF Object Detection API model directory: `train/` logs `Loss/total_loss` every 100 steps (1.31 -> 0.73,
    never above 1.52), `eval/` the same loss at each of its evaluations; the train run's report."""
    steps = np.arange(100, 2100, 100)
    train = scatter(np.random.default_rng(2), 0.7 + 0.6 * np.exp(-(steps - 100) / 500), 0.15)
    train[12] = 1.52  # one bad stretch, the highest the training loss ever logged
    evals = np.arange(2000 - 500 * (len(eval_losses) - 1), 2001, 500)
    write_tensorboardx_run(tmp_path, to_run("model/eval", RunSpec({"Loss/total_loss": (evals, np.array(eval_losses))})))
    return diagnose_written(tmp_path, to_run("model/train", RunSpec({"Loss/total_loss": (steps, train)})))


def test_a_held_out_loss_far_above_anything_the_training_loss_ever_was_is_said(tmp_path):
    # One evaluation at the end, 12.3 against a training loss of 0.73 that never logged more than 1.52: the
    # model does not carry over (or eval and train disagree): info, since one evaluation cannot say which.
    report = _object_detection_run(tmp_path, [12.34])
    (finding,) = [f for f in report.findings if f.kind == "overfitting"]
    assert finding.severity == "info" and finding.step == 2000 and finding.evidence["above_training"]
    assert finding.evidence["val_run"] == "model/eval" and finding.evidence["train_highest"] == pytest.approx(1.52)
    assert "label map" in finding.suggestion and "a sum over batches" in finding.suggestion


@pytest.mark.parametrize("eval_losses", [[0.81], [60.0, 41.0, 35.0]])
def test_a_held_out_loss_near_the_training_loss_or_falling_between_evaluations_is_not_said(tmp_path, eval_losses):
    # An ordinary gap; or a loop that sums its validation loss over batches: far above, but it falls as training
    # goes on, so the model carries over and only the scale differs.
    report = _object_detection_run(tmp_path, eval_losses)
    assert "overfitting" not in kinds(report, ("critical", "warning", "info"))
