"""What the app's thread workers report back to the UI thread, one typed message per event.

Workers never touch widgets: they read and analyse, then post one of these; the app's
handlers (on the UI thread) update state and panes.
"""

from __future__ import annotations

from pathlib import Path

from textual.message import Message

from tbtriage.analysis.datamodel import Finding, RunReport


class RunsDiscovered(Message):
    """Run directories found under the logdir (before any of them is read)."""

    def __init__(self, names: list[str], warnings: list[str]) -> None:
        super().__init__()
        self.names = names
        self.warnings = warnings


class LogdirRead(Message):
    """The logdir's event files were read; `logdir` holds every run's data."""

    def __init__(self, logdir) -> None:
        super().__init__()
        self.logdir = logdir


class RunAnalyzed(Message):
    """The engine's verdict on one run; `new` are findings not seen before in this session."""

    def __init__(self, report: RunReport, new: tuple[Finding, ...] = ()) -> None:
        super().__init__()
        self.report = report
        self.new = new


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


class Refreshed(Message):
    """A live-follow pass finished; `changed` runs had new events (new runs included)."""

    def __init__(self, changed: list[str]) -> None:
        super().__init__()
        self.changed = changed


class Exported(Message):
    """The charted series were written to `path` (`rows` data rows), or `error` says why not."""

    def __init__(self, path: Path | None, rows: int, error: str | None = None) -> None:
        super().__init__()
        self.path = path
        self.rows = rows
        self.error = error
