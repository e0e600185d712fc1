"""One row of the runs table per run: status, health, worst finding, last step, liveness.

Pure functions of a `Run` and its `RunReport` (None while it is still being analysed), so the
table's content and order are tested without a terminal. A row holds the run's last wall time, not
its age: the clock moves every run's age at once, and the table works the ages out from it for the
lines it draws (`age_of`), so snapshot tests get fixed ages from a fixed clock and ten thousand rows
are not built again every second.
"""

from __future__ import annotations

import bisect
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
    """A tuple rather than a frozen dataclass: thousands are built while a large logdir loads, and with 10,000
    runs the dataclass's `__init__` alone held the UI thread for tens of milliseconds."""

    name: str
    status: str  # "critical" | "warning" | "info" | "ok" | "pending"
    health: int | None
    worst: str  # "divergence@600", or "" when there is none
    last_step: int | None
    wall: float | None  # the wall time of the run's last event (its age: `age_of`)


def age_of(row: RunRow, now: float) -> float | None:
    """Seconds from the run's last event to `now` (None: no event yet); a clock behind the run's reads 0."""
    return None if row.wall is None else max(now - row.wall, 0.0)


def is_live(age: float | None) -> bool:
    """A run whose last event is this recent is marked live (`LIVE_SECONDS`)."""
    return age is not None and age < LIVE_SECONDS


def verdict_cells(report: RunReport | None, health: RunHealth | None = None) -> tuple[str, int | None, str]:
    """What a run's row shows of its verdict: (status, health score, worst finding's label), from its verdict,
    else from its `health` as a warm reopen's index recorded it (its verdict not loaded yet), else pending."""
    if report is not None:
        status, worst = verdict_status(report.findings)
        return status, report.health.score, worst
    if health is not None:
        return health.status, health.score, health.worst
    return "pending", None, ""


def run_row(
    run: Run,
    report: RunReport | None,
    verdict: tuple[str, int | None, str] | None = None,
    health: RunHealth | None = None,
) -> RunRow:
    """`verdict` is `verdict_cells(report, health)` when the caller kept it (it changes only with the report)."""
    status, score, worst = verdict_cells(report, health) if verdict is None else verdict
    return RunRow(run.name, status, score, worst, run.last_step, run.last_wall_time)


def sort_rows(rows: list[RunRow], key: str, by_name: bool = False) -> list[RunRow]:
    """Order rows for display; health puts the worst (lowest score) first and unscored runs last; ties by name.

    `by_name`: `rows` are in name order already (`RunStore` keeps that order), so one stable sort on a number does
    it: comparing (flag, number, name) tuples took 6x as long, every batch of verdicts, with 10,000 runs. Liveness is
    the youngest first, i.e. the latest wall time first, whatever the clock reads."""
    rows = rows if by_name else sorted(rows, key=_name)
    if key == "name":
        return list(rows)
    return sorted(rows, key=_SORT_VALUES[key])


def _step_value(r: RunRow) -> float:
    return _LAST if r.last_step is None else -r.last_step


def _wall_value(r: RunRow) -> float:
    return _LAST if r.wall is None else -r.wall


def _health_value(r: RunRow) -> float:
    return _LAST if r.health is None else r.health


#: What each sort (but the name's) orders rows by, before their names.
_SORT_VALUES = {"step": _step_value, "liveness": _wall_value, "health": _health_value}


def place_rows(rows: list[RunRow], key: str, moves: list[tuple[RunRow | None, RunRow]]) -> bool:
    """Apply `moves` to `rows`, sorted by `key` as `sort_rows` sorts them: each (old row or None, new row) takes the
    old row out and puts the new one where `sort_rows` would, by bisection. False when an old row is not where its
    order says (then `rows` is part-changed: sort again)."""
    value = _SORT_VALUES.get(key)
    order = _name if value is None else lambda r: (value(r), r.name)
    for old, new in moves:
        if old is not None:
            at = bisect.bisect_left(rows, order(old), key=order)
            if at == len(rows) or rows[at] is not old:
                return False
            del rows[at]
        bisect.insort(rows, new, key=order)
    return True


#: The sort key of a row without the value sorted on: after every row with one.
_LAST = float("inf")


def _name(row: RunRow) -> str:
    return row.name


def format_age(age: float | None) -> str:
    """Seconds as the largest whole unit: 42s, 7m, 3h, 2d."""
    if age is None:
        return "-"
    for limit, unit, size in ((60, "s", 1), (3600, "m", 60), (86400, "h", 3600)):
        if age < limit:
            return f"{int(age // size)}{unit}"
    return f"{int(age // 86400)}d"
