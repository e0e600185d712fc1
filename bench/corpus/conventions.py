"""How each framework would have logged a trace: its writer, its tag names, its cadence and its step axis.

Writers are the real ones: PyTorch's `torch.utils.tensorboard.SummaryWriter` (which Lightning, HF Trainer,
detectron2, ultralytics and stable-baselines3 use), tensorboardX's `SummaryWriter`, and TF2/Keras tensor
scalars built with tensorboard's own protobuf classes and framed by the project's `event_writer`.
Cadences follow the frameworks' defaults: HF logs the mean loss of each `logging_steps` window, detectron2
the median of a 20-iteration window, Lightning every `log_every_n_steps`, Keras and timm once per epoch,
ultralytics the running epoch mean after every batch *at the epoch's step* (many values share one step).

Some names are ones `analysis/roles.py` does not know (`relu_dead_frac/...`, `scaler/scale`, `perf/...`):
real users invent names, and the corpus should show what the engine misses.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .trace import Trace

#: Every corpus run starts at this wall time (2025-06-02 09:00 UTC): a sweep launched together, long finished.
WALL0 = 1748854800.0
#: Seconds between opening a crashed process's writer and its relaunch's (file names carry the second).
RELAUNCH_PAUSE_S = 1.1


# ---- writers ----------------------------------------------------------------------------------------------


class Sink:
    """One process's event file in one folder."""

    def scalar(self, tag: str, value: float, step: int, wall: float) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


#: Buckets per logged histogram: TF2/Keras's default, and it keeps a run that logs every layer at ~100 KB
#: (PyTorch's default TensorFlow-style buckets would make it ~20x larger for the same picture).
HIST_BINS = 30


class TorchSink(Sink):
    def __init__(self, folder: Path):
        from torch.utils.tensorboard import SummaryWriter

        self.w = SummaryWriter(log_dir=str(folder), max_queue=100000, flush_secs=3600)

    def scalar(self, tag, value, step, wall):
        self.w.add_scalar(tag, float(value), int(step), walltime=WALL0 + wall)

    def histogram(self, tag, values, step, wall):
        self.w.add_histogram(tag, values, int(step), bins=HIST_BINS, walltime=WALL0 + wall)

    def close(self):
        self.w.close()


class TbxSink(Sink):
    def __init__(self, folder: Path):
        from tensorboardX import SummaryWriter

        self.w = SummaryWriter(logdir=str(folder), max_queue=100000, flush_secs=3600)

    def scalar(self, tag, value, step, wall):
        self.w.add_scalar(tag, float(value), int(step), walltime=WALL0 + wall)

    def histogram(self, tag, values, step, wall):
        self.w.add_histogram(tag, values, int(step), bins=HIST_BINS, walltime=WALL0 + wall)

    def close(self):
        self.w.close()


class TF2Sink(Sink):
    """TF2 `tf.summary.scalar` records: a rank-0 DT_FLOAT tensor in `tensor_content`, scalars plugin metadata."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.events: list[bytes] = []
        self.first_wall: float | None = None

    def scalar(self, tag, value, step, wall):
        from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2

        meta = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
        tensor = tensor_pb2.TensorProto(
            dtype=types_pb2.DT_FLOAT,
            tensor_shape=tensor_shape_pb2.TensorShapeProto(),
            tensor_content=np.float32(value).tobytes(),
        )
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, metadata=meta, tensor=tensor)])
        self.events.append(event_pb2.Event(wall_time=WALL0 + wall, step=int(step), summary=summary).SerializeToString())
        if self.first_wall is None:
            self.first_wall = WALL0 + wall

    def close(self):
        from tbtriage.analysis.event_writer import write_event_file

        wall = self.first_wall or WALL0
        name = f"events.out.tfevents.{int(wall)}.{socket.gethostname()}.{os.getpid()}.0.v2"
        write_event_file(self.folder / name, self.events, wall)


WRITERS: dict[str, type[Sink]] = {"torch": TorchSink, "tbx": TbxSink, "tf2": TF2Sink}


# ---- sampling a trace the way a framework does -----------------------------------------------------------


def every(trace: Trace, name: str, n: int, offset: int = 0):
    """The value at every n-th step (what `if step % n == 0: writer.add_scalar(...)` logs)."""
    steps, values, walls = trace.get(name)
    keep = (steps % n) == (offset % n)
    return steps[keep], values[keep], walls[keep]


def window_mean(trace: Trace, name: str, n: int, median: bool = False):
    """The mean (or median) of each n-step window, at the window's last step (HF, detectron2)."""
    steps, values, walls = trace.get(name)
    window = steps // n
    ends = np.flatnonzero(np.r_[window[1:] != window[:-1], True])
    starts = np.r_[0, ends[:-1] + 1]
    agg = np.median if median else np.mean
    out = np.array([agg(values[a : b + 1]) for a, b in zip(starts, ends)])  # one value per window
    return steps[ends], out, walls[ends]


