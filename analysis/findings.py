"""The vocabulary of findings, once: every kind a detector may report, the severities, their order, identity.

Each row of `KINDS` is one finding kind: its name, what it means in one line (the table of DESIGN.md is a
summary of these rows), the health component it counts against, and the causes of the cause library
(`causes.py`) that can explain it, each with its prior. The engine, the health score, the renderers, `watch`, the app and the prompt read these
rows and the three functions below; none of them spells a kind, a severity order or a sort rule of its own.

Adding a finding kind is one detector module plus one row here:

1. write `analysis/detectors/<name>.py` with `KINDS = ("<kind>",)` and `detect(data) -> list[Finding]`, and
   add the module to `detectors.DETECTORS`;
2. add a `FindingKind` row below (name, meaning, component, causes with their priors).

`tests/test_vocabulary.py` fails when a detector emits a kind without a row, emits a kind it does not
declare, or a row has no detector that emits it on the labelled scenarios or the demo.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .datamodel import Finding

#: Most severe first. `critical`: the run is broken or wasting its compute; `warning`: it will likely end worse
#: than it should; `info`: worth knowing, nothing to act on yet.
SEVERITIES = ("critical", "warning", "info")
_SEVERITY_RANK = MappingProxyType({s: i for i, s in enumerate(SEVERITIES)})

#: The five parts of a run's health score (see `health.py` for how each is judged).
COMPONENTS = ("convergence", "stability", "gradient_health", "resource_efficiency", "overfitting_risk")


@dataclass(frozen=True)
class FindingKind:
    """One row of the vocabulary."""

    name: str
    meaning: str  # one line: what a person should understand by it
    component: str | None  # the health component it counts against; None: it acts only through the score's caps
    #: (cause id, prior) for each cause in the cause library (`causes.CAUSES`) that can explain this kind: the
    #: prior is how often it is the cause before the run's own evidence is read. Evidence moves it; a prior
    #: alone never makes a cause the answer (see `causes.UNCLEAR_BELOW`).
    causes: tuple[tuple[str, float], ...] = ()


#: Every finding kind, in the order of DESIGN.md's table (that order also breaks ties between findings of the
#: same severity at the same step: loss-level kinds before gradient, system and file-level ones).
KINDS: tuple[FindingKind, ...] = (
    FindingKind(
        "divergence",
        "the loss or a metric became NaN/Inf, or blew up and never recovered",
        "convergence",
        causes=(
            ("lr_too_high", 0.3),
            ("lr_schedule_unbounded", 0.15),
            ("no_warmup", 0.15),
            ("no_grad_clipping", 0.2),
            ("fp16_overflow", 0.1),
            ("bad_batch", 0.1),
            ("nan_in_inputs_or_loss", 0.1),
        ),
    ),
    FindingKind(
        "loss_spike",
        "isolated sudden jumps in the loss that recover",
        "stability",
        causes=(
            ("bad_batch", 0.3),
            ("lr_too_high", 0.2),
            ("no_grad_clipping", 0.15),
        ),
    ),
    FindingKind(
        "periodic_spikes",
        "spikes recur at a fixed period, often once per epoch (a bad shard, or no shuffling)",
        "stability",
        causes=(
            ("data_order", 0.4),
            ("bad_batch", 0.2),
        ),
    ),
    FindingKind(
        "oscillation",
        "the loss keeps bouncing with an amplitude large against its trend, or above the untrained model's loss "
        "(lr too high, batch too small)",
        "stability",
        causes=(
            ("lr_too_high", 0.35),
            ("batch_too_small", 0.2),
        ),
    ),
    FindingKind(
        "no_learning",
        "the loss never fell meaningfully below its start or the chance level ln(K), or a metric stayed at chance or "
        "identical at every evaluation (lr ~0, frozen parameters, misaligned labels)",
        "convergence",
        causes=(("lr_zero_or_frozen", 0.3), ("labels_or_loss_bug", 0.25), ("lr_too_low", 0.2)),
    ),
    FindingKind(
        "slow_convergence",
        "the loss falls far too slowly (lr too low, bad init, poor optimizer settings)",
        "convergence",
        causes=(
            ("lr_too_low", 0.35),
            ("saturating_activations_or_init", 0.15),
        ),
    ),
    FindingKind(
        "plateau",
        "the loss stayed flat for a long stretch",
        "convergence",
        causes=(
            ("lr_too_low", 0.25),
            ("saturating_activations_or_init", 0.15),
        ),
    ),
    FindingKind(
        "overfitting",
        "training loss keeps falling while the validation loss or metric gets worse",
        "overfitting_risk",
        causes=(("insufficient_regularization", 0.4),),
    ),
    FindingKind(
        "exploding_gradients",
        "the gradient norm spiked far above its own baseline",
        "gradient_health",
        causes=(
            ("no_grad_clipping", 0.3),
            ("lr_too_high", 0.25),
            ("lr_schedule_unbounded", 0.1),
            ("no_warmup", 0.1),
            ("bad_batch", 0.1),
        ),
    ),
    FindingKind(
        "vanishing_gradients",
        "gradient norms (often of early layers) near zero while learning stalls",
        "gradient_health",
        causes=(
            ("saturating_activations_or_init", 0.4),
            ("lr_too_low", 0.1),
        ),
    ),
    FindingKind(
        "dead_units",
        "activations mostly zero (dead ReLUs) or saturated",
        "gradient_health",
        causes=(
            ("lr_too_high", 0.3),
            ("saturating_activations_or_init", 0.25),
        ),
    ),
    FindingKind(
        "weight_growth",
        "weight norms growing fast late in training",
        "gradient_health",
        causes=(
            ("no_weight_decay", 0.35),
            ("lr_too_high", 0.2),
        ),
    ),
    FindingKind(
        "warmup_instability",
        "instability in the first steps that a warmup would prevent",
        "stability",
        causes=(
            ("no_warmup", 0.35),
            ("lr_too_high", 0.25),
            ("lr_schedule_unbounded", 0.1),
        ),
    ),
    # Measured directly by the resource component (data_time / step_time), so it would count twice there.
    FindingKind(
        "input_bottleneck",
        "data loading dominates the step time, or the device sits idle",
        None,
        causes=(("slow_data_loader", 0.45),),
    ),
    # No component judges how loss terms share the total; it acts only through the score's caps.
    FindingKind(
        "task_imbalance",
        "one loss term dominates the total while the others stall",
        None,
        causes=(("unweighted_loss_sum", 0.45),),
    ),
    FindingKind(
        "amp_overflow",
        "the mixed-precision loss scale keeps collapsing (overflow skips)",
        "gradient_health",
        causes=(("fp16_overflow", 0.45),),
    ),
    FindingKind(
        "lr_anomaly",
        "the learning rate does something its schedule shouldn't",
        "stability",
        causes=(
            ("schedule_bug", 0.4),
            ("lr_schedule_unbounded", 0.2),
        ),
    ),
    # About the files, not the training: they act only through the score's caps.
    FindingKind(
        "run_restart",
        "the run restarted: steps went backwards and the overlap was resolved",
        None,
        causes=(("resumed", 0.6),),
    ),
    FindingKind(
        "data_integrity",
        "an event file is truncated, corrupt, empty or unreadable; intact data was kept",
        None,
        causes=(("writer_crash", 0.6), ("nan_in_inputs_or_loss", 0.2)),
    ),
    FindingKind(
        "stalled",
        "the run stopped writing while others continue",
        "resource_efficiency",
        causes=(("process_stopped", 0.6),),
    ),
)

#: Kind name -> its row.
BY_NAME = MappingProxyType({k.name: k for k in KINDS})
#: The kind names alone, in registry order.
FINDING_KINDS = tuple(k.name for k in KINDS)
_KIND_ORDER = MappingProxyType({name: i for i, name in enumerate(FINDING_KINDS)})


def kinds_counted_in(component: str) -> tuple[str, ...]:
    """The kinds whose findings count against a health component."""
    return tuple(k.name for k in KINDS if k.component == component)


def severity_rank(severity: str) -> int:
    """0 for critical, 1 warning, 2 info; an unknown severity ranks after all of them."""
    return _SEVERITY_RANK.get(severity, len(SEVERITIES))


#: Where a finding without a step sorts among those with one. Such a finding is about the whole run (a
#: truncated file, a run that stopped) and has no onset to put in time order, so it comes after every
#: finding of its severity that does: the first thing a reader jumps to is a place on a curve.
NO_STEP = 1 << 62


def finding_order(finding: Finding) -> tuple:
    """Sort key, worst first: severity, then earliest onset (no step: last of its severity), run, kind, tags."""
    return (
        severity_rank(finding.severity),
        finding.step if finding.step is not None else NO_STEP,
        finding.run,
        _KIND_ORDER.get(finding.kind, len(_KIND_ORDER)),
        tuple(finding.tags),
    )


def timeline_order(finding: Finding) -> tuple:
    """Sort key for telling a run's story: onset first (no step: at the end), then as `finding_order`."""
    rank, step, *rest = finding_order(finding)
    return (step, rank, *rest)


FindingKey = tuple  # (run, kind, tags, onset step[, file, offset])


def finding_key(finding: Finding) -> FindingKey:
    """What makes a finding the same one later: run, kind, tags and onset step.

    Its message and evidence may quote newer numbers on the next read of a live run; a second spike at a
    later step is a new finding. What the reader noticed about a file (`data_integrity`: no tags, no step)
    is told apart by file and byte offset, so a file truncated after an earlier checksum note is news.
    """
    where = (finding.evidence.get("file"), finding.evidence.get("offset")) if finding.kind == "data_integrity" else ()
    return (finding.run, finding.kind, tuple(finding.tags), finding.step, *where)


def worst(findings) -> Finding | None:
    """The finding a reader should see first (most severe, then earliest onset), or None."""
    return min(findings, key=finding_order, default=None)
