"""A realistic demo logdir with known pathologies, for `tbtriage demo`, the README and the tests.

Eleven runs from one imaginary lab, written the way their frameworks write them (HF Trainer, Lightning,
plain PyTorch SummaryWriter, timm-style scripts, Keras/TF2 with tensor scalars in `train/` and
`validation/` sub-runs), each with a pathology planted at a known step, or none. `PLANTED` is the
ground truth the tests hold the engine to. Everything is seeded: two writes give identical bytes.

The events are tensorboard's own protobuf classes; the framing is `analysis.event_writer` (tensorboard's
`EventFileWriter` checksums in pure Python on a writer thread, ~50 µs an event, too slow for the
two-second budget of a ~40k-event demo).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .event_writer import event_file_name, file_version_event, frame_records

#: Seed of every random stream; a run's stream is (SEED, run index) so adding a run never changes another.
SEED = 20240607
#: The marker file a demo logdir carries at its root: `tbtriage demo` overwrites only directories holding it.
MARKER = ".tbtriage-demo.json"
#: Default directory name, created in the current directory.
DEFAULT_DIR_NAME = "tbtriage-demo"
#: All runs end near this wall time (a finished overnight batch), each started as long before as it ran.
END_WALL_TIME = 1_717_480_800.0  # 2024-06-04 06:00 UTC

#: Steps of every step-based run, how often the training loop logs, and the epoch length.
TOTAL_STEPS = 4000
LOG_EVERY = 10
EPOCH_STEPS = 250  # validation runs once an epoch, so val curves have 16 points
#: Histograms are large: loggers write them every few dozen steps, not every step.
HIST_EVERY = 50


@dataclass(frozen=True)
class Planted:
    """One pathology the demo planted: the engine should report `kind` on `run` starting at `step`."""

    run: str
    kind: str
    step: int | None  # None: the whole run shows it, no onset to check
    note: str


#: The ground truth: every planted pathology, and (below) which runs are healthy.
PLANTED: tuple[Planted, ...] = (
    Planted("gpt_small_lr3e-3_noclip", "exploding_gradients", 2500, "grad_norm grows ×1.05 a step from 2500"),
    Planted("gpt_small_lr3e-3_noclip", "divergence", 2600, "train/loss is NaN from step 2600 on"),
    Planted("vit_tiny_no_aug", "overfitting", 1500, "val_loss bottoms at 1500, then climbs while train_loss falls"),
    Planted("lstm_lm_grad_spikes", "exploding_gradients", 1200, "grad norm ×40 at 1200, 2100, 3300, each recovers"),
    Planted("lstm_lm_grad_spikes", "loss_spike", 1200, "loss ×2.5 at the same steps, recovers within 30 steps"),
    Planted("resnet18_lr1e-5", "slow_convergence", None, "lr 1e-5 with Adam: loss falls 8 % in 4000 steps"),
    Planted("bert_base_resumed", "run_restart", 1500, "crashed at 2000, resumed from the step-1500 checkpoint"),
    Planted("unet_no_shuffle", "periodic_spikes", 120, "one bad shard: a loss spike 120 steps into every epoch"),
    Planted("effnet_b0_workers0", "input_bottleneck", None, "num_workers=0: data_time is 80 % of step_time"),
)

#: Runs with nothing planted: the engine must report nothing at warning or critical on them.
HEALTHY_RUNS: tuple[str, ...] = (
    "bert_base_cosine_seed0",
    "bert_base_cosine_seed1",
    "resnet50_step_decay",
    "keras_mnist_cnn/train",
    "keras_mnist_cnn/validation",
)


# ---- event encoding (tensorboard protos) -------------------------------------------------------------


def _pb():
    """tensorboard's proto modules, imported on first use (they cost ~0.2 s to import)."""
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2

    return event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2


def _plugin_metadata(plugin_name: str, content: bytes = b""):
    _, summary_pb2, *_ = _pb()
    return summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=plugin_name, content=content)
    )


