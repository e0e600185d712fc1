"""stalled: a live run stopped writing while the others in its logdir keep going.

A run is stalled when its last event is older than the logdir's newest by more than
max(MIN_SILENCE_S, SILENCE_INTERVALS × its own median interval between writes), and at least one other
run was running alongside it (started before this one's last event) and kept writing after it. Runs that
finished (their lr schedule ran down to ≤ FINISHED_LR of its peak, or HF Trainer's end-of-training
summary tags are there) are not stalled: they are done. Without `now` the logdir may be an old, finished
batch, so the finding is info; when the logdir is live (its newest event within LIVE_WINDOW_S of `now`)
it is a warning: a job that hangs (deadlock in a collective, a dead dataloader worker) writes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..datamodel import Run
from ..features import finite_view
from ..reader import activity_span
from ..smoothing import median
from ..text import duration
from .base import LogdirContext, RunData, finding

#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("stalled",)

MIN_SILENCE_S = 600.0
SILENCE_INTERVALS = 20.0
LIVE_WINDOW_S = 1800.0
FINISHED_LR = 0.02
_END_MARKERS = re.compile(r"train_runtime|total_flos|train_samples_per_second")


def _median_interval(run: Run) -> float | None:
    gaps = []
    for series in run.scalars.values():
        if len(series) > 2:
            between = np.diff(series.wall_times)
            if not (between > 0).all():  # strictly increasing times are already their unique values
                between = np.diff(np.unique(series.wall_times))
            if between.size > 1:
                gaps.append(median(between, repeats=True))  # a logger's gaps repeat
    return min(gaps) if gaps else None


def _finished(run: Run, lr_tag: str | None) -> bool:
    if any(_END_MARKERS.search(t) for t in run.scalars):
        return True
    series = run.scalars.get(lr_tag) if lr_tag is not None else None
    if series is None:
        return False
    _, lr = finite_view(series)
    return bool(lr.size >= 3 and lr.max() > 0 and lr[-1] <= FINISHED_LR * lr.max())


@dataclass(frozen=True)
class StallFacts:
    """What `stalled` knows of one run from its own points: the part of its verdict no other run can change."""

    name: str
    first: float  # the run's activity span (`reader.activity_span`)
    last: float
    threshold: float  # seconds of silence past which it may be stalled
    interval: float  # its median interval between writes (0 when unknown)
    finished: bool  # its lr ran down, or it wrote an end-of-training summary: done, never stalled


@dataclass(frozen=True)
class Stall:
    """What the logdir's context adds: how long the run has been silent, who wrote on, whether it is live."""

    silence: float
    alongside: tuple[str, ...]
    live: bool


def stall_facts(run: Run, lr_tag: str | None) -> StallFacts | None:
    """The run's own facts (None when it has no plausible wall time): computed from its points alone."""
    span = activity_span(run)  # plausible times only: one corrupt wall time says nothing
    if span is None:
        return None
    return _facts(run, span, _finished(run, lr_tag))


def _facts(run: Run, span: tuple[float, float], finished: bool) -> StallFacts:
    interval = _median_interval(run) or 0.0
    threshold = max(MIN_SILENCE_S, SILENCE_INTERVALS * interval)
    return StallFacts(run.name, span[0], span[1], threshold, interval, finished)


def stall(facts: StallFacts | None, context: LogdirContext) -> Stall | None:
    """Whether the run is stalled in this logdir context, and the context's part of the finding (None: not)."""
    if facts is None or context.latest_wall_time is None:
        return None
    last = facts.last
    silence = context.latest_wall_time - last
    if silence <= facts.threshold or facts.finished:
        return None
    alongside = tuple(
        name
        for name, first, end in context.spans
        if name != facts.name and first < last and end > last + facts.threshold
    )
    if not alongside:
        return None
    live = context.now is not None and context.now - context.latest_wall_time <= LIVE_WINDOW_S
    return Stall(silence, alongside, live)


def detect(data: RunData) -> list:
    context = data.context
    latest = context.latest_wall_time
    span = activity_span(data.run) if latest is not None else None
    # Silent for at most MIN_SILENCE_S (the least threshold), or finished: never stalled, whatever its interval
    # between writes, the costly fact (a median of every tag's gaps), which `stall` would then not need.
    if latest is None or span is None or latest - span[1] <= MIN_SILENCE_S or _finished(data.run, data.primary.lr):
        return []
    facts = _facts(data.run, span, False)
    found = stall(facts, context)
    if found is None:
        return []
    silence, alongside, live, interval = found.silence, found.alongside, found.live, facts.interval
    quiet = duration(silence)
    evidence = {
        "summary": (
            f"last event at step {data.run.last_step}, {quiet} before the logdir's newest; "
            f"{len(alongside)} run(s) that ran alongside kept writing"
        ),
        "silence_s": round(silence, 1),
        "typical_interval_s": round(interval, 2),
        "still_writing": list(alongside[:10]),
    }
    message = f"stalled: no event for {quiet} (step {data.run.last_step}) while other runs kept writing"
    suggestion = (
        "Check the job: is the process alive (a hang in a collective/NCCL call or a dead dataloader "
        "worker writes nothing), was it pre-empted or out of memory, is its disk full? py-spy dump "
        "--pid shows where a hung Python process sits"
    )
    return [
        finding(
            data, "stalled", "warning" if live else "info", [], data.run.last_step, None, evidence, message, suggestion
        )
    ]
