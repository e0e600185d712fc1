"""The corpus's cases: a configuration that causes a pathology, the kinds a careful reader would name, and
the healthy twin (same model and data, sane settings) it should be told apart from.

Onsets come from the configuration where it fixes them (the poisoned step, the restart step) and otherwise
from the run's own trace by a plain reading rule (`divergence_onset`), never from a drawn curve.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

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
    onset: int | None  # global step; None where a step means nothing (a torn file, a run without data)
    tolerance: int  # steps either side
    #: Other names that are just as right for this run (NaN from the first step: a data bug or a divergence).
    alternatives: tuple[str, ...] = ()


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
    no_data: bool = False  # the run holds no data points: its health should be null, not a score
    note: str = ""
    #: Default: one seed per listed convention, at least three (seed i is written in convention i).
    seeds: tuple[int, ...] | None = None
    #: Did this seed's run really show what the label says? A reason when not (the run is left out).
    check: Callable[[Trace], str | None] | None = None  # default: `check_healthy` for healthy cases


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


def whole_run(kind: str, alternatives: tuple[str, ...] = ()) -> Callable[[Trace, Setup], list[Expect]]:
    """A pathology present from the first step to the last: any onset inside the run is right."""

    def expect(trace: Trace, setup) -> list[Expect]:
        return [Expect(kind, 0, trace.last_step, alternatives)]

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
    return [Expect("periodic_spikes", setup.poison_batches[0], trace.steps_per_epoch)]


def _overfit(trace: Trace, setup) -> list[Expect]:
    return [Expect("overfitting", overfit_onset(trace), max(40, trace.last_step // 8))]


def _restart(trace: Trace, setup: Setup) -> list[Expect]:
    return [Expect("run_restart", setup.resume_from + 1, 10)]


def _truncated(trace: Trace, setup: Setup) -> list[Expect]:
    return [Expect("data_integrity", None, 1)]


def _nan_from_start(trace: Trace, setup: Setup) -> list[Expect]:
    return [Expect("divergence", 0, 5, alternatives=("data_integrity",))]


def _grad_onset(trace: Trace, setup) -> list[Expect]:
    """The first step whose gradient norm exceeds 100x the run's early median: the explosion."""
    steps, norm, _ = trace.get("grad_norm")
    early = np.median(norm[:20])
    over = np.flatnonzero(~(norm <= EXPLOSION_FACTOR * early))
    return [Expect("exploding_gradients", int(steps[over[0]]), 20)]


def _rnn_nan(trace: Trace, setup) -> list[Expect]:
    return [*_grad_onset(trace, setup), *_div(trace, setup)]


