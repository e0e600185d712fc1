"""Snapshots of the main screen, the run dashboard and the compare screen at 80x24 and 160x48.

Deterministic: the runs are built in memory from fixed numbers, reports are planted by hand,
the clock is fixed (so liveness ages never change) and live follow is off. Update them with
`pytest tests/test_snapshots.py --snapshot-update` after a deliberate change, and look at the SVGs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tbtriage.analysis.config import Config
from tbtriage.analysis.datamodel import HistogramSeries, Run, Series
from tbtriage.tui.app import make_app
from tests._app_data import NOW, HandAnalyzer, fixed_clock, settle
from tests._report_data import finding

POINTS = 400
STEPS = np.arange(POINTS, dtype=np.int64) * 10


def _series(values: np.ndarray, minutes_ago: float) -> Series:
    """Points ten seconds apart, the last one `minutes_ago` before the fixed clock."""
    walls = NOW - minutes_ago * 60 - 10.0 * (POINTS - 1 - np.arange(POINTS))
    return Series(STEPS, walls, np.asarray(values, dtype=np.float64))


def _run(name: str, scalars: dict[str, np.ndarray], minutes_ago: float) -> Run:
    series = {tag: _series(values, minutes_ago) for tag, values in scalars.items()}
    return Run(
        name=name,
        path=Path("runs") / name,
        scalars=series,
        last_step=int(STEPS[-1]),
        last_wall_time=float(NOW - minutes_ago * 60),
    )


def _runs() -> dict[str, Run]:
    rng = np.random.default_rng(7)
    t = np.arange(POINTS) / POINTS
    base = 0.4 + 2.0 * np.exp(-6 * t)
    noisy = base * (1 + 0.04 * rng.standard_normal(POINTS))
    diverged = noisy.copy()
    diverged[240:] = np.nan
    diverged[230:240] = np.linspace(1.0, 30.0, 10)
    lr = np.minimum(t / 0.1, 1.0) * 3e-3 * 0.5 * (1 + np.cos(np.pi * t))
    layers = {f"grad_norm/layer{i}": np.abs(1.0 * 10.0**-i * (1 + 0.2 * rng.standard_normal(POINTS))) for i in range(4)}
    layers["grad_norm/layer0"][225:240] *= 1e3
    overfit_val = 0.8 + 0.6 * (t - 0.5) ** 2 * 4
    return {
        "bert_base": _run(
            "bert_base",
            {
                "train/loss": noisy,
                "val/loss": noisy + 0.1,
                "lr": lr,
                "gpu/util": 90 + rng.standard_normal(POINTS),
                "time/step": 0.3 + 0.01 * rng.random(POINTS),
                "time/data": 0.02 + 0.01 * rng.random(POINTS),
            },
            0.5,
        ),
        "gpt_lr3e-3": _run(
            "gpt_lr3e-3",
            {
                "train/loss": diverged,
                "val/loss": diverged + 0.2,
                "lr": lr * 10,
                "optim/momentum": np.full(POINTS, 0.9),
                **layers,
            },
            42.0,
        ),
        "resnet_bs32": _run("resnet_bs32", {"train/loss": noisy * 0.8, "val/loss": overfit_val}, 200.0),
    }


class FixedLogdir:
    """A loaded logdir that never changes (live follow finds nothing)."""

    def __init__(self, runs: dict[str, Run]) -> None:
        self.path = Path("runs")
        self.runs = runs
        self.warnings: list[str] = []

    def refresh(self, **_) -> list[str]:
        return []


def _app():
    analyzer = HandAnalyzer({
        "gpt_lr3e-3": (18, [finding("gpt_lr3e-3", "divergence", "critical", 2400, tags=("train/loss",)),
                            finding("gpt_lr3e-3", "exploding_gradients", "critical", 2250, tags=("grad_norm/layer0",))]),
        "resnet_bs32": (64, [finding("resnet_bs32", "overfitting", "warning", 2000, tags=("val/loss",))]),
    })  # fmt: skip
    return make_app(
        "runs",
        config=Config(),
        follow=False,
        clock=fixed_clock,
        analyzer=analyzer,
        loader=lambda path, **_: FixedLogdir(_runs()),
    )


async def _loaded(pilot) -> None:
    await settle(pilot.app, pilot)


async def _dashboard(pilot) -> None:
    await _loaded(pilot)
    await pilot.press("enter")
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_main_screen(snap_compare, size):
    assert snap_compare(_app(), terminal_size=size, run_before=_loaded)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_run_dashboard(snap_compare, size):
    assert snap_compare(_app(), terminal_size=size, run_before=_dashboard)


async def _compare(pilot) -> None:
    await _loaded(pilot)
    await pilot.press("space", "j", "j", "space", "C")  # the worst run and the healthiest, side by side
    await settle(pilot.app, pilot)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_compare_screen(snap_compare, size):
    assert snap_compare(_app(), terminal_size=size, run_before=_compare)


HIST_STEPS = np.arange(0, 2000, 20, dtype=np.int64)


def _histograms(samples) -> HistogramSeries:
    """One histogram per HIST_STEPS step of `samples(step, rng)`, 30 equal buckets (Keras's TF2 layout)."""
    rng = np.random.default_rng(11)
    limits, counts, mins, maxs, sums = [], [], [], [], []
    for step in HIST_STEPS:
        values = samples(int(step), rng)
        c, edges = np.histogram(values, bins=30)
        limits.append(edges[1:])
        counts.append(c.astype(np.float64))
        mins.append(values.min())
        maxs.append(values.max())
        sums.append(values.sum())
    walls = NOW - 3600 + HIST_STEPS.astype(np.float64)
    nums = np.array([c.sum() for c in counts])
    return HistogramSeries(HIST_STEPS, walls, tuple(limits), tuple(counts), np.array(mins), np.array(maxs), nums,
                           np.array(sums))  # fmt: skip


def _histogram_runs() -> dict[str, Run]:
    run = _run("mlp_relu_dying", {"train/loss": 0.4 + 2.0 * np.exp(-np.arange(POINTS) / 80)}, 1.0)
    for k in range(4):  # the first layers' gradients fade: 0.3x per layer back from the output
        run.histograms[f"grads/fc{k}.weight"] = _histograms(
            lambda step, rng, k=k: 0.01 * 0.3 ** (3 - k) * (1 + step / 2000) * rng.standard_normal(400)
        )
    run.histograms["weights/fc1.weight"] = _histograms(
        lambda step, rng: (0.1 + step / 10000) * rng.standard_normal(400)
    )
    run.histograms["activations/relu1"] = _histograms(
        lambda step, rng: np.where(rng.random(400) < (1.0 if step < 1000 else 0.1), np.maximum(rng.standard_normal(400), 0), 0)
    )  # fmt: skip
    return {run.name: run}


def _histogram_app():
    return make_app(
        "runs",
        config=Config(),
        follow=False,
        clock=fixed_clock,
        analyzer=HandAnalyzer({}),
        loader=lambda path, **_: FixedLogdir(_histogram_runs()),
    )


async def _distributions(pilot) -> None:
    await _loaded(pilot)
    await pilot.press("h", "down", "down", "down", "down", "down")  # the ReLU activations, which die at 1000
    for _ in range(40):
        await pilot.press("left_square_bracket")
    await pilot.pause()


async def _gradient_flow(pilot) -> None:
    await _loaded(pilot)
    await pilot.press("h", "v", "left_square_bracket")
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_distributions(snap_compare, size):
    assert snap_compare(_histogram_app(), terminal_size=size, run_before=_distributions)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_gradient_flow(snap_compare, size):
    assert snap_compare(_histogram_app(), terminal_size=size, run_before=_gradient_flow)
