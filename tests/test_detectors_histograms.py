"""Runs that logged only histograms (PyTorch `add_histogram` through tensorboardX) get the per-layer findings
the scalar rules give runs that log per-layer norms, with the layers named; healthy ones get none."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from tensorboardX import SummaryWriter

import tbtriage
from tbtriage.analysis.engine import analyze_run
from tests._report_contract import assert_follows

STEPS = np.arange(0, 1000, 10)  # a histogram every 10 steps, as loggers usually do (they are large)
UNITS = 2000


def _write(path: Path, histograms, loss) -> Path:
    """One run: the loss every 10 steps and, at each step, `histograms(step, rng) -> {tag: samples}`."""
    rng = np.random.default_rng(0)
    writer = SummaryWriter(str(path))
    for i, step in enumerate(STEPS):
        writer.add_scalar("train/loss", float(loss[i]), int(step))
        for tag, samples in histograms(int(step), rng).items():
            writer.add_histogram(tag, samples, int(step))
    writer.close()
    return path


def _report(path: Path):
    logdir = tbtriage.load(path.parent)
    return analyze_run(logdir.runs[path.name])


def _falling_loss(rng_seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(rng_seed)
    return (0.3 + 2.0 * np.exp(-STEPS / 300)) * (1 + 0.03 * rng.standard_normal(STEPS.size))


def _healthy(step: int, rng) -> dict[str, np.ndarray]:
    x = rng.standard_normal(UNITS)
    return {
        **{f"weights/fc{k}.weight": 0.1 * (1 + 0.2 * step / 1000) * rng.standard_normal(UNITS) for k in range(4)},
        **{f"grads/fc{k}.weight": 0.01 * (1 + 0.1 * rng.random()) * rng.standard_normal(UNITS) for k in range(4)},
        "activations/relu1": np.maximum(x, 0),
        "activations/relu2": np.maximum(x + 0.2, 0),
        "activations/tanh3": np.tanh(0.7 * rng.standard_normal(UNITS)),
    }


def _kinds(report) -> set[str]:
    return {f.kind for f in report.findings}


def test_a_healthy_run_that_logs_weights_gradients_and_activations_gets_no_histogram_finding(tmp_path):
    report = _report(_write(tmp_path / "healthy", _healthy, _falling_loss()))
    assert not [f for f in report.findings if f.evidence.get("source") == "histograms"], report.findings
    assert not _kinds(report) & {"dead_units", "exploding_gradients", "vanishing_gradients", "weight_growth"}


def test_relus_that_die_at_step_400_are_dead_units_from_that_step_naming_the_layer(tmp_path):
    def dying(step: int, rng) -> dict[str, np.ndarray]:
        out = _healthy(step, rng)
        x = rng.standard_normal(UNITS)
        alive = 1.0 if step < 400 else 0.03
        out["activations/relu1"] = np.where(rng.random(UNITS) < alive, np.maximum(x, 0), 0.0)
        return out

    report = _report(_write(tmp_path / "dying", dying, _falling_loss()))
    dead = [f for f in report.findings if f.kind == "dead_units"]
    assert len(dead) == 1 and dead[0].severity in ("warning", "critical")
    assert dead[0].tags[0] == "activations/relu1" and dead[0].evidence["layer_names"][0] == "relu1"
    assert 390 <= dead[0].step <= 420 and dead[0].evidence["source"] == "histograms"
    assert dead[0].evidence["recent_zero_fraction"] >= 0.95
    # The JSON report carries it like any finding, the layers in its evidence.
    doc = assert_follows(json.loads(tbtriage.diagnose(tmp_path).to_json()))
    (reported,) = [f for f in doc["runs"][0]["findings"] if f["kind"] == "dead_units"]
    assert reported["evidence"]["layer_names"][0] == "relu1" and reported["step"] == dead[0].step


def test_tanh_units_pinned_at_plus_minus_one_are_reported_as_saturated(tmp_path):
    def saturating(step: int, rng) -> dict[str, np.ndarray]:
        out = _healthy(step, rng)
        gain = 0.7 if step < 500 else 8.0
        out["activations/tanh3"] = np.tanh(gain * rng.standard_normal(UNITS))
        return out

    report = _report(_write(tmp_path / "saturated", saturating, _falling_loss()))
    dead = [f for f in report.findings if f.kind == "dead_units"]
    assert len(dead) == 1 and dead[0].tags == ("activations/tanh3",)
    assert 490 <= dead[0].step <= 520 and "saturated" in dead[0].message
    # Saturating during training, not from the start: large updates, as for ReLUs that die on the way.
    assert dead[0].causes[0].cause == "lr_too_high" and "saturated" in str(dead[0].causes[0].evidence)


def test_a_sigmoid_stack_whose_first_layers_get_no_gradient_has_vanishing_gradients_there(tmp_path):
    def vanishing(step: int, rng) -> dict[str, np.ndarray]:
        out = _healthy(step, rng)
        # Each sigmoid layer passes at most 1/4 of the gradient back: 12 layers deep, the first gets 4^-11.
        for k in range(4):
            out[f"grads/fc{k}.weight"] = 0.01 * 0.25 ** (3 * (3 - k)) * rng.standard_normal(UNITS)
        return out

    stalled = np.full(STEPS.size, 2.3) * (1 + 0.01 * np.random.default_rng(2).standard_normal(STEPS.size))
    report = _report(_write(tmp_path / "vanishing", vanishing, stalled))
    found = [f for f in report.findings if f.kind == "vanishing_gradients"]
    assert found and found[0].tags[0] == "grads/fc0.weight"
    assert found[0].evidence["source"] == "histograms" and "fc0.weight" in found[0].evidence["layer_names"]


def test_a_layer_whose_gradients_blow_up_while_the_loss_jumps_is_exploding_gradients(tmp_path):
    def exploding(step: int, rng) -> dict[str, np.ndarray]:
        out = _healthy(step, rng)
        if step >= 600:
            out["grads/fc2.weight"] *= 10.0 ** (1 + (step - 600) / 50)
        return out

    loss = _falling_loss()
    loss[STEPS >= 600] *= np.linspace(1.5, 8.0, int((STEPS >= 600).sum()))
    report = _report(_write(tmp_path / "exploding", exploding, loss))
    found = [f for f in report.findings if f.kind == "exploding_gradients"]
    assert found and "grads/fc2.weight" in found[0].tags and found[0].severity == "critical"
    assert 550 <= found[0].step <= 650


def test_a_layer_whose_weights_grow_fast_late_in_training_is_weight_growth(tmp_path):
    def growing(step: int, rng) -> dict[str, np.ndarray]:
        out = _healthy(step, rng)
        scale = 0.1 if step < 600 else 0.1 * np.exp((step - 600) / 120)
        out["weights/fc3.weight"] = scale * rng.standard_normal(UNITS)
        out["weights/fc3.bias"] = np.zeros(8) + step  # biases start at 0 and are not judged
        return out

    report = _report(_write(tmp_path / "growing", growing, _falling_loss()))
    found = [f for f in report.findings if f.kind == "weight_growth"]
    assert len(found) == 1 and found[0].tags == ("weights/fc3.weight",)
    assert 550 <= found[0].step <= 700 and found[0].evidence["layer_names"] == ["fc3.weight"]


def test_per_layer_norm_scalars_win_over_the_same_layers_histograms(tmp_path):
    path = tmp_path / "both"

    def vanishing(step: int, rng) -> dict[str, np.ndarray]:
        out = _healthy(step, rng)
        out["grads/fc0.weight"] = 1e-9 * rng.standard_normal(UNITS)
        return out

    _write(path, vanishing, _falling_loss())
    writer = SummaryWriter(str(path))
    for step in STEPS:  # the same layers' norms as scalars: healthy, so the scalars' verdict stands
        for k in range(4):
            writer.add_scalar(f"grad_norm/fc{k}", 1.0 + 0.01 * k, int(step))
    writer.close()
    report = _report(path)
    assert "vanishing_gradients" not in _kinds(report)