def per_epoch(trace: Trace, name: str):
    """The mean over each epoch, indexed by epoch (Keras `epoch_*`, timm), at the epoch's last wall time."""
    steps, values, walls = trace.get(name)
    epoch = steps // trace.steps_per_epoch
    ends = np.flatnonzero(np.r_[epoch[1:] != epoch[:-1], True])
    starts = np.r_[0, ends[:-1] + 1]
    means = np.array([np.mean(values[a : b + 1]) for a, b in zip(starts, ends)])
    return epoch[ends], means, walls[ends]


def epoch_running_mean(trace: Trace, name: str):
    """After every step, the mean of the epoch's values so far: a stateful mean metric reset at each epoch's
    start (what Keras passes to its callbacks as `logs`, and ultralytics shows as its progress)."""
    steps, values, walls = trace.get(name)
    epoch = steps // trace.steps_per_epoch
    running = np.empty(values.size)
    for e in np.unique(epoch):
        at = np.flatnonzero(epoch == e)
        running[at] = np.cumsum(values[at]) / np.arange(1, at.size + 1)
    return steps, running, walls


def at_epochs(trace: Trace, name: str):
    """An evaluation series re-indexed by epoch."""
    steps, values, walls = trace.get(name)
    return steps // trace.steps_per_epoch, values, walls


def _emit(sinks: list[Sink], trace: Trace, tag: str, series, scale: float = 1.0) -> None:
    """Write a series, each point through the sink of the process that produced it (restarts)."""
    steps, values, walls = series
    for s, v, w in zip(steps.tolist(), values.tolist(), walls.tolist()):
        sinks[_segment_of(trace, s, w)].scalar(tag, v * scale, s, w)


def _segment_of(trace: Trace, step: int, wall: float) -> int:
    # Segments are ordered in time; a restart's wall clock jumps by the relaunch delay.
    if len(trace.segments) == 1:
        return 0
    return 0 if wall < trace.restart_wall else 1


def _layer_name(name: str) -> str:
    return name.split("/", 1)[1]


# ---- conventions ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Convention:
    name: str
    writer: str
    axis: str  # "step" (global steps) or "epoch": what a finding's step means on this run
    write: Callable[[Trace, list[Sink], str], None]  # (trace, sinks, folder role) ; folders from `folders`
    folders: tuple[str, ...] = ("",)  # sub-runs: Keras writes train/ and validation/
    rl: bool = False
    interval: int = 1  # steps between two logged training-loss points (an onset is only seen this finely)


def _common_extras(trace: Trace, sinks, names: dict[str, str], n: int) -> None:
    """Per-layer gradient norms, zero fractions, loss scale, timings and task terms, under this convention's names.

    A template with `{}` takes every `<prefix>/<part>` series; one without names the single series `<prefix>`.
    """
    for prefix, template in names.items():
        if "{}" in template:
            matched = [(name, template.format(_layer_name(name))) for name in trace.names(prefix + "/")]
        else:
            matched = [(prefix, template)] if trace.has(prefix) else []
        for name, tag in matched:
            # Evaluations are already sparse: write them all; per-step series every n steps.
            _emit(sinks, trace, tag, trace.get(name) if prefix.startswith("val_") else every(trace, name, n))


def _emit_histograms(sinks, trace: Trace, templates: dict[str, str]) -> None:
    """(Writers with `add_histogram`: torch's and tensorboardX's.) Every logged histogram, named by this convention's template for its kind (`hist_grad` -> `grads/{}`)."""
    for name, points in trace.histograms.items():
        kind, layer = name.split("/", 1)
        for step, values, wall in points:
            sinks[_segment_of(trace, step, wall)].histogram(templates[kind].format(layer), values, step, wall)