def _scale_onset(trace: Trace, setup) -> list[Expect]:
    """From the first skipped step the scale only loses ground: the collapse starts there."""
    steps, scale, _ = trace.get("loss_scale")
    first_drop = np.flatnonzero(np.diff(scale) < 0)
    onset = int(steps[first_drop[0] + 1]) if first_drop.size else 0
    return [Expect("amp_overflow", onset, max(60, trace.last_step // 4))]


def _died_at(steps: np.ndarray, shares: np.ndarray, window: int, last_step: int) -> Expect:
    """dead_units when the units died: the first step from which the rolling median of the share of dead (or
    saturated) units stays at or above the middle of its rise, halfway from its first value (the freshly
    initialised net) to its final level (the median of the last tenth).

    Not where it passes a fixed level such as DEAD_FRACTION: units die in a few large updates (0.5 -> 0.87 of
    zeros in ~30 steps) and the share then creeps up for the rest of the run (-> 0.95 over 600), so a fixed
    level is crossed wherever the creep happens to reach it (steps 47 to 128 across seeds of one config)."""
    final = float(np.median(shares[-max(1, shares.size // 10) :]))
    middle = 0.5 * (float(shares[0]) + final)
    below = np.flatnonzero(_rolling_median(shares, window) < middle)
    first = min(int(below[-1]) + 1, shares.size - 1) if below.size else 0
    return Expect("dead_units", int(steps[first]), max(60, last_step // 8))


def _dead_onset(trace: Trace, setup) -> list[Expect]:
    worst = np.max([trace.get(n)[1] for n in trace.names("zero_frac/")], axis=0)
    steps = trace.get(trace.names("zero_frac/")[0])[0]
    return [_died_at(steps, worst, 9, trace.last_step)]


def _zero(values: np.ndarray) -> np.ndarray:
    return values == 0


def _saturated(values: np.ndarray) -> np.ndarray:
    return np.abs(values) > 0.95


def _act_shares(trace: Trace, state) -> tuple[np.ndarray, np.ndarray]:
    """(steps, the largest share of units in `state` (`_zero`, `_saturated`) over the activation histograms)."""
    names = [n for n in trace.histograms if n.startswith("hist_act/")]
    steps = np.array([s for s, _, _ in trace.histograms[names[0]]])
    shares = np.max([[float(state(v).mean()) for _, v, _ in trace.histograms[n]] for n in names], axis=0)
    return steps, shares


def _act_onset(state):
    """The expectation: dead_units when the share of units in `state` made the middle of its rise."""

    def expect(trace: Trace, setup) -> list[Expect]:
        return [_died_at(*_act_shares(trace, state), 3, trace.last_step)]

    return expect


def _saddle(trace: Trace, setup) -> list[Expect]:
    """The plateau at ln K from the start until the gradient norm leaves the saddle."""
    steps, norm, _ = trace.get("grad_norm")
    escape = np.flatnonzero(norm > 1e-3)
    end = int(steps[escape[0]]) if escape.size else trace.last_step
    return [Expect("plateau", 0, max(30, end // 2))]


# ---- checks: did this seed's run show what its label says? ---------------------------------------------------

#: A gradient norm this many times its early median is an explosion.
EXPLOSION_FACTOR = 100.0
#: A ReLU layer with more than this fraction of zero activations is mostly dead.
DEAD_FRACTION = 0.9
#: A tanh layer with more than this fraction of outputs beyond ±0.95 is mostly saturated (passes ~no gradient).
SATURATED_FRACTION = 0.8


def _final(trace: Trace, name: str, share: float = 0.1) -> float:
    values = trace.get(name)[1]
    tail = values[-max(1, int(values.size * share)) :]
    return float(np.mean(tail))


def _chance(trace: Trace) -> float:
    return float(np.log(trace.num_classes))


def check_healthy(trace: Trace) -> str | None:
    if not np.isfinite(trace.get("loss")[1]).all():
        return "non-finite loss"
    if trace.has("val_loss") and trace.num_classes and _final(trace, "val_loss") > 0.8 * _chance(trace):
        return f"validation loss ends at {_final(trace, 'val_loss'):.3f}, near chance"
    return None


def check_no_learning(trace: Trace) -> str | None:
    """Validation stays where predicting the class frequencies would put it."""
    val = _final(trace, "val_loss", 0.2)
    acc = _final(trace, "val_acc", 0.2)
    if val < 0.95 * trace.prior_loss or acc > trace.prior_acc + 0.06:
        return f"validation loss {val:.3f} (prior {trace.prior_loss:.3f}), accuracy {acc:.2f}"
    return None


def check_diverged(trace: Trace) -> str | None:
    loss = trace.get("loss")[1]
    end = _final(trace, "loss")
    return None if not np.isfinite(end) or end > 2 * np.nanmin(loss) else f"loss ends at {end:.3f}"


def check_collapse(trace: Trace) -> str | None:
    """An early jump, and the run stays far from where a healthy one ends (near chance)."""
    loss = trace.get("loss")[1]
    if np.max(loss[:20]) < 1.15 * loss[0]:
        return "no early jump"
    val = _final(trace, "val_loss", 0.2)
    return None if val > 0.8 * _chance(trace) else f"validation loss recovered to {val:.3f}"


def check_nan_from_start(trace: Trace) -> str | None:
    loss = trace.get("loss")[1]
    return None if not np.isfinite(loss[:3]).any() and not np.isfinite(loss).any() else "finite losses"


def check_slow(trace: Trace) -> str | None:
    """It learned, and is still falling in the last quarter of the run: stopped long before it converged."""
    val = trace.get("val_loss")[1]
    last_quarter = val[int(0.75 * (val.size - 1))]
    if not val[-1] < 0.97 * val[0]:
        return f"validation barely moved ({val[0]:.3f} -> {val[-1]:.3f})"
    return None if val[-1] < 0.99 * last_quarter else f"flat at the end ({last_quarter:.3f} -> {val[-1]:.3f})"


def check_exploded(trace: Trace) -> str | None:
    norm = trace.get("grad_norm")[1]
    return None if not (np.nanmax(norm) <= EXPLOSION_FACTOR * np.median(norm[:20])) else "no explosion"


def check_vanishing(trace: Trace) -> str | None:
    first = trace.get(trace.names("grad_norm/")[0])[1]
    return None if np.median(first) < 1e-6 else f"first layer's gradient norm is {np.median(first):.2g}"


def check_dead(trace: Trace) -> str | None:
    worst = max(_final(trace, n) for n in trace.names("zero_frac/"))
    return None if worst > DEAD_FRACTION else f"at most {worst:.2f} of units are zero"


def _check_act(state, threshold: float, what: str):
    """The check: the recent median share of units in `state` is above `threshold`."""

    def check(trace: Trace) -> str | None:
        shares = _act_shares(trace, state)[1]
        worst = float(np.median(shares[-max(3, shares.size // 10) :]))
        return None if worst > threshold else f"at most {worst:.2f} of units are {what}"

    return check


def _first_layer_grad(trace: Trace) -> float:
    first = next(n for n in trace.histograms if n.startswith("hist_grad/"))
    return float(np.median([np.linalg.norm(v) for _, v, _ in trace.histograms[first]]))


def check_vanishing_histograms(trace: Trace) -> str | None:
    norm = _first_layer_grad(trace)
    return None if norm < 1e-6 else f"first layer's gradient norm is {norm:.2g}"


def check_healthy_histograms(trace: Trace) -> str | None:
    return check_healthy(trace) or (None if _first_layer_grad(trace) > 1e-4 else "the first layer gets no gradient")


def check_imbalance(trace: Trace) -> str | None:
    share = np.mean(trace.get("task/reg")[1] / trace.get("loss")[1])
    cls = _final(trace, "val_task/cls", 0.2)
    return None if share > 0.8 and cls > 0.9 * _chance(trace) else f"reg share {share:.2f}, cls ends {cls:.3f}"


def check_scale_collapse(trace: Trace) -> str | None:
    end = trace.get("loss_scale")[1][-1]
    return None if end < 1.0 else f"loss scale ends at {end:g}"


def check_bottleneck(trace: Trace) -> str | None:
    share = np.median(trace.get("data_time")[1] / trace.get("step_time")[1])
    return None if share > 0.5 else f"data is {share:.0%} of a step"


def check_saddle(trace: Trace) -> str | None:
    norm = trace.get("grad_norm")[1]
    if np.median(norm[:20]) > 1e-5:
        return f"starts at gradient norm {np.median(norm[:20]):.2g}"
    return None if _final(trace, "loss") < 0.9 * _chance(trace) else "never left the saddle"


def check_bouncing(trace: Trace) -> str | None:
    """lr too high: through the second half the training loss stays up (no memorising), stops improving, and
    the validation loss jumps from one evaluation to the next (a healthy run's moves by ~1-2 % of its level)."""
    loss = trace.get("loss")[1]
    half = loss.size // 2
    level, third, fourth = (
        float(np.median(part)) for part in (loss[half:], loss[half : 3 * half // 2], loss[3 * half // 2 :])
    )
    if level < 0.3 * _chance(trace):
        return f"training loss sits at {level:.3f} in the second half: it learned (or memorised)"
    if fourth < 0.8 * third:
        return f"training loss still falling ({third:.3f} -> {fourth:.3f})"
    val = trace.get("val_loss")[1]
    jumps = np.abs(np.diff(val[val.size // 2 :]))
    jump = float(np.median(jumps) / np.median(val[val.size // 2 :]))
    return None if jump > 0.04 else f"validation moves by {jump:.1%} of its level between evaluations"


def check_overfit(trace: Trace) -> str | None:
    val = trace.get("val_loss")[1]
    return None if val[-1] > 1.3 * val.min() else f"validation ends {val[-1] / val.min():.2f}x its best"


# ---- the cases --------------------------------------------------------------------------------------------

#: The MLP family's sane run: a tanh MLP on teacher-labelled vectors, 2048 samples, 20 epochs of 32 steps.
MLP = Setup(label_noise=0.1, n_train=2048, steps=640, act="tanh", batch=64)
MLP_SGD = replace(MLP, optimizer="sgd", lr=0.02)
#: A 4-layer post-LN transformer on token sequences at a peak lr that needs warmup.
TRANSFORMER = Setup(
    data="seq", model="transformer", depth=4, n_train=2048, batch=64, steps=300, lr=0.03, schedule="cosine"
)
#: A vanilla tanh RNN on the adding problem (a stream), SGD with momentum.
RNN = Setup(
    data="adding", model="rnn", hidden=64, n_train=None, batch=32, steps=400, eval_every=25, optimizer="sgd", lr=0.03
)
#: 12 layers deep, per-layer gradient norms logged.
DEEP = replace(MLP, depth=12, hidden=32, optimizer="sgd", lr=0.05, log_layers=True)
#: Three tanh layers without biases, initialised 1000x too small.
SADDLE = replace(MLP, depth=3, init_gain=1e-3, bias=False, lr=3e-4)
#: Shared trunk, a classification head and a regression head, loss = CE + MSE.
TWO_HEAD = replace(MLP, model="twohead", optimizer="sgd", lr=0.01)
#: Histograms are logged every this many steps: 21 points in a 640-step run (findings on fewer than 20 points
#: are only `info`), and a file of ~100 KB.
HIST_EVERY = 32


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
            # The twin's SGD (momentum 0.9) at lr 0.45: each step overshoots the valley, so the loss never
            # settles; it keeps bouncing at ~1.7-2x the twin's level and the validation loss jumps by 5-15 % of
            # its level between evaluations (the twin: 1-2 %). At lr 0.3 the same net memorises the noisy labels
            # instead (training loss -> 0.1: overfitting, not oscillation); at 0.6 it sits near chance.
            replace(MLP_SGD, lr=0.45),
            ("pytorch", "hf", "keras", "lightning"),
            twin="healthy_sgd",
            expect=whole_run("oscillation"),
            # The weights it bounces between give overconfident wrong answers: the validation loss rises above
            # its early best while the training loss does not fall, which a reader may call overfitting too.
            also_ok=("loss_spike", "overfitting"),
            check=check_bouncing,
            note="SGD lr 0.45 (22x the twin): the loss bounces at ~2x the healthy level, validation jumps",
        ),
        Case(
            "lr_far_too_high",
            "lr_too_high",
            # The same SGD at lr 0.8 (40x the twin): after a few steps of learning the updates throw the weights out
            # of the valley for good, and the loss bounces at 1.2-1.6x the untrained model's for the rest of the run:
            # worse than where it started, without the climb of a divergence (at lr 1.2 it doubles: divergence).
            replace(MLP_SGD, lr=0.8),
            ("pytorch", "tensorboardx", "hf", "lightning"),
            twin="healthy_sgd",
            # Bouncing at twice the untrained loss, "it blew up and never came back" is as right a name.
            expect=whole_run("oscillation", alternatives=("divergence",)),
            also_ok=("loss_spike", "overfitting"),
            check=check_bouncing,
            seeds=(0, 1, 2, 3),
            note="SGD lr 0.8 (40x the twin): the loss bounces above the untrained model's for the whole run",
        ),
        Case(
            "lr_too_high_divergence",
            "lr_too_high",
            replace(MLP_SGD, lr=3.0),
            ("tensorboardx", "keras_batch", "timm"),
            twin="healthy_sgd",
            expect=_div,
            also_ok=("oscillation", "loss_spike", "exploding_gradients"),
            check=check_diverged,
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
            check=check_slow,
            note="Adam lr 1e-4 (10x too low): still falling steeply when the run ends",
        ),
        Case(
            "lr_too_low_sgd",
            "lr_too_low",
            replace(MLP_SGD, lr=1e-3, momentum=0.0),
            ("pytorch", "keras_batch", "tensorboardx", "timm"),
            twin="healthy_sgd",
            expect=whole_run("slow_convergence"),
            also_ok=("plateau",),
            check=check_slow,
            note="plain SGD at 1e-3 without momentum: the loss creeps down from ln 4 the whole run",
        ),
        Case(
            "lr_far_too_low",
            "lr_too_low",
            replace(MLP, lr=1e-6),
            ("hf", "lightning", "keras"),
            twin="healthy_adam",
            expect=whole_run("no_learning"),
            also_ok=("slow_convergence", "plateau"),
            check=check_no_learning,
            note="Adam lr 1e-6 (1000x too low): the loss stays at ln 4 and accuracy at chance",
        ),
        Case(
            "lr_zero",
            "lr_zero",
            replace(MLP, lr=0.0),
            ("pytorch", "timm", "keras_batch"),
            twin="healthy_adam",
            expect=whole_run("no_learning"),
            also_ok=("plateau", "slow_convergence", "lr_anomaly"),
            check=check_no_learning,
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
            check=check_no_learning,
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
            check=check_no_learning,
            note="labels permuted against inputs: training memorises a little, validation stays at chance",
        ),
        Case(
            "shuffled_labels_memorising",
            "shuffled_labels",
            # A wider net on a quarter of the data memorises the permuted labels outright: its training loss falls to
            # ~0.05 and its training accuracy to 1.0, while the validation accuracy stays at chance and the
            # validation loss climbs from ln 4 (nothing learned carries over): no longer a loss pinned near ln K.
            replace(MLP, shuffle_labels=True, hidden=256, n_train=512, eval_every=32),
            ("pytorch", "tensorboardx", "hf"),
            twin="healthy_adam",
            expect=whole_run("no_learning"),
            also_ok=("overfitting", "plateau", "slow_convergence"),
            check=check_no_learning,
            note="labels permuted against inputs, memorised: training loss -> 0.05, validation at chance",
        ),
        Case(
            "warmup_uncapped",
            "warmup_uncapped",
            replace(MLP_SGD, schedule="warmup_uncapped", warmup=20),
            ("hf", "lightning", "pytorch"),
            twin="healthy_warmup",
            expect=_div,
            also_ok=("lr_anomaly", "oscillation", "loss_spike", "overfitting", "exploding_gradients"),
            check=check_diverged,
            note="linear warmup without min(1, ...): lr grows without bound and training comes apart",
        ),
    ]
    # -- data --
    c += [
        Case(
            "poisoned_shard_once",
            "poisoned_shard",
            replace(MLP, n_train=None, poison_steps=tuple(range(300, 310)), eval_every=32),
            STEP_CONVENTIONS[:3],
            twin="healthy_stream",
            expect=_poison_once,
            note="a stream reads a corrupted shard (raw unnormalised bytes) at steps 300-309",
        ),
        Case(
            "healthy_stream", "healthy", replace(MLP, n_train=None, eval_every=32), STEP_CONVENTIONS[:3], healthy=True
        ),
        Case(
            "poisoned_shard_every_epoch",
            "poisoned_shard",
            replace(MLP, shuffle=False, poison_batches=(10, 11, 12, 13, 14)),
            ("pytorch", "tensorboardx", "keras_batch"),
            twin="healthy_adam",
            expect=_poison_periodic,
            also_ok=("loss_spike",),
            note="no shuffling and a corrupted shard of 5 batches: a spike at the same place in every epoch",
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
            check=check_overfit,
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
    # -- architectures and initialisation --
    c += [
        Case(
            "no_warmup_transformer",
            "no_warmup",
            TRANSFORMER,
            ("hf", "lightning", "pytorch", "keras_batch"),
            twin="healthy_transformer_warmup",
            expect=early("warmup_instability", 30),
            also_ok=("no_learning", "divergence", "loss_spike", "plateau"),
            check=check_collapse,
            note="post-LN transformer, Adam 3e-2 from step 0: collapses in its first steps and stays at ln 4",
        ),
        Case(
            "healthy_transformer_warmup",
            "healthy",
            replace(TRANSFORMER, warmup=100),
            ("hf", "lightning", "pytorch", "keras_batch"),
            healthy=True,
            note="the same peak lr after a 100-step linear warmup, cosine decay",
        ),
        Case(
            "rnn_no_clipping",
            "no_clipping",
            RNN,
            ("pytorch", "tensorboardx", "hf", "lightning"),
            twin="healthy_rnn_clipped",
            expect=_grad_onset,
            # The explosion comes in the first 5 % of the run, where warmup is a fair reading too.
            also_ok=("loss_spike", "divergence", "oscillation", "warmup_instability"),
            check=check_exploded,
            note="vanilla tanh RNN, SGD 0.03 without clipping: the gradient norm leaps 1000x and the loss with it",
        ),
        Case(
            "rnn_no_clipping_nan",
            "no_clipping",
            replace(RNN, lr=0.06),
            ("pytorch", "tensorboardx", "hf", "lightning"),
            twin="healthy_rnn_clipped",
            expect=_rnn_nan,
            also_ok=("loss_spike", "warmup_instability"),
            check=check_diverged,
            note="the same RNN at lr 0.06: the explosion ends in NaN",
        ),
        Case(
            "healthy_rnn_clipped",
            "healthy",
            replace(RNN, clip=1.0),
            ("pytorch", "tensorboardx", "hf", "lightning"),
            healthy=True,
            note="clip_grad_norm_(1.0): the logged norm is the one before clipping, spikes included",
        ),
        Case(
            "vanishing_sigmoid_stack",
            "sigmoid_deep_stack",
            replace(DEEP, act="sigmoid"),
            ("pytorch", "tensorboardx", "lightning", "hf", "detectron2"),
            twin="healthy_deep_relu",
            expect=whole_run("vanishing_gradients"),
            also_ok=("no_learning", "plateau", "slow_convergence"),
            check=check_vanishing,
            note="12 sigmoid layers: the first layer's gradient norm is ~1e-10 and the net never learns",
        ),
        Case(
            "healthy_deep_relu",
            "healthy",
            replace(DEEP, act="relu", init_gain=2.45),
            ("pytorch", "tensorboardx", "lightning", "hf", "detectron2"),
            healthy=True,
            note="the same depth with ReLU and He init",
        ),
        Case(
            "saddle_tiny_init",
            "bad_init",
            SADDLE,
            ("pytorch", "hf", "lightning"),
            twin="healthy_no_bias",
            expect=_saddle,
            also_ok=("slow_convergence",),
            check=check_saddle,
            note="weights x1e-3, no biases: loss at ln 4 while the gradient norm grows from 1e-9 until it leaves the saddle",
        ),
        Case(
            "healthy_no_bias", "healthy", replace(SADDLE, init_gain=1.0), ("pytorch", "hf", "lightning"), healthy=True
        ),
        Case(
            "dying_relu",
            "lr_too_high",
            replace(MLP, act="relu", lr=0.05, log_zero_frac=True),
            ("pytorch", "tensorboardx", "lightning", "hf", "detectron2"),
            twin="healthy_relu",
            expect=_dead_onset,
            also_ok=("overfitting", "oscillation", "loss_spike"),
            check=check_dead,
            note="ReLU MLP, Adam 0.05: most units of the second layer die (zero fraction logged per layer)",
        ),
        Case(
            "healthy_relu",
            "healthy",
            replace(MLP, act="relu", log_zero_frac=True),
            ("pytorch", "tensorboardx", "lightning", "hf", "detectron2"),
            healthy=True,
        ),
    ]
    # -- the same stories told only by histograms (add_histogram of weights, gradients, activations) --
    c += [
        Case(
            "dying_relu_histograms",
            "lr_too_high",
            replace(MLP, act="relu", lr=0.05, log_histograms=HIST_EVERY),
            ("pytorch", "tensorboardx"),
            twin="healthy_relu_histograms",
            expect=_act_onset(_zero),
            also_ok=("overfitting", "oscillation", "loss_spike"),
            check=_check_act(_zero, DEAD_FRACTION, "zero"),
            seeds=(0, 1),
            note="dying_relu, logging histograms of every layer's weights, gradients and outputs instead of zero fractions",
        ),
        Case(
            "healthy_relu_histograms",
            "healthy",
            replace(MLP, act="relu", log_histograms=HIST_EVERY),
            ("pytorch", "tensorboardx"),
            healthy=True,
            seeds=(0, 1),
        ),
        Case(
            "saturated_tanh_histograms",
            "lr_too_high",
            replace(MLP, lr=0.05, log_histograms=HIST_EVERY),
            ("pytorch", "tensorboardx"),
            twin="healthy_tanh_histograms",
            expect=_act_onset(_saturated),
            also_ok=("overfitting", "oscillation", "loss_spike"),
            check=_check_act(_saturated, SATURATED_FRACTION, "saturated"),
            seeds=(0, 1),
            note="tanh MLP, Adam 0.05: most outputs of the second layer pinned at ±1 within a hundred steps",
        ),
        Case(
            "healthy_tanh_histograms",
            "healthy",
            replace(MLP, log_histograms=HIST_EVERY),
            ("pytorch", "tensorboardx"),
            healthy=True,
            seeds=(0, 1),
        ),
        Case(
            "vanishing_sigmoid_histograms",
            "sigmoid_deep_stack",
            replace(DEEP, act="sigmoid", log_layers=False, log_histograms=HIST_EVERY, histogram_kinds=("grad",)),
            ("pytorch", "tensorboardx"),
            twin="healthy_deep_relu_histograms",
            expect=whole_run("vanishing_gradients"),
            also_ok=("no_learning", "plateau", "slow_convergence"),
            check=check_vanishing_histograms,
            seeds=(0, 1),
            note="12 sigmoid layers with only gradient histograms per layer: the first layer's are ~1e-10 wide",
        ),
        Case(
            "healthy_deep_relu_histograms",
            "healthy",
            replace(
                DEEP, act="relu", init_gain=2.45, log_layers=False, log_histograms=HIST_EVERY, histogram_kinds=("grad",)
            ),
            ("pytorch", "tensorboardx"),
            healthy=True,
            check=check_healthy_histograms,
            seeds=(0, 1),
        ),
    ]
    # -- multi-task, system, precision --
    c += [
        Case(
            "unweighted_multitask",
            "unweighted_loss_sum",
            replace(TWO_HEAD, reg_scale=30.0, lr=1e-4),
            ("pytorch", "detectron2", "ultralytics", "keras", "hf"),
            twin="healthy_multitask",
            expect=whole_run("task_imbalance"),
            also_ok=("slow_convergence", "no_learning", "plateau"),
            check=check_imbalance,
            note="CE + MSE on a target in raw units (~30x): MSE is >90 % of the sum and the class head stays at ln 4",
        ),
        Case(
            "healthy_multitask",
            "healthy",
            TWO_HEAD,
            ("pytorch", "detectron2", "ultralytics", "keras", "hf"),
            healthy=True,
            note="the same two heads with the regression target standardised",
        ),
        Case(
            "slow_loader",
            "slow_data_loading",
            replace(MLP, loader_delay=0.02, steps=320),
            ("detectron2", "pytorch", "hf", "tensorboardx"),
            twin="healthy_fast_loader",
            expect=whole_run("input_bottleneck"),
            check=check_bottleneck,
            note="a synchronous loader that blocks 20 ms a batch: data time is ~95 % of every step",
        ),
        Case(
            "healthy_fast_loader",
            "healthy",
            replace(MLP, steps=320),
            ("detectron2", "pytorch", "hf", "tensorboardx"),
            healthy=True,
        ),
        Case(
            "fp16_overflow",
            "fp16_overflow",
            replace(MLP, amp=True, outlier_frac=0.003),
            ("pytorch", "tensorboardx", "hf", "lightning"),
            twin="healthy_amp",
            expect=_scale_onset,
            also_ok=("no_learning", "plateau", "slow_convergence"),
            check=check_scale_collapse,
            note="fp16 with GradScaler's rule; 0.3 % of samples hold a 99999 sentinel (inf in fp16): the scale collapses",
        ),
        Case(
            "healthy_amp",
            "healthy",
            replace(MLP, amp=True),
            ("pytorch", "tensorboardx", "hf", "lightning"),
            healthy=True,
            note="fp16 on clean data: the scale saw-tooths between 2^17 and 2^19, an inf grad norm on skipped steps",
        ),
    ]
    # -- hard healthy shapes --
    c += [
        Case(
            "healthy_rl_gridworld",
            "healthy",
            RLSetup(),
            ("sb3", "rl_tensorboardx"),
            healthy=True,
            note="REINFORCE with a baseline on a 7x7 gridworld: noisy returns, a policy loss around 0",
        ),
        Case(
            "healthy_finetune",
            "healthy",
            replace(MLP, pretrain_steps=400, lr=1e-4),
            ("hf", "lightning", "keras"),
            healthy=True,
            note="fine-tune from a checkpoint of the same task: the loss starts low and barely moves",
        ),
    ]
    # -- broken data and broken processes --
    c += [
        Case(
            "nan_in_inputs",
            "nan_in_data",
            replace(MLP, nan_frac=0.05),
            ("keras", "pytorch", "hf"),
            twin="healthy_adam",
            expect=_nan_from_start,
            check=check_nan_from_start,
            note="5 % of samples hold a NaN reading that was never imputed: the loss is NaN from the first batch",
        ),
        Case(
            "died_before_first_log",
            "crash_at_start",
            replace(MLP, crash_at=0),
            ("pytorch", "tensorboardx", "keras"),
            twin="healthy_adam",
            expect=_truncated,
            no_data=True,
            note="the job died before its first log: each folder holds an events file with only its header",
        ),
    ]
    return c


def _poison_periodic_sorted(trace: Trace, setup: Setup) -> list[Expect]:
    return [Expect("periodic_spikes", 0, 2 * trace.steps_per_epoch)]


def seeds_of(case: Case) -> tuple[int, ...]:
    return case.seeds or tuple(range(max(3, len(case.conventions))))


def case_map() -> dict[str, Case]:
    out = {case.name: case for case in cases()}
    assert len(out) == len(cases()), "case names are unique"
    return out
