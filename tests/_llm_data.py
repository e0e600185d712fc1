"""Runs and reports for the LLM-diagnosis tests: a run that blows up at step 1210, with as many tags and
findings as a busy real run (30 tags, 10 findings), built by hand so the tests need no engine."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tbtriage.analysis.datamodel import Finding, RunReport
from tests._report_data import make_report, series

BLOWUP_STEP = 1210
GRAD_RISE_STEP = 1180
LAST_STEP = 1990


def _finding(
    kind: str,
    severity: str,
    tags: tuple[str, ...],
    step: int | None,
    end: int | None,
    evidence: dict,
    message: str,
    suggestion: str,
) -> Finding:
    return Finding(kind, severity, "bs256_lr3e-3", tags, step, end, evidence, message, suggestion)


def blowup_report(
    n_tags: int = 30,
    n_findings: int = 10,
    path: Path | None = None,
    name: str = "bs256_lr3e-3",
    loss_scale: float = 1.0,
) -> RunReport:
    """Loss turns NaN at 1210 after grad_norm climbs from 1180; plus filler tags and lesser findings."""
    steps = np.arange(0, LAST_STEP + 1, 10)
    loss = (3.0 * np.exp(-steps / 500) + 0.3) * loss_scale
    loss[steps >= BLOWUP_STEP] = np.nan
    grad = np.full(steps.shape, 1.2)
    rising = steps >= GRAD_RISE_STEP
    grad[rising] = np.linspace(1.2, 148.6, int(rising.sum()))
    lr = np.minimum(steps / 100, 1.0) * 3e-3
    curves = {
        "train/loss": ("train_loss", series(steps, loss)),
        "val/loss": ("val_loss", series(steps[::10], loss[::10] + 0.1)),
        "val/acc": ("metric", series(steps[::10], 1 - loss[::10] / 4)),
        "train/grad_norm": ("grad_norm", series(steps, grad)),
        "train/lr": ("lr", series(steps, lr)),
        "sys/gpu_mem": ("gpu_mem", series(steps, np.full(steps.shape, 17.5))),
    }
    for i in range(n_tags - len(curves)):
        curves[f"extra/metric_{i}"] = (None, series(steps, np.sin(steps / 100 + i)))
    findings = [
        _finding(
            "divergence",
            "critical",
            ("train/loss",),
            BLOWUP_STEP,
            None,
            {"first_nonfinite_step": BLOWUP_STEP, "last_finite": 0.412},
            f"train/loss became NaN at step {BLOWUP_STEP}",
            "lower the lr and clip gradients",
        ),
        _finding(
            "exploding_gradients",
            "critical",
            ("train/grad_norm",),
            GRAD_RISE_STEP,
            BLOWUP_STEP,
            {"baseline": 1.2, "peak": 148.6, "ratio": 123.8, "peak_step": BLOWUP_STEP},
            "grad_norm rose 124x above its baseline before the NaN",
            "clip the gradient norm at 1.0",
        ),
    ]
    kinds = [
        "loss_spike",
        "oscillation",
        "plateau",
        "overfitting",
        "lr_anomaly",
        "input_bottleneck",
        "slow_convergence",
        "weight_growth",
    ]
    for i, kind in enumerate(kinds[: max(0, n_findings - 2)]):
        findings.append(
            _finding(
                kind,
                "warning" if i % 2 else "info",
                (f"extra/metric_{i}",),
                100 * i + 50,
                None,
                {"value": 0.1 * i + 0.05, "ratio": 2.5 + i},
                f"{kind} seen on extra/metric_{i}",
                f"look into the {kind}",
            )
        )
    hparams = {
        "lr": 3e-3,
        "batch_size": 256,
        "optimizer": "adamw",
        "weight_decay": 0.01,
        "seed": 42,
        "model": "vit_b16",
        "dropout": 0.1,
        "notes": "baseline",
    }
    return make_report(name, curves, findings, hparams=hparams, path=path, texts={"config": "lr: 0.003\nbatch: 256"})
