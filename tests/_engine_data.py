"""Labelled training runs for the engine's tests: pathologies planted at known steps, and healthy runs.

Every scenario builds one or more runs (tag -> steps, values) from a seeded generator, in the tag
conventions of a real framework, with the noise real training has (lognormal minibatch scatter,
heavy tails, correlated logging averages), and says which findings the engine must report and where
they start (`Expected`). Healthy scenarios expect nothing at warning or critical. The same scenario can
be turned into in-memory `Run`s (fast, for detector tests) or written as event files: tensorboardX's
SummaryWriter for PyTorch-style runs, tensorboard's protobuf classes (tensor scalars) for TF2/Keras runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tbtriage.analysis.datamodel import Note, Run, Series

WALL0 = 1_717_000_000.0


@dataclass(frozen=True)
class Expected:
    """A finding the engine must report: `kind` on `run`, starting at `step` (None: the whole run)."""

    kind: str
    step: int | None
    run: str = "."  # the run's name relative to the scenario's directory ("." = the scenario itself)
    tolerance: int | None = None  # default: 2 % of the run or one validation interval, whichever is larger
    severity: str = "warning"  # the least severe the finding may be


@dataclass
class RunSpec:
    """One run as a training script would have logged it."""

    scalars: dict[str, tuple[np.ndarray, np.ndarray]]
    seconds_per_step: float = 0.3
    start_wall: float = WALL0
    tf2: bool = False  # tensor scalars (Keras / tf.summary) instead of simple_value
    restart_from: int | None = None  # resumed from this step after crashing at the run's `crash_at`
    crash_at: int | None = None
    corrupt: bool = False  # one byte flipped two thirds into the file (a bad CRC: a damaged copy or disk)
    stop_at: int | None = None  # the process hung: nothing written after this step
    hparams: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    name: str
    make: Callable[[np.random.Generator], dict[str, RunSpec]]
    expected: tuple[Expected, ...] = ()
    eval_interval: int | None = None
    now_offset: float | None = None  # analyse at (newest event + this many seconds): a live logdir

    @property
    def healthy(self) -> bool:
        return not self.expected


# ---- curve shapes -------------------------------------------------------------------------------------


def steps_every(total: int, every: int, first: int | None = None) -> np.ndarray:
    return np.arange(every if first is None else first, total + 1, every, dtype=np.int64)


def lr_warmup_cosine(steps, peak, warmup, total, floor=0.0):
    warm = peak * np.minimum(steps / max(warmup, 1), 1.0)
    progress = np.clip((steps - warmup) / max(total - warmup, 1), 0.0, 1.0)
    return np.where(steps < warmup, warm, floor + (peak - floor) * 0.5 * (1.0 + np.cos(np.pi * progress)))


def lr_step(steps, base, milestones, gamma=0.1):
    return base * gamma ** np.searchsorted(np.asarray(milestones), steps, side="right")


def lr_one_cycle(steps, peak, total, up=0.3):
    rise = steps < up * total
    frac_up = steps / (up * total)
    frac_down = (steps - up * total) / ((1 - up) * total)
    return np.where(
        rise, peak * (0.04 + 0.96 * frac_up), peak * (0.5 * (1 + np.cos(np.pi * np.clip(frac_down, 0, 1)))) + 1e-7
    )


def lr_sgdr(steps, peak, cycle):
    return peak * 0.5 * (1 + np.cos(np.pi * (steps % cycle) / cycle)) + peak * 1e-3


def loss_from_lr(steps, lr, start, floor, speed, lr_floor=0.0):
    """Loss driven by accumulated lr (slow in warmup, flattening as lr decays); `lr_floor` makes it hover
    above its minimum in proportion to lr, which is why real losses drop at each lr decay."""
    dt = np.diff(np.r_[0, steps])
    progress = np.cumsum(lr * dt) / (lr.max() * speed)
    return floor + (start - floor) * np.exp(-progress) + lr_floor * lr / lr.max()


def scatter(rng, values, rel, dist="lognormal", df=4):
    """Minibatch noise in proportion to the value (lognormal), or heavy-tailed (Student t)."""
    if dist == "lognormal":
        return values * np.exp(rng.normal(0.0, rel, values.shape))
    if dist == "t":
        return values * np.exp(rel * rng.standard_t(df, values.shape) / np.sqrt(df / (df - 2)))
    return values + rel * rng.normal(0.0, 1.0, values.shape)


def grad_norm_from(rng, loss, scale, rel=0.15):
    return scatter(rng, scale * (0.3 + 0.7 * loss / loss[0]), rel)


def accuracy_from(loss, best=0.92):
    return best * np.exp(-np.maximum(loss - loss.min() * 0.9, 0.0) * 0.4)


def val_at(train_steps, clean, val_steps, factor=1.05, rng=None, rel=0.01):
    v = np.interp(val_steps, train_steps, clean) * factor
    return v if rng is None else scatter(rng, v, rel)


# ---- the pathologies ------------------------------------------------------------------------------------

T = 3000  # steps of a typical scenario
EVERY = 10
EPOCH = 150


def _hf(rng, total=T, every=EVERY, peak=3e-4, warmup=150, start=4.0, floor=1.4, speed=600, rel=0.04):
    steps = steps_every(total, every)
    lr = lr_warmup_cosine(steps, peak, warmup, total)
    clean = loss_from_lr(steps, lr, start, floor, speed)
    return steps, lr, clean, scatter(rng, clean, rel)


def divergence_nan(rng):
    steps, lr, clean, loss = _hf(rng)
    grad = grad_norm_from(rng, clean, 2.0)
    loss[steps >= 1800] = np.nan
    grad[steps >= 1800] = np.nan
    val_steps = steps_every(T, EPOCH)
    val = val_at(steps, clean, val_steps, 1.04, rng, 0.006)
    val[val_steps >= 1800] = np.nan
    return {
        ".": RunSpec(
            {
                "train/loss": (steps, loss),
                "train/learning_rate": (steps, lr),
                "train/grad_norm": (steps, grad),
                "eval/loss": (val_steps, val),
            }
        )
    }


def divergence_blowup(rng):
    steps = steps_every(T, EVERY)
    lr = np.full(steps.size, 0.05)
    clean = loss_from_lr(steps, lr, 2.3, 0.35, 500)
    blow = steps >= 2100
    clean[blow] = clean[blow] * np.exp(np.minimum((steps[blow] - 2100) / 120.0, 2.2))
    loss = scatter(rng, clean, 0.05)
    return {".": RunSpec({"Loss/train": (steps, loss), "LR": (steps, lr)})}


def loss_spikes(rng):
    steps = steps_every(T, EVERY)
    lr = lr_step(steps, 0.1, (2000,), 0.2)
    clean = loss_from_lr(steps, lr, 2.4, 0.5, 400, lr_floor=0.2)
    loss = scatter(rng, clean, 0.04)
    for at in (900, 1650, 2450):
        i = int(np.searchsorted(steps, at))
        loss[i] *= 3.2
        loss[i + 1] *= 1.6
    val_steps = steps_every(T, EPOCH)
    return {
        ".": RunSpec(
            {
                "train_loss_step": (steps, loss),
                "lr-SGD": (steps, lr),
                "val_loss": (val_steps, val_at(steps, clean, val_steps, 1.05, rng, 0.008)),
                "epoch": (steps, np.floor(steps / EPOCH)),
            }
        )
    }


def periodic(rng):
    steps = steps_every(T, EVERY)
    lr = lr_warmup_cosine(steps, 1e-3, 100, T)
    clean = loss_from_lr(steps, lr, 1.2, 0.2, 500)
    loss = scatter(rng, clean, 0.03)
    bad = steps % 300 == 70
    loss[bad] *= 1.9
    val_steps = steps_every(T, 300)
    return {
        ".": RunSpec(
            {
                "Loss/train": (steps, loss),
                "LR": (steps, lr),
                "Loss/val": (val_steps, val_at(steps, clean, val_steps, 1.05, rng, 0.006)),
            }
        )
    }


def oscillation(rng):
    steps = steps_every(T, EVERY)
    lr = np.where(steps < 900, 0.01, 0.08)
    clean = loss_from_lr(steps, np.full(steps.size, 0.01), 2.0, 0.6, 400)
    swing = np.where(steps >= 900, 0.45 * clean * np.sin(2 * np.pi * (steps - 900) / 240.0), 0.0)
    loss = scatter(rng, clean + swing, 0.04)
    return {".": RunSpec({"train/loss": (steps, loss), "train/lr": (steps, lr)})}


def bouncing(rng):
    steps = steps_every(2000, 5)
    clean = loss_from_lr(steps, np.full(steps.size, 1.0), 1.5, 0.5, 600)
    sign = np.where(np.arange(steps.size) % 2 == 0, 1.0, -1.0)
    bounce = np.where(steps >= 600, 0.35 * clean * sign, 0.0)
    loss = scatter(rng, clean + bounce, 0.03)
    return {".": RunSpec({"loss": (steps, loss), "lr": (steps, np.where(steps < 600, 1e-3, 2e-2))})}


def slow_convergence(rng):
    steps = steps_every(T, EVERY)
    lr = np.full(steps.size, 1e-6)
    clean = 2.30 - 0.16 * (steps / T)
    val_steps = steps_every(T, EPOCH)
    return {
        ".": RunSpec(
            {
                "train_loss": (steps, scatter(rng, clean, 0.02)),
                "lr-Adam": (steps, lr),
                "val_loss": (val_steps, val_at(steps, clean, val_steps, 1.01, rng, 0.004)),
            }
        )
    }


def no_learning(rng):
    steps = steps_every(2000, 10)
    clean = np.full(steps.size, 0.693)
    return {
        ".": RunSpec(
            {
                "train/loss": (steps, scatter(rng, clean, 0.03)),
                "train/learning_rate": (steps, np.full(steps.size, 2e-5)),
            }
        )
    }


def plateau_start(rng):
    steps = steps_every(T, EVERY)
    lr = np.full(steps.size, 3e-4)
    clean = np.where(steps < 900, np.log(10.0), 0.3 + (np.log(10.0) - 0.3) * np.exp(-(steps - 900) / 300.0))
    return {".": RunSpec({"train/loss": (steps, scatter(rng, clean, 0.02)), "train/lr": (steps, lr)})}


def overfitting(rng):
    steps = steps_every(T, EVERY)
    lr = lr_warmup_cosine(steps, 1e-3, 100, T)
    clean = loss_from_lr(steps, lr, 2.3, 0.02, 350)
    val_steps = steps_every(T, EPOCH)
    base = np.interp(val_steps, steps, clean) * 1.1 + 0.35
    gap = np.where(val_steps > 1200, (val_steps - 1200) / 1000.0 * 0.2, 0.0)
    val = scatter(rng, base + gap, 0.01)
    return {
        ".": RunSpec(
            {
                "train_loss": (steps, scatter(rng, clean, 0.05)),
                "val_loss": (val_steps, val),
                "val_acc": (val_steps, accuracy_from(base + gap, 0.8)),
                "lr-AdamW": (steps, lr),
            }
        )
    }


def keras_overfit(rng):
    epochs = np.arange(0, 40, dtype=np.int64)
    loss = 0.03 + 0.5 * np.exp(-epochs / 5.0)
    val = 0.12 + 0.45 * np.exp(-epochs / 5.0) + np.where(epochs > 14, (epochs - 14) * 0.012, 0.0)
    return {
        "train": RunSpec(
            {
                "epoch_loss": (epochs, scatter(rng, loss, 0.02)),
                "epoch_accuracy": (epochs, np.clip(1 - loss * 0.4, 0, 1)),
            },
            12.0,
            tf2=True,
        ),
        "validation": RunSpec(
            {"epoch_loss": (epochs, scatter(rng, val, 0.01)), "epoch_accuracy": (epochs, np.clip(1 - val * 0.4, 0, 1))},
            12.0,
            WALL0 + 3,
            tf2=True,
        ),
    }


def exploding(rng):
    steps, lr, clean, loss = _hf(rng, peak=1e-3)
    grad = grad_norm_from(rng, clean, 1.5)
    for at in (1400, 2300):
        i = int(np.searchsorted(steps, at))
        grad[i] *= 60.0
        grad[i + 1] *= 5.0
        loss[i + 1] *= 1.3
    return {
        ".": RunSpec(
            {"train/loss": (steps, loss), "train/learning_rate": (steps, lr), "train/grad_norm": (steps, grad)}
        )
    }


def exploding_growth(rng):
    steps = steps_every(2000, 5)
    lr = np.full(steps.size, 3e-3)
    clean = loss_from_lr(steps, lr, 5.0, 2.0, 300)
    grad = grad_norm_from(rng, clean, 1.0, 0.1)
    rising = steps >= 1500
    grad[rising] *= 1.02 ** (steps[rising] - 1500)
    loss = scatter(rng, clean, 0.03)
    loss[steps >= 1700] = loss[steps >= 1700] * np.exp((steps[steps >= 1700] - 1700) / 100.0)
    return {".": RunSpec({"loss": (steps, loss), "grad_norm": (steps, grad), "lr": (steps, lr)})}


def vanishing(rng):
    steps = steps_every(T, EVERY)
    lr = np.full(steps.size, 0.01)
    clean = 2.30 - 0.5 * (1 - np.exp(-steps / 300.0))
    out = {"train/loss": (steps, scatter(rng, clean, 0.02)), "lr": (steps, lr)}
    for name, scale in (("layer4.weight", 2e-2), ("layer3.weight", 1.5e-2), ("fc.weight", 3e-2)):
        out[f"grad_norm/{name}"] = (steps, scatter(rng, np.full(steps.size, scale), 0.1))
    # The first layer's gradient decays ×1e6 over the run: it crosses 1e-3 of the others at step 1500.
    early = 2e-2 * np.exp(-np.log(1e6) * steps / T)
    out["grad_norm/conv1.weight"] = (steps, scatter(rng, early, 0.1))
    return {".": RunSpec(out)}


def dead_relu(rng):
    steps = steps_every(T, 20)
    lr = np.full(steps.size, 0.05)
    clean = loss_from_lr(steps, lr, 2.3, 0.8, 500)
    out = {"train/loss": (steps, scatter(rng, clean, 0.03)), "lr": (steps, lr)}
    for name, dies in (("relu1", None), ("relu2", 1600), ("relu3", 1600)):
        frac = 0.5 + rng.normal(0, 0.01, steps.size)
        if dies:
            frac = np.where(steps >= dies, 0.93 + rng.normal(0, 0.005, steps.size), frac)
        out[f"activations/{name}_zero_frac"] = (steps, np.clip(frac, 0, 1))
    return {".": RunSpec(out)}


def weight_growth(rng):
    steps = steps_every(T, 20)
    lr = np.full(steps.size, 1e-3)
    clean = loss_from_lr(steps, lr, 2.0, 0.1, 400)
    norm = 20.0 + 4.0 * np.sqrt(steps / T)
    grow = steps >= 2000
    norm[grow] = norm[grow] * np.exp((steps[grow] - 2000) / 450.0)
    return {
        ".": RunSpec(
            {
                "train/loss": (steps, scatter(rng, clean, 0.03)),
                "lr": (steps, lr),
                "weight_norm/fc": (steps, scatter(rng, norm, 0.005)),
                "weight_norm/conv1": (steps, scatter(rng, 8.0 + 0 * norm, 0.005)),
            }
        )
    }


def warmup_missing(rng):
    steps = steps_every(T, 5)
    lr = lr_warmup_cosine(steps, 3e-3, 0, T)
    clean = loss_from_lr(steps, lr, 7.0, 2.5, 500)
    bump = np.exp(-0.5 * ((steps - 140) / 40.0) ** 2) * 5.0
    loss = scatter(rng, clean + bump * (steps < 300), 0.03)
    return {".": RunSpec({"train/loss": (steps, loss), "train/learning_rate": (steps, lr)})}


def bottleneck(rng):
    steps = steps_every(T, EVERY)
    lr = lr_warmup_cosine(steps, 5e-3, 150, T)
    clean = loss_from_lr(steps, lr, 6.9, 1.6, 500)
    step_time = scatter(rng, np.full(steps.size, 0.5), 0.04)
    data_time = scatter(rng, np.full(steps.size, 0.36), 0.08)
    util = np.clip(rng.normal(28, 4, steps.size), 0, 100)
    return {
        ".": RunSpec(
            {
                "train/loss": (steps, scatter(rng, clean, 0.03)),
                "train/lr": (steps, lr),
                "data_time": (steps, data_time),
                "time": (steps, step_time),
                "resources/gpu:0/gpu_utilization (%)/mean": (steps, util),
            },
            0.5,
        )
    }


def bottleneck_late(rng):
    steps = steps_every(T, EVERY)
    lr = lr_warmup_cosine(steps, 5e-3, 150, T)
    clean = loss_from_lr(steps, lr, 6.9, 1.6, 500)
    data_time = scatter(rng, np.where(steps < 1800, 0.02, 0.6), 0.08)
    step_time = scatter(rng, 0.3 + data_time, 0.02)
    return {
        ".": RunSpec(
            {
                "train/loss": (steps, scatter(rng, clean, 0.03)),
                "train/lr": (steps, lr),
                "perf/data_time": (steps, data_time),
                "perf/step_time": (steps, step_time),
            }
        )
    }


def task_imbalance(rng):
    steps = steps_every(T, 20)
    lr = lr_warmup_cosine(steps, 0.02, 100, T)
    cls = loss_from_lr(steps, lr, 9.0, 2.5, 300)
    box = np.full(steps.size, 0.09)
    mask = loss_from_lr(steps, lr, 0.6, 0.2, 300) * 0.0 + 0.07
    total = cls + box + mask
    return {
        ".": RunSpec(
            {
                "total_loss": (steps, scatter(rng, total, 0.03)),
                "loss_cls": (steps, scatter(rng, cls, 0.03)),
                "loss_box_reg": (steps, scatter(rng, box, 0.02)),
                "loss_mask": (steps, scatter(rng, mask, 0.02)),
                "lr": (steps, lr),
            }
        )
    }


def amp_collapse(rng):
    steps = steps_every(T, EVERY)
    lr = lr_warmup_cosine(steps, 2e-4, 100, T)
    clean = loss_from_lr(steps, lr, 3.0, 1.0, 500)
    octave = np.clip(16 - steps / 20.0, 12, 16) + (steps // 400) % 2
    collapse = steps >= 2000
    octave = np.where(collapse, 12 - (steps - 2000) / 40.0, octave)
    scale = 2.0 ** np.round(octave)
    return {
        ".": RunSpec(
            {"train/loss": (steps, scatter(rng, clean, 0.03)), "lr": (steps, lr), "loss_scale": (steps, scale)}
        )
    }


def lr_blip(rng):
    steps = steps_every(T, EVERY)
    lr = lr_warmup_cosine(steps, 3e-4, 200, T)
    i = int(np.searchsorted(steps, 1700))
    lr[i : i + 2] = 3e-2
    clean = loss_from_lr(steps, lr_warmup_cosine(steps, 3e-4, 200, T), 3.0, 1.2, 500)
    return {".": RunSpec({"train/loss": (steps, scatter(rng, clean, 0.03)), "train/learning_rate": (steps, lr)})}


def lr_dead_tail(rng):
    steps = steps_every(T, EVERY)
    lr = lr_warmup_cosine(steps, 1e-3, 100, 1900)
    lr[steps >= 1900] = 0.0
    clean = loss_from_lr(steps, np.maximum(lr, 1e-9), 3.0, 1.2, 500)
    return {".": RunSpec({"train/loss": (steps, scatter(rng, clean, 0.03)), "train/lr": (steps, lr)})}


def restarted(rng):
    steps, lr, clean, loss = _hf(rng)
    return {
        ".": RunSpec(
            {"train/loss": (steps, loss), "train/learning_rate": (steps, lr)}, crash_at=2000, restart_from=1500
        )
    }


def corrupted(rng):
    steps, lr, clean, loss = _hf(rng)
    return {".": RunSpec({"train/loss": (steps, loss), "train/learning_rate": (steps, lr)}, corrupt=True)}


def stalled(rng):
    out = {}
    for i, name in enumerate(("seed0", "seed1", "seed2")):
        steps, lr, clean, loss = _hf(rng)
        spec = RunSpec({"train/loss": (steps, loss), "train/learning_rate": (steps, lr)}, 4.0, WALL0 + 5 * i)
        if name == "seed1":
            spec.stop_at = 1200
        out[name] = spec
    return out


# ---- healthy runs of many shapes ------------------------------------------------------------------------


def healthy_noisy(rng):
    steps = steps_every(2500, 5)
    lr = np.full(steps.size, 0.01)
    clean = loss_from_lr(steps, lr, 3.0, 0.9, 500)
    val_steps = steps_every(2500, 250)
    return {
        ".": RunSpec(
            {
                "loss": (steps, scatter(rng, clean, 0.15)),
                "lr": (steps, lr),
                "val_loss": (val_steps, val_at(steps, clean, val_steps, 1.05, rng, 0.02)),
                "val_acc": (val_steps, accuracy_from(val_at(steps, clean, val_steps), 0.7)),
            }
        )
    }


def healthy_hf_cosine(rng):
    steps, lr, clean, loss = _hf(rng, total=4000, peak=5e-5, warmup=400, start=3.2, floor=0.9, speed=900)
    val_steps = steps_every(4000, 500)
    val = val_at(steps, clean, val_steps, 1.06, rng, 0.005)
    return {
        ".": RunSpec(
            {
                "train/loss": (steps, loss),
                "train/learning_rate": (steps, lr),
                "train/grad_norm": (steps, grad_norm_from(rng, clean, 3.0, 0.2)),
                "train/epoch": (steps, steps / 1000.0),
                "eval/loss": (val_steps, val),
                "eval/accuracy": (val_steps, accuracy_from(val, 0.88)),
            }
        )
    }


def healthy_step_decay(rng):
    steps = steps_every(6000, 20)
    lr = lr_step(steps, 0.1, (3000, 4500))
    clean = loss_from_lr(steps, lr, 6.9, 0.9, 450, lr_floor=0.6)
    grad = grad_norm_from(rng, clean, 4.0)
    val_steps = steps_every(6000, 300)
    val = val_at(steps, clean, val_steps, 1.1, rng, 0.008)
    out = {
        "Loss/train": (steps, scatter(rng, clean, 0.05)),
        "LR": (steps, lr),
        "grad_norm/total": (steps, grad),
        "Loss/val": (val_steps, val),
        "Accuracy/val": (val_steps, accuracy_from(val, 0.76)),
        "time/step": (steps, scatter(rng, np.full(steps.size, 0.4), 0.05)),
        "time/data": (steps, scatter(rng, np.full(steps.size, 0.03), 0.2)),
        "gpu/util": (steps, np.clip(rng.normal(94, 3, steps.size), 0, 100)),
    }
    for name, share in (("conv1", 0.3), ("fc", 0.8)):
        out[f"grad_norm/{name}"] = (steps, scatter(rng, grad * share, 0.05))
    return {".": RunSpec(out, 0.4)}


def healthy_short(rng):
    steps = np.arange(0, 12, dtype=np.int64) * 50
    clean = 2.0 * np.exp(-steps / 300.0) + 0.5
    return {
        ".": RunSpec(
            {
                "train/loss": (steps, scatter(rng, clean, 0.05)),
                "train/learning_rate": (steps, np.full(steps.size, 1e-3)),
            }
        )
    }


def healthy_few_points(rng):
    epochs = np.arange(1, 6, dtype=np.int64)
    return {
        ".": RunSpec(
            {
                "val_loss": (epochs, np.array([1.2, 0.9, 0.95, 0.8, 0.85]) * np.exp(rng.normal(0, 0.01, 5))),
                "val_acc": (epochs, np.array([0.6, 0.7, 0.68, 0.74, 0.73])),
            }
        )
    }


def healthy_accuracy_only(rng):
    steps = steps_every(3000, 30)
    acc = 0.95 - 0.85 * np.exp(-steps / 600.0)
    val_steps = steps_every(3000, 300)
    return {
        ".": RunSpec(
            {
                "Accuracy/train": (steps, np.clip(acc + rng.normal(0, 0.02, steps.size), 0, 1)),
                "Accuracy/val": (
                    val_steps,
                    np.clip(np.interp(val_steps, steps, acc) - 0.04 + rng.normal(0, 0.004, val_steps.size), 0, 1),
                ),
            }
        )
    }


def healthy_keras_tf2(rng):
    epochs = np.arange(0, 30, dtype=np.int64)
    loss = 0.04 + 0.4 * np.exp(-epochs / 4.0)
    lr = np.where(epochs < 20, 1e-3, 1e-4)
    return {
        "train": RunSpec(
            {
                "epoch_loss": (epochs, scatter(rng, loss, 0.02)),
                "epoch_accuracy": (epochs, np.clip(1 - loss * 0.3, 0, 1)),
                "epoch_learning_rate": (epochs, lr),
            },
            15.0,
            tf2=True,
        ),
        "validation": RunSpec(
            {
                "epoch_loss": (epochs, scatter(rng, loss * 1.1 + 0.01, 0.015)),
                "epoch_accuracy": (epochs, np.clip(1 - loss * 0.33, 0, 1)),
            },
            15.0,
            WALL0 + 2,
            tf2=True,
        ),
    }


def healthy_large_scale(rng):
    steps = steps_every(3000, 10)
    lr = lr_warmup_cosine(steps, 1e-3, 100, 3000)
    clean = loss_from_lr(steps, lr, 8.0e4, 1.2e4, 600)
    return {
        ".": RunSpec(
            {
                "train/mse_sum": (steps, scatter(rng, clean, 0.08)),
                "train/lr": (steps, lr),
                "val/mse_sum": (steps_every(3000, 300), val_at(steps, clean, steps_every(3000, 300), 1.02, rng, 0.01)),
            }
        )
    }


def healthy_small_scale(rng):
    steps = steps_every(3000, 10)
    lr = lr_step(steps, 1e-3, (2000,), 0.3)
    clean = loss_from_lr(steps, lr, 2e-3, 1e-5, 500, lr_floor=5e-6)
    return {".": RunSpec({"loss": (steps, scatter(rng, clean, 0.2)), "learning_rate": (steps, lr)})}


def healthy_sgdr(rng):
    steps = steps_every(4000, 10)
    lr = lr_sgdr(steps, 0.05, 1000)
    clean = 0.4 + 1.6 * np.exp(-steps / 700.0) + 0.25 * lr / 0.05
    return {".": RunSpec({"train_loss": (steps, scatter(rng, clean, 0.04)), "lr-SGD": (steps, lr)})}


def healthy_heavy_tail(rng):
    steps = steps_every(3000, 3)
    lr = lr_warmup_cosine(steps, 1e-3, 100, 3000, floor=1e-5)
    clean = loss_from_lr(steps, lr, 4.0, 1.0, 500)
    return {
        ".": RunSpec({"train/loss": (steps, scatter(rng, clean, 0.06, "t", df=4)), "train/learning_rate": (steps, lr)})
    }


def healthy_multitask_amp(rng):
    steps = steps_every(3000, 20)
    lr = lr_warmup_cosine(steps, 0.02, 100, 3000)
    cls = loss_from_lr(steps, lr, 1.1, 0.2, 400)
    box = loss_from_lr(steps, lr, 0.6, 0.15, 500)
    rpn = loss_from_lr(steps, lr, 0.3, 0.05, 300)
    octave = np.clip(16 - steps / 10.0, 13, 16) + ((steps // 2000) % 2)
    util = np.clip(rng.normal(91, 3, steps.size), 0, 100)
    return {
        ".": RunSpec(
            {
                "total_loss": (steps, scatter(rng, cls + box + rpn, 0.03)),
                "loss_cls": (steps, scatter(rng, cls, 0.04)),
                "loss_box_reg": (steps, scatter(rng, box, 0.04)),
                "loss_rpn_cls": (steps, scatter(rng, rpn, 0.05)),
                "lr": (steps, lr),
                "grad_scaler/scale": (steps, 2.0**octave),
                "data_time": (steps, scatter(rng, np.full(steps.size, 0.01), 0.3)),
                "time": (steps, scatter(rng, np.full(steps.size, 0.35), 0.05)),
                "gpu_util": (steps, util),
            }
        )
    }


def healthy_llm_long(rng):
    steps = steps_every(20000, 25)
    lr = lr_warmup_cosine(steps, 6e-4, 400, 20000, floor=6e-5)
    clean = loss_from_lr(steps, lr, 10.9, 2.9, 2500)
    grad = scatter(rng, 0.25 + 2.0 * np.exp(-steps / 800.0), 0.25)
    return {
        ".": RunSpec(
            {
                "train/loss": (steps, scatter(rng, clean, 0.02)),
                "train/lr": (steps, lr),
                "train/grad_norm": (steps, grad),
                "train/tokens_per_sec": (steps, scatter(rng, np.full(steps.size, 1.2e5), 0.03)),
            }
        )
    }


def healthy_finetune(rng):
    steps = steps_every(2000, 10)
    lr = lr_warmup_cosine(steps, 2e-5, 100, 2000)
    clean = loss_from_lr(steps, lr, 0.52, 0.40, 300)
    val_steps = steps_every(2000, 200)
    val = scatter(rng, np.full(val_steps.size, 0.47) - 0.02 * (1 - np.exp(-val_steps / 500.0)), 0.01)
    return {
        ".": RunSpec(
            {
                "train/loss": (steps, scatter(rng, clean, 0.08)),
                "train/learning_rate": (steps, lr),
                "eval/loss": (val_steps, val),
            }
        )
    }


def healthy_one_cycle(rng):
    steps = steps_every(3000, 10)
    lr = lr_one_cycle(steps, 0.4, 3000)
    clean = loss_from_lr(steps, lr, 2.3, 0.25, 300, lr_floor=0.15)
    return {
        ".": RunSpec(
            {
                "train_loss": (steps, scatter(rng, clean, 0.05)),
                "lr-SGD": (steps, lr),
                "lr-SGD-momentum": (steps, 0.95 - 0.1 * lr / lr.max()),
            }
        )
    }


def healthy_smoothed_logging(rng):
    # detectron2 logs the median of the last 20 iterations: a smooth, autocorrelated curve.
    steps = np.arange(19, 6000, 20, dtype=np.int64)
    lr = lr_step(steps, 0.02, (4000, 5300))
    raw_steps = np.arange(0, 6000, dtype=np.int64)
    raw_lr = lr_step(raw_steps, 0.02, (4000, 5300))
    raw = scatter(rng, loss_from_lr(raw_steps, np.maximum(raw_lr, 1e-9), 2.5, 0.45, 900, lr_floor=0.2), 0.15)
    windows = np.lib.stride_tricks.sliding_window_view(raw, 20)[::20]
    smooth = np.median(windows, axis=1)[: steps.size]
    return {
        ".": RunSpec(
            {
                "total_loss": (steps, smooth),
                "lr": (steps, lr),
                "data_time": (steps, scatter(rng, np.full(steps.size, 0.004), 0.3)),
                "time": (steps, scatter(rng, np.full(steps.size, 0.31), 0.03)),
            }
        )
    }


def healthy_negative_loss(rng):
    steps = steps_every(3000, 10)
    lr = lr_warmup_cosine(steps, 1e-3, 100, 3000)
    clean = -3.0 + 8.0 * np.exp(-steps / 700.0)  # a negative log-likelihood of a continuous density
    return {
        ".": RunSpec(
            {
                "train/nll": (steps, clean + rng.normal(0, 0.15, steps.size)),
                "train/lr": (steps, lr),
                "val/nll": (steps_every(3000, 300), clean[29::30][:10] + 0.2 + rng.normal(0, 0.03, 10)),
            }
        )
    }


def healthy_rl_reward(rng):
    steps = steps_every(50000, 100)
    reward = 200 * (1 - np.exp(-steps / 12000.0)) + rng.normal(0, 15, steps.size)
    return {
        ".": RunSpec(
            {
                "rollout/ep_rew_mean": (steps, reward),
                "train/learning_rate": (steps, np.full(steps.size, 3e-4)),
                "train/loss": (steps, scatter(rng, 5 + 20 * np.exp(-steps / 8000.0), 0.4)),
            }
        )
    }


def healthy_ultralytics(rng):
    epochs = np.arange(0, 100, dtype=np.int64)
    lr = lr_warmup_cosine(epochs, 0.01, 3, 100, floor=1e-4)
    out = {}
    for name, start, floor in (("box_loss", 1.8, 0.9), ("cls_loss", 3.0, 0.6), ("dfl_loss", 1.6, 1.0)):
        curve = floor + (start - floor) * np.exp(-epochs / 25.0)
        out[f"train/{name}"] = (epochs, scatter(rng, curve, 0.01))
        out[f"val/{name}"] = (epochs, scatter(rng, curve * 1.05 + 0.02, 0.01))
    out["metrics/mAP50(B)"] = (epochs, 0.7 * (1 - np.exp(-epochs / 20.0)) + rng.normal(0, 0.005, epochs.size))
    out["metrics/mAP50-95(B)"] = (epochs, 0.45 * (1 - np.exp(-epochs / 20.0)) + rng.normal(0, 0.004, epochs.size))
    out["lr/pg0"] = (epochs, lr)
    return {".": RunSpec(out, 60.0)}


def healthy_val_noise(rng):
    steps = steps_every(3000, 10)
    lr = lr_warmup_cosine(steps, 1e-3, 100, 3000)
    clean = loss_from_lr(steps, lr, 2.0, 0.5, 400)
    val_steps = steps_every(3000, 100)
    val = np.interp(val_steps, steps, clean) * 1.15 + rng.normal(0, 0.02, val_steps.size)
    return {
        ".": RunSpec(
            {"train_loss": (steps, scatter(rng, clean, 0.05)), "val_loss": (val_steps, val), "lr-AdamW": (steps, lr)}
        )
    }


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("divergence_nan", divergence_nan, (Expected("divergence", 1800),), EPOCH),
    Scenario("divergence_blowup", divergence_blowup, (Expected("divergence", 2100),)),
    Scenario("loss_spikes", loss_spikes, (Expected("loss_spike", 900),), EPOCH),
    Scenario("periodic_spikes", periodic, (Expected("periodic_spikes", 70),), 300),
    Scenario("oscillation", oscillation, (Expected("oscillation", 900),)),
    Scenario("bouncing", bouncing, (Expected("oscillation", 600),)),
    Scenario("slow_convergence", slow_convergence, (Expected("slow_convergence", 10),), EPOCH),
    Scenario("no_learning", no_learning, (Expected("no_learning", 10),)),
    Scenario("plateau_start", plateau_start, (Expected("plateau", 10),)),
    Scenario("overfitting", overfitting, (Expected("overfitting", 1200),), EPOCH),
    Scenario("keras_overfit", keras_overfit, (Expected("overfitting", 14, run="train", tolerance=1),), 1),
    Scenario("exploding_spikes", exploding, (Expected("exploding_gradients", 1400),)),
    Scenario(
        "exploding_growth", exploding_growth, (Expected("exploding_gradients", 1500), Expected("divergence", 1700))
    ),
    Scenario("vanishing", vanishing, (Expected("vanishing_gradients", 1500),)),
    Scenario("dead_relu", dead_relu, (Expected("dead_units", 1600),)),
    Scenario("weight_growth", weight_growth, (Expected("weight_growth", 2000),)),
    Scenario("warmup_missing", warmup_missing, (Expected("warmup_instability", 60),)),
    Scenario("bottleneck", bottleneck, (Expected("input_bottleneck", 10),)),
    Scenario("bottleneck_late", bottleneck_late, (Expected("input_bottleneck", 1800),)),
    Scenario("task_imbalance", task_imbalance, (Expected("task_imbalance", 20),)),
    Scenario("amp_collapse", amp_collapse, (Expected("amp_overflow", 2000),)),
    Scenario("lr_blip", lr_blip, (Expected("lr_anomaly", 1700),)),
    Scenario("lr_dead_tail", lr_dead_tail, (Expected("lr_anomaly", 1900),)),
    Scenario("restarted", restarted, (Expected("run_restart", 1500, severity="info"),)),
    Scenario("corrupted", corrupted, (Expected("data_integrity", None),)),
    Scenario("stalled", stalled, (Expected("stalled", 1200, run="seed1"),), now_offset=60.0),
    Scenario("healthy_noisy", healthy_noisy),
    Scenario("healthy_hf_cosine", healthy_hf_cosine),
    Scenario("healthy_step_decay", healthy_step_decay),
    Scenario("healthy_short", healthy_short),
    Scenario("healthy_few_points", healthy_few_points),
    Scenario("healthy_accuracy_only", healthy_accuracy_only),
    Scenario("healthy_keras_tf2", healthy_keras_tf2),
    Scenario("healthy_large_scale", healthy_large_scale),
    Scenario("healthy_small_scale", healthy_small_scale),
    Scenario("healthy_sgdr", healthy_sgdr),
    Scenario("healthy_heavy_tail", healthy_heavy_tail),
    Scenario("healthy_multitask_amp", healthy_multitask_amp),
    Scenario("healthy_llm_long", healthy_llm_long),
    Scenario("healthy_finetune", healthy_finetune),
    Scenario("healthy_one_cycle", healthy_one_cycle),
    Scenario("healthy_smoothed_logging", healthy_smoothed_logging),
    Scenario("healthy_negative_loss", healthy_negative_loss),
    Scenario("healthy_rl_reward", healthy_rl_reward),
    Scenario("healthy_ultralytics", healthy_ultralytics),
    Scenario("healthy_val_noise", healthy_val_noise),
)
BY_NAME = {s.name: s for s in SCENARIOS}
PATHOLOGIES = tuple(s for s in SCENARIOS if not s.healthy)
HEALTHY = tuple(s for s in SCENARIOS if s.healthy)


def build(scenario: Scenario, seed: int = 0) -> dict[str, RunSpec]:
    return scenario.make(np.random.default_rng([seed, sum(map(ord, scenario.name))]))


def tolerance(scenario: Scenario, expected: Expected, runs: dict[str, Run]) -> int:
    """How far the reported onset may be from the planted one: 2 % of the run or one validation interval."""
    if expected.tolerance is not None:
        return expected.tolerance
    run = runs[expected.run]
    firsts = [int(s.steps[0]) for s in run.scalars.values() if len(s)]
    lasts = [int(s.steps[-1]) for s in run.scalars.values() if len(s)]
    span = max(lasts) - min(firsts)
    return max(int(0.02 * span), scenario.eval_interval or 0, 1)


# ---- in memory ------------------------------------------------------------------------------------------


def _walls(spec: RunSpec, steps: np.ndarray) -> np.ndarray:
    return spec.start_wall + steps.astype(np.float64) * spec.seconds_per_step


def _visible(spec: RunSpec, steps: np.ndarray) -> np.ndarray:
    return steps <= spec.stop_at if spec.stop_at is not None else np.ones(steps.size, bool)


def to_run(name: str, spec: RunSpec) -> Run:
    """The Run the reader would produce for `spec` (restarts resolved as TensorBoard does)."""
    run = Run(name=name, path=Path(name))
    for tag, (steps, values) in spec.scalars.items():
        keep = _visible(spec, steps)
        steps, values = steps[keep], np.asarray(values, np.float64)[keep]
        walls = _walls(spec, steps)
        if spec.restart_from is not None:
            walls = np.where(
                steps >= spec.restart_from,
                walls + 1800.0 + (spec.crash_at - spec.restart_from) * spec.seconds_per_step,
                walls,
            )
        run.scalars[tag] = Series(steps.astype(np.int64), walls, values.astype(np.float32).astype(np.float64))
    if spec.restart_from is not None:
        run.notes.append(
            Note(
                "run_restart",
                f"{name}/events.2",
                f"steps go back from {spec.crash_at} to {spec.restart_from} (a restart from a checkpoint)",
                step=spec.restart_from,
                severity="info",
            )
        )
    if spec.corrupt:
        run.notes.append(
            Note("data_integrity", f"{name}/events.1", "bad CRC in a record; intact records before it kept")
        )
    series = [s for s in run.scalars.values() if len(s)]
    run.last_step = max(int(s.steps[-1]) for s in series) if series else None
    run.last_wall_time = max(float(s.wall_times[-1]) for s in series) if series else None
    return run


def runs_in_memory(scenario: Scenario, seed: int = 0) -> dict[str, Run]:
    return {name: to_run(name, spec) for name, spec in build(scenario, seed).items()}


# ---- event files ----------------------------------------------------------------------------------------


def _points(spec: RunSpec, lo: int | None = None, hi: int | None = None):
    """(step, wall, tag, value) of every point in training-loop order, optionally in a step range."""
    rows = []
    for tag, (steps, values) in spec.scalars.items():
        keep = _visible(spec, steps)
        if lo is not None:
            keep &= steps >= lo
        if hi is not None:
            keep &= steps <= hi
        walls = _walls(spec, steps)
        rows.extend(
            zip(
                steps[keep].tolist(),
                walls[keep].tolist(),
                [tag] * int(keep.sum()),
                np.asarray(values, np.float64)[keep].tolist(),
            )
        )
    rows.sort(key=lambda r: (r[0], r[2]))
    return rows


def _write_tensorboardx(directory: Path, rows, wall_shift: float = 0.0, suffix: str = "") -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(directory), flush_secs=3600, filename_suffix=suffix)
    for step, wall, tag, value in rows:
        writer.add_scalar(tag, value, step, walltime=wall + wall_shift)
    writer.close()


def _write_tf2(directory: Path, rows) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(directory), filename_suffix=".v2")
    seen: set[str] = set()
    for step, wall, tag, value in rows:
        tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[value])
        summary_value = summary_pb2.Summary.Value(tag=tag, tensor=tensor)
        if tag not in seen:
            seen.add(tag)
            summary_value.metadata.plugin_data.plugin_name = "scalars"
        writer.add_event(event_pb2.Event(wall_time=wall, step=step, summary=summary_pb2.Summary(value=[summary_value])))
    writer.close()


def write_tensorboardx_run(root: Path, run: Run) -> None:
    """Write `run`'s scalars under root/<run name> with tensorboardX's SummaryWriter, tag by tag in the run's
    order (the order the reader then lists its tags in)."""
    rows = [
        (int(step), float(wall), tag, float(value))
        for tag, series in run.scalars.items()
        for step, wall, value in zip(series.steps, series.wall_times, series.values)
    ]
    _write_tensorboardx(root / run.name, rows)


def diagnose_written(root: Path, run: Run):
    """`write_tensorboardx_run`, then read the logdir back and judge it as a user would: the RunReport of `run`."""
    import tbtriage
    from tbtriage.analysis.engine import diagnose

    write_tensorboardx_run(root, run)
    return next(r for r in diagnose(tbtriage.load(root)).runs if r.name == run.name)


def write_scenario(root: Path, scenario: Scenario, seed: int = 0) -> Path:
    """Write the scenario's runs under root/<scenario name>/ as event files; returns that directory."""
    base = root / scenario.name
    for name, spec in build(scenario, seed).items():
        directory = base if name == "." else base / name
        directory.mkdir(parents=True, exist_ok=True)
        if spec.tf2:
            _write_tf2(directory, _points(spec))
        elif spec.restart_from is not None:
            _write_tensorboardx(directory, _points(spec, hi=spec.crash_at), suffix=".1")
            # The resumed process starts a new file; its suffix sorts after the first's within one second.
            shift = 1800.0 + (spec.crash_at - spec.restart_from) * spec.seconds_per_step
            _write_tensorboardx(directory, _points(spec, lo=spec.restart_from), wall_shift=shift, suffix=".2")
        else:
            _write_tensorboardx(directory, _points(spec))
        if spec.corrupt:
            files = sorted(directory.glob("*tfevents*"))
            data = bytearray(files[-1].read_bytes())
            data[2 * len(data) // 3] ^= 0xFF
            files[-1].write_bytes(bytes(data))
    return base


# ---- randomised healthy runs ------------------------------------------------------------------------------


def _random_schedule(rng, steps, total):
    kind = rng.choice(
        [
            "constant",
            "warmup_cosine",
            "step",
            "one_cycle",
            "sgdr",
            "linear",
            "exponential",
            "inverse_sqrt",
            "plateau_decay",
        ]
    )
    peak = float(10 ** rng.uniform(-5, -0.5))
    if kind == "constant":
        return kind, np.full(steps.size, peak)
    if kind == "warmup_cosine":
        return kind, lr_warmup_cosine(
            steps, peak, int(total * rng.uniform(0, 0.1)), total, floor=peak * rng.choice([0.0, 0.1])
        )
    if kind == "step":
        milestones = sorted(rng.choice(np.arange(int(0.3 * total), int(0.95 * total) + 1), size=2, replace=False))
        return kind, lr_step(steps, peak, milestones, float(rng.choice([0.1, 0.2, 0.5])))
    if kind == "one_cycle":
        return kind, lr_one_cycle(steps, peak, total)
    if kind == "sgdr":
        return kind, lr_sgdr(steps, peak, max(total // int(rng.integers(2, 5)), 1))
    if kind == "linear":
        return kind, peak * np.maximum(1 - steps / (total * 1.0001), 1e-3)
    if kind == "exponential":
        return kind, peak * 0.5 ** (steps / (total * rng.uniform(0.2, 1.0)))
    if kind == "inverse_sqrt":
        warm = max(int(total * 0.05), 1)
        return kind, peak * np.minimum(steps / warm, np.sqrt(warm / np.maximum(steps, 1)))
    # ReduceLROnPlateau-like: a few halvings at irregular steps
    cuts = np.sort(rng.uniform(0.2, 0.95, size=3)) * total
    return kind, peak * 0.5 ** np.searchsorted(cuts, steps)


def random_healthy(seed: int) -> tuple[dict[str, RunSpec], dict]:
    """A healthy run of random shape, scale, noise, length and logging habits; returns (runs, description)."""
    rng = np.random.default_rng([seed, 7919])
    points = int(10 ** rng.uniform(1.3, 4.0))
    every = int(rng.choice([1, 1, 5, 10, 20, 50]))
    total = points * every
    steps = steps_every(total, every, first=int(rng.choice([0, every])))
    kind, lr = _random_schedule(rng, steps, total)
    lr = np.maximum(lr, 1e-12)
    start = float(10 ** rng.uniform(-2, 4))
    floor = start * rng.uniform(0.02, 0.8)
    speed = rng.uniform(0.05, 0.6) * total
    lr_floor = float(rng.choice([0.0, 0.0, 0.1, 0.3])) * (start - floor)
    clean = loss_from_lr(steps, lr, start, floor, speed, lr_floor)
    noise_kind = rng.choice(["lognormal", "lognormal", "t", "additive", "smoothed"])
    rel = float(10 ** rng.uniform(-2.3, -0.6))
    if noise_kind == "t":
        loss = scatter(rng, clean, min(rel, 0.1), "t", df=int(rng.integers(6, 16)))
    elif noise_kind == "additive":
        loss = clean + rel * floor * rng.normal(0, 1, clean.size)
    elif noise_kind == "smoothed":
        # Logged as the mean of the last 20 raw losses (detectron2, HF's logging_steps); the first point is
        # logged once the window is full, as those loggers do.
        raw = scatter(rng, clean, rel * 3)
        window = min(20, max(1, raw.size // 10))
        loss = np.convolve(raw, np.ones(window) / window, mode="full")[: raw.size]
        loss[: window - 1] = np.nan  # dropped below: nothing is logged before the window is full
    else:
        loss = scatter(rng, clean, rel)
    offset = float(rng.choice([0.0, 0.0, 0.0, -1.5 * floor]))
    logged = np.isfinite(loss)
    tags: dict[str, tuple[np.ndarray, np.ndarray]] = {
        "train/loss": (steps[logged], loss[logged] + offset),
        "train/lr": (steps, lr),
    }
    if rng.random() < 0.6 and points >= 10:
        cadence = max(every, int(total / rng.integers(5, 60)) // every * every)
        val_steps = steps_every(total, cadence)
        val = np.interp(val_steps, steps, clean) * rng.uniform(1.0, 1.3) + offset
        val = val + rng.normal(0, rng.uniform(0.001, 0.02) * abs(floor), val_steps.size)
        tags["val/loss"] = (val_steps, val)
        if rng.random() < 0.5:
            tags["val/accuracy"] = (
                val_steps,
                np.clip(accuracy_from(np.interp(val_steps, steps, clean) / start * 2.3), 0, 1),
            )
    if rng.random() < 0.5:
        grad = scatter(rng, (0.2 + clean / start) * 10 ** rng.uniform(-2, 1), rng.uniform(0.05, 0.4))
        tags["train/grad_norm"] = (steps, grad)
    if rng.random() < 0.3:
        util = np.clip(rng.normal(rng.uniform(75, 98), 3, steps.size), 0, 100)
        tags["gpu/utilization"] = (steps, util)
        step_time = scatter(rng, np.full(steps.size, rng.uniform(0.05, 2)), 0.05)
        tags["perf/step_time"] = (steps, step_time)
        tags["perf/data_time"] = (steps, step_time * rng.uniform(0.0, 0.2) * np.exp(rng.normal(0, 0.2, steps.size)))
    if rng.random() < 0.2:
        octave = np.clip(16 - 3.0 * np.arange(steps.size), rng.integers(8, 15), 16)  # calibrates in a few steps
        octave = octave + (np.arange(steps.size) // max(2000 // every, 1)) % 2
        tags["grad_scaler/scale"] = (steps, 2.0 ** np.round(octave))
    if rng.random() < 0.2:
        tags["weight_norm/fc"] = (steps, scatter(rng, 10 * (1 + 0.3 * np.sqrt(steps / total)), 0.003))
        tags["act/relu1_zero_frac"] = (steps, np.clip(rng.normal(rng.uniform(0.3, 0.6), 0.01, steps.size), 0, 1))
    description = {
        "points": points,
        "every": every,
        "schedule": str(kind),
        "noise": str(noise_kind),
        "rel": rel,
        "start": start,
        "offset": offset,
    }
    return {".": RunSpec(tags, float(rng.uniform(0.05, 2.0)))}, description


# ---- analysing scenarios in memory ----------------------------------------------------------------------


def analyze_scenario(scenario: Scenario | str, seed: int = 0) -> dict:
    """{run name: RunReport} for the scenario's runs, analysed in memory with their logdir context."""
    from types import SimpleNamespace

    from tbtriage.analysis.engine import analyze_run, logdir_context

    scenario = BY_NAME[scenario] if isinstance(scenario, str) else scenario
    runs = runs_in_memory(scenario, seed)
    context = logdir_context(SimpleNamespace(runs=runs))
    if scenario.now_offset is not None:
        context = logdir_context(SimpleNamespace(runs=runs), now=context.latest_wall_time + scenario.now_offset)
    return {name: analyze_run(run, None, context) for name, run in runs.items()}


def analyze_tags(tags: dict[str, tuple], name: str = "run", **spec) -> object:
    """The RunReport of one hand-built run: `tags` maps tag -> (steps, values)."""
    from tbtriage.analysis.engine import analyze_run

    scalars = {t: (np.asarray(s, dtype=np.int64), np.asarray(v, dtype=np.float64)) for t, (s, v) in tags.items()}
    return analyze_run(to_run(name, RunSpec(scalars, **spec)))


def kinds(report, severities=("critical", "warning")) -> list[str]:
    """The kinds a report found at the given severities."""
    return [f.kind for f in report.findings if f.severity in severities]


# ---- runs from real training ------------------------------------------------------------------------------


def train_mlp(
    seed: int,
    lr: float = 0.05,
    epochs: int = 8,
    n_train: int = 20000,
    batch: int = 64,
    hidden: int = 128,
    schedule: str = "cosine",  # or "constant", or "uncapped_warmup"
    weight_decay: float = 1e-3,
    label_noise: float = 0.0,
    noise: float = 3.0,
    classes: int = 10,
    head_init: float = 1.0,
    first_init: float = 1.0,
    tags: dict[str, str] | None = None,
) -> Run:
    """A real network really trained: a one-hidden-layer ReLU MLP on 10 noisy Gaussian classes, SGD with
    momentum 0.9, logged the way a PyTorch loop logs (per step: loss, grad norm, lr, ReLU zero fraction;
    per epoch: validation loss and accuracy). Its noise, curvature and failures are the optimizer's own.

    `head_init` and `first_init` scale the output and hidden layers' initial weights (0.02 for the head is a
    Hugging Face classification head: the first loss is ln(classes); both tiny start the net on a saddle); `tags` renames the logged tags (e.g. to the HF Trainer's names)."""
    rng = np.random.default_rng(seed)
    dims = 20
    centres = rng.normal(0, 1.5, (classes, dims))
    labels = rng.integers(0, classes, n_train + 2000)
    inputs = centres[labels] + rng.normal(0, noise, (labels.size, dims))
    x_train, y_train, x_val, y_val = inputs[:n_train], labels[:n_train].copy(), inputs[n_train:], labels[n_train:]
    flipped = rng.random(n_train) < label_noise
    y_train[flipped] = rng.integers(0, classes, int(flipped.sum()))
    params = [
        rng.normal(0, first_init * np.sqrt(2 / dims), (dims, hidden)),
        np.zeros(hidden),
        rng.normal(0, head_init * np.sqrt(1 / hidden), (hidden, classes)),
        np.zeros(classes),
    ]
    velocity = [np.zeros_like(p) for p in params]
    per_epoch = n_train // batch
    total = epochs * per_epoch
    log: dict[str, tuple[list, list]] = {
        t: ([], []) for t in ("train/loss", "train/grad_norm", "train/lr", "act/relu_zero_frac", "val/loss", "val/acc")
    }

    def forward(x):
        hidden_out = np.maximum(x @ params[0] + params[1], 0)
        logits = hidden_out @ params[2] + params[3]
        logits = logits - logits.max(1, keepdims=True)
        probs = np.exp(logits)
        return hidden_out, probs / probs.sum(1, keepdims=True)

    step = 0
    with np.errstate(all="ignore"):  # the failing configurations overflow on purpose
        for _ in range(epochs):
            order = rng.permutation(n_train)
            for i in range(per_epoch):
                idx = order[i * batch : (i + 1) * batch]
                hidden_out, probs = forward(x_train[idx])
                rows = np.arange(idx.size)
                loss = -np.mean(np.log(probs[rows, y_train[idx]] + 1e-12))
                d_logits = probs.copy()
                d_logits[rows, y_train[idx]] -= 1
                d_logits /= idx.size
                d_hidden = d_logits @ params[2].T
                d_hidden[hidden_out <= 0] = 0
                grads = [
                    x_train[idx].T @ d_hidden + weight_decay * params[0],
                    d_hidden.sum(0),
                    hidden_out.T @ d_logits + weight_decay * params[2],
                    d_logits.sum(0),
                ]
                norm = np.sqrt(sum(float((g * g).sum()) for g in grads))
                if schedule == "cosine":
                    rate = lr * 0.5 * (1 + np.cos(np.pi * step / total))
                elif schedule == "uncapped_warmup":  # a linear warmup whose end was never set: it keeps rising
                    rate = lr * (step + 1) / 100
                else:
                    rate = lr
                for p, v, g in zip(params, velocity, grads):
                    v *= 0.9
                    v += g
                    p -= rate * v
                step += 1
                for tag, value in (
                    ("train/loss", loss),
                    ("train/grad_norm", norm),
                    ("train/lr", rate),
                    ("act/relu_zero_frac", float((hidden_out <= 0).mean())),
                ):
                    log[tag][0].append(step)
                    log[tag][1].append(value)
            hidden_out, probs = forward(x_val)
            log["val/loss"][0].append(step)
            log["val/loss"][1].append(-np.mean(np.log(probs[np.arange(y_val.size), y_val] + 1e-12)))
            log["val/acc"][0].append(step)
            log["val/acc"][1].append(float((probs.argmax(1) == y_val).mean()))
    with np.errstate(over="ignore"):  # float32, as event files store them: a 1e140 norm becomes Inf
        scalars = {
            t: (np.array(s, dtype=np.int64), np.array(v, dtype=np.float64).astype(np.float32).astype(np.float64))
            for t, (s, v) in log.items()
        }
    if tags:
        scalars = {tags.get(t, t): v for t, v in scalars.items()}
    return to_run("mlp", RunSpec(scalars, 0.01))


def train_deep_linear(
    seed: int = 0, init: float = 0.02, lr: float = 0.05, steps: int = 3000, depth: int = 3, width: int = 16
) -> Run:
    """A deep linear net (no biases) really trained by full-batch gradient descent to fit a random linear map.

    From a tiny init it sits on the saddle at zero, where every layer's gradient is ∝ init^(depth-1): the
    gradient norm starts tiny and grows by orders of magnitude as the net escapes and learns (the loss falls).
    Logs the loss, the total gradient norm and every layer's norm at every step."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (256, width))
    target = x @ rng.normal(0, 1 / np.sqrt(width), (width, width))
    weights = [rng.normal(0, init, (width, width)) for _ in range(depth)]
    log: dict[str, list] = {"train/loss": [], "train/grad_norm": []} | {f"grad_norm/layer{i}": [] for i in range(depth)}
    for _ in range(steps):
        acts = [x]
        for w in weights:
            acts.append(acts[-1] @ w)
        err = acts[-1] - target
        grad_out = 2 * err / err.size
        grads: list = [None] * depth
        for i in reversed(range(depth)):
            grads[i] = acts[i].T @ grad_out
            grad_out = grad_out @ weights[i].T
        norms = [float(np.sqrt((g**2).sum())) for g in grads]
        for w, g in zip(weights, grads):
            w -= lr * g
        log["train/loss"].append(float((err**2).mean()))
        log["train/grad_norm"].append(float(np.sqrt(sum(n * n for n in norms))))
        for i, n in enumerate(norms):
            log[f"grad_norm/layer{i}"].append(n)
    every = np.arange(1, steps + 1, dtype=np.int64)
    return to_run("deep_linear", RunSpec({t: (every, np.array(v)) for t, v in log.items()}, 0.01))
