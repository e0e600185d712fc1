"""One row of the runs table per run: status, health, worst finding, last step, liveness.

Pure functions of a `Run`, its `RunReport` (None while it is still being analysed) and the
clock, so the table's content and order are tested without a terminal and snapshot tests
get fixed ages from a fixed clock.
"""

from __future__ import annotations

from typing import NamedTuple

from tbtriage.analysis.datamodel import Run, RunReport
from tbtriage.analysis.health_index import RunHealth, verdict_status

#: A run whose last event is younger than this is marked live. PyTorch's and tensorboardX's
#: SummaryWriter flush every 120 s by default, so a training run's file grows at least that
#: often; 300 s tolerates one missed flush before calling the run idle.
LIVE_SECONDS = 300.0

SORTS = ("health", "name", "step", "liveness")

#: Severity glyphs, worst first; the ASCII set is for `--ascii` terminals.
GLYPHS = {"critical": "✖", "warning": "▲", "info": "●", "ok": "✓", "pending": "…"}
ASCII_GLYPHS = {"critical": "X", "warning": "!", "info": "i", "ok": "+", "pending": "."}
#: Status -> the theme variable that colours it.
STATUS_COLOURS = {"critical": "error", "warning": "warning", "info": "primary", "ok": "success", "pending": "secondary"}


class RunRow(NamedTuple):
    """A tuple rather than a frozen dataclass: one is built per run on every batch of verdicts, and with 10,000
    runs the dataclass's `__init__` alone held the UI thread for tens of milliseconds."""

    name: str
    status: str  # "critical" | "warning" | "info" | "ok" | "pending"
    health: int | None
    worst: str  # "divergence@600", or "" when there is none
    last_step: int | None
    age: float | None  # seconds since the last event
    live: bool


def run_row(run: Run, report: RunReport | None, now: float, health: RunHealth | None = None) -> RunRow:
    """The row of `run`: from its verdict, else from its `health` as a warm reopen's index recorded it (its
    verdict not loaded yet), else pending."""
    age = None if run.last_wall_time is None else max(now - run.last_wall_time, 0.0)
    if report is not None:
        (status, worst), score = verdict_status(report.findings), report.health.score
    elif health is not None:
        status, worst, score = health.status, health.worst, health.score
    else:
        status, worst, score = "pending", "", None
    return RunRow(
        name=run.name,
        status=status,
        health=score,
        worst=worst,
        last_step=run.last_step,
        age=age,
        live=age is not None and age < LIVE_SECONDS,
    )


def sort_rows(rows: list[RunRow], key: str) -> list[RunRow]:
    """Order rows for display; health puts the worst (lowest score) first and unscored runs last."""
    if key == "name":
        return sorted(rows, key=lambda r: r.name)
    if key == "step":
        return sorted(rows, key=lambda r: (r.last_step is None, -(r.last_step or 0), r.name))
    if key == "liveness":
        return sorted(rows, key=lambda r: (r.age is None, r.age or 0.0, r.name))
    return sorted(rows, key=lambda r: (r.health is None, r.health or 0, r.name))


def format_age(age: float | None) -> str:
    """Seconds as the largest whole unit: 42s, 7m, 3h, 2d."""
    if age is None:
        return "-"
    for limit, unit, size in ((60, "s", 1), (3600, "m", 60), (86400, "h", 3600)):
        if age < limit:
            return f"{int(age // size)}{unit}"
    return f"{int(age // 86400)}d"