def write_pytorch(trace: Trace, sinks, folder: str) -> None:
    """A hand-written PyTorch loop with `SummaryWriter`: the loss every step, the rest every 10."""
    _emit(sinks, trace, "Loss/train", trace.get("loss"))
    if trace.has("acc"):
        _emit(sinks, trace, "Accuracy/train", every(trace, "acc", 10))
    if trace.has("val_loss"):
        _emit(sinks, trace, "Loss/val", trace.get("val_loss"))
    if trace.has("val_acc"):
        _emit(sinks, trace, "Accuracy/val", trace.get("val_acc"))
    _emit(sinks, trace, "learning_rate", every(trace, "lr", 10))
    _emit(sinks, trace, "grad_norm", every(trace, "grad_norm", 5))
    _common_extras(
        trace,
        sinks,
        {
            "grad_norm": "grad_norm/{}",
            "zero_frac": "activations/{}_zero_fraction",
            "loss_scale": "amp/loss_scale",
            "data_time": "time/data",
            "step_time": "time/batch",
            "task": "Loss/train_{}",
            "val_task": "Loss/val_{}",
        },
        5,
    )
    _emit_histograms(sinks, trace, {"hist_weight": "weights/{}", "hist_grad": "grads/{}", "hist_act": "activations/{}"})


def write_tensorboardx(trace: Trace, sinks, folder: str) -> None:
    """A tensorboardX loop logging every 5 steps, with home-made names."""
    _emit(sinks, trace, "train/loss", every(trace, "loss", 5))
    if trace.has("acc"):
        _emit(sinks, trace, "train/acc", every(trace, "acc", 5))
    if trace.has("val_loss"):
        _emit(sinks, trace, "valid/loss", trace.get("val_loss"))
    if trace.has("val_acc"):
        _emit(sinks, trace, "valid/acc", trace.get("val_acc"))
    _emit(sinks, trace, "train/lr", every(trace, "lr", 5))
    _emit(sinks, trace, "train/grad_norm", every(trace, "grad_norm", 5))
    _common_extras(
        trace,
        sinks,
        {
            "grad_norm": "grads/{}",
            "zero_frac": "relu_dead_frac/{}",
            "loss_scale": "scaler/scale",
            "data_time": "perf/data_wait_s",
            "step_time": "perf/iter_s",
            "task": "train/loss_{}",
            "val_task": "valid/loss_{}",
        },
        5,
    )
    _emit_histograms(sinks, trace, {"hist_weight": "{}/weight", "hist_grad": "{}/weight.grad", "hist_act": "act/{}"})


