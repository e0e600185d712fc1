"""no_learning on networks really trained with the configurations that cause it, written as event files.

The nets are `train_mlp`'s numpy MLPs (SGD with momentum on 10 or 4 noisy Gaussian classes): their curves are
the optimizer's own, not drawn. Each run is written with tensorboardX's SummaryWriter and read back.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests._engine_data import (
    RunSpec,
    analyze_tags,
    diagnose_written,
    scatter,
    steps_every,
    to_run,
    train_mlp,
    write_tensorboardx_run,
)

#: The tag names of a Hugging Face Trainer run.
HF_TAGS = {"train/lr": "train/learning_rate", "val/loss": "eval/loss", "val/acc": "eval/accuracy"}


def _no_learning(report):
    found = [f for f in report.findings if f.kind == "no_learning"]
    assert found, [(f.kind, f.severity, f.message) for f in report.findings]
    return found[0]


@pytest.mark.parametrize("seed", [0, 1])
def test_an_hf_trainer_run_with_an_lr_far_too_low_sits_at_ln4_and_chance_accuracy_and_never_learned(tmp_path, seed):
    run = train_mlp(seed, lr=3e-8, schedule="constant", epochs=4, n_train=4000, classes=4, head_init=0.02, tags=HF_TAGS)
    report = diagnose_written(tmp_path, run)
    finding = _no_learning(report)
    assert finding.severity == "warning" and "chance" in finding.evidence["signals"]
    assert finding.evidence["chance_classes"] == 4 and "ln(4)" in finding.message
    assert "eval/accuracy" in finding.evidence["summary"] and "labels" in finding.suggestion
    assert report.health.components["convergence"] <= 70 and report.health.score <= 80


def test_a_frozen_model_whose_validation_loss_is_identical_at_every_epoch_never_learned(tmp_path):
    report = diagnose_written(tmp_path, train_mlp(0, lr=0.0, epochs=6, n_train=4000))
    finding = _no_learning(report)
    assert "identical" in finding.evidence["signals"] and finding.evidence["evaluations"] == 6
    assert "val/loss" in finding.message and "never changed" in finding.message
    assert "requires_grad" in finding.suggestion


def test_labels_shuffled_against_their_inputs_leave_accuracy_at_chance(tmp_path):
    report = diagnose_written(tmp_path, train_mlp(0, label_noise=1.0, epochs=6, n_train=4000))
    finding = _no_learning(report)
    assert finding.evidence["chance_classes"] == 10 and "val/acc" in finding.evidence["summary"]


@pytest.mark.parametrize("seed", [0, 1])
def test_the_same_nets_with_sane_settings_are_not_called_stuck(tmp_path, seed):
    for classes, head in ((4, 0.02), (10, 1.0)):
        report = diagnose_written(
            tmp_path / f"{classes}", train_mlp(seed, epochs=4, n_train=4000, classes=classes, head_init=head)
        )
        assert not [f for f in report.findings if f.kind == "no_learning"]


def test_a_held_out_accuracy_climbing_from_below_chance_back_to_chance_is_still_memorising(tmp_path):
    # A GRU fitting shuffled labels, logged fairseq-style (`train_inner/` and `valid/`, the loss in bits): its
    # training loss falls from log2(4) as it memorises, the held-out loss only rises, and the held-out accuracy
    # (a set not quite balanced) climbs from 0.21, below chance, to 0.28: back to chance, not above it.
    steps = np.arange(10, 410, 10)
    train = scatter(np.random.default_rng(1), 2.0 - 0.55 * (steps / 400) ** 3, 0.01)
    lr = np.full(steps.size, 3e-3)
    evals = np.array([32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 400])
    val_loss = np.array([2.04, 2.031, 2.054, 2.049, 2.044, 2.076, 2.07, 2.087, 2.115, 2.164, 2.198, 2.257, 2.331])
    val_acc = np.array([20.7, 20.12, 19.73, 20.31, 23.44, 22.07, 23.24, 27.34, 26.56, 25.59, 26.56, 27.54, 27.73])
    write_tensorboardx_run(tmp_path, to_run("train_inner", RunSpec({"loss": (steps, train), "lr": (steps, lr)}, 0.05)))
    valid = to_run("valid", RunSpec({"loss": (evals, val_loss), "accuracy": (evals, val_acc)}, 0.05))
    found = [f for f in diagnose_written(tmp_path, valid).findings if f.kind == "no_learning"]
    assert found and found[0].evidence["signals"] == ["memorised"] and found[0].evidence["chance_classes"] == 4


def test_a_loss_that_fell_to_ln2_and_stayed_learned_to_a_plateau():
    steps = steps_every(4000, 10)
    rng = np.random.default_rng(0)
    loss = (np.log(2.0) + 1.6 * np.exp(-steps / 400)) * np.exp(rng.normal(0, 0.03, steps.size))
    assert not [f for f in analyze_tags({"train/loss": (steps, loss)}).findings if f.kind == "no_learning"]


def test_a_metric_solved_from_the_first_evaluation_is_not_stuck():
    steps = steps_every(4000, 10)
    evals = steps_every(4000, 400)
    tags = {"train/loss": (steps, 0.05 + np.exp(-steps / 300)), "val/acc": (evals, np.ones(evals.size))}
    assert not [f for f in analyze_tags(tags).findings if f.kind == "no_learning"]


def test_the_class_count_a_held_out_loss_started_at_is_read_in_nats_or_in_fairseqs_bits():
    from tbtriage.analysis.detectors.learning import MAX_CLASSES, _untrained_classes

    # fairseq logs its loss in bits: 2.008 is log2(4), and a 4-class accuracy sits near 0.25
    assert _untrained_classes(2.008, 0.207)[0] == (4, 2.0)
    # the same classes in nats: ln 4 = 1.386
    k, loss = _untrained_classes(1.45, 0.27)[0]
    assert k == 4 and abs(loss - math.log(4)) < 1e-12
    # a language model's ln(50,257): a range of ~100,000 class counts, answered without walking it
    found = _untrained_classes(10.8, 2e-5)
    assert found and all(2 <= k <= MAX_CLASSES for k, _ in found)
    assert _untrained_classes(0.2, 0.5) == [] and _untrained_classes(2.0, 0.0) == []
