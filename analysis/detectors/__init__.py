"""Training-pathology detectors: one module per kind (or family), each `detect(RunData) -> list[Finding]`.

Each module declares the kinds it reports (`KINDS`); together they cover every row of `findings.KINDS`
(adding a kind: see `findings.py`). `run_detectors` runs them all and orders the findings with
`findings.finding_order`: most severe first, then by onset.
"""

from __future__ import annotations

from ..datamodel import Finding
from ..findings import finding_order
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

#: Detector modules, in the order they run; each declares the kinds it reports as `module.KINDS`.
DETECTORS = (
    divergence,
    spikes,
    oscillation,
    learning,
    convergence,
    overfitting,
    gradients,
    activations,
    weights,
    warmup,
    resources,
    tasks,
    amp,
    lr,
    notes,
    stalled,
)


def run_detectors(data: RunData) -> list[Finding]:
    """Every detector's findings on one run, worst first, then by onset step (`findings.finding_order`)."""
    found: list[Finding] = []
    for module in DETECTORS:
        found.extend(module.detect(data))
    return sorted(found, key=finding_order)


__all__ = ["DETECTORS", "ExternalSeries", "LogdirContext", "RunData", "run_detectors"]
