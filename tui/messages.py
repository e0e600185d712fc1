"""What the app's thread workers report back to the UI thread, one typed message per event.

Workers never touch widgets: they read and analyse, then post one of these; the app's
handlers (on the UI thread) update its state, and the screens watching that state redraw.
Workers post at most a few per second (`Throttle`): a logdir of thousands of runs must not
flood the UI thread with one message, and one redraw, per run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from textual.message import Message

from tbtriage.analysis.datamodel import Finding, Run, RunReport


class RunsDiscovered(Message):
    """Run directories found under the logdir (before any of them is read), each as an empty run: made on the
    worker's thread, since ten thousand of them held the UI thread for tens of milliseconds."""

    def __init__(self, runs: dict[str, Run], warnings: list[str]) -> None:
        super().__init__()
        self.runs = runs
        self.warnings = warnings


class LogdirRead(Message):
    """The logdir's event files were read; `logdir` holds every run's data."""

    def __init__(self, logdir) -> None:
        super().__init__()
        self.logdir = logdir


class HealthIndexed(Message):
    """A warm reopen: every run's health from the logdir's health index (`analysis.health_index`), which still
    holds for the files as they are; no run is read or judged yet."""

    def __init__(self, health: dict, paths: dict[str, Path]) -> None:
        super().__init__()
        self.health = health  # run name -> RunHealth, in the logdir's run order
        self.paths = paths  # run name -> its directory


class RunsRead(Message):
    """Some runs' columns were read on a warm reopen (the charted ones first), with the cached verdicts of those
    whose verdict twins cannot change (the others wait for the whole logdir: `LogdirRead`)."""

    def __init__(self, runs: dict[str, Run], reports: list[RunReport], done: int, total: int) -> None:
        super().__init__()
        self.runs = runs
        self.reports = reports
        self.done = done
        self.total = total


class RunsAnalyzed(Message):
    """The follower's verdicts on some runs; `done` of `total` runs of this pass are judged."""

    def __init__(self, reports: list[RunReport], done: int, total: int) -> None:
        super().__init__()
        self.reports = reports
        self.done = done
        self.total = total


class Progress(Message):
    """`done` of `total` units of `stage` ("reading", "analysing") are finished."""

    def __init__(self, stage: str, done: int, total: int) -> None:
        super().__init__()
        self.stage = stage
        self.done = done
        self.total = total


class LoadFailed(Message):
    """Reading the logdir failed as a whole; `message` is one line naming the problem."""

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message


class PassDone(Message):
    """A follow pass (the first analysis, or a live re-read) finished; `new` are findings not seen before."""

    def __init__(self, new: list[Finding], first: bool) -> None:
        super().__init__()
        self.new = new
        self.first = first


class Exported(Message):
    """The charted series were written to `path` (`rows` data rows), or `error` says why not."""

    def __init__(self, path: Path | None, rows: int, error: str | None = None) -> None:
        super().__init__()
        self.path = path
        self.rows = rows
        self.error = error


#: Workers post progress and verdicts at most this often: four redraws a second look live, and
#: leave the UI thread free for keys however many runs are read or analysed.
COALESCE_S = 0.25


class Throttle:
    """A worker's gate for its messages: open at first, then at most once per `interval` seconds."""

    def __init__(self, interval: float = COALESCE_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self.last = float("-inf")

    def ready(self) -> bool:
        now = self.clock()
        if now - self.last < self.interval:
            return False
        self.last = now
        return True
