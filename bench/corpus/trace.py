"""What a training loop measured, before any tag convention names it: logical series of (step, value, wall).

The loop records every step; a convention (`conventions.py`) decides what its framework would have written
(every step, every N steps, the mean over a logging interval, once per epoch) and under which names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Series:
    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)  # seconds since the run started

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (
            np.asarray(self.steps, dtype=np.int64),
            np.asarray(self.values, dtype=np.float64),
            np.asarray(self.walls, dtype=np.float64),
        )


@dataclass
class Trace:
    """Everything one training run measured, keyed by logical name.

    Names: `loss` (train, per step), `acc` (train batch accuracy), `val_loss`, `val_acc` (at evaluations),
    `lr`, `grad_norm`, `grad_norm/<layer>`, `zero_frac/<layer>`, `loss_scale`, `data_time`, `step_time`,
    `task/<name>` (the terms of a multi-task loss), and RL's `return`, `ep_len`, `entropy`, `policy_loss`,
    `value_loss`, `explained_variance`.
    """

    steps_per_epoch: int
    series: dict[str, Series] = field(default_factory=dict)
    #: Segments written by separate processes (a restart starts a new event file in the same folder).
    segments: list[tuple[int, int]] = field(default_factory=list)  # (first step, last step) of each process
    num_classes: int | None = None
    #: Wall time (run clock) at which a restarted process began writing; points from then on are its own.
    restart_wall: float = math.inf
    #: Cross-entropy of predicting the validation set's class frequencies: what "learned nothing" scores.
    prior_loss: float | None = None
    prior_acc: float | None = None  # accuracy of always answering the most frequent class
    optimizer: str = "Adam"  # the optimizer's class name (Lightning's LearningRateMonitor puts it in the tag)
    #: Samples for histograms, by logical name (`hist_weight/<layer>`, `hist_grad/<layer>`, `hist_act/<layer>`):
    #: (step, values, wall) every `Setup.log_histograms` steps, the values the framework's add_histogram sees.
    histograms: dict[str, list[tuple[int, np.ndarray, float]]] = field(default_factory=dict)

    def log(self, name: str, step: int, value: float, wall: float) -> None:
        s = self.series.setdefault(name, Series())
        s.steps.append(int(step))
        s.values.append(float(value) if math.isfinite(value) else float(value))
        s.walls.append(float(wall))

    def log_histogram(self, name: str, step: int, values: np.ndarray, wall: float) -> None:
        self.histograms.setdefault(name, []).append((int(step), values, float(wall)))

    def get(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.series[name].arrays()

    def has(self, name: str) -> bool:
        return name in self.series and len(self.series[name].steps) > 0

    def names(self, prefix: str) -> list[str]:
        return [n for n in self.series if n.startswith(prefix)]

    @property
    def last_step(self) -> int:
        return int(max((max(s.steps) for s in self.series.values() if s.steps), default=0))