def write_lightning(trace: Trace, sinks, folder: str) -> None:
    """Lightning's TensorBoardLogger: `*_step` every log_every_n_steps (10), `*_epoch` means, `epoch`, `lr-<Optimizer>`."""
    n = 10
    _emit(sinks, trace, "train_loss_step", every(trace, "loss", n, n - 1))
    steps, values, walls = per_epoch(trace, "loss")
    end_steps = (steps + 1) * trace.steps_per_epoch - 1
    _emit(sinks, trace, "train_loss_epoch", (end_steps, values, walls))
    if trace.has("acc"):
        _emit(sinks, trace, "train_acc_step", every(trace, "acc", n, n - 1))
    if trace.has("val_loss"):
        _emit(sinks, trace, "val_loss", trace.get("val_loss"))
    if trace.has("val_acc"):
        _emit(sinks, trace, "val_acc", trace.get("val_acc"))
    s, v, w = every(trace, "lr", n, n - 1)
    _emit(sinks, trace, f"lr-{trace.optimizer}", (s, v, w))
    _emit(sinks, trace, "epoch", (s, (s // trace.steps_per_epoch).astype(float), w))
    _emit(sinks, trace, "grad_2.0_norm_total", every(trace, "grad_norm", n, n - 1))
    _common_extras(
        trace,
        sinks,
        {
            "grad_norm": "grad_2.0_norm/{}",
            "zero_frac": "train/{}_dead_relu_fraction",
            "loss_scale": "precision/loss_scale",
            "data_time": "data_time",
            "step_time": "batch_time",
            "task": "train_loss_{}_step",
            "val_task": "val_loss_{}",
        },
        n,
    )


def write_hf(trace: Trace, sinks, folder: str) -> None:
    """HF Trainer: `train/loss` is the mean over each logging_steps window; global_step counts from 1."""
    n = 10
    s, v, w = window_mean(trace, "loss", n)
    _emit(sinks, trace, "train/loss", (s + 1, v, w))
    s, v, w = every(trace, "grad_norm", n, n - 1)
    _emit(sinks, trace, "train/grad_norm", (s + 1, v, w))
    s, v, w = every(trace, "lr", n, n - 1)
    _emit(sinks, trace, "train/learning_rate", (s + 1, v, w))
    _emit(sinks, trace, "train/epoch", (s + 1, (s + 1) / trace.steps_per_epoch, w))
    if trace.has("val_loss"):
        s, v, w = trace.get("val_loss")
        _emit(sinks, trace, "eval/loss", (s + 1, v, w))
        _emit(sinks, trace, "eval/runtime", (s + 1, np.full(s.size, 0.41), w))
        _emit(sinks, trace, "eval/samples_per_second", (s + 1, np.full(s.size, 1248.7), w))
    if trace.has("val_acc"):
        s, v, w = trace.get("val_acc")
        _emit(sinks, trace, "eval/accuracy", (s + 1, v, w))
    for name in trace.names("task/"):
        s, v, w = window_mean(trace, name, n)
        _emit(sinks, trace, f"train/loss_{_layer_name(name)}", (s + 1, v, w))
    for name in trace.names("grad_norm/"):
        s, v, w = every(trace, name, n, n - 1)
        _emit(sinks, trace, f"train/grad_norm_{_layer_name(name)}", (s + 1, v, w))
    for name in trace.names("zero_frac/"):
        s, v, w = every(trace, name, n, n - 1)
        _emit(sinks, trace, f"train/{_layer_name(name)}_zero_frac", (s + 1, v, w))
    if trace.has("loss_scale"):
        s, v, w = every(trace, "loss_scale", n, n - 1)
        _emit(sinks, trace, "train/loss_scale", (s + 1, v, w))
    if trace.has("data_time"):
        s, v, w = window_mean(trace, "data_time", n)
        _emit(sinks, trace, "train/data_time", (s + 1, v, w))
        s, v, w = window_mean(trace, "step_time", n)
        _emit(sinks, trace, "train/step_time", (s + 1, v, w))


def write_keras(trace: Trace, sinks, folder: str) -> None:
    """Keras `TensorBoard(update_freq="epoch")`: `epoch_*` per epoch in train/ and validation/ siblings."""
    if folder == "train":
        _emit(sinks, trace, "epoch_loss", per_epoch(trace, "loss"))
        if trace.has("acc"):
            _emit(sinks, trace, "epoch_accuracy", per_epoch(trace, "acc"))
        s, v, w = per_epoch(trace, "lr")
        _emit(sinks, trace, "epoch_learning_rate", (s, v, w))
        for name in trace.names("task/"):
            _emit(sinks, trace, f"epoch_{_layer_name(name)}_loss", per_epoch(trace, name))
        for name in trace.names("grad_norm"):
            tag = "epoch_grad_norm" if name == "grad_norm" else f"epoch_grad_norm_{_layer_name(name)}"
            _emit(sinks, trace, tag, per_epoch(trace, name))
        for name in trace.names("zero_frac/"):
            _emit(sinks, trace, f"epoch_{_layer_name(name)}_zero_fraction", per_epoch(trace, name))
        if trace.has("loss_scale"):
            _emit(sinks, trace, "epoch_loss_scale", per_epoch(trace, "loss_scale"))
    else:
        if trace.has("val_loss"):
            _emit(sinks, trace, "epoch_loss", at_epochs(trace, "val_loss"))
        if trace.has("val_acc"):
            _emit(sinks, trace, "epoch_accuracy", at_epochs(trace, "val_acc"))
        for name in trace.names("val_task/"):
            _emit(sinks, trace, f"epoch_{_layer_name(name)}_loss", at_epochs(trace, name))


def write_keras_batch(trace: Trace, sinks, folder: str) -> None:
    """Keras `TensorBoard(update_freq=10)`: `batch_*` every 10 global steps plus `epoch_*`, and the validation
    run's `evaluation_*_vs_iterations` at the global step.

    `batch_*` is what `fit` passes to `on_train_batch_end`: the running mean of the epoch so far (the stateful
    loss and metric means, reset at each epoch's start; TF >= 2.2 and Keras 3), at step = the number of batches
    trained so far (Keras counts them from 1: the value after batch index s is written at step s + 1)."""
    write_keras(trace, sinks, folder)
    n = 10
    if folder == "train":
        for name, tag in (("loss", "batch_loss"), ("acc", "batch_accuracy")):
            if trace.has(name):
                steps, running, walls = epoch_running_mean(trace, name)
                keep = (steps + 1) % n == 0
                _emit(sinks, trace, tag, (steps[keep] + 1, running[keep], walls[keep]))
    else:
        if trace.has("val_loss"):
            _emit(sinks, trace, "evaluation_loss_vs_iterations", trace.get("val_loss"))
        if trace.has("val_acc"):
            _emit(sinks, trace, "evaluation_accuracy_vs_iterations", trace.get("val_acc"))


def write_timm(trace: Trace, sinks, folder: str) -> None:
    """timm's train.py summary, once per epoch: train_loss, eval_loss, eval_top1, eval_top5, lr."""
    _emit(sinks, trace, "train_loss", per_epoch(trace, "loss"))
    if trace.has("val_loss"):
        _emit(sinks, trace, "eval_loss", at_epochs(trace, "val_loss"))
    if trace.has("val_acc"):
        _emit(sinks, trace, "eval_top1", at_epochs(trace, "val_acc"), scale=100.0)
    s, v, w = per_epoch(trace, "lr")
    _emit(sinks, trace, "lr", (s, v, w))


def write_detectron2(trace: Trace, sinks, folder: str) -> None:
    """detectron2's TensorboardXWriter: medians of a 20-iteration window every 20 iterations."""
    n = 20
    s, v, w = window_mean(trace, "loss", n, median=True)
    _emit(sinks, trace, "total_loss", (s, v, w))
    for name in trace.names("task/"):
        _emit(sinks, trace, f"loss_{_layer_name(name)}", window_mean(trace, name, n, median=True))
    if trace.has("acc"):
        _emit(sinks, trace, "fast_rcnn/cls_accuracy", window_mean(trace, "acc", n, median=True))
    _emit(sinks, trace, "lr", every(trace, "lr", n, n - 1))
    _emit(sinks, trace, "data_time", window_mean(trace, "data_time", n, median=True))
    _emit(sinks, trace, "time", window_mean(trace, "step_time", n, median=True))
    s, _, w = every(trace, "lr", n, n - 1)
    total = trace.last_step + 1
    per_iter = np.median(trace.get("step_time")[1])
    _emit(sinks, trace, "eta_seconds", (s, (total - s) * per_iter, w))
    if trace.has("val_acc"):
        _emit(sinks, trace, "bbox/AP", trace.get("val_acc"), scale=100.0)
    for name in trace.names("grad_norm/"):
        _emit(sinks, trace, f"grad_norm/{_layer_name(name)}", every(trace, name, n, n - 1))
    for name in trace.names("zero_frac/"):
        _emit(sinks, trace, f"dead_frac/{_layer_name(name)}", every(trace, name, n, n - 1))


def write_ultralytics(trace: Trace, sinks, folder: str) -> None:
    """Ultralytics: after every batch the running mean of the epoch's losses, at step = epoch (many per step)."""
    steps, running, walls = epoch_running_mean(trace, "loss")
    epoch = steps // trace.steps_per_epoch
    terms = trace.names("task/")
    if terms:
        for name in terms:
            _emit(sinks, trace, f"train/{_layer_name(name)}_loss", (epoch, *epoch_running_mean(trace, name)[1:]))
    else:
        _emit(sinks, trace, "train/loss", (epoch, running, walls))
    if trace.has("val_loss"):
        if terms:
            for name in trace.names("val_task/"):
                _emit(sinks, trace, f"val/{_layer_name(name)}_loss", at_epochs(trace, name))
        else:
            _emit(sinks, trace, "val/loss", at_epochs(trace, "val_loss"))
    if trace.has("val_acc"):
        _emit(sinks, trace, "metrics/accuracy_top1", at_epochs(trace, "val_acc"))
    s, v, w = per_epoch(trace, "lr")
    for group in ("pg0", "pg1", "pg2"):
        _emit(sinks, trace, f"lr/{group}", (s, v, w))


def write_sb3(trace: Trace, sinks, folder: str) -> None:
    """stable-baselines3's logger: rollout/ and train/ groups at the environment step."""
    _emit(sinks, trace, "rollout/ep_rew_mean", trace.get("return"))
    _emit(sinks, trace, "rollout/ep_len_mean", trace.get("ep_len"))
    _emit(sinks, trace, "train/loss", trace.get("loss"))
    _emit(sinks, trace, "train/policy_gradient_loss", trace.get("policy_loss"))
    _emit(sinks, trace, "train/value_loss", trace.get("value_loss"))
    s, v, w = trace.get("entropy")
    _emit(sinks, trace, "train/entropy_loss", (s, -v, w))
    _emit(sinks, trace, "train/explained_variance", trace.get("explained_variance"))
    _emit(sinks, trace, "train/learning_rate", trace.get("lr"))


def write_rl_tbx(trace: Trace, sinks, folder: str) -> None:
    """A hand-written RL loop with tensorboardX (the NAF/DQN style: `episode/Return`)."""
    _emit(sinks, trace, "episode/Return", trace.get("return"))
    _emit(sinks, trace, "episode/Length", trace.get("ep_len"))
    _emit(sinks, trace, "loss/policy", trace.get("policy_loss"))
    _emit(sinks, trace, "loss/value", trace.get("value_loss"))
    _emit(sinks, trace, "policy/entropy", trace.get("entropy"))


# ---- held-out conventions (`heldout.py` only: names no corpus case is logged with) ------------------------


def write_handwritten(trace: Trace, sinks, folder: str) -> None:
    """A hand-rolled PyTorch loop with names of its own: `Loss/train_step` every step, `Loss/valid_epoch`,
    `metrics/val_top1` in percent, `opt/lr_group0`, `grads/total_norm`, `grads/<layer>_l2`, `sparsity/<layer>`
    (zero fractions), `amp/grad_scale`, times in milliseconds."""
    _emit(sinks, trace, "Loss/train_step", trace.get("loss"))
    if trace.has("val_loss"):
        _emit(sinks, trace, "Loss/valid_epoch", trace.get("val_loss"))
    if trace.has("val_acc"):
        _emit(sinks, trace, "metrics/val_top1", trace.get("val_acc"), scale=100.0)
    if trace.has("acc"):
        _emit(sinks, trace, "metrics/train_top1", every(trace, "acc", 10), scale=100.0)
    _emit(sinks, trace, "opt/lr_group0", every(trace, "lr", 10))
    _emit(sinks, trace, "grads/total_norm", trace.get("grad_norm"))
    _common_extras(
        trace,
        sinks,
        {"grad_norm": "grads/{}_l2", "zero_frac": "sparsity/{}", "loss_scale": "amp/grad_scale"},
        5,
    )
    if trace.has("data_time"):
        _emit(sinks, trace, "sys/dataloader_wait_ms", every(trace, "data_time", 5), scale=1000.0)
        _emit(sinks, trace, "sys/step_ms", every(trace, "step_time", 5), scale=1000.0)
    for name in trace.names("task/"):
        _emit(sinks, trace, f"Loss/train_step_{_layer_name(name)}", trace.get(name))
    for name in trace.names("val_task/"):
        _emit(sinks, trace, f"Loss/valid_epoch_{_layer_name(name)}", trace.get(name))


def write_handwritten_tbx(trace: Trace, sinks, folder: str) -> None:
    """tensorboardX every 4 steps: `objective/train`, `objective/holdout`, `score/holdout_acc`,
    `schedule/learning_rate`, `gradient/global_norm`, `gradient/<layer>`, `fp16/loss_scale`, `timing/*_s`."""
    n = 4
    _emit(sinks, trace, "objective/train", every(trace, "loss", n))
    if trace.has("val_loss"):
        _emit(sinks, trace, "objective/holdout", trace.get("val_loss"))
    if trace.has("val_acc"):
        _emit(sinks, trace, "score/holdout_acc", trace.get("val_acc"))
    _emit(sinks, trace, "schedule/learning_rate", every(trace, "lr", n))
    _emit(sinks, trace, "gradient/global_norm", every(trace, "grad_norm", n))
    _common_extras(
        trace,
        sinks,
        {
            "grad_norm": "gradient/{}",
            "loss_scale": "fp16/loss_scale",
            "data_time": "timing/fetch_s",
            "step_time": "timing/compute_s",
            "task": "objective/train_{}",
            "val_task": "objective/holdout_{}",
        },
        n,
    )


def write_fairseq(trace: Trace, sinks, folder: str) -> None:
    """fairseq's tensorboard logger: one folder per stat group (`train_inner/`, `valid/`), plain names, the loss
    in bits (base 2), every 10 updates (counted from 1): `loss`, `lr`, `gnorm`, `loss_scale`, `ups`; `valid/`
    `loss` and `accuracy` (percent)."""
    n = 10
    if folder == "train_inner":
        s, v, w = window_mean(trace, "loss", n)
        _emit(sinks, trace, "loss", (s + 1, v / np.log(2), w))
        s, v, w = every(trace, "lr", n, n - 1)
        _emit(sinks, trace, "lr", (s + 1, v, w))
        s, v, w = window_mean(trace, "grad_norm", n)
        _emit(sinks, trace, "gnorm", (s + 1, v, w))
        if trace.has("loss_scale"):
            s, v, w = every(trace, "loss_scale", n, n - 1)
            _emit(sinks, trace, "loss_scale", (s + 1, v, w))
        if trace.has("step_time"):
            s, v, w = window_mean(trace, "step_time", n)
            _emit(sinks, trace, "ups", (s + 1, 1.0 / v, w))
        for name in trace.names("task/"):
            s, v, w = window_mean(trace, name, n)
            _emit(sinks, trace, f"{_layer_name(name)}_loss", (s + 1, v / np.log(2), w))
        return
    if trace.has("val_loss"):
        s, v, w = trace.get("val_loss")
        _emit(sinks, trace, "loss", (s + 1, v / np.log(2), w))
    if trace.has("val_acc"):
        s, v, w = trace.get("val_acc")
        _emit(sinks, trace, "accuracy", (s + 1, 100 * v, w))
    for name in trace.names("val_task/"):
        s, v, w = trace.get(name)
        _emit(sinks, trace, f"{_layer_name(name)}_loss", (s + 1, v / np.log(2), w))


CONVENTIONS: dict[str, Convention] = {
    c.name: c
    for c in (
        Convention("pytorch", "torch", "step", write_pytorch),
        Convention("tensorboardx", "tbx", "step", write_tensorboardx, interval=5),
        Convention("lightning", "torch", "step", write_lightning, interval=10),
        Convention("hf", "torch", "step", write_hf, interval=10),
        Convention("keras", "tf2", "epoch", write_keras, folders=("train", "validation")),
        Convention("keras_batch", "tf2", "step", write_keras_batch, folders=("train", "validation"), interval=10),
        Convention("timm", "torch", "epoch", write_timm),
        Convention("detectron2", "torch", "step", write_detectron2, interval=20),
        Convention("ultralytics", "torch", "epoch", write_ultralytics),
        Convention("sb3", "torch", "step", write_sb3, rl=True),
        Convention("rl_tensorboardx", "tbx", "step", write_rl_tbx, rl=True),
        # held out: only `heldout.py` writes these
        Convention("handwritten", "torch", "step", write_handwritten),
        Convention("handwritten_tbx", "tbx", "step", write_handwritten_tbx, interval=4),
        Convention("fairseq", "torch", "step", write_fairseq, folders=("train_inner", "valid"), interval=10),
    )
}


class _Processes:
    """One sink per training process, opened when that process first writes.

    A restarted process opens its event file at least a second after the first one, as a relaunch does:
    tensorboardX names files by the second and host only, so two writers opened in the same second would
    share (and clobber) one file.
    """

    def __init__(self, writer: type[Sink], folder: Path):
        self.writer, self.folder = writer, folder
        self.open: dict[int, Sink] = {}

    def __getitem__(self, index: int) -> Sink:
        if index not in self.open:
            if self.open:
                time.sleep(RELAUNCH_PAUSE_S)
            self.open[index] = self.writer(self.folder)
        return self.open[index]

    def start(self) -> None:
        """Open the first process's writer without logging anything."""
        self[0]

    def close(self) -> None:
        for sink in self.open.values():
            sink.close()


def write_run(trace: Trace, convention: Convention, folder: Path) -> list[Path]:
    """Write `trace` under `folder` as `convention` would; one event file per process (restarts make two)."""
    written = []
    for sub in convention.folders:
        target = folder / sub if sub else folder
        target.mkdir(parents=True, exist_ok=True)
        sinks = _Processes(WRITERS[convention.writer], target)
        if trace.series:
            convention.write(trace, sinks, sub)
        else:
            sinks.start()  # a writer was opened (its file has the header record) and nothing was ever logged
        sinks.close()
        written.append(target)
    return written
