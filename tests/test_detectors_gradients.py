"""Gradient, weight, activation and mixed-precision detectors."""

from __future__ import annotations

import numpy as np
import pytest

from tbtriage.analysis.datamodel import Run
from tbtriage.analysis.engine import analyze_run
from tests._engine_data import (
    RunSpec,
    analyze_scenario,
    analyze_tags,
    diagnose_written,
    kinds,
    scatter,
    steps_every,
    to_run,
    train_deep_linear,
)


def _one(report, kind):
    found = [f for f in report.findings if f.kind == kind]
    assert found, f"no {kind} in {[(f.kind, f.severity, f.step) for f in report.findings]}"
    return found[0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_grad_norm_spiking_60x_at_1400_is_exploding_gradients_quoted_like_a_person_would(seed):
    finding = _one(analyze_scenario("exploding_spikes", seed)["."], "exploding_gradients")
    assert finding.severity == "warning" and finding.step == 1400 and finding.evidence["events"] == 2
    summary = finding.evidence["summary"]
    assert summary.startswith("train/grad_norm ") and "→" in summary
    assert "between steps 1390 and 1400" in summary or "between steps 2290 and 2300" in summary  # the worst one
    assert "max_norm=" in finding.suggestion


def test_a_grad_norm_growing_until_the_loss_blows_up_is_critical_from_where_it_left_its_band():
    report = analyze_scenario("exploding_growth")["."]
    exploding = _one(report, "exploding_gradients")
    assert exploding.severity == "critical" and abs(exploding.step - 1500) <= 40 and exploding.evidence["sustained"]
    assert abs(_one(report, "divergence").step - 1700) <= 40


def test_an_rnn_whose_norm_leaps_x1000_in_its_first_steps_and_slowly_comes_back_explodes_from_there():
    # A vanilla RNN without clipping: at step ~15 the norm leaves ~10 for ~1e4 and takes most of the run to
    # come back, the loss ×1e5 with it. Too wide for a spike, and too early for a rolling baseline.
    steps = steps_every(400, 5, first=0)
    rng = np.random.default_rng(7)
    level = np.where(steps < 15, 10.0, 10.0 * 10 ** (3.5 * np.exp(-np.maximum(steps - 15, 0) / 150)))
    grad = scatter(rng, level, 0.3)
    loss_steps = np.arange(0, 400, dtype=np.int64)
    loss = scatter(rng, np.interp(loss_steps, steps, 2 * (level / 10) ** 1.5), 0.3)
    finding = _one(analyze_tags({"grad_norm": (steps, grad), "Loss/train": (loss_steps, loss)}), "exploding_gradients")
    assert finding.severity == "critical" and abs(finding.step - 15) <= 10
    assert "exploded from step" in finding.message and "rose from" in finding.evidence["summary"]
    assert finding.causes[0].cause == "no_grad_clipping"  # the loss followed an uncapped ×1000 norm


def test_a_norm_climbing_x1e6_in_three_logged_points_before_the_loss_turns_nan_is_an_explosion_too():
    # Logged every 10 steps: 15 → 6e4 → 4e8 → 2e12 → Inf; the loss goes NaN with it. The climb came first.
    steps = steps_every(400, 10)
    grad = np.full(steps.size, np.nan)
    grad[:5] = [15.0, 6.6e4, 4.1e8, 2.6e12, np.inf]
    loss = np.full(steps.size, np.nan)
    loss[:4] = [3.1, 1.7e7, 6.5e14, 2.6e22]
    report = analyze_tags({"train/grad_norm": (steps, grad), "train/loss": (steps, loss)})
    exploding = _one(report, "exploding_gradients")
    assert exploding.severity == "critical" and exploding.step == 20 and "×" in exploding.message
    assert _one(report, "divergence").severity == "critical"


def test_a_healthy_lognormal_grad_norm_that_falls_then_drifts_up_is_fine():
    steps = steps_every(20000, 10)
    grad = scatter(np.random.default_rng(1), 0.3 + 3.0 * np.exp(-steps / 500) + 0.4 * steps / 20000, 0.3)
    report = analyze_tags({"train/grad_norm": (steps, grad), "train/loss": (steps, 2 + np.exp(-steps / 3000))})
    assert not kinds(report)


@pytest.mark.parametrize("init,steps", [(0.02, 3000), (0.01, 4000)])
def test_a_gradient_norm_growing_from_a_tiny_init_as_the_net_leaves_its_saddle_is_not_an_explosion(init, steps):
    """A deep linear net from a tiny init: its norm grows ×40–150 while the loss falls (it is learning)."""
    run = train_deep_linear(0, init=init, steps=steps)
    norms = run.scalars["train/grad_norm"].values
    assert norms.max() > 30 * norms[0]  # the growth that used to be called a critical explosion
    assert "exploding_gradients" not in [f.kind for f in analyze_run(run).findings]


def test_norms_far_below_any_scale_that_moves_a_weight_never_explode():
    steps = steps_every(3000, 10)
    rng = np.random.default_rng(2)
    tags = {
        "train/loss": (steps, scatter(rng, np.full(steps.size, 2.3), 0.01)),
        "grad_norm/layer0": (steps, scatter(rng, 1e-17 * 600 ** (steps / 3000), 0.2)),
        "grad_norm/layer5": (steps, scatter(rng, np.full(steps.size, 0.3), 0.2)),
    }
    assert "exploding_gradients" not in [f.kind for f in analyze_tags(tags).findings]


def test_a_first_layer_whose_gradient_fades_below_a_thousandth_of_the_others_is_vanishing():
    finding = _one(analyze_scenario("vanishing")["."], "vanishing_gradients")
    assert finding.severity == "warning" and abs(finding.step - 1500) <= 60
    assert finding.tags[0] == "grad_norm/conv1.weight"


def test_a_layer_with_no_gradient_at_all_is_reported_as_frozen_info():
    steps = steps_every(1000, 10)
    tags = {
        "grad_norm/embed": (steps, np.zeros(steps.size)),
        "grad_norm/fc": (steps, np.full(steps.size, 0.1)),
        "grad_norm/conv": (steps, np.full(steps.size, 0.2)),
    }
    finding = _one(analyze_tags(tags), "vanishing_gradients")
    assert finding.severity == "info" and "frozen" in finding.message


def test_relu_layers_going_from_half_to_93_percent_zeros_at_1600_are_dead_units():
    finding = _one(analyze_scenario("dead_relu")["."], "dead_units")
    assert finding.severity == "warning" and abs(finding.step - 1600) <= 60
    assert set(finding.tags) == {"activations/relu2_zero_frac", "activations/relu3_zero_frac"}


def test_weight_norm_accelerating_from_2000_is_weight_growth():
    finding = _one(analyze_scenario("weight_growth")["."], "weight_growth")
    assert finding.severity == "warning" and abs(finding.step - 2000) <= 60
    assert finding.tags == ("weight_norm/fc",) and "weight decay" in finding.suggestion


def test_weight_norm_growing_like_sqrt_of_the_steps_is_normal():
    steps = steps_every(10000, 20)
    norm = scatter(np.random.default_rng(2), 20 + 15 * np.sqrt(steps / 10000), 0.003)
    assert not kinds(analyze_tags({"weight_norm/fc": (steps, norm)}))


def test_a_loss_scale_falling_from_2_12_to_below_1_from_2000_is_a_critical_amp_overflow():
    finding = _one(analyze_scenario("amp_collapse")["."], "amp_overflow")
    assert finding.severity == "critical" and abs(finding.step - 2000) <= 60
    assert "bf16" in finding.suggestion


def test_a_loss_scale_that_never_stops_halving_from_its_first_point_collapsed_from_the_start(tmp_path):
    # fairseq logs `loss_scale` every 10 updates: a sentinel value in 1 batch of 3 overflows fp16 from the first
    # updates, so the scale halves from 2^13 at update 10 to 1e-45 and never holds. No calibration ends in
    # that descent: the collapse is the whole of it (it was dated where the scale finally stopped, at update 190).
    from tensorboardX import SummaryWriter

    import tbtriage

    w = SummaryWriter(str(tmp_path / "train_inner"))
    octave = 13.0
    for update in range(10, 410, 10):
        w.add_scalar("loss", 2.0 - update / 1000, update)
        w.add_scalar("loss_scale", 2.0**octave, update)
        octave = max(octave - 3.5, -149.0)
    w.close()
    finding = _one(tbtriage.diagnose(tmp_path).runs[0], "amp_overflow")
    assert finding.severity == "critical" and finding.step <= 20


def test_a_grad_scaler_that_calibrates_then_hovers_is_healthy():
    steps = steps_every(20000, 10)
    octave = np.maximum(16 - 3 * np.arange(steps.size), 13) + (steps // 2000) % 2
    assert not kinds(analyze_tags({"grad_scaler/scale": (steps, 2.0**octave)}), ("critical", "warning", "info"))


def test_overflows_of_a_scaler_probing_upward_while_its_scale_holds_are_info():
    # GradScaler with a short growth interval: every doubling overflows once and is halved back; 3 % of
    # logged steps are skipped, and the scale saw-tooths in the same two octaves all run long.
    steps = steps_every(3000, 5)
    rng = np.random.default_rng(6)
    octave = 17 + (steps // 100) % 2
    grad = scatter(rng, np.full(steps.size, 0.6), 0.1)
    grad[(steps % 200 == 100)] = np.inf
    report = analyze_tags(
        {"grad_norm": (steps, grad), "amp/loss_scale": (steps, 2.0**octave), "loss": (steps, 2 - steps / 3000)}
    )
    finding = _one(report, "amp_overflow")
    assert finding.severity == "info" and finding.evidence["scale_holds"]
    assert "probing" in finding.message and "bf16" not in finding.suggestion


def test_grad_norm_inf_on_many_steps_while_the_loss_stays_finite_is_amp_overflow():
    steps = steps_every(3000, 10)
    rng = np.random.default_rng(3)
    grad = scatter(rng, np.full(steps.size, 1.0), 0.1)
    grad[rng.choice(steps.size, 12, replace=False)] = np.inf
    finding = _one(
        analyze_tags({"train/grad_norm": (steps, grad), "train/loss": (steps, 2 - steps / 3000)}), "amp_overflow"
    )
    assert finding.severity == "warning" and finding.evidence["overflow_points"] == 12
    assert "exploding_gradients" not in kinds(analyze_tags({"train/grad_norm": (steps, grad)}))


def test_units_that_die_fast_then_creep_past_80_percent_late_are_dated_at_the_fast_rise():
    # Half the units at zero until step 400, 78 % by step 440 (one bad update), then a slow creep to 95 % that
    # crosses 80 % only around step 1100: the layer died at ~420, in the middle of its rise.
    steps = steps_every(4000, 10)
    rng = np.random.default_rng(3)
    level = np.where(steps < 400, 0.5, 0.78 + 0.17 * (1 - np.exp(-np.maximum(steps - 440, 0) / 1500)))
    level = np.where((steps >= 400) & (steps < 440), 0.5 + 0.28 * (steps - 400) / 40, level)
    zero = np.clip(scatter(rng, level, 0.005), 0, 1)
    loss = scatter(rng, 1.0 + np.exp(-steps / 800), 0.02)
    finding = _one(analyze_tags({"train/loss": (steps, loss), "act/relu2_zero_frac": (steps, zero)}), "dead_units")
    assert finding.severity == "warning" and 400 <= finding.step <= 440, finding.step


def _sparsity_run(layers: dict[str, np.ndarray]) -> Run:
    """A hand-rolled loop's run: `Loss/train_step` falling every step, and `sparsity/<layer>` every 5 steps."""
    steps = np.arange(0, 640)
    loss = scatter(np.random.default_rng(4), 0.5 + 0.9 * np.exp(-steps / 60), 0.2)
    scalars = {"Loss/train_step": (steps, loss)}
    scalars |= {f"sparsity/{name}": (steps[::5], share) for name, share in layers.items()}
    return to_run("run", RunSpec(scalars, 0.01))


def test_relu_layers_logged_as_sparsity_that_go_from_half_to_95_percent_zeros_are_dead_units(tmp_path):
    # A held-out loop logs each ReLU layer's zero share on the batch as `sparsity/layerN`: half at initialisation,
    # then one too-large AdamW update kills most units of the second layer by step 20 (measured on 64 samples
    # × 96 units a batch: it wanders by ~0.5 % between batches).
    rng = np.random.default_rng(5)
    steps = np.arange(0, 640, 5)
    first = np.clip(0.6 + 0.1 * steps / 640 + rng.normal(0, 0.01, steps.size), 0, 1)
    second = np.clip(np.where(steps < 20, 0.5, 0.95) + rng.normal(0, 0.005, steps.size), 0, 1)
    second[0] = 0.51
    report = diagnose_written(tmp_path, _sparsity_run({"layer0": first, "layer1": second}))
    finding = _one(report, "dead_units")
    assert finding.tags == ("sparsity/layer1",) and finding.step <= 20


@pytest.mark.parametrize("start", [0.0, 0.5])
def test_pruning_that_takes_weights_to_90_percent_sparsity_is_not_dead_units(tmp_path, start):
    # Gradual magnitude pruning (Zhu & Gupta's cubic schedule, every 50 steps) from dense weights, or fine-tuning
    # a checkpoint pruned to half and pruning it on: its sparsity only ever grows or holds, as it is meant to.
    steps = np.arange(0, 640, 5)
    pruned_at = np.minimum(steps // 50 * 50, 500) / 500
    share = 0.9 + (start - 0.9) * (1 - pruned_at) ** 3
    report = diagnose_written(tmp_path, _sparsity_run({"layer0": share, "layer1": share}))
    assert "dead_units" not in kinds(report, ("critical", "warning", "info"))


def _bad_batches(at: tuple[int, ...]) -> dict:
    """A healthy run (loss and grad norm every step) where each batch in `at` has ×8 the loss and ×15 the norm."""
    steps = steps_every(3000, 1, first=0)
    rng = np.random.default_rng(5)
    loss = scatter(rng, 0.4 + 1.6 * np.exp(-steps / 400), 0.04)
    grad = scatter(rng, np.full(steps.size, 0.8), 0.1)
    for step in at:
        loss[step] *= 8.0
        grad[step] *= 15.0
    return {"train/loss": (steps, loss), "train/grad_norm": (steps, grad)}


def test_one_bad_batch_jumping_loss_and_norm_together_is_one_loss_spike_with_the_norm_in_its_evidence():
    report = analyze_tags(_bad_batches((1800,)))
    assert "exploding_gradients" not in kinds(report, ("critical", "warning", "info"))
    spike = _one(report, "loss_spike")
    assert spike.step == 1800 and spike.evidence["grad_norm_spike"]["step"] == 1800
    assert "train/grad_norm jumped ×" in spike.evidence["summary"]


def test_the_norm_jumping_on_several_bad_batches_is_still_exploding_gradients():
    report = analyze_tags(_bad_batches((1200, 1800, 2400)))
    exploding = _one(report, "exploding_gradients")
    assert exploding.severity == "warning" and exploding.evidence["events"] == 3


def _write_bad_shard_run(path, epochs: int = 20, spe: int = 32, shard=(20, 21, 22), every: int = 1) -> None:
    """A tensorboardX run under names of its own, logging every `every` steps: the data is never shuffled and
    batches 20-22 of every epoch are raw, unnormalised bytes, so the loss jumps ×3-×15 there and the gradient norm
    ×100-×800 (a ReLU net is linear in its input scale), from the first epoch; evaluated at each epoch's end."""
    from tensorboardX import SummaryWriter

    rng = np.random.default_rng(11)
    w = SummaryWriter(str(path))
    for step in range(epochs * spe):
        loss = (0.5 + 0.9 * np.exp(-step / 150)) * np.exp(0.03 * rng.standard_normal())
        grad = 0.6 * np.exp(0.1 * rng.standard_normal())
        if step % spe in shard:
            fade = np.exp(-step / 200)  # the net learns to live with the shard: its bumps shrink
            loss *= 1.5 + 12 * fade
            grad *= 15 + 800 * fade
        if step % every == 0:
            w.add_scalar("Loss/train_step", loss, step)
            w.add_scalar("grads/total_norm", grad, step)
            w.add_scalar("opt/lr_group0", 1e-3, step)
        if step % spe == spe - 1:
            w.add_scalar("Loss/valid_epoch", 0.6 + 0.8 * np.exp(-step / 150), step)
    w.close()


@pytest.mark.parametrize("every", [1, 4])
def test_the_norm_jumping_on_a_bad_shard_read_every_epoch_is_the_periodic_patterns_evidence(tmp_path, every):
    """The same bad batches every epoch: one `periodic_spikes` finding, with the norm's jumps in its evidence;
    not an exploding gradient (the norm comes back each time) nor an unstable start (its first bump, seen in the
    norm alone when the loss is logged every 4 steps)."""
    import tbtriage

    _write_bad_shard_run(tmp_path, every=every)
    report = tbtriage.diagnose(tmp_path).runs[0]
    assert kinds(report, ("critical", "warning", "info")) == ["periodic_spikes"]
    pattern = report.findings[0]
    assert pattern.step <= 32 and pattern.evidence["period"] == 32
    jumps = pattern.evidence["grad_norm_spikes"]
    assert jumps["tag"] == "grads/total_norm" and len(jumps["steps"]) == 20  # once in each of the 20 epochs
    assert all(step % 32 in (20, 21, 22) for step in jumps["steps"]) and jumps["largest_ratio"] > 100
