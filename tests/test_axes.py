"""Step axes: a Keras run's findings are stated in global steps with their epoch when it counts both, in epochs when
it counts epochs only; the onset never depends on the runs loaded with it; charts place each finding on each
series' own axis. Event files come from tensorboard's own writer (tests/_event_files.write_keras_pair)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import tbtriage
from tbtriage.analysis.axes import restate, series_step, step_axes
from tbtriage.analysis.config import Config
from tbtriage.analysis.datamodel import Run, Series
from tbtriage.analysis.smoothing import ema
from tbtriage.tui.chart_data import ChartOptions, SeriesRequest, prepare_chart
from tbtriage.tui.state import RunStore, ViewState, jump_to
from tests._event_files import write_keras_pair
from tests._report_data import finding

SPE = 32  # steps per epoch of the written runs
NAN_EPOCH = 6


def _findings(report) -> dict[str, list]:
    return {run.name: run.findings for run in report.runs}


def test_a_keras_pair_logging_per_batch_states_the_divergence_in_global_steps_and_says_the_epoch(tmp_path: Path):
    write_keras_pair(tmp_path, steps_per_epoch=SPE, update_freq=10, nan_from_epoch=NAN_EPOCH)
    found = _findings(tbtriage.diagnose(tmp_path))
    for name in ("train", "validation"):
        divergence = [f for f in found[name] if f.kind == "divergence"]
        assert divergence, name
        f = divergence[0]
        # The losses go NaN in epoch 6, global steps 192-223: the onset is in global steps, not the epoch index 6.
        assert NAN_EPOCH * SPE <= f.step < (NAN_EPOCH + 1) * SPE
        assert f.evidence["epoch"] == NAN_EPOCH and f.evidence["steps_per_epoch"] == SPE
        assert f"epoch {NAN_EPOCH} (step {f.step})" in f.message
        # No bare "step 6" left in what the user reads.
        assert not re.search(rf"\bstep {NAN_EPOCH}\b", f.message + f.suggestion)


def test_a_keras_pair_logging_per_epoch_only_states_onsets_and_spans_in_epochs(tmp_path: Path):
    write_keras_pair(tmp_path, steps_per_epoch=SPE, update_freq=None, nan_from_epoch=NAN_EPOCH)
    found = _findings(tbtriage.diagnose(tmp_path))
    divergence = [f for f in found["train"] if f.kind == "divergence"]
    assert divergence and divergence[0].step == NAN_EPOCH and divergence[0].evidence["axis"] == "epoch"
    reasons = [x for c in divergence[0].causes for k in ("for", "against") for x in c.evidence.get(k, ())]
    text = " ".join([divergence[0].message, divergence[0].suggestion, *reasons])
    assert f"epoch {NAN_EPOCH}" in text and not re.search(r"\bsteps? \d", text)


def test_an_onset_does_not_depend_on_which_runs_were_loaded_together(tmp_path: Path):
    write_keras_pair(tmp_path, steps_per_epoch=SPE, update_freq=10, nan_from_epoch=NAN_EPOCH)
    together = _findings(tbtriage.diagnose(tmp_path))
    for name in ("train", "validation"):
        alone = _findings(tbtriage.diagnose(tmp_path / name))["."]
        assert [(f.kind, f.step, f.end_step, f.message) for f in alone] == [
            (f.kind, f.step, f.end_step, f.message.replace(f"{name}/", "")) for f in together[name]
        ]


def test_step_axes_know_which_tags_count_epochs_and_the_steps_per_epoch(tmp_path: Path):
    write_keras_pair(tmp_path, steps_per_epoch=SPE, update_freq=10)
    logdir = tbtriage.load(tmp_path)
    train, validation = step_axes(logdir.runs["train"]), step_axes(logdir.runs["validation"])
    assert train.epoch_tags == {"epoch_loss", "epoch_accuracy", "epoch_learning_rate"}
    assert train.steps_per_epoch == SPE and validation.steps_per_epoch == SPE  # each from its own tags
    assert validation.epoch_tags == {"epoch_loss", "epoch_accuracy"}


def _run(tags: dict[str, np.ndarray]) -> Run:
    scalars = {
        t: Series(s.astype(np.int64), s.astype(np.float64), np.linspace(1.0, 0.5, s.size)) for t, s in tags.items()
    }
    return Run(name="r", path=Path("r"), scalars=scalars, last_step=640, last_wall_time=640.0)


def test_a_per_epoch_framework_run_counts_epochs_and_a_step_run_is_left_as_it_is():
    epochs = np.arange(20)
    ultralytics = step_axes(_run({"train/box_loss": epochs, "lr/pg0": epochs}))
    plain = step_axes(_run({"train/loss": np.arange(0, 640, 10)}))
    f = replace(
        finding("r", "slow_convergence", "warning", 0, tags=("train/box_loss",)),
        end_step=19,
        message="still falling (-50% in 19 steps) from step 0",
    )
    said = restate(f, ultralytics)
    assert said.message == "still falling (-50% in 19 epochs) from epoch 0" and said.evidence["axis"] == "epoch"
    assert restate(f, plain) == f  # nothing known about epochs: unchanged


def test_markers_and_the_finding_jump_place_a_global_step_finding_at_its_epoch_on_an_epoch_series(tmp_path: Path):
    write_keras_pair(tmp_path, steps_per_epoch=SPE, update_freq=10, nan_from_epoch=NAN_EPOCH)
    report = tbtriage.diagnose(tmp_path)
    train = next(r for r in report.runs if r.name == "train")
    f = next(f for f in train.findings if f.kind == "divergence")
    epoch_series, batch_series = train.run.scalars["epoch_loss"], train.run.scalars["batch_loss"]
    assert series_step(f, "epoch_loss", epoch_series.steps) == NAN_EPOCH
    assert series_step(f, "batch_loss", batch_series.steps) == f.step

    def onsets(tag: str, series: Series) -> list[float]:
        request = SeriesRequest("train", 0, series, (f,), tag)
        chart = prepare_chart([request], ChartOptions(), 80, lambda r, w: ema(r.series.values, w))
        return [o.x for o in chart.onsets]

    assert onsets("epoch_loss", epoch_series) == [float(NAN_EPOCH)]
    assert onsets("batch_loss", batch_series) == [float(f.step)]

    store = RunStore(Config())
    store.runs = dict(tbtriage.load(tmp_path).runs)
    view = jump_to(ViewState(), store, f)  # the finding's lead tag is epoch_loss: the window is in epochs
    assert view.current_tag == "epoch_loss" and view.options.window is not None
    low, high = view.options.window
    assert low <= NAN_EPOCH <= high and high <= epoch_series.steps[-1]


@pytest.mark.parametrize("tag", ["epoch_loss", "batch_loss"])
def test_a_finding_without_an_epoch_is_placed_at_its_step_on_any_series(tag: str):
    f = finding("r", "loss_spike", "warning", 5, tags=(tag,))
    assert series_step(f, tag, np.arange(20)) == 5


def test_each_step_phrase_is_restated_and_percentages_and_advice_are_left_alone():
    axes = step_axes(_run({"epoch_loss": np.arange(20), "batch_loss": np.arange(9, 640, 10)}))
    assert axes.steps_per_epoch == 32
    f = replace(
        finding("r", "loss_spike", "warning", 200, tags=("batch_loss",)),
        end_step=300,
        message="spiked at step 200, 12% above; between steps 64 and 128 (in 64 steps)",
        suggestion="add a warmup of ~100 steps",
    )
    said = restate(f, axes)
    assert said.message == (
        "spiked at epoch 6 (step 200), 12% above; between epochs 2 and 4 (steps 64 and 128) (in 64 steps)"
    )
    assert said.suggestion == f.suggestion and (said.step, said.end_step) == (200, 300)
    assert (said.evidence["epoch"], said.evidence["end_epoch"]) == (6, 9)
    # The same words on the epoch tag: epoch 6 spans global steps 192-223; its span is counted in epochs.
    on_epoch = restate(replace(f, tags=("epoch_loss",), step=6, end_step=9, message="from step 6 in 3 steps"), axes)
    assert (on_epoch.step, on_epoch.end_step, on_epoch.message) == (192, 319, "from epoch 6 (step 192) in 3 epochs")


def _stretch_means(losses: np.ndarray, logged: np.ndarray, spe: int) -> np.ndarray:
    """What each logged stretch of batches averaged (steps count batches from 1; stretches end at epoch ends)."""
    out, before = [], 0
    for g in logged:
        start = max(before, (g - 1) // spe * spe)
        out.append(losses[start:g].mean())
        before = g
    return np.asarray(out)


def test_a_keras_running_epoch_mean_is_read_as_the_mean_of_each_logged_stretch_of_batches(tmp_path: Path):
    from tbtriage.analysis.axes import keras_batch_means

    write_keras_pair(tmp_path / "means", steps_per_epoch=SPE, update_freq=10, running_means=True)
    write_keras_pair(tmp_path / "batches", steps_per_epoch=SPE, update_freq=10)
    run = tbtriage.load(tmp_path / "means").runs["train"]
    logged = run.scalars["batch_loss"]
    recovered = keras_batch_means(run).scalars["batch_loss"]
    rng = np.random.default_rng(0)  # write_keras_pair's losses, seed 0
    total = 20 * SPE
    losses = 1.4 * np.exp(-np.arange(total) / (total / 3)) + 0.2 + 0.03 * rng.standard_normal(total)
    assert np.allclose(recovered.values, _stretch_means(losses, logged.steps, SPE), rtol=1e-5)
    assert np.array_equal(recovered.steps, logged.steps) and not np.allclose(recovered.values, logged.values)
    assert run.scalars["batch_loss"] is logged  # the run itself keeps what was logged
    # Per-batch values (a pre-2.2 or hand-written callback) are not running means: their epoch ends do not hold
    # the epoch's mean, and they are left as they are.
    raw = tbtriage.load(tmp_path / "batches").runs["train"]
    assert keras_batch_means(raw) is raw


def test_one_bad_batch_diluted_in_a_keras_running_mean_is_still_a_loss_spike_at_its_step(tmp_path: Path):
    # Batch 400 (offset 16 of epoch 12) has 8 times the loss. The running mean logged at step 410 holds it 1/26th:
    # ~+0.1 on a noisy 0.45. Undone, the stretch 401-410 averages it 1/10th: ~x1.7, a spike at step 410.
    write_keras_pair(tmp_path, steps_per_epoch=SPE, update_freq=10, running_means=True, bad_batches=(400,))
    run = tbtriage.diagnose(tmp_path).runs[0]
    assert run.name == "train"
    spikes = [f for f in run.findings if f.kind == "loss_spike"]
    assert spikes and spikes[0].step == 410 and spikes[0].tags[0] == "batch_loss"
    # Its numbers are the stretch's mean, not the point the chart shows there: the evidence says so.
    assert "recovered from Keras's running epoch mean" in spikes[0].evidence["values_from"]


def _shard_losses(seed: int, first_epoch: int = 0, epochs: int = 20) -> np.ndarray:
    """Per-batch losses of a net trained without shuffling on data holding a raw shard at batches 10-14 of each
    epoch from `first_epoch`: a slow start, then the run's fastest fall (~10 % per 10 batches), while the shard's
    loss barely falls (5 % above the clean batches at first, x3 by the end)."""
    rng = np.random.default_rng(seed)
    steps = np.arange(epochs * SPE)
    clean = 0.45 + 0.95 / (1 + np.exp((steps - 40) / 12))
    loss = clean * np.exp(0.02 * rng.standard_normal(steps.size))
    shard = (steps % SPE >= 10) & (steps % SPE < 15) & (steps // SPE >= first_epoch)
    loss[shard] = np.maximum(1.05 * clean[shard], 1.4) * np.exp(0.02 * rng.standard_normal(int(shard.sum())))
    return loss


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_bad_shard_hidden_in_the_first_epochs_fall_is_dated_from_the_first_epoch(tmp_path: Path, seed: int):
    # Keras running means every 10 batches, undone into stretch means: epoch 0's stretches fall ever faster
    # (seed 0: 1.35, 1.33, 1.19, then 1.02 in epoch 1) and the one holding the shard sits ~5 % above the line
    # through its neighbours, so a 3-point running median passes through all of them. The epoch still follows
    # the pattern every later epoch shows.
    write_keras_pair(tmp_path, steps_per_epoch=SPE, update_freq=10, running_means=True, step_loss=_shard_losses(seed))
    run = next(r for r in tbtriage.diagnose(tmp_path).runs if r.name == "train")
    pattern = next(f for f in run.findings if f.kind == "periodic_spikes")
    assert pattern.evidence["epoch"] == 0 and pattern.step < SPE


def test_a_bad_shard_that_appears_mid_run_is_not_dated_before_it(tmp_path: Path):
    losses = _shard_losses(1, first_epoch=8)
    write_keras_pair(tmp_path, steps_per_epoch=SPE, update_freq=10, running_means=True, step_loss=losses)
    run = next(r for r in tbtriage.diagnose(tmp_path).runs if r.name == "train")
    pattern = next(f for f in run.findings if f.kind == "periodic_spikes")
    assert pattern.evidence["epoch"] >= 8