@dataclass
class _RunWriter:
    """Collects one event file's events, then writes them in step order (as a training loop would)."""

    style: str  # "pytorch" (simple_value) or "tf2" (tensor scalars, metadata on a tag's first event only)
    start_wall: float
    seconds_per_step: float
    events: list[tuple[int, int, bytes]] = field(default_factory=list)  # (step, order, payload)
    _seen_tags: set[str] = field(default_factory=set)

    def wall(self, step: int) -> float:
        return self.start_wall + step * self.seconds_per_step

    def _add(self, step: int, value) -> None:
        event_pb2, summary_pb2, *_ = _pb()
        event = event_pb2.Event(wall_time=self.wall(step), step=int(step), summary=summary_pb2.Summary(value=[value]))
        self.events.append((int(step), len(self.events), event.SerializeToString()))

    def scalars(self, tag: str, steps: np.ndarray, values: np.ndarray) -> None:
        _, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2 = _pb()
        for step, value in zip(steps.tolist(), np.asarray(values, np.float64).tolist()):
            if self.style == "tf2":
                tensor = tensor_pb2.TensorProto(
                    dtype=types_pb2.DT_FLOAT,
                    tensor_shape=tensor_shape_pb2.TensorShapeProto(),
                    tensor_content=np.float32(value).tobytes(),
                )
                first = tag not in self._seen_tags
                self._seen_tags.add(tag)
                summary_value = summary_pb2.Summary.Value(
                    tag=tag, tensor=tensor, metadata=_plugin_metadata("scalars") if first else None
                )
            else:
                summary_value = summary_pb2.Summary.Value(tag=tag, simple_value=value)
            self._add(step, summary_value)

    def histogram(self, tag: str, step: int, samples: np.ndarray, bins: int = 30) -> None:
        _, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2 = _pb()
        counts, edges = np.histogram(samples, bins=bins)
        if self.style == "tf2":  # TF2: a [k, 3] double tensor of (left edge, right edge, count)
            table = np.stack([edges[:-1], edges[1:], counts.astype(np.float64)], axis=1)
            shape = tensor_shape_pb2.TensorShapeProto(
                dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=bins), tensor_shape_pb2.TensorShapeProto.Dim(size=3)]
            )
            tensor = tensor_pb2.TensorProto(
                dtype=types_pb2.DT_DOUBLE, tensor_shape=shape, tensor_content=table.astype("<f8").tobytes()
            )
            first = tag not in self._seen_tags
            self._seen_tags.add(tag)
            value = summary_pb2.Summary.Value(
                tag=tag, tensor=tensor, metadata=_plugin_metadata("histograms") if first else None
            )
        else:
            histo = summary_pb2.HistogramProto(
                min=float(samples.min()),
                max=float(samples.max()),
                num=float(samples.size),
                sum=float(samples.sum()),
                sum_squares=float(np.square(samples).sum()),
                bucket_limit=edges[1:].tolist(),
                bucket=counts.astype(np.float64).tolist(),
            )
            value = summary_pb2.Summary.Value(tag=tag, histo=histo)
        self._add(step, value)

    def text(self, tag: str, step: int, text: str) -> None:
        _, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2 = _pb()
        tensor = tensor_pb2.TensorProto(
            dtype=types_pb2.DT_STRING,
            tensor_shape=tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1)]),
            string_val=[text.encode("utf-8")],
        )
        # PyTorch's SummaryWriter.add_text("args", ...) writes the tag "args/text_summary".
        self._add(
            step, summary_pb2.Summary.Value(tag=f"{tag}/text_summary", tensor=tensor, metadata=_plugin_metadata("text"))
        )

    def hparams(self, hparams: dict[str, Any]) -> None:
        """The hparams plugin's session_start_info, as `hp.hparams()` / `add_hparams` write it."""
        from tensorboard.plugins.hparams import metadata, plugin_data_pb2

        info = plugin_data_pb2.SessionStartInfo(start_time_secs=self.start_wall)
        for name, value in hparams.items():
            if isinstance(value, bool):
                info.hparams[name].bool_value = value
            elif isinstance(value, (int, float)):
                info.hparams[name].number_value = value
            else:
                info.hparams[name].string_value = str(value)
        content = plugin_data_pb2.HParamsPluginData(version=0, session_start_info=info).SerializeToString()
        _, summary_pb2, *_ = _pb()
        value = summary_pb2.Summary.Value(
            tag=metadata.SESSION_START_INFO_TAG, metadata=_plugin_metadata(metadata.PLUGIN_NAME, content)
        )
        self._add(0, value)

    def write(self, directory: Path, index: int = 0) -> Path:
        self.events.sort(key=lambda e: (e[0], e[1]))
        name = event_file_name(
            self.start_wall, host="demo-gpu01", index=index, suffix=".v2" if self.style == "tf2" else ""
        )
        path = directory / name
        directory.mkdir(parents=True, exist_ok=True)
        path.write_bytes(frame_records([file_version_event(self.start_wall)] + [e[2] for e in self.events]))
        return path


