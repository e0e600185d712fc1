"""Training-pathology detectors: one module per kind (or family), each `detect(RunData) -> list[Finding]`.

Together they cover every kind in `model.FINDING_KINDS`; `run_detectors` runs them all and orders the
findings most severe first, then by onset.
"""

from __future__ import annotations

from ..datamodel import SEVERITIES, Finding
from . import (
    activations,
    amp,
    convergence,
    divergence,
    gradients,
    learning,
    lr,
    notes,
    oscillation,
    overfitting,
    resources,
    spikes,
    stalled,
    tasks,
    warmup,
    weights,
)
from .base import ExternalSeries, LogdirContext, RunData

#: (module, kinds it can report), in the order they run.
DETECTORS = (
    (divergence, ("divergence",)),
    (spikes, ("loss_spike", "periodic_spikes")),
    (oscillation, ("oscillation",)),
    (learning, ("no_learning",)),
    (convergence, ("slow_convergence", "plateau")),
    (overfitting, ("overfitting",)),
    (gradients, ("exploding_gradients", "vanishing_gradients")),
    (activations, ("dead_units",)),
    (weights, ("weight_growth",)),
    (warmup, ("warmup_instability",)),
    (resources, ("input_bottleneck",)),
    (tasks, ("task_imbalance",)),
    (amp, ("amp_overflow",)),
    (lr, ("lr_anomaly",)),
    (notes, ("run_restart", "data_integrity")),
    (stalled, ("stalled",)),
)


def severity_rank(finding: Finding) -> int:
    """0 for critical, 1 warning, 2 info: sort keys that put the worst first."""
    return SEVERITIES.index(finding.severity) if finding.severity in SEVERITIES else len(SEVERITIES)


def run_detectors(data: RunData) -> list[Finding]:
    """Every detector's findings on one run, worst first, then by onset step."""
    found: list[Finding] = []
    for module, _kinds in DETECTORS:
        found.extend(module.detect(data))
    return sorted(found, key=lambda f: (severity_rank(f), f.step if f.step is not None else -1, f.kind))


__all__ = ["DETECTORS", "ExternalSeries", "LogdirContext", "RunData", "run_detectors", "severity_rank"]
