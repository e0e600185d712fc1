"""Loss-shape detectors: divergence, spikes, oscillation, slow convergence, plateaus, unstable starts."""

from __future__ import annotations

import numpy as np
import pytest

import tbtriage
from tests._engine_data import (
    RunSpec,
    analyze_scenario,
    analyze_tags,
    diagnose_written,
    kinds,
    loss_from_lr,
    lr_sgdr,
    lr_step,
    lr_warmup_cosine,
    scatter,
    steps_every,
    to_run,
    write_tensorboardx_run,
)


def _one(report, kind):
    found = [f for f in report.findings if f.kind == kind]
    assert found, f"no {kind} in {[(f.kind, f.severity, f.step) for f in report.findings]}"
    return found[0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_run_that_goes_nan_at_step_1800_gets_a_critical_divergence_at_1800(seed):
    report = analyze_scenario("divergence_nan", seed)["."]
    finding = _one(report, "divergence")
    assert (finding.severity, finding.step) == ("critical", 1800)
    assert "train/loss" in finding.tags and "eval/loss" in finding.tags
    assert "NaN from step 1800" in finding.evidence["summary"]
    assert finding.evidence["context"]["lr"] and "grad_norm" in finding.evidence["context_tags"]
    # The NaN gradient norm is the divergence's consequence, not a second story.
    assert "exploding_gradients" not in kinds(report)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_loss_that_blows_up_at_2100_and_never_recovers_diverges_from_there(seed):
    finding = _one(analyze_scenario("divergence_blowup", seed)["."], "divergence")
    assert finding.severity == "critical" and abs(finding.step - 2100) <= 60
    assert "rose from step" in finding.evidence["summary"] and finding.evidence["best"] < 0.6


def test_nan_points_the_run_recovered_from_are_a_warning_not_a_critical_divergence():
    steps = steps_every(2000, 10)
    loss = scatter(np.random.default_rng(0), 2.0 * np.exp(-steps / 500) + 0.5, 0.03)
    loss[[50, 120]] = np.nan
    finding = _one(analyze_tags({"train/loss": (steps, loss)}), "divergence")
    assert (finding.severity, finding.step) == ("warning", 510)
    assert "recovered" in finding.message


def test_a_warm_restart_raising_the_loss_is_the_schedule_not_divergence():
    steps = steps_every(4000, 10)
    lr = np.where(steps < 3000, lr_warmup_cosine(steps, 0.05, 0, 3000), 0.05)
    loss = scatter(np.random.default_rng(1), 0.3 + 1.5 * np.exp(-steps / 400) + 0.6 * lr / 0.05, 0.03)
    assert not kinds(analyze_tags({"train_loss": (steps, loss), "lr-SGD": (steps, lr)}))


def test_a_loss_that_jumps_far_above_its_untrained_level_in_its_first_steps_diverged_from_the_start():
    # SGD at lr 3: the loss of the untrained model (ln 4) leaps ×8 within 10 steps and bounces there for good,
    # so the curve never made progress the ordinary rule could measure a rise against.
    steps = steps_every(640, 5, first=0)
    rng = np.random.default_rng(4)
    loss = scatter(rng, np.where(steps < 10, 1.39, 13.0), 0.3)
    loss[0] = 1.39
    report = analyze_tags({"train/loss": (steps, loss), "train/lr": (steps, np.full(steps.size, 3.0))})
    assert "warmup_instability" not in kinds(report)  # it never came back: not an unstable start
    finding = _one(report, "divergence")
    assert finding.severity == "critical" and finding.step <= 20 and finding.evidence["from_start"]
    assert "untrained" in finding.evidence["summary"]
    assert "checkpoint before step" not in finding.suggestion and "restart" in finding.suggestion


def test_a_policy_gradient_loss_that_rises_back_to_zero_is_not_divergence():
    # A REINFORCE loss follows the advantages' sign: negative early, a bump as the policy improves, then
    # around zero. Its level has no "lower is better".
    steps = steps_every(35000, 175)
    rng = np.random.default_rng(5)
    curve = -0.2 + 0.9 * np.exp(-(((steps - 7000) / 2500.0) ** 2)) + 0.2 * (steps > 10000)
    loss = curve + rng.normal(0, 0.02, steps.size)
    assert "divergence" not in kinds(analyze_tags({"train/loss": (steps, loss)}))
    reward = 0.85 * (1 - np.exp(-steps / 6000.0)) + rng.normal(0, 0.03, steps.size)
    value_loss = scatter(rng, 0.3 + 0.5 * (steps > 20000), 0.2)  # grows as returns grow: a moving target
    tags = {"rollout/ep_rew_mean": (steps, reward), "train/value_loss": (steps, value_loss)}
    assert "divergence" not in kinds(analyze_tags(tags))


def test_gan_losses_rising_against_each_other_are_not_divergence():
    steps = steps_every(3000, 10)
    rng = np.random.default_rng(2)
    d_loss = scatter(rng, 1.2 - 0.9 * (1 - np.exp(-steps / 600)), 0.05)
    g_loss = scatter(rng, 0.8 + 2.5 * (1 - np.exp(-steps / 600)), 0.05)
    assert not kinds(analyze_tags({"loss_D": (steps, d_loss), "loss_G": (steps, g_loss)}))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_three_loss_spikes_that_recover_are_one_loss_spike_finding_from_the_first(seed):
    finding = _one(analyze_scenario("loss_spikes", seed)["."], "loss_spike")
    assert finding.severity == "warning" and abs(finding.step - 900) <= 60
    assert finding.evidence["count"] == 3 and finding.evidence["largest_ratio"] > 2.5
    assert "→" in finding.evidence["summary"] and "between steps" in finding.evidence["summary"]


def test_step_decay_drops_are_not_spikes_and_a_noisy_healthy_loss_has_none():
    steps = steps_every(6000, 10)
    lr = lr_step(steps, 0.1, (2000, 4000))
    loss = scatter(np.random.default_rng(3), loss_from_lr(steps, lr, 4.0, 0.6, 500, lr_floor=0.8), 0.12)
    report = analyze_tags({"Loss/train": (steps, loss), "LR": (steps, lr)})
    assert not kinds(report, ("critical", "warning", "info"))


@pytest.mark.parametrize("seed", [0, 1])
def test_a_spike_every_epoch_is_periodic_and_says_where_in_the_epoch(seed):
    finding = _one(analyze_scenario("periodic_spikes", seed)["."], "periodic_spikes")
    assert finding.severity == "warning" and finding.step == 70
    assert (
        finding.evidence["period"] == 300
        and finding.evidence["per_epoch"]
        and finding.evidence["offset_in_epoch"] == 70
    )
    assert "loss_spike" not in kinds(analyze_scenario("periodic_spikes", seed)["."])


@pytest.mark.parametrize("scenario,onset", [("oscillation", 900), ("bouncing", 600)])
def test_a_loss_bouncing_after_the_lr_rose_is_an_oscillation_from_there(scenario, onset):
    finding = _one(analyze_scenario(scenario)["."], "oscillation")
    assert finding.severity == "warning" and abs(finding.step - onset) <= 60
    assert "learning rate" in finding.suggestion


def test_a_loss_logged_as_a_running_mean_wanders_but_does_not_oscillate():
    rng = np.random.default_rng(4)
    steps = np.arange(3000)
    raw = scatter(rng, 0.5 + 2.0 * np.exp(-steps / 800), 0.6)
    smooth = np.convolve(raw, np.ones(20) / 20, mode="valid")
    assert not kinds(analyze_tags({"loss": (steps[19:], smooth)}))


# A loss that does not move at all used to be slow_convergence too; it is no_learning now (its own kind).
@pytest.mark.parametrize("scenario,kind", [("slow_convergence", "slow_convergence"), ("no_learning", "no_learning")])
def test_a_loss_that_crawls_is_slow_and_one_that_does_not_move_never_learned_over_the_whole_run(scenario, kind):
    finding = _one(analyze_scenario(scenario)["."], kind)
    assert finding.severity == "warning" and finding.step == 10
    assert "×" in finding.suggestion or "lr" in finding.suggestion


def test_a_fine_tune_that_improves_a_little_and_levels_off_is_not_slow():
    steps = steps_every(2000, 10)
    lr = lr_warmup_cosine(steps, 2e-5, 100, 2000)
    loss = scatter(np.random.default_rng(5), loss_from_lr(steps, lr, 0.52, 0.44, 300), 0.05)
    assert not kinds(analyze_tags({"train/loss": (steps, loss), "train/learning_rate": (steps, lr)}))


def test_a_noisy_loss_that_waited_then_fell_fast_and_is_levelling_off_is_not_slow(tmp_path):
    # A held-out small-batch conv net, logged fairseq-style (the mean of every 10 updates): the loss (in bits)
    # hardly moves for its first quarter, falls fastest in the middle and ends at a third of that pace. Its last
    # quarter still falls at about its first quarter's pace, which alone reads as a straight-line crawl.
    steps = np.arange(10, 910, 10)
    loss = scatter(np.random.default_rng(0), 0.6 + 1.4 / (1 + np.exp((steps - 450) / 120)), 0.06)
    lr = np.full(steps.size, 3e-4)
    run = to_run("train_inner", RunSpec({"loss": (steps, loss), "lr": (steps, lr)}, 0.02))
    assert not kinds(diagnose_written(tmp_path, run))


def test_a_loss_that_crawls_at_one_pace_after_waiting_is_still_slow(tmp_path):
    # The same wait, then a straight fall at one pace to the end: an lr far too low, whatever the start did.
    steps = np.arange(10, 910, 10)
    clean = np.where(steps < 225, 2.0 - 0.0004 * steps, 1.91 - 0.0013 * (steps - 225))
    loss = scatter(np.random.default_rng(0), clean, 0.02)
    run = to_run("train_inner", RunSpec({"loss": (steps, loss), "lr": (steps, np.full(steps.size, 3e-5))}, 0.02))
    assert "slow_convergence" in kinds(diagnose_written(tmp_path, run))


def test_a_resumed_run_is_not_judged_for_slow_convergence():
    steps = np.arange(50_000, 60_000, 10)
    loss = scatter(np.random.default_rng(6), 1.10 - 0.05 * (steps - 50_000) / 10_000, 0.01)
    assert not kinds(analyze_tags({"train/loss": (steps, loss)}))


def test_a_loss_stuck_at_chance_level_before_learning_is_a_plateau_from_the_start():
    finding = _one(analyze_scenario("plateau_start")["."], "plateau")
    assert finding.severity == "warning" and finding.step <= 70 and 800 <= finding.end_step <= 950
    assert finding.evidence["chance_level_classes"] == 10


def test_a_loss_flat_during_the_lr_warmup_is_not_a_plateau():
    steps = steps_every(3000, 10)
    lr = lr_warmup_cosine(steps, 1e-3, 600, 3000)
    loss = scatter(np.random.default_rng(7), loss_from_lr(steps, lr, 3.0, 0.8, 200), 0.02)
    assert "plateau" not in kinds(analyze_tags({"train/loss": (steps, loss), "train/lr": (steps, lr)}))


def test_a_loss_jumping_up_in_the_first_steps_without_warmup_is_warmup_instability():
    finding = _one(analyze_scenario("warmup_missing")["."], "warmup_instability")
    assert finding.severity == "warning" and abs(finding.step - 60) <= 60
    assert "no warmup" in finding.evidence["summary"] and "warmup of ~" in finding.suggestion


def test_a_short_run_proves_nothing_strongly():
    steps = np.arange(0, 12) * 50
    loss = np.array([2.0, 1.8, 1.7, 5.0, 1.5, 1.4, np.nan, 1.3, 1.2, 1.2, 1.1, 1.1])
    assert not kinds(analyze_tags({"train/loss": (steps, loss)}), ("critical",))


def test_sgdr_restarts_are_not_spikes_or_oscillation():
    steps = steps_every(8000, 10)
    lr = lr_sgdr(steps, 0.05, 1000)
    loss = scatter(np.random.default_rng(8), 0.4 + 1.6 * np.exp(-steps / 900) + 0.4 * lr / 0.05, 0.04)
    assert not kinds(analyze_tags({"train_loss": (steps, loss), "lr-SGD": (steps, lr)}))


def test_a_run_whose_loss_is_nan_from_its_very_first_point_is_a_data_or_loss_bug_not_a_checkpoint_story():
    from tbtriage.analysis.engine import analyze_run
    from tests._engine_data import train_mlp

    # The inputs hold NaN (a missing-value column normalised by a zero std): every loss is NaN from step 1.
    report = analyze_run(train_mlp(0, epochs=2, n_train=2000, noise=float("nan")))
    (diverged,) = [f for f in report.findings if f.kind == "divergence"]
    assert diverged.severity == "critical" and diverged.evidence["never_finite"]
    assert "first point" in diverged.message and "data or loss bug" in diverged.message
    assert "checkpoint" not in diverged.suggestion and "step 0" not in diverged.suggestion


@pytest.mark.parametrize("train_nan_from", [20, 30])
def test_a_validation_run_nan_from_its_first_evaluation_after_training_diverged_is_that_divergence(
    tmp_path, train_nan_from
):
    # fairseq `train_inner/` + `valid/`: a GRU without clipping blows up in its first updates (1.6e9 at step 10),
    # its training loss is non-finite from step 20 or 30 and the first evaluation (step 25) is already Inf.
    steps = np.arange(10, 410, 10)
    loss = np.full(steps.size, np.nan)
    loss[: (train_nan_from - 10) // 10] = [1.6e9, 3.6e28][: (train_nan_from - 10) // 10]
    write_tensorboardx_run(tmp_path, to_run("train_inner", RunSpec({"loss": (steps, loss)}, 0.05)))
    evals = np.arange(25, 425, 25)
    valid = diagnose_written(tmp_path, to_run("valid", RunSpec({"loss": (evals, np.full(evals.size, np.inf))}, 0.05)))
    (diverged,) = [f for f in valid.findings if f.kind == "divergence"]
    assert diverged.severity == "critical" and diverged.evidence["train_nonfinite_step"] == train_nan_from
    assert f"training loss beside it turned non-finite at step {train_nan_from}" in diverged.message
    assert "data or loss bug" not in diverged.message and diverged.causes[0].cause != "nan_in_inputs_or_loss"


def test_an_rl_metric_going_nan_while_the_loss_stays_finite_is_its_own_warning():
    rng = np.random.default_rng(0)
    steps = steps_every(4000, 10)
    # explained_variance = 1 - Var(returns - values) / Var(returns): from step 2500 the episodes all end the
    # same way (constant returns), Var(returns) is 0 and the metric is 0/0.
    returns = rng.normal(1.0, 0.5, (steps.size, 64))
    returns[steps >= 2500] = 1.0
    values = returns + rng.normal(0, 0.2, returns.shape)
    with np.errstate(all="ignore"):
        explained = 1.0 - (returns - values).var(axis=1) / returns.var(axis=1)
    explained[returns.var(axis=1) == 0] = np.nan
    loss = scatter(rng, 0.3 + np.exp(-steps / 800), 0.05)
    report = analyze_tags({"train/value_loss": (steps, loss), "train/explained_variance": (steps, explained)})
    (broken,) = [f for f in report.findings if f.kind == "divergence"]
    assert broken.severity == "warning" and broken.step == 2500 and broken.evidence["metric_only"]
    assert "explained_variance" in broken.message and "stayed finite" in broken.message
    assert "checkpoint" not in broken.suggestion


def _chance_run(rng, excursion: bool, warmup: int = 0):
    """A 4-class classifier at lr 0.03 (cosine) whose loss sits at ln 4 after its first steps."""
    steps = np.arange(0, 300, dtype=np.int64)
    lr = lr_warmup_cosine(steps, 0.03, warmup, 300)
    loss = np.log(4) + rng.normal(0, 0.01, steps.size)
    if excursion:
        loss[[2, 4, 13]] = [1.52, 1.65, 1.53]
    return {"Loss/train": (steps, loss), "learning_rate": (steps, lr)}


def test_a_classifier_knocked_onto_a_constant_guess_by_its_first_full_lr_steps_is_an_unstable_start():
    report = analyze_tags(_chance_run(np.random.default_rng(8), excursion=True))
    finding = _one(report, "warmup_instability")
    assert finding.severity == "warning" and finding.step <= 5 and finding.evidence["classes"] == 4
    assert "uniform guess" in finding.message and "warmup" in finding.suggestion


def test_a_model_that_sits_at_chance_without_first_rising_above_it_or_with_a_warmup_is_no_unstable_start():
    rng = np.random.default_rng(9)
    assert "warmup_instability" not in kinds(analyze_tags(_chance_run(rng, excursion=False)))
    assert "warmup_instability" not in kinds(analyze_tags(_chance_run(rng, excursion=True, warmup=60)))


def _epoch_ordered(rng, shuffled: bool):
    """A per-step loss whose batches 10-14 of each 32-step epoch are harder (×1.25): too small for spikes."""
    steps = np.arange(0, 640, dtype=np.int64)
    offsets = (steps % 32) if not shuffled else rng.integers(0, 32, steps.size)
    clean = 0.4 + np.exp(-steps / 150.0)
    loss = scatter(rng, clean * np.where((offsets >= 10) & (offsets <= 14), 1.25, 1.0), 0.08)
    return {"Loss/train": (steps, loss), "epoch": (steps, steps / 32.0)}


def test_a_loss_high_at_the_same_offset_of_every_epoch_is_periodic_from_the_first_epoch():
    finding = _one(analyze_tags(_epoch_ordered(np.random.default_rng(11), shuffled=False)), "periodic_spikes")
    assert finding.severity == "warning" and finding.evidence["period"] == 32
    assert 8 <= finding.evidence["offset_in_epoch"] <= 14 and finding.step <= 42
    assert "shuffle" in finding.suggestion


def test_the_same_hard_batches_in_a_shuffled_order_are_no_pattern():
    assert "periodic_spikes" not in kinds(analyze_tags(_epoch_ordered(np.random.default_rng(12), shuffled=True)))


def test_ten_batches_of_a_bad_shard_are_one_loss_spike_though_too_wide_for_single_points():
    steps = np.arange(0, 640, dtype=np.int64)
    rng = np.random.default_rng(13)
    loss = scatter(rng, 0.35 + np.exp(-steps / 100.0), 0.15)
    loss[300:310] *= rng.uniform(7, 13, 10)
    finding = _one(analyze_tags({"Loss/train": (steps, loss)}), "loss_spike")
    assert finding.severity == "warning" and abs(finding.step - 300) <= 2


def test_a_loss_spike_the_gradient_norm_and_the_epoch_mean_confirm_is_one_finding():
    # Logged every 10 steps, the loss's own heavy tail sets a high bar; the norm jumping ×10 at the same
    # logged step and the epoch's mean jumping over that epoch show it is an event.
    rng = np.random.default_rng(14)
    steps = np.arange(9, 640, 10, dtype=np.int64)
    loss = scatter(rng, np.full(steps.size, 0.5), 0.3, dist="t", df=3)
    grad = scatter(rng, np.full(steps.size, 0.7), 0.15)
    at = int(np.searchsorted(steps, 309))
    loss[at], grad[at] = 2.1, 7.0
    epochs = np.arange(31, 640, 32, dtype=np.int64)
    epoch_mean = scatter(rng, np.full(epochs.size, 0.5), 0.03)
    epoch_mean[int(np.searchsorted(epochs, 319))] = 1.08
    tags = {
        "train_loss_step": (steps, loss),
        "grad_2.0_norm_total": (steps, grad),
        "train_loss_epoch": (epochs, epoch_mean),
    }
    spikes = [f for f in analyze_tags(tags).findings if f.kind == "loss_spike"]
    assert len(spikes) == 1 and spikes[0].step == 309 and spikes[0].severity == "warning"


def test_a_loss_that_climbs_x1e27_in_three_logged_points_before_nan_diverged_where_the_climb_began():
    steps = np.arange(9, 640, 10, dtype=np.int64)
    loss = np.full(steps.size, np.nan)
    loss[:4] = [2.98, 6.2e8, 1.7e16, 4.1e30]
    finding = _one(analyze_tags({"train_loss_step": (steps, loss)}), "divergence")
    assert finding.severity == "critical" and finding.step == 19
    assert "after a climb from 2.98 (step 9) that began at step 19" in finding.evidence["summary"]
    assert finding.evidence["first_nonfinite_step"] == 49


def test_a_training_loss_falling_in_a_straight_line_while_validation_gets_worse_is_not_slow():
    # A YOLO-style run: the training loss keeps falling linearly under a linear lr decay while the validation
    # loss has turned: more lr would not help, so it is not slow convergence.
    steps = np.arange(1, 121)
    rng = np.random.default_rng(8)
    train = scatter(rng, 1.2 - 0.0025 * steps, 0.01)
    val = scatter(rng, 1.45 + 0.0027 * steps, 0.02)
    found = kinds(analyze_tags({"train/dfl_loss": (steps, train), "val/dfl_loss": (steps, val)}), ("warning", "info"))
    assert "slow_convergence" not in found


def test_a_loss_sitting_exactly_at_chance_then_falling_noisily_is_a_plateau_from_the_start():
    # A net on a saddle: the loss is ln 4 to the last digit for a quarter of the run, then falls and stays noisy.
    steps = np.arange(0, 640, 10)
    rng = np.random.default_rng(9)
    loss = np.where(steps < 160, np.log(4.0), scatter(rng, 1.0 + 0.4 * np.exp(-(steps - 160) / 30.0), 0.08))
    plateau = _one(analyze_tags({"train_loss_step": (steps, loss)}), "plateau")
    assert plateau.severity == "warning" and plateau.step == 0 and 120 <= plateau.end_step <= 170


@pytest.mark.parametrize("seed", [0, 4, 5])
def test_a_small_batch_loss_drifting_down_inside_its_noise_before_it_falls_is_not_a_plateau(tmp_path, seed):
    # A conv net at batch 8: the loss drifts from ln 4 down 13 % over the first quarter, within a band its early
    # noise (4 %) makes wide, then falls fast and gets noisier as the model grows confident (30 %). The stretch
    # fell: it is the fall's slow start, not a wait at the initial level.
    steps = np.arange(0, 900, 5)
    start = 1.386 - 0.0008 * np.minimum(steps, 225)
    clean = np.where(steps < 225, start, 0.45 + (start[45] - 0.45) * np.exp(-(steps - 225) / 200))
    rel = np.where(steps < 225, 0.04, 0.3)
    loss = clean * np.exp(np.random.default_rng(seed).normal(0, 1, steps.size) * rel)
    assert not kinds(diagnose_written(tmp_path, to_run("run", RunSpec({"train/loss": (steps, loss)}, 0.05))))


def test_a_noisy_loss_whose_first_points_happen_to_agree_is_not_a_plateau():
    steps = np.arange(0, 400, 10)
    rng = np.random.default_rng(10)
    loss = scatter(rng, 0.6 + 1.0 * np.exp(-steps / 120.0), 0.3)
    assert "plateau" not in kinds(analyze_tags({"train_loss_step": (steps, loss)}), ("warning",))


def _epoch_ordered_coarse(rng, shuffled: bool, every: int = 10):
    """HF-style: the mean of each `every` per-step losses, logged at its last step, over 32-step epochs whose
    batches 10-14 are harder (×1.5): logged every 10 steps, the epoch's offsets are visited 16 at a time."""
    steps = np.arange(1, 641, dtype=np.int64)
    offsets = (steps % 32) if not shuffled else rng.integers(0, 32, steps.size)
    clean = 0.4 + np.exp(-steps / 150.0)
    loss = scatter(rng, clean * np.where((offsets >= 10) & (offsets <= 14), 1.5, 1.0), 0.08)
    logged = steps[every - 1 :: every]
    means = loss.reshape(-1, every).mean(axis=1)
    return {"train/loss": (logged, means), "train/epoch": (logged, logged / 32.0)}


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_a_profile_logged_more_coarsely_than_its_bumps_is_still_read_on_the_offsets_it_samples(seed):
    finding = _one(analyze_tags(_epoch_ordered_coarse(np.random.default_rng(seed), shuffled=False)), "periodic_spikes")
    assert finding.evidence["pattern"] == "epoch_profile" and finding.evidence["period"] == 32
    # The means ending at offsets 14-24 cover the hard batches 10-14 (step 10 of the epoch and after).
    assert 10 <= finding.evidence["offset_in_epoch"] <= 24 and finding.step <= 96


@pytest.mark.parametrize("seed", [24, 25, 26])
def test_the_same_coarse_logging_of_shuffled_batches_is_no_pattern(seed):
    tags = _epoch_ordered_coarse(np.random.default_rng(seed), shuffled=True)
    assert "periodic_spikes" not in kinds(analyze_tags(tags))


def test_a_loss_logged_at_one_offset_of_each_epoch_has_no_profile_to_read():
    # Every 32 steps over 32-step epochs: each point sits at the same offset, however the batches are ordered.
    tags = _epoch_ordered_coarse(np.random.default_rng(27), shuffled=False, every=32)
    assert "periodic_spikes" not in kinds(analyze_tags(tags))


def _scattering(rng, rel: float, lr) -> dict:
    """A per-batch loss falling to ~0.15 whose points scatter more and more as it falls, by `rel` (lognormal
    sigma) around it from step 200 on."""
    steps = np.arange(0, 640, dtype=np.int64)
    loss = scatter(rng, 0.15 + 1.2 * np.exp(-steps / 60.0), np.minimum(0.1 + rel * steps / 200.0, rel))
    return {"Loss/train": (steps, loss), "learning_rate": (steps, lr(steps))}


def _constant(steps):
    return np.full(steps.size, 0.3)


@pytest.mark.parametrize("seed", [31, 32, 33])
def test_a_per_batch_loss_bouncing_by_half_its_level_at_a_constant_lr_is_an_oscillation_note(seed):
    # SGD at 15x a sane lr in the real-run corpus: the per-batch loss scatters by ±46-51 % of its level to the end.
    finding = _one(analyze_tags(_scattering(np.random.default_rng(seed), 0.6, _constant)), "oscillation")
    assert finding.severity == "info" and finding.evidence["pattern"] == "scatter"
    assert 0.45 <= finding.evidence["relative_scatter"] <= 0.75
    assert "does not decay" in finding.message and "few samples" in finding.suggestion


@pytest.mark.parametrize("seed", [34, 35, 36])
def test_a_per_batch_loss_scattering_like_healthy_minibatch_noise_is_no_oscillation(seed):
    # Healthy per-batch losses of the corpus scatter by 0.1-0.32 of their level (batch 4 included).
    assert "oscillation" not in kinds(analyze_tags(_scattering(np.random.default_rng(seed), 0.3, _constant)))


def test_the_same_scatter_under_an_lr_decaying_to_zero_is_no_oscillation_note():
    tags = _scattering(np.random.default_rng(37), 0.6, lambda steps: lr_warmup_cosine(steps, 0.3, 0, 640))
    assert "oscillation" not in kinds(analyze_tags(tags))


def _write_slow_climb(path, climb: float, seed: int = 21) -> None:
    """600 per-step points (one per level bucket) of a noisy loss (±20 % a batch) that falls to ~0.45 by step 200,
    then, as an uncapped warmup keeps raising the lr, climbs `climb`-fold to the end; tensorboardX, new names."""
    from tensorboardX import SummaryWriter

    rng = np.random.default_rng(seed)
    w = SummaryWriter(str(path))
    for step in range(600):
        level = 0.45 + 0.95 * np.exp(-step / 50)
        level *= 1 + (climb - 1) * max(0.0, step - 220) / 380
        w.add_scalar("Loss/train_step", level * np.exp(0.2 * rng.standard_normal()), step)
        w.add_scalar("opt/lr_group0", 0.02 * (step + 1) / 30, step)
    w.close()


def test_a_sparse_noisy_loss_climbing_back_to_its_untrained_level_diverged(tmp_path):
    """The rise is judged against the noise of the levels it compares (a best of a 5-bucket running median, a
    median of the last points), not of single points: a run logging fewer points than the level has buckets
    needed a rise twice as large as a denser run with the same noise."""
    _write_slow_climb(tmp_path / "climb", climb=2.6)
    _write_slow_climb(tmp_path / "steady", climb=1.0)
    report = {r.name: r for r in tbtriage.diagnose(tmp_path).runs}
    finding = _one(report["climb"], "divergence")
    assert finding.severity == "critical" and 200 <= finding.step <= 420
    assert not kinds(report["steady"])
