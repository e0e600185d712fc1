"""The data model every stage shares: small dataclasses around numpy columns.

Reading produces `Run`s (inside a `Logdir`); the engine turns a `Run` into a `RunReport`
(roles, per-series features, findings, health); views only ever consume these types.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

# The finding vocabulary lives in `findings.py`; re-exported because `Finding` and `Note` speak it.
from .findings import FINDING_KINDS, SEVERITIES  # noqa: F401

if TYPE_CHECKING:  # numpy is imported where columns are made: a warm reopen's first screen has none to make
    import numpy as np

#: Roles a scalar tag can play. `metric` carries a direction separately.
ROLES = (
    "train_loss",
    "val_loss",
    "loss_component",
    "metric",
    "lr",
    "momentum",
    "grad_norm",
    "grad_norm_layer",
    "weight_norm",
    "activation_zero_frac",
    "loss_scale",
    "step_time",
    "data_time",
    "throughput",
    "gpu_util",
    "gpu_mem",
    "epoch",
    "context",
)


@dataclass(frozen=True, eq=False)
class Series:
    """One scalar curve: three aligned columns, in step order after restart resolution."""

    steps: np.ndarray  # int64
    wall_times: np.ndarray  # float64
    values: np.ndarray  # float64 (NaN and Inf preserved)

    def __len__(self) -> int:
        return int(self.steps.shape[0])

    def __repr__(self) -> str:
        # Short: Textual describes each worker by the repr of its call, and a chart's worker gets every charted
        # series; printing their arrays held the UI thread for tens of milliseconds per key.
        span = f", steps {self.steps[0]}..{self.steps[-1]}" if len(self) else ""
        return f"Series({len(self)} points{span})"

    @classmethod
    def empty(cls) -> Series:
        import numpy as np

        return cls(np.empty(0, np.int64), np.empty(0, np.float64), np.empty(0, np.float64))


@dataclass(frozen=True, eq=False)
class HistogramSeries:
    """Histograms of one tag over time: per point, bucket right edges and counts."""

    steps: np.ndarray  # int64
    wall_times: np.ndarray  # float64
    limits: tuple[np.ndarray, ...]  # per point: bucket right edges (float64)
    counts: tuple[np.ndarray, ...]  # per point: bucket counts (float64)
    mins: np.ndarray  # float64, per point
    maxs: np.ndarray  # float64, per point
    nums: np.ndarray  # float64, per point: total count
    sums: np.ndarray  # float64, per point

    def __len__(self) -> int:
        return int(self.steps.shape[0])


@dataclass(frozen=True)
class TextEntry:
    step: int
    wall_time: float
    text: str  # untrusted: escape before display


@dataclass(frozen=True)
class Note:
    """Something the reader noticed about the files themselves (corruption, restarts)."""

    kind: str  # "data_integrity" or "run_restart"
    file: str  # path of the file, relative to the logdir
    message: str  # one clear line naming the problem
    offset: int | None = None  # byte offset in `file` where it happened
    step: int | None = None
    severity: str = "warning"


@dataclass
class Run:
    """Everything read from one run directory. Mutated in place by live tailing."""

    name: str  # path relative to the logdir ("." for a logdir that is itself a run)
    path: Path | str  # the run directory; a URL for a run read from a store (s3://...)
    files: list[str] = field(default_factory=list)  # event file names, in read order
    scalars: dict[str, Series] = field(default_factory=dict)
    histograms: dict[str, HistogramSeries] = field(default_factory=dict)
    texts: dict[str, list[TextEntry]] = field(default_factory=dict)
    hparams: dict[str, Any] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)  # e.g. {"image": 12, "graph": 1}
    last_step: int | None = None
    last_wall_time: float | None = None
    bytes_read: int = 0
    # (file, byte offset) when the newest file ends in an incomplete record: a live writer mid-record, or a
    # crash that cut the file; the engine tells the two apart by how long ago the run last wrote.
    partial_tail: tuple[str, int] | None = None
    # Config files beside the events of a run on a store (name -> text), read with its events: a local run's
    # are read from `path` when needed (`run_config.run_hparams`).
    config_texts: dict[str, str] = field(default_factory=dict)


#: Feature `extra` values kept by `SeriesFeatures.without_curves`: numbers, text and small containers of them.
_SMALL = (int, float, str, bool, type(None), tuple, dict)


@dataclass(frozen=True, eq=False)
class SeriesFeatures:
    """Structured description of one series: what a person (or the LLM) needs, not the points."""

    tag: str
    role: str | None
    direction: int  # +1 higher is better, -1 lower is better, 0 unknown
    points: int
    first_step: int | None
    last_step: int | None
    best: float | None
    best_step: int | None
    final: float | None
    final_step: int | None
    first_nonfinite_step: int | None
    noise: float | None  # robust sigma of the residual around the rolling baseline
    outlier_steps: np.ndarray  # int64 steps beyond k·sigma of the baseline
    plateaus: tuple[tuple[int, int], ...]  # (start_step, end_step) of flat stretches
    trend: float | None  # recent relative slope (per 1 % of the run), sign = direction of change
    spike_period: int | None  # steps between recurring spikes, when periodic
    extra: dict[str, Any] = field(default_factory=dict)  # detector-specific numbers

    @classmethod
    def deferred(cls, later: Mapping[str, Callable[[], Any]], **fields: Any) -> SeriesFeatures:
        """Features whose fields named in `later` are worked out on first read, each by its callable, and kept.

        Most of a run's features are read by no detector (a noise estimate only task balance reads, the flat
        stretches of curves other than the main loss): analysis need not pay for them. Whatever reads them (a
        view, `repr`, `dataclasses.replace`, pickling for a pool or the verdict cache) gets the value it would
        have got had they been worked out at once: the callables are that same work, done later.
        """
        placeholders: dict[str, Any] = dict.fromkeys(later)
        made = cls(**fields, **placeholders)
        for name in later:
            object.__delattr__(made, name)
        object.__setattr__(made, "_later", dict(later))
        return made

    if not TYPE_CHECKING:  # hidden from the type checker, which would otherwise accept any attribute name

        def __getattr__(self, name: str) -> Any:
            # Only called for an attribute not set: a deferred field not read yet (or no attribute at all).
            later = self.__dict__.get("_later")
            make = later.get(name) if later else None
            if make is None:
                if name in self.__dict__:  # another thread worked it out meanwhile
                    return self.__dict__[name]
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            value = make()
            object.__setattr__(self, name, value)
            later.pop(name, None)
            return value

    def __getstate__(self) -> dict[str, Any]:
        # Pickled (a pool's worker, the verdict cache): every field worked out, nothing deferred travels.
        for name in list(self.__dict__.get("_later", ())):
            getattr(self, name)
        return {k: v for k, v in self.__dict__.items() if k != "_later"}

    def without_curves(self) -> SeriesFeatures:
        """These features without the detectors' bucketed curves (`extra` values that are arrays or arrays'
        summaries: only detectors read them; health, twins and every view read the numbers)."""
        return replace(self, extra={k: v for k, v in self.extra.items() if isinstance(v, _SMALL)})

    @property
    def has_curves(self) -> bool:
        """Whether `extra` holds anything `without_curves` drops."""
        return not all(isinstance(v, _SMALL) for v in self.extra.values())


@dataclass(frozen=True)
class Finding:
    kind: str  # one of findings.FINDING_KINDS
    severity: str  # one of findings.SEVERITIES
    run: str
    tags: tuple[str, ...]
    step: int | None
    end_step: int | None
    evidence: dict[str, Any]
    message: str
    suggestion: str
    #: Candidate causes, most likely first (`analysis.causes.Cause`; the engine attaches them).
    causes: tuple[Any, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "tags": list(self.tags),
            "step": self.step,
            "end_step": self.end_step,
            "evidence": self.evidence,
            "message": self.message,
            "suggestion": self.suggestion,
            "causes": [cause.to_dict() for cause in self.causes],
        }


@dataclass(frozen=True)
class Health:
    score: int | None  # 0-100; None when the run holds no scalar point to judge ("no data")
    components: dict[str, int | None]  # convergence, stability, gradient_health, resource_efficiency, overfitting_risk


@dataclass(frozen=True)
class PrimaryTags:
    """The one series of each kind a person looks at first (None where the run has none).

    Chosen once per run by `roles.primary_tags` and kept on its `RunReport`, so the app, the dashboard and
    the reports all headline the same series.
    """

    train_loss: str | None
    val_loss: str | None
    val_metric: str | None  # the validation metric with a direction (accuracy, mAP, perplexity ...)
    lr: str | None
    grad_norm: str | None

    @property
    def loss(self) -> str | None:
        """The run's headline loss: its training loss, else its validation loss."""
        return self.train_loss or self.val_loss

    @property
    def headline(self) -> str | None:
        """The one series a run is summarised by: its headline loss, else its validation metric."""
        return self.loss or self.val_metric


@dataclass
class RunReport:
    """The engine's verdict on one run."""

    name: str
    run: Run
    roles: dict[str, str | None]  # tag -> role (None when unknown)
    directions: dict[str, int]  # tag -> +1 / -1 / 0
    features: dict[str, SeriesFeatures]
    findings: list[Finding]
    health: Health
    primary_tags: PrimaryTags  # the headline series (`roles.primary_tags`), chosen once for every view
    #: The engine's own (findings, health), kept by `twins.attach_twins` the first time it re-weighs this report,
    #: so that attaching twins again starts from the verdict rather than from its previous result.
    engine_verdict: tuple[list[Finding], Health] | None = field(default=None, repr=False, compare=False)

    def tag_points(self) -> dict[str, int]:
        """Points per scalar tag, in the run's order: the run's series as they are (a live run grows), and for a
        tag whose points a Dask worker did not send back (`fleet.slim`), the count its features kept."""
        scalars = self.run.scalars
        points = {tag: len(scalars[tag]) if tag in scalars else f.points for tag, f in self.features.items()}
        points.update((tag, len(s)) for tag, s in scalars.items() if tag not in points)
        return points
