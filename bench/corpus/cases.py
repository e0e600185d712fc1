"""The corpus's cases: a configuration that causes a pathology, the kinds a careful reader would name, and
the healthy twin (same model and data, sane settings) it should be told apart from.

Onsets come from the configuration where it fixes them (the poisoned step, the restart step) and otherwise
from the run's own trace by a plain reading rule (`divergence_onset`), never from a drawn curve.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from .trace import Trace
from .train import RLSetup, Setup

#: Conventions that log per step (a one-step spike can be seen) and those that only log epoch means.
STEP_CONVENTIONS = ("pytorch", "tensorboardx", "lightning", "hf", "keras_batch", "detectron2")
ALL_CONVENTIONS = (*STEP_CONVENTIONS, "keras", "timm", "ultralytics")
RL_CONVENTIONS = ("sb3", "rl_tensorboardx")


@dataclass(frozen=True)
class Expect:
    kind: str
    onset: int  # global step
    tolerance: int  # steps either side


@dataclass(frozen=True)
class Case:
    name: str
    cause: str
    setup: Setup | RLSetup
    conventions: tuple[str, ...]
    twin: str | None = None  # the healthy case this one is compared with
    #: kinds the run shows, from its trace; empty for healthy runs
    expect: Callable[[Trace, Setup | RLSetup], list[Expect]] = lambda trace, setup: []
    also_ok: tuple[str, ...] = ()  # kinds that are fair to report too (not false alarms)
    healthy: bool = False
    post: str | None = None  # "truncate": the process died while writing its last record
    note: str = ""
    seeds: tuple[int, ...] = (0, 1, 2)
    extra: dict = field(default_factory=dict)


# ---- onsets read from a run's own trace ---------------------------------------------------------------------


def _rolling_median(values: np.ndarray, window: int) -> np.ndarray:
    pad = window // 2
    padded = np.pad(values, pad, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, window)
    return np.median(windows, axis=1)


def divergence_onset(trace: Trace) -> int:
    """First step from which the smoothed loss stays above twice the best it had reached (or is non-finite)."""
    steps, loss, _ = trace.get("loss")
    loss = np.where(np.isfinite(loss), loss, np.inf)
    smooth = _rolling_median(loss, 9)
    best = np.minimum.accumulate(smooth)
    above = smooth > 2.0 * best[np.maximum(0, np.arange(smooth.size) - 1)]
    # Stays above from here on: the reverse cumulative AND.
    stays = np.logical_and.accumulate(above[::-1])[::-1]
    first = np.flatnonzero(stays)
    return int(steps[first[0]]) if first.size else int(steps[-1])


def overfit_onset(trace: Trace) -> int:
    """The evaluation with the lowest validation loss: after it, validation only gets worse."""
    steps, val, _ = trace.get("val_loss")
    return int(steps[int(np.argmin(_rolling_median(val, 3)))])


def whole_run(kind: str) -> Callable[[Trace, Setup], list[Expect]]:
    """A pathology present from the first step to the last: any onset inside the run is right."""

    def expect(trace: Trace, setup) -> list[Expect]:
        return [Expect(kind, 0, trace.last_step)]

    return expect


def early(kind: str, within: int) -> Callable[[Trace, Setup], list[Expect]]:
    def expect(trace: Trace, setup) -> list[Expect]:
        return [Expect(kind, 0, within)]

    return expect


def _div(trace: Trace, setup) -> list[Expect]:
    return [Expect("divergence", divergence_onset(trace), max(30, trace.last_step // 10))]


def _poison_once(trace: Trace, setup: Setup) -> list[Expect]:
    return [Expect("loss_spike", setup.poison_steps[0], 15)]


def _poison_periodic(trace: Trace, setup: Setup) -> list[Expect]:
    first = setup.poison_batch
    return [Expect("periodic_spikes", first, trace.steps_per_epoch)]


def _overfit(trace: Trace, setup) -> list[Expect]:
    return [Expect("overfitting", overfit_onset(trace), max(40, trace.last_step // 8))]


def _restart(trace: Trace, setup: Setup) -> list[Expect]:
    return [Expect("run_restart", setup.resume_from + 1, 10)]


def _truncated(trace: Trace, setup: Setup) -> list[Expect]:
    return [Expect("data_integrity", trace.last_step, trace.last_step)]


# ---- the cases --------------------------------------------------------------------------------------------

#: The MLP family's sane run: a tanh MLP on teacher-labelled vectors, 2048 samples, 20 epochs of 32 steps.
MLP = Setup(label_noise=0.1, n_train=2048, steps=640, act="tanh", batch=64)
MLP_SGD = replace(MLP, optimizer="sgd", lr=0.02)


def cases() -> list[Case]:
    c: list[Case] = []
    # -- healthy baselines (twins of the MLP cases) and hard healthy shapes --
    c += [
        Case("healthy_adam", "healthy", MLP, ALL_CONVENTIONS[:6], healthy=True, seeds=(0, 1, 2, 3, 4, 5)),
        Case("healthy_sgd", "healthy", MLP_SGD, ALL_CONVENTIONS[3:], healthy=True, seeds=(0, 1, 2, 3, 4, 5)),
        Case(
            "healthy_step_decay",
            "healthy",
            replace(MLP_SGD, lr=0.05, schedule="step"),
            ("pytorch", "keras", "hf"),
            healthy=True,
            note="lr x0.1 at 50 % and 75 %: the loss drops in steps",
        ),
        Case(
            "healthy_cosine_restarts",
            "healthy",
            replace(MLP_SGD, lr=0.05, schedule="cosine_restarts"),
            ("tensorboardx", "lightning", "detectron2"),
            healthy=True,
            note="SGDR: the loss rises a little at every restart",
        ),
        Case(
            "healthy_warmup",
            "healthy",
            replace(MLP_SGD, schedule="warmup", warmup=60),
            ("hf", "pytorch", "keras_batch"),
            healthy=True,
        ),
        Case(
            "healthy_small_batch",
            "healthy",
            replace(MLP, batch=4, lr=3e-4, steps=800),
            ("pytorch", "lightning", "tensorboardx"),
            healthy=True,
            note="batch 4: a very noisy per-step loss that still falls",
        ),
    ]
    # -- learning rate --
    c += [
        Case(
            "lr_too_high_oscillation",
            "lr_too_high",
            replace(MLP_SGD, lr=0.3),
            ("pytorch", "hf", "keras", "lightning"),
            twin="healthy_sgd",
            expect=whole_run("oscillation"),
            also_ok=("loss_spike",),
            note="SGD lr 0.3 (15x the twin): the loss bounces at several times the healthy level",
        ),
        Case(
            "lr_too_high_divergence",
            "lr_too_high",
            replace(MLP_SGD, lr=3.0),
            ("tensorboardx", "keras_batch", "timm"),
            twin="healthy_sgd",
            expect=_div,
            also_ok=("oscillation", "loss_spike", "exploding_gradients"),
            note="SGD lr 3.0: the loss blows up within a few steps and stays there",
        ),
        Case(
            "lr_too_low",
            "lr_too_low",
            replace(MLP, lr=1e-4),
            ("hf", "detectron2", "ultralytics"),
            twin="healthy_adam",
            expect=whole_run("slow_convergence"),
            also_ok=("plateau",),
            note="Adam lr 1e-4 (10x too low): still falling steeply when the run ends",
        ),
        Case(
            "lr_far_too_low",
            "lr_too_low",
            replace(MLP, lr=1e-5),
            ("hf", "lightning", "keras"),
            twin="healthy_adam",
            expect=whole_run("no_learning"),
            also_ok=("slow_convergence", "plateau"),
            note="Adam lr 1e-5: the loss stays at ln 4 and accuracy at chance",
        ),
        Case(
            "lr_zero",
            "lr_zero",
            replace(MLP, lr=0.0),
            ("pytorch", "timm", "keras_batch"),
            twin="healthy_adam",
            expect=whole_run("no_learning"),
            also_ok=("plateau", "slow_convergence", "lr_anomaly"),
            note="lr 0 (a schedule misconfigured to zero): nothing moves",
        ),
        Case(
            "frozen_params",
            "frozen_params",
            replace(MLP, freeze=True),
            ("lightning", "hf", "tensorboardx"),
            twin="healthy_adam",
            expect=whole_run("no_learning"),
            also_ok=("plateau", "slow_convergence", "vanishing_gradients"),
            note="requires_grad off everywhere (a forgotten unfreeze): gradient norm 0, validation identical",
        ),
        Case(
            "shuffled_labels",
            "shuffled_labels",
            replace(MLP, shuffle_labels=True),
            ("pytorch", "keras", "detectron2"),
            twin="healthy_adam",
            expect=whole_run("no_learning"),
            also_ok=("overfitting", "plateau", "slow_convergence"),
            note="labels permuted against inputs: training memorises a little, validation stays at chance",
        ),
        Case(
            "warmup_uncapped",
            "warmup_uncapped",
            replace(MLP_SGD, schedule="warmup_uncapped", warmup=20),
            ("hf", "lightning", "pytorch"),
            twin="healthy_warmup",
            expect=_div,
            also_ok=("lr_anomaly", "oscillation", "loss_spike", "overfitting", "exploding_gradients"),
            note="linear warmup without min(1, ...): lr grows without bound and training comes apart",
        ),
    ]
    # -- data --
    c += [
        Case(
            "poisoned_shard_once",
            "poisoned_shard",
            replace(MLP, n_train=None, poison_steps=(300, 301), eval_every=32),
            STEP_CONVENTIONS[:3],
            twin="healthy_stream",
            expect=_poison_once,
            note="a stream reads a corrupted shard (inputs x40) at steps 300-301",
        ),
        Case(
            "healthy_stream", "healthy", replace(MLP, n_train=None, eval_every=32), STEP_CONVENTIONS[:3], healthy=True
        ),
        Case(
            "poisoned_shard_every_epoch",
            "poisoned_shard",
            replace(MLP, shuffle=False, poison_batch=11),
            ("pytorch", "tensorboardx", "keras_batch"),
            twin="healthy_adam",
            expect=_poison_periodic,
            also_ok=("loss_spike",),
            note="no shuffling and one corrupted batch: a spike at the same place in every epoch",
        ),
        Case(
            "unshuffled_sorted",
            "no_shuffle",
            replace(MLP, shuffle=False, sort_by_label=True),
            ("pytorch", "lightning", "hf"),
            twin="healthy_adam",
            expect=_poison_periodic_sorted,
            also_ok=("loss_spike", "oscillation"),
            note="data sorted by class and never shuffled: every class boundary in every epoch jolts the loss",
        ),
        Case(
            "overfitting_small_data",
            "no_regularisation",
            replace(MLP, n_train=128, batch=16, hidden=256, steps=800, eval_every=16, label_noise=0.2),
            ("pytorch", "keras", "hf"),
            twin="healthy_regularised",
            expect=_overfit,
            note="128 samples, a wide net, no weight decay or dropout, 100 epochs",
        ),
        Case(
            "healthy_regularised",
            "healthy",
            replace(
                MLP,
                n_train=128,
                batch=16,
                hidden=256,
                steps=800,
                eval_every=16,
                label_noise=0.2,
                weight_decay=3.0,
                dropout=0.5,
                optimizer="adamw",
                lr=1e-3,
            ),
            ("pytorch", "keras", "hf"),
            healthy=True,
        ),
    ]
    # -- process --
    c += [
        Case(
            "restart_same_folder",
            "restart",
            replace(MLP, crash_at=420, resume_from=320),
            ("pytorch", "tensorboardx", "lightning"),
            twin="healthy_adam",
            expect=_restart,
            note="the process died at step 420 and was relaunched from the step-320 checkpoint into the same folder",
        ),
        Case(
            "crash_mid_write",
            "crash_mid_write",
            replace(MLP, crash_at=400),
            ("pytorch", "tensorboardx", "hf"),
            twin="healthy_adam",
            expect=_truncated,
            post="truncate",
            also_ok=("stalled",),
            note="killed at step 400 while writing: the events file ends in half a record",
        ),
    ]
    return c


def _poison_periodic_sorted(trace: Trace, setup: Setup) -> list[Expect]:
    return [Expect("periodic_spikes", 0, 2 * trace.steps_per_epoch)]


def case_map() -> dict[str, Case]:
    out = {case.name: case for case in cases()}
    assert len(out) == len(cases()), "case names are unique"
    return out


def seed_setup(setup, seed: int):
    return replace(setup, seed=seed)