# ---- curve shapes ------------------------------------------------------------------------------------


def _steps(last: int = TOTAL_STEPS, every: int = LOG_EVERY, first: int | None = None) -> np.ndarray:
    return np.arange(every if first is None else first, last + 1, every, dtype=np.int64)


def _cosine_warmup_lr(steps: np.ndarray, peak: float, warmup: int, total: int = TOTAL_STEPS) -> np.ndarray:
    warm = peak * np.minimum(steps / warmup, 1.0)
    progress = np.clip((steps - warmup) / (total - warmup), 0.0, 1.0)
    return np.where(steps < warmup, warm, peak * 0.5 * (1.0 + np.cos(np.pi * progress)))


def _step_decay_lr(steps: np.ndarray, base: float, milestones: tuple[int, ...], gamma: float = 0.1) -> np.ndarray:
    return base * gamma ** np.searchsorted(np.asarray(milestones), steps, side="right")


def _loss_from_lr(
    steps: np.ndarray, lr: np.ndarray, start: float, floor: float, speed: float, lr_noise_floor: float = 0.0
) -> np.ndarray:
    """Loss driven by the accumulated learning rate: slow in warmup, flattening as lr decays.

    `lr_noise_floor` adds a term proportional to lr: SGD hovers above the minimum in proportion to its
    step size, which is why real losses drop suddenly at each lr decay.
    """
    dt = np.diff(np.r_[0, steps])
    progress = np.cumsum(lr * dt) / (lr.max() * speed)
    return floor + (start - floor) * np.exp(-progress) + lr_noise_floor * lr / lr.max()


def _noisy(rng: np.random.Generator, values: np.ndarray, rel: float) -> np.ndarray:
    """Multiplicative noise: minibatch losses scatter in proportion to their size."""
    return values * np.exp(rng.normal(0.0, rel, values.shape))


def _smooth(values: np.ndarray, width: int) -> np.ndarray:
    kernel = np.ones(width) / width
    padded = np.r_[np.full(width - 1, values[0]), values]
    return np.convolve(padded, kernel, mode="valid")


def _val_at(train_steps: np.ndarray, train_curve: np.ndarray, val_steps: np.ndarray) -> np.ndarray:
    return np.interp(val_steps, train_steps, train_curve)


def _accuracy_from_loss(loss: np.ndarray, best: float = 0.93) -> np.ndarray:
    return best * np.exp(-np.maximum(loss - loss.min() * 0.9, 0.0) * 0.35)


def _grad_norm(rng: np.random.Generator, loss: np.ndarray, scale: float) -> np.ndarray:
    """Gradient norm tracks the loss (larger far from a minimum) with lognormal minibatch scatter."""
    return _noisy(rng, scale * (0.35 + 0.65 * loss / loss[0]), 0.12)


