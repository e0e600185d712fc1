"""tbtriage: read TensorBoard event files fast, describe and diagnose training runs.

    import tbtriage
    logdir = tbtriage.load("runs/")            # every run; tbtriage.load(path, runs="regex") for a subset
    logdir = tbtriage.load("s3://bucket/runs", storage_options={"profile": "lab"})  # any fsspec URL
    run = logdir.runs["bs256_cosine"]          # keyed by the run's path relative to the logdir
    s = run.scalars["train/loss"]              # Series: s.steps (int64), s.wall_times (float64), s.values
    report = tbtriage.diagnose(logdir)         # findings and health for every run; report.to_json()

The headless core is `tbtriage.analysis`, the Textual app `tbtriage.tui`, the command line `tbtriage.cli`.
Importing this package imports nothing heavy: each function imports what it needs when called.
"""

from __future__ import annotations

from os import PathLike
from typing import TYPE_CHECKING, Any

from tbtriage._version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from tbtriage.analysis.engine import Report
    from tbtriage.analysis.logdir import Logdir


def load(path: str | PathLike[str], runs: str | None = None, **kwargs: Any) -> Logdir:
    """Read every run under `path` (a logdir, a run directory or a single event file; or an fsspec URL, with
    `storage_options=` for its backend)."""
    from tbtriage.analysis.logdir import load as _load

    return _load(path, runs=runs, **kwargs)


def diagnose(logdir: str | PathLike[str] | Logdir, **kwargs: Any) -> Report:
    """Roles, features, findings and health for every run of `logdir` (a path or a loaded Logdir)."""
    from tbtriage.analysis.engine import diagnose as _diagnose

    return _diagnose(logdir, **kwargs)


__all__ = ["load", "diagnose", "__version__"]
