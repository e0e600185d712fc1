"""The labelled corpus of real training runs (bench/corpus/runs/) is whole, and the engine's verdicts on its
clearest runs are the ones a careful researcher would give.

The runs were trained for real by `python -m bench.corpus.generate` (torch on CPU); these tests need only the
committed event files and labels. Expectations the current engine does not meet yet are `xfail(strict=True)`:
when the detectors learn them, the test flips and must be un-marked.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import tbtriage
from tbtriage.analysis.datamodel import FINDING_KINDS

CORPUS = Path(__file__).resolve().parent.parent / "bench" / "corpus" / "runs"
#: Issue 9 adds `no_learning` to the vocabulary; labels may name it before the engine knows it.
KINDS = set(FINDING_KINDS) | {"no_learning"}

LABELS = {p.parent.name: json.loads(p.read_text()) for p in sorted(CORPUS.glob("*/label.json"))}


def _verdict(folder: str):
    """Findings and health of every run (Keras: both siblings) in one corpus folder, read on its own."""
    report = tbtriage.diagnose(CORPUS / folder)
    return [f for run in report.runs for f in run.findings], [run.health.score for run in report.runs]


def _first(case: str, convention: str | None = None) -> str:
    names = [n for n, label in LABELS.items() if label["case"] == case]
    if convention:
        names = [n for n in names if LABELS[n]["convention"] == convention]
    assert names, f"no corpus run of {case} {convention or ''}"
    return names[0]


def test_the_committed_corpus_loads_with_its_labels():
    assert len(LABELS) >= 40
    logdir = tbtriage.load(CORPUS)
    folders = Counter(name.split("/", 1)[0] for name in logdir.runs)
    assert set(folders) == set(LABELS), "every run folder has a label and every label has event files"
    for name, run in logdir.runs.items():
        assert run.scalars or LABELS[name.split("/", 1)[0]]["no_data"], f"{name} has scalars"
    keras = [n for n, label in LABELS.items() if label["convention"].startswith("keras")]
    assert keras and all(folders[n] == 2 for n in keras), "Keras runs are train/ + validation/ siblings"


def test_every_label_names_known_kinds_with_an_onset_inside_the_run():
    for name, label in LABELS.items():
        assert label["healthy"] == (not label["expect"]), name
        for e in label["expect"]:
            assert {e["kind"], *e["or"]} <= KINDS, f"{name}: {e['kind']} {e['or']}"
            assert e["tolerance"] >= 1, name
            assert e["onset_step"] is None or 0 <= e["onset_step"] <= label["last_step"], name
        assert set(label["also_ok"]) <= KINDS, name
        assert label["cause"] and label["convention"] and isinstance(label["seed"], int), name


def test_every_case_has_a_healthy_twin_with_the_same_model_and_data():
    cases = {label["case"]: label for label in LABELS.values()}
    for case, label in cases.items():
        if label["healthy"]:
            continue
        twin = cases.get(label["twin"])
        assert twin is not None and twin["healthy"], f"{case}'s twin {label['twin']} is in the corpus and healthy"
        for key in ("model", "data", "dim", "classes"):
            assert twin["setup"][key] == label["setup"][key], f"{case} and its twin share {key}"


def test_each_pathology_comes_in_several_seeds_and_conventions():
    by_case: dict[str, list[dict]] = {}
    for label in LABELS.values():
        by_case.setdefault(label["case"], []).append(label)
    for case, labels in by_case.items():
        assert len({lb["seed"] for lb in labels}) >= 2, case
        assert len({lb["convention"] for lb in labels}) >= 2, case
    assert len({lb["convention"] for lb in LABELS.values()}) >= 8


# ---- user stories on the clearest runs -------------------------------------------------------------------


def test_an_uncapped_warmup_run_gets_a_critical_divergence_near_where_it_came_apart():
    folder = _first("warmup_uncapped", "hf")
    expect = LABELS[folder]["expect"][0]
    findings, _ = _verdict(folder)
    divergence = [f for f in findings if f.kind == "divergence"]
    assert divergence and divergence[0].severity == "critical"
    assert abs(divergence[0].step - expect["onset"]) <= expect["tolerance"]


def test_a_healthy_adam_run_gets_no_warning_or_critical_finding():
    findings, scores = _verdict(_first("healthy_adam", "pytorch"))
    assert [f for f in findings if f.severity in ("warning", "critical")] == []
    assert scores == [100]


def test_a_slow_synchronous_loader_gets_an_input_bottleneck_from_the_first_steps():
    folder = _first("slow_loader", "pytorch")
    findings, _ = _verdict(folder)
    bottleneck = [f for f in findings if f.kind == "input_bottleneck"]
    assert bottleneck and bottleneck[0].severity in ("warning", "critical")
    assert bottleneck[0].step <= LABELS[folder]["expect"][0]["tolerance"]


def test_a_frozen_model_that_never_learns_gets_no_learning():
    findings, _ = _verdict(_first("frozen_params"))
    assert "no_learning" in {f.kind for f in findings}


def test_a_run_killed_mid_write_gets_a_data_integrity_note():
    findings, _ = _verdict(_first("crash_mid_write", "pytorch"))
    assert "data_integrity" in {f.kind for f in findings}


def test_a_transformer_that_collapses_without_warmup_gets_warmup_instability_at_the_start():
    folder = _first("no_warmup_transformer", "hf")
    findings, _ = _verdict(folder)
    warmup = [f for f in findings if f.kind == "warmup_instability"]
    assert warmup and warmup[0].step <= LABELS[folder]["expect"][0]["tolerance"]


def test_a_net_leaving_a_saddle_is_a_plateau_not_an_explosion():
    findings, _ = _verdict(_first("saddle_tiny_init", "pytorch"))
    kinds = {f.kind for f in findings}
    assert "plateau" in kinds and "exploding_gradients" not in kinds


def test_a_job_that_died_before_its_first_log_has_no_health_score_and_a_data_integrity_note():
    report = tbtriage.diagnose(CORPUS / _first("died_before_first_log", "pytorch"))
    assert [run.health.score for run in report.runs] == [None]
    assert [f.kind for run in report.runs for f in run.findings] == ["data_integrity"]


def test_an_rnn_without_clipping_gets_exploding_gradients_blamed_on_the_missing_clipping():
    for case, convention in (("rnn_no_clipping", "pytorch"), ("rnn_no_clipping_nan", "tensorboardx")):
        folder = _first(case, convention)
        findings, _ = _verdict(folder)
        exploding = [f for f in findings if f.kind == "exploding_gradients"]
        expect = LABELS[folder]["expect"][0]
        assert exploding and abs(exploding[0].step - expect["onset_step"]) <= expect["tolerance"], folder
        assert exploding[0].causes[0].cause == "no_grad_clipping", folder


def test_sgd_at_lr_3_diverges_from_its_first_steps_and_is_not_called_an_unstable_start():
    findings, _ = _verdict(_first("lr_too_high_divergence", "tensorboardx"))
    kinds = {f.kind: f for f in findings}
    assert kinds["divergence"].severity == "critical" and kinds["divergence"].step <= 20
    assert "warmup_instability" not in kinds


def test_a_shard_read_at_the_same_place_every_epoch_is_periodic_from_the_first_epoch():
    findings, _ = _verdict(_first("poisoned_shard_every_epoch", "pytorch"))
    periodic = [f for f in findings if f.kind == "periodic_spikes"]
    assert periodic and periodic[0].step <= 32 and periodic[0].causes[0].cause in ("data_order", "bad_batch")


def test_healthy_rl_and_amp_runs_get_no_warning():
    for case in ("healthy_rl_gridworld", "healthy_amp"):
        for folder in (n for n, label in LABELS.items() if label["case"] == case):
            findings, _ = _verdict(folder)
            assert not [f for f in findings if f.severity in ("warning", "critical")], folder


def _top_cause(finding) -> str:
    return finding.causes[0].cause if finding.causes else "unclear"


@pytest.mark.parametrize(
    "case,convention", [("lr_too_low", "hf"), ("lr_too_low", "ultralytics"), ("lr_too_low_sgd", "timm")]
)
def test_an_lr_far_too_small_crawls_and_is_slow_convergence_caused_by_the_lr(case, convention):
    findings, _ = _verdict(_first(case, convention))
    slow = [f for f in findings if f.kind == "slow_convergence"]
    assert slow and slow[0].severity == "warning" and _top_cause(slow[0]) == "lr_too_low"
    assert "still falling" in slow[0].message and "no_learning" not in {f.kind for f in findings}


@pytest.mark.parametrize("case", ["healthy_adam", "healthy_sgd", "healthy_small_batch", "healthy_transformer_warmup"])
def test_healthy_twins_that_level_off_are_not_slow(case):
    for folder in [n for n, label in LABELS.items() if label["case"] == case]:
        findings, _ = _verdict(folder)
        assert "slow_convergence" not in {f.kind for f in findings}, folder


@pytest.mark.parametrize("convention", ["pytorch", "keras", "detectron2"])
def test_labels_shuffled_against_inputs_settle_just_under_ln_k_and_are_no_learning_from_a_label_bug(convention):
    findings, _ = _verdict(_first("shuffled_labels", convention))
    # (a Keras validation sibling has its own: `memorised`, below)
    stuck = [f for f in findings if f.kind == "no_learning" and not f.run.endswith("validation")]
    assert stuck and stuck[0].severity == "warning" and "prior" in stuck[0].evidence["signals"]
    assert stuck[0].evidence["chance_classes"] == 4 and _top_cause(stuck[0]) == "labels_or_loss_bug"


@pytest.mark.parametrize("convention", ["detectron2", "ultralytics", "keras", "pytorch"])
def test_an_unweighted_regression_term_that_owns_the_total_while_the_class_head_stalls_is_task_imbalance(convention):
    findings, _ = _verdict(_first("unweighted_multitask", convention))
    imbalance = [f for f in findings if f.kind == "task_imbalance"]
    assert imbalance and imbalance[0].severity == "warning" and "dominates" in imbalance[0].message


def test_a_balanced_multi_task_run_is_not_imbalanced():
    for folder in [n for n, label in LABELS.items() if label["case"] == "healthy_multitask"]:
        findings, _ = _verdict(folder)
        assert "task_imbalance" not in {f.kind for f in findings}, folder


def test_a_saddle_sitting_exactly_at_ln4_then_noisy_is_a_plateau_from_the_start():
    findings, _ = _verdict(_first("saddle_tiny_init", "lightning"))
    plateau = [f for f in findings if f.kind == "plateau"]
    assert plateau and plateau[0].severity == "warning" and plateau[0].step <= 20


def test_a_validation_accuracy_wandering_at_chance_beside_a_flat_validation_loss_is_not_overfitting():
    findings, _ = _verdict(_first("no_warmup_transformer", "keras_batch"))
    assert "overfitting" not in {f.kind for f in findings}


def test_an_rl_run_reads_its_return_as_the_metric_and_no_objective_term_as_its_loss():
    report = tbtriage.diagnose(CORPUS / _first("healthy_rl_gridworld", "rl_tensorboardx"))
    run = report.runs[0]
    assert run.roles["loss/value"] == "loss_component" and run.roles["episode/Return"] == "metric"
    assert run.primary_tags.train_loss is None and run.primary_tags.val_metric == "episode/Return"
    assert [f for f in run.findings if f.severity in ("warning", "critical")] == []


def test_a_slow_loader_logged_every_20_iterations_is_a_warning_on_few_but_unanimous_points():
    findings, _ = _verdict(_first("slow_loader", "detectron2"))
    bottleneck = [f for f in findings if f.kind == "input_bottleneck"]
    assert bottleneck and bottleneck[0].severity == "warning"


def test_an_rl_objectives_total_loss_is_not_judged_for_plateaus_or_progress():
    findings, _ = _verdict(_first("healthy_rl_gridworld", "sb3"))
    assert not {"plateau", "slow_convergence", "no_learning"} & {f.kind for f in findings}


def test_a_keras_run_logging_per_batch_states_overfitting_in_global_steps_and_says_the_epoch():
    findings, _ = _verdict(_first("healthy_sgd", "keras_batch"))
    overfitting = [f for f in findings if f.kind == "overfitting"]
    # batch_loss (global steps) is paired with evaluation_loss_vs_iterations, not with the per-epoch epoch_loss
    assert overfitting and overfitting[0].step > 20 and "epoch" in overfitting[0].message
    # The epoch is the one the step falls in, 0-based like the chart's epoch axis (was a rounded count of epochs,
    # "~epoch 4" for step 127, which the epoch_loss chart shows as epoch 3).
    step = overfitting[0].step
    assert (
        overfitting[0].evidence["epoch"] == step // 32 and f"epoch {step // 32} (step {step})" in overfitting[0].message
    )


@pytest.mark.parametrize("convention", ["hf", "lightning"])
def test_data_sorted_by_class_logged_every_10_steps_over_32_step_epochs_is_periodic(convention):
    # Each logged point lands on a different offset of the epoch, 16 of them over 5 epochs: the profile is
    # read on those offsets, from the first epochs on.
    findings, _ = _verdict(_first("unshuffled_sorted", convention))
    periodic = [f for f in findings if f.kind == "periodic_spikes"]
    assert periodic and periodic[0].evidence["period"] == 32 and periodic[0].step <= 64


def test_a_bad_shard_in_a_keras_per_batch_running_mean_is_periodic():
    findings, _ = _verdict(_first("poisoned_shard_every_epoch", "keras_batch"))
    periodic = [f for f in findings if f.kind == "periodic_spikes"]
    assert periodic and periodic[0].evidence["period"] == 32
    assert periodic[0].causes[0].cause in ("data_order", "bad_batch")


@pytest.mark.parametrize("case", ["dying_relu", "dying_relu_histograms", "saturated_tanh_histograms"])
def test_units_that_die_in_a_few_large_updates_are_dated_when_they_died_not_where_the_creep_after_passed_80_percent(
    case,
):
    # lr 0.05: the second layer goes from half to ~85 % zeros (or 0 to ~76 % of tanh outputs at ±1) within its
    # first ~30 steps, then creeps up for the rest of the run. The death is dated at that rise (the first
    # logged point after it), not where the creep crossed 80 % (steps 64 and 96 for the tanh nets).
    for folder in [n for n, label in LABELS.items() if label["case"] == case]:
        findings, _ = _verdict(folder)
        dead = [f for f in findings if f.kind == "dead_units"]
        assert dead and dead[0].severity == "warning", folder
        assert dead[0].step <= 32, f"{folder}: dated at {dead[0].step}"
        assert abs(dead[0].step - LABELS[folder]["expect"][0]["onset_step"]) <= LABELS[folder]["expect"][0]["tolerance"]


def test_healthy_relu_and_tanh_twins_have_no_dead_units():
    twins = ("healthy_relu", "healthy_deep_relu", "healthy_relu_histograms", "healthy_tanh_histograms")
    for folder in [n for n, label in LABELS.items() if label["case"] in twins]:
        findings, _ = _verdict(folder)
        assert "dead_units" not in {f.kind for f in findings}, folder


@pytest.mark.parametrize("convention", ["pytorch", "tensorboardx", "lightning"])
def test_one_poisoned_batch_is_a_loss_spike_whose_evidence_holds_the_gradient_jump_not_exploding_gradients(
    convention,
):
    # The bad batch at step 300 makes the loss ×6-13 and the gradient norm ×10-18 on the same step; both are back
    # at the next points. One event, one finding: the loss spike, with the norm's jump in its evidence.
    findings, _ = _verdict(_first("poisoned_shard_once", convention))
    assert "exploding_gradients" not in {f.kind for f in findings}
    spike = [f for f in findings if f.kind == "loss_spike"]
    assert spike and spike[0].severity == "warning" and abs(spike[0].step - 300) <= 10
    jump = spike[0].evidence["grad_norm_spike"]
    assert jump["ratio"] >= 3 and abs(jump["step"] - 300) <= 10 and jump["tag"] in spike[0].evidence["summary"]


def test_every_rnn_without_clipping_still_explodes_from_its_labelled_onset():
    # Norms that climb x1e4..x1e18 and stay up (or turn Inf/NaN): no single recovered spike, never folded.
    folders = [n for n, label in LABELS.items() if label["case"] in ("rnn_no_clipping", "rnn_no_clipping_nan")]
    assert len(folders) >= 8
    for folder in folders:
        findings, _ = _verdict(folder)
        exploding = [f for f in findings if f.kind == "exploding_gradients"]
        expect = next(e for e in LABELS[folder]["expect"] if e["kind"] == "exploding_gradients")
        assert exploding and exploding[0].severity == "critical", folder
        assert abs(exploding[0].step - expect["onset_step"]) <= expect["tolerance"], folder


@pytest.mark.parametrize("convention", ["pytorch", "tensorboardx"])
def test_a_loss_that_bounces_above_the_untrained_models_for_the_whole_run_is_an_lr_too_high(convention):
    # SGD at 40x its twin's lr: a few steps of learning, then the loss bounces at 1.2-1.6x where it started
    findings, health = _verdict(_first("lr_far_too_high", convention))
    bouncing = [f for f in findings if f.kind == "oscillation"]
    assert bouncing and bouncing[0].severity == "warning" and health[0] is not None and health[0] <= 80
    assert bouncing[0].evidence["pattern"] == "above_untrained" and bouncing[0].evidence["ratio"] >= 1.2
    assert bouncing[0].step is not None and bouncing[0].step < 64, "it went wrong within the first tenth"
    assert _top_cause(bouncing[0]) == "lr_too_high"
    # nothing was learned before the trouble: no "last good checkpoint" to go back to
    assert "checkpoint" not in bouncing[0].causes[0].fix


def test_a_healthy_sgd_twin_never_sits_above_its_untrained_loss():
    for folder in [n for n, label in LABELS.items() if label["case"] in ("healthy_sgd", "healthy_small_batch")]:
        findings, _ = _verdict(folder)
        assert not [f for f in findings if f.evidence.get("pattern") == "above_untrained"], folder


def test_a_fix_goes_back_to_the_last_good_checkpoint_only_when_the_run_had_learned_before_the_trouble():
    findings, _ = _verdict(_first("dying_relu_histograms", "pytorch"))
    dead = next(f for f in findings if f.kind == "dead_units")
    assert _top_cause(dead) == "lr_too_high" and dead.causes[0].fix.endswith("from the last good checkpoint")


@pytest.mark.parametrize("convention", ["pytorch", "tensorboardx"])
def test_a_net_that_memorises_shuffled_labels_is_no_learning_though_its_training_loss_falls(convention):
    # training loss 1.3 -> 0.05 and training accuracy 1.0: on the training side it looks like learning; the
    # validation accuracy stays at chance and the validation loss never improves on ln 4
    findings, _ = _verdict(_first("shuffled_labels_memorising", convention))
    stuck = [f for f in findings if f.kind == "no_learning"]
    assert stuck and stuck[0].severity == "warning" and stuck[0].evidence["signals"] == ["memorised"]
    assert stuck[0].evidence["chance_classes"] == 4 and _top_cause(stuck[0]) == "labels_or_loss_bug"


@pytest.mark.parametrize(
    "case, convention",
    [
        ("overfitting_small_data", "hf"),  # binary accuracy at ~0.58: above chance, memorising real labels
        ("lr_too_low_sgd", "tensorboardx"),  # accuracy climbing slowly from chance: learning, too slowly
        ("lr_too_high_divergence", "timm"),  # at chance because it blew up: divergence's story
        ("no_warmup_transformer", "keras_batch"),  # one output for every input: a collapse, not memorising
    ],
)
def test_a_held_out_accuracy_near_chance_that_climbs_or_follows_a_collapse_is_not_called_memorising(case, convention):
    findings, _ = _verdict(_first(case, convention))
    assert not [f for f in findings if "memorised" in (f.evidence.get("signals") or ())], case