def _layer_grads(rng: np.random.Generator, total: np.ndarray, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    shares = np.linspace(1.0, 0.45, len(names))  # later layers carry larger gradients in a healthy net
    shares = shares / np.sqrt(np.square(shares).sum())
    return {name: _noisy(rng, total * share, 0.05) for name, share in zip(names, shares)}


def _resources(rng, steps, step_time: float, data_time: float, util: float, mem_gb: float) -> dict[str, np.ndarray]:
    return {
        "step_time": _noisy(rng, np.full(steps.size, step_time), 0.04),
        "data_time": _noisy(rng, np.full(steps.size, data_time), 0.10),
        "gpu_util": np.clip(rng.normal(util, 2.5, steps.size), 0, 100),
        "gpu_mem": np.clip(mem_gb + rng.normal(0, 0.05, steps.size), 0, None),
    }


def _weights(rng: np.random.Generator, step: int, spread: float, n: int = 2000) -> np.ndarray:
    return rng.normal(0.0, spread * (1.0 + step / TOTAL_STEPS * 0.1), n)


# ---- the runs ----------------------------------------------------------------------------------------


def _hf_run(directory: Path, rng, seed: int, lr_peak: float = 3e-4) -> list[_RunWriter]:
    """HF Trainer style: train/loss, eval/loss, train/learning_rate, train/grad_norm, args text summary."""
    w = _RunWriter("pytorch", END_WALL_TIME - TOTAL_STEPS * 0.31, 0.31)
    steps = _steps()
    lr = _cosine_warmup_lr(steps, lr_peak, warmup=300)
    clean = _loss_from_lr(steps, lr, start=4.2, floor=1.45, speed=700)
    loss = _noisy(rng, clean, 0.035)
    w.scalars("train/loss", steps, loss)
    w.scalars("train/learning_rate", steps, lr)
    w.scalars("train/grad_norm", steps, _grad_norm(rng, clean, 2.2))
    w.scalars("train/epoch", steps, steps / EPOCH_STEPS)
    val_steps = _steps(every=EPOCH_STEPS)
    val = _noisy(rng, _val_at(steps, clean, val_steps) * 1.04, 0.006)
    w.scalars("eval/loss", val_steps, val)
    w.scalars("eval/accuracy", val_steps, _accuracy_from_loss(val, 0.89))
    args = {
        "learning_rate": lr_peak,
        "lr_scheduler_type": "cosine",
        "warmup_steps": 300,
        "seed": seed,
        "per_device_train_batch_size": 32,
        "weight_decay": 0.01,
        "max_grad_norm": 1.0,
    }
    w.text("args", 0, json.dumps(args, indent=2))
    return [w]


def bert_base_cosine(directory: Path, rng, seed: int) -> list[_RunWriter]:
    return _hf_run(directory, rng, seed)


def resnet50_step_decay(directory: Path, rng) -> list[_RunWriter]:
    """Plain PyTorch SummaryWriter: Loss/train, Loss/val, Accuracy/val, LR, grad norms per layer, timings."""
    w = _RunWriter("pytorch", END_WALL_TIME - TOTAL_STEPS * 0.42, 0.42)
    steps = _steps()
    lr = _step_decay_lr(steps, 0.1, (2000, 3000))
    clean = _loss_from_lr(steps, lr, start=6.9, floor=0.95, speed=500, lr_noise_floor=0.55)
    w.scalars("Loss/train", steps, _noisy(rng, clean, 0.04))
    w.scalars("LR", steps, lr)
    total = _grad_norm(rng, clean, 4.0)
    w.scalars("grad_norm/total", steps, total)
    for name, values in _layer_grads(rng, total, ("conv1", "layer1", "layer4", "fc")).items():
        w.scalars(f"grad_norm/{name}", steps, values)
    res = _resources(rng, steps, 0.42, 0.03, 96.0, 31.5)
    w.scalars("time/step", steps, res["step_time"])
    w.scalars("time/data", steps, res["data_time"])
    w.scalars("gpu/util", steps, res["gpu_util"])
    w.scalars("gpu/mem_gb", steps, res["gpu_mem"])
    val_steps = _steps(every=EPOCH_STEPS)
    val = _noisy(rng, _val_at(steps, clean, val_steps) * 1.08, 0.008)
    w.scalars("Loss/val", val_steps, val)
    w.scalars("Accuracy/val", val_steps, _accuracy_from_loss(val, 0.76))
    for step in range(0, TOTAL_STEPS + 1, 1000):
        w.histogram("weights/fc", step, _weights(rng, step, 0.05))
        w.histogram("weights/conv1", step, _weights(rng, step, 0.12))
    for step in range(0, TOTAL_STEPS + 1, 4 * HIST_EVERY):  # healthy ReLUs: about half the outputs are zero
        w.histogram("activations/layer4.relu", step, np.maximum(rng.standard_normal(2000) + 0.1, 0.0))
    w.hparams({"lr": 0.1, "optimizer": "sgd", "momentum": 0.9, "batch_size": 256, "schedule": "step"})
    return [w]


def gpt_small_lr3e_3_noclip(directory: Path, rng) -> list[_RunWriter]:
    """HF style; lr too high, no clipping: grad_norm explodes from 2500, loss follows, NaN from 2600 on."""
    w = _RunWriter("pytorch", END_WALL_TIME - TOTAL_STEPS * 0.35, 0.35)
    steps = _steps()
    lr = _cosine_warmup_lr(steps, 3e-3, warmup=100)
    clean = _loss_from_lr(steps, lr, start=10.8, floor=3.3, speed=500)
    loss = _noisy(rng, clean, 0.03)
    grad = _grad_norm(rng, clean, 1.6)
    blowup = steps >= 2500
    # Explosion: ×1.05 per step compounds to ×140 by step 2600.
    grad[blowup] = grad[blowup] * 1.05 ** (steps[blowup] - 2490)
    rising = (steps >= 2560) & (steps < 2600)
    loss[rising] = loss[rising] * 1.35 ** ((steps[rising] - 2550) / 10)
    loss[steps >= 2600] = np.nan
    grad[steps >= 2600] = np.inf
    grad[steps >= 2620] = np.nan
    w.scalars("train/loss", steps, loss)
    w.scalars("train/learning_rate", steps, lr)
    w.scalars("train/grad_norm", steps, grad)
    w.scalars("train/epoch", steps, steps / EPOCH_STEPS)
    val_steps = _steps(every=EPOCH_STEPS)
    val = _noisy(rng, _val_at(steps, clean, val_steps) * 1.03, 0.006)
    val[val_steps >= 2600] = np.nan
    w.scalars("eval/loss", val_steps, val)
    w.text("args", 0, json.dumps({"learning_rate": 3e-3, "warmup_steps": 100, "max_grad_norm": 0.0, "seed": 0}))
    # A callback logs the device and, every HIST_EVERY steps, per-layer gradient and activation histograms:
    # the blow-up starts in the last blocks and reaches the embedding a few hundred steps later.
    res = _resources(rng, steps, 0.35, 0.02, 97.0, 38.0)
    w.scalars("system/gpu_util", steps, res["gpu_util"])
    w.scalars("system/step_time", steps, res["step_time"])
    layers = ("transformer.wte", "transformer.h.0.attn", "transformer.h.11.mlp", "lm_head")
    for step in range(0, 2600, HIST_EVERY):  # the process stops logging histograms once they hold NaN
        at = int(np.searchsorted(steps, step))
        for depth, layer in enumerate(layers):
            # Deeper layers feel the explosion first: layer k's gradients lag the total by (3 - k) × 20 steps.
            lag = (len(layers) - 1 - depth) * 20
            scale = float(grad[max(at - lag // LOG_EVERY, 0)]) * (0.4 + 0.2 * depth) / 200
            w.histogram(f"gradients/{layer}.weight", step, rng.standard_normal(2000) * scale)
        hidden = rng.standard_normal(2000) * (1.0 + (grad[at] / grad[0] - 1.0) * 0.05 if step >= 2500 else 1.0)
        w.histogram("activations/transformer.h.11.mlp.gelu", step, hidden * 0.5 * (1 + np.tanh(0.8 * hidden)))
    return [w]


def _lightning_run(seconds_per_step: float) -> _RunWriter:
    return _RunWriter("pytorch", END_WALL_TIME - TOTAL_STEPS * seconds_per_step, seconds_per_step)


def vit_tiny_no_aug(directory: Path, rng) -> list[_RunWriter]:
    """Lightning style (train_loss, val_loss, val_acc, lr-AdamW, epoch); overfits from step 1500."""
    w = _lightning_run(0.22)
    steps = _steps()
    lr = _cosine_warmup_lr(steps, 1e-3, warmup=200)
    clean = _loss_from_lr(steps, lr, start=2.3, floor=0.02, speed=450)
    w.scalars("train_loss", steps, _noisy(rng, clean, 0.04))
    w.scalars("lr-AdamW", steps, lr)
    w.scalars("epoch", steps, np.floor(steps / EPOCH_STEPS))
    val_steps = _steps(every=EPOCH_STEPS)
    base = _val_at(steps, clean, val_steps) * 1.1 + 0.35
    # Memorisation: past step 1500 the generalisation gap widens linearly (+~55 % by the end).
    gap = np.where(val_steps > 1500, (val_steps - 1500) / 1000 * 0.17, 0.0)
    val = _noisy(rng, base + gap, 0.01)
    w.scalars("val_loss", val_steps, val)
    w.scalars("val_acc", val_steps, _accuracy_from_loss(val, 0.81))
    (directory / "hparams.yaml").parent.mkdir(parents=True, exist_ok=True)
    (directory / "hparams.yaml").write_text(
        "# written by the demo the way Lightning writes it\nlr: 0.001\nbatch_size: 128\naugment: false\n"
        "weight_decay: 0.0\nmodel: vit_tiny_patch16_224\n"
    )
    return [w]


def lstm_lm_grad_spikes(directory: Path, rng) -> list[_RunWriter]:
    """PyTorch style; three gradient spikes (×40) with loss bumps that recover."""
    w = _RunWriter("pytorch", END_WALL_TIME - TOTAL_STEPS * 0.18, 0.18)
    steps = _steps()
    lr = _step_decay_lr(steps, 1.0, (3000,), gamma=0.25)
    clean = _loss_from_lr(steps, lr, start=6.5, floor=4.3, speed=600)
    loss = _noisy(rng, clean, 0.02)
    total = _grad_norm(rng, clean, 0.9)
    for spike in (1200, 2100, 3300):
        at = np.searchsorted(steps, spike)
        total[at] *= 40.0
        total[at + 1] *= 6.0
        # The loss jumps the step after the bad update and recovers over ~3 logged points.
        loss[at] *= 2.5
        loss[at + 1 : at + 4] *= np.array([1.5, 1.15, 1.04])
    w.scalars("Loss/train", steps, loss)
    w.scalars("LR", steps, lr)
    w.scalars("grad_norm/total", steps, total)
    for name, values in _layer_grads(rng, total, ("embedding", "lstm.weight_hh_l0", "decoder")).items():
        w.scalars(f"grad_norm/{name}", steps, values)
    val_steps = _steps(every=EPOCH_STEPS)
    val = _noisy(rng, _val_at(steps, clean, val_steps) * 1.02, 0.004)
    w.scalars("Loss/val", val_steps, val)
    w.scalars("Perplexity/val", val_steps, np.exp(val))
    (directory / "args.json").parent.mkdir(parents=True, exist_ok=True)
    (directory / "args.json").write_text(json.dumps({"lr": 1.0, "clip": 0.0, "bptt": 35, "dropout": 0.2}))
    return [w]


def resnet18_lr1e_5(directory: Path, rng) -> list[_RunWriter]:
    """Lightning style; Adam at lr 1e-5 crawls: 8 % lower after 4000 steps."""
    w = _lightning_run(0.2)
    steps = _steps()
    lr = np.full(steps.size, 1e-5)
    clean = 2.30 - 0.19 * (steps / TOTAL_STEPS) ** 0.9
    w.scalars("train_loss", steps, _noisy(rng, clean, 0.02))
    w.scalars("lr-Adam", steps, lr)
    w.scalars("epoch", steps, np.floor(steps / EPOCH_STEPS))
    val_steps = _steps(every=EPOCH_STEPS)
    val = _noisy(rng, _val_at(steps, clean, val_steps) * 1.01, 0.004)
    w.scalars("val_loss", val_steps, val)
    w.scalars("val_acc", val_steps, np.clip(0.1 + (2.30 - val) * 0.9, 0, 1))
    (directory / "hparams.yaml").parent.mkdir(parents=True, exist_ok=True)
    (directory / "hparams.yaml").write_text("lr: 1.0e-05\nbatch_size: 128\noptimizer: adam\nmodel: resnet18\n")
    return [w]


def bert_base_resumed(directory: Path, rng) -> list[_RunWriter]:
    """HF style; the job died at step 2000 and resumed from the step-1500 checkpoint into a second file."""
    steps = _steps()
    lr = _cosine_warmup_lr(steps, 3e-4, warmup=300)
    clean = _loss_from_lr(steps, lr, start=4.2, floor=1.45, speed=700)
    start = END_WALL_TIME - (TOTAL_STEPS + 500) * 0.31 - 1800  # 500 steps redone, 30 min lost to the crash
    first = _RunWriter("pytorch", start, 0.31)
    before = steps <= 2000
    first.scalars("train/loss", steps[before], _noisy(rng, clean[before], 0.035))
    first.scalars("train/learning_rate", steps[before], lr[before])
    first.scalars("train/grad_norm", steps[before], _grad_norm(rng, clean, 2.2)[before])
    val_steps = _steps(every=EPOCH_STEPS)
    val = _noisy(rng, _val_at(steps, clean, val_steps) * 1.04, 0.006)
    first.scalars("eval/loss", val_steps[val_steps <= 2000], val[val_steps <= 2000])
    first.text("args", 0, json.dumps({"learning_rate": 3e-4, "warmup_steps": 300, "seed": 0}))
    # The resumed process starts its own file; its clock starts after the crash.
    resumed_start = first.wall(2000) + 1800 - 1500 * 0.31
    second = _RunWriter("pytorch", resumed_start, 0.31)
    after = steps >= 1500
    second.scalars("train/loss", steps[after], _noisy(rng, clean[after], 0.035))
    second.scalars("train/learning_rate", steps[after], lr[after])
    second.scalars("train/grad_norm", steps[after], _grad_norm(rng, clean, 2.2)[after])
    second.scalars("eval/loss", val_steps[val_steps >= 1500], val[val_steps >= 1500])
    return [first, second]


def unet_no_shuffle(directory: Path, rng) -> list[_RunWriter]:
    """PyTorch style; no shuffling and one bad shard: a loss spike 120 steps into every epoch."""
    w = _RunWriter("pytorch", END_WALL_TIME - TOTAL_STEPS * 0.5, 0.5)
    steps = _steps()
    lr = _cosine_warmup_lr(steps, 2e-4, warmup=100)
    clean = _loss_from_lr(steps, lr, start=0.9, floor=0.12, speed=600)
    loss = _noisy(rng, clean, 0.03)
    in_epoch = steps % EPOCH_STEPS
    loss[in_epoch == 120] *= 2.2
    w.scalars("Loss/train", steps, loss)
    w.scalars("LR", steps, lr)
    total = _grad_norm(rng, clean, 1.5)
    total[in_epoch == 120] *= 3.0
    w.scalars("grad_norm/total", steps, total)
    val_steps = _steps(every=EPOCH_STEPS)
    val = _noisy(rng, _val_at(steps, clean, val_steps) * 1.05, 0.006)
    w.scalars("Loss/val", val_steps, val)
    w.scalars("Dice/val", val_steps, np.clip(1.0 - val * 0.9, 0, 1))
    w.hparams({"lr": 2e-4, "shuffle": False, "batch_size": 8, "optimizer": "adamw"})
    return [w]


def effnet_b0_workers0(directory: Path, rng) -> list[_RunWriter]:
    """timm-style script with nvitop-like resource tags; num_workers=0 starves the GPU."""
    w = _RunWriter("pytorch", END_WALL_TIME - TOTAL_STEPS * 0.61, 0.61)
    steps = _steps()
    lr = _cosine_warmup_lr(steps, 5e-3, warmup=200)
    clean = _loss_from_lr(steps, lr, start=6.9, floor=1.6, speed=600)
    w.scalars("train/loss", steps, _noisy(rng, clean, 0.035))
    w.scalars("train/lr", steps, lr)
    res = _resources(rng, steps, 0.61, 0.49, 23.0, 9.8)
    w.scalars("perf/step_time", steps, res["step_time"])
    w.scalars("perf/data_time", steps, res["data_time"])
    w.scalars("perf/samples_per_sec", steps, 256 / res["step_time"])
    w.scalars("gpu/utilization", steps, res["gpu_util"])
    w.scalars("gpu/memory_used_gb", steps, res["gpu_mem"])
    val_steps = _steps(every=EPOCH_STEPS)
    val = _noisy(rng, _val_at(steps, clean, val_steps) * 1.06, 0.006)
    w.scalars("eval/loss", val_steps, val)
    w.scalars("eval/top1", val_steps, _accuracy_from_loss(val, 0.77) * 100)
    w.hparams({"lr": 5e-3, "workers": 0, "batch_size": 256, "pin_memory": False})
    return [w]


def keras_mnist_cnn(directory: Path, rng) -> dict[str, list[_RunWriter]]:
    """Keras/TF2: tensor scalars epoch_loss/epoch_accuracy in train/ and validation/ sibling runs."""
    epochs = np.arange(0, 40, dtype=np.int64)
    seconds_per_epoch = 14.0
    start = END_WALL_TIME - 40 * seconds_per_epoch
    train = _RunWriter("tf2", start, seconds_per_epoch)
    validation = _RunWriter("tf2", start + 2.0, seconds_per_epoch)
    lr = np.where(epochs < 25, 1e-3, 1e-4)
    loss = 0.025 + 0.35 * np.exp(-epochs / 4.0) - np.where(epochs >= 25, 0.004, 0.0)
    train.scalars("epoch_loss", epochs, _noisy(rng, loss, 0.02))
    train.scalars("epoch_accuracy", epochs, np.clip(1.0 - loss * 0.28, 0, 1))
    train.scalars("epoch_learning_rate", epochs, lr)
    val_loss = _noisy(rng, loss * 1.08 + 0.01, 0.015)
    validation.scalars("epoch_loss", epochs, val_loss)
    validation.scalars("epoch_accuracy", epochs, np.clip(1.0 - val_loss * 0.3, 0, 1))
    for epoch in range(0, 40, 10):
        train.histogram("conv2d/kernel_0", epoch, _weights(rng, epoch * 100, 0.08))
    return {"train": [train], "validation": [validation]}


#: (run name, builder(run_dir, rng)). A run's index is its random stream, so keep the order.
def _builders() -> list[tuple[str, Callable[..., Any]]]:
    return [
        ("bert_base_cosine_seed0", lambda d, r: bert_base_cosine(d, r, 0)),
        ("bert_base_cosine_seed1", lambda d, r: bert_base_cosine(d, r, 1)),
        ("resnet50_step_decay", resnet50_step_decay),
        ("gpt_small_lr3e-3_noclip", gpt_small_lr3e_3_noclip),
        ("vit_tiny_no_aug", vit_tiny_no_aug),
        ("lstm_lm_grad_spikes", lstm_lm_grad_spikes),
        ("resnet18_lr1e-5", resnet18_lr1e_5),
        ("bert_base_resumed", bert_base_resumed),
        ("unet_no_shuffle", unet_no_shuffle),
        ("effnet_b0_workers0", effnet_b0_workers0),
        ("keras_mnist_cnn", keras_mnist_cnn),
    ]


# ---- writing the logdir ------------------------------------------------------------------------------


class DemoDirError(Exception):
    """The target directory cannot take a demo (not empty and not a previous demo, or not writable)."""


@dataclass(frozen=True)
class DemoLogdir:
    path: Path
    files: tuple[Path, ...]  # every file written, event files and config files
    runs: tuple[str, ...]  # run names (paths relative to `path`) holding event files
    events: int  # events written, file_version records excluded


def default_demo_dir(cwd: Path | None = None) -> Path:
    """`./tbtriage-demo`, or a fresh temporary directory when the current one is not writable."""
    cwd = Path.cwd() if cwd is None else cwd
    if os.access(cwd, os.W_OK | os.X_OK):
        return cwd / DEFAULT_DIR_NAME
    return Path(tempfile.mkdtemp(prefix="tbtriage-demo-"))


def _clear_previous_demo(path: Path) -> None:
    """Remove exactly the files a previous demo listed in its marker, then the directories left empty."""
    try:
        listed = json.loads((path / MARKER).read_text()).get("files", [])
    except (OSError, ValueError, AttributeError) as exc:
        raise DemoDirError(f"{path}: unreadable demo marker {MARKER} ({exc})") from exc
    root = path.resolve()
    directories: set[Path] = set()
    for relative in listed:
        target = (path / str(relative)).resolve()
        if root not in target.parents or not target.is_file():
            continue  # never follow a marker outside the demo directory
        target.unlink()
        directories.update(p for p in target.parents if root in p.parents)
    for directory in sorted(directories, key=lambda p: len(p.parts), reverse=True):
        try:
            directory.rmdir()
        except OSError:
            pass  # not empty: something the user put there stays
    (path / MARKER).unlink()


def prepare_demo_dir(path: Path) -> None:
    """Make `path` ready: create it, or clear a previous demo; refuse a non-empty directory that is not one."""
    if path.exists() and not path.is_dir():
        raise DemoDirError(f"{path}: exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        if not (path / MARKER).is_file():
            raise DemoDirError(f"{path}: directory is not empty and holds no previous demo; choose another DIR")
        _clear_previous_demo(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DemoDirError(f"{path}: cannot create directory ({exc.strerror})") from exc
    if not os.access(path, os.W_OK | os.X_OK):
        raise DemoDirError(f"{path}: directory is not writable")


def write_demo(path: str | os.PathLike[str]) -> DemoLogdir:
    """Write the demo logdir at `path` (see `prepare_demo_dir` for what an existing directory may hold)."""
    root = Path(path)
    prepare_demo_dir(root)
    before = {p for p in root.rglob("*") if p.is_file()}
    runs: list[str] = []
    events = 0
    for index, (name, build) in enumerate(_builders()):
        rng = np.random.default_rng([SEED, index])
        run_dir = root / name
        built = build(run_dir, rng)
        subruns = built if isinstance(built, dict) else {"": built}
        for sub, writers in subruns.items():
            target = run_dir / sub if sub else run_dir
            for file_index, writer in enumerate(writers):
                writer.write(target, index=file_index)
                events += len(writer.events)
            runs.append(f"{name}/{sub}" if sub else name)
    written = tuple(sorted(p for p in root.rglob("*") if p.is_file() and p not in before))
    manifest = {
        "tool": "tbtriage demo",
        "seed": SEED,
        "files": [p.relative_to(root).as_posix() for p in written],
    }
    (root / MARKER).write_text(json.dumps(manifest, indent=1) + "\n")
    return DemoLogdir(root, written, tuple(runs), events)
