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
from typing import NamedTuple

import numpy as np

from ..reader import activity_span
from .base import LogdirContext, RunData, finding

#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("stalled",)

MIN_SILENCE_S = 600.0
SILENCE_INTERVALS = 20.0
LIVE_WINDOW_S = 1800.0
FINISHED_LR = 0.02
_END_MARKERS = re.compile(r"train_runtime|total_flos|train_samples_per_second")


def _median_interval(data: RunData) -> float | None:
    gaps = []
    for series in data.run.scalars.values():
        if len(series) > 2:
            walls = series.wall_times
            if not np.all(walls[1:] > walls[:-1]):  # already its unique values when strictly increasing
                walls = np.unique(walls)
            if walls.size > 2:
                gaps.append(float(np.median(np.diff(walls))))
    return min(gaps) if gaps else None


def _finished(data: RunData) -> bool:
    if any(_END_MARKERS.search(t) for t in data.run.scalars):
        return True
    tag = data.primary.lr
    if tag is None:
        return False
    _, lr = data.finite(tag)
    return bool(lr.size >= 3 and lr.max() > 0 and lr[-1] <= FINISHED_LR * lr.max())


class Quiet(NamedTuple):
    """When a run last wrote and how long a silence after it must last to count: everything `stalled` needs of
    the run itself (the rest is the logdir's context), so a pool can judge the context later, in the parent."""

    last: float  # the run's last plausible wall time
    interval: float  # its median interval between writes (0 when unknown)
    threshold: float  # seconds of silence beyond which it counts as stopped


def quiet(data: RunData) -> Quiet | None:
    """The run's `Quiet`, or None when it cannot be stalled whatever the other runs did (no plausible wall time,
    or it finished)."""
    span = activity_span(data.run)  # plausible times only: one corrupt wall time says nothing
    if span is None:
        return None
    interval = _median_interval(data) or 0.0
    if _finished(data):
        return None
    return Quiet(span[1], interval, max(MIN_SILENCE_S, SILENCE_INTERVALS * interval))


def still_writing(name: str, run: Quiet, context: LogdirContext) -> list[str]:
    """The runs of `context` that ran alongside run `name` and kept writing after its silence began (none when
    it has not been silent long enough): `stalled` fires exactly when this is not empty."""
    if context.latest_wall_time is None or context.latest_wall_time - run.last <= run.threshold:
        return []
    return [n for n, first, end in context.spans if n != name and first < run.last and end > run.last + run.threshold]


def detect(data: RunData) -> list:
    context = data.context
    if context.latest_wall_time is None:
        return []
    found = quiet(data)
    alongside = still_writing(data.name, found, context) if found is not None else []
    if found is None or not alongside:
        return []
    silence, interval = context.latest_wall_time - found.last, found.interval
    live = context.now is not None and context.now - context.latest_wall_time <= LIVE_WINDOW_S
    minutes = silence / 60.0
    evidence = {
        "summary": (
            f"last event at step {data.run.last_step}, {minutes:.0f} min before the logdir's newest; "
            f"{len(alongside)} run(s) that ran alongside kept writing"
        ),
        "silence_s": round(silence, 1),
        "typical_interval_s": round(interval, 2),
        "still_writing": alongside[:10],
    }
    message = f"stalled: no event for {minutes:.0f} min (step {data.run.last_step}) while other runs kept writing"
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
