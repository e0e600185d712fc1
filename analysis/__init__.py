"""tbtriage's headless core: read TensorBoard event files fast, describe and diagnose training runs.

    import analysis
    logdir = analysis.load("runs/")            # every run; analysis.load(path, runs="regex") for a subset
    run = logdir.runs["bs256_cosine"]          # keyed by the run's path relative to the logdir
    s = run.scalars["train/loss"]              # Series: s.steps (int64), s.wall_times (float64), s.values
    report = analysis.diagnose(logdir)         # findings and health for every run; report.to_json()

This package never imports Textual: it is usable from notebooks, cron jobs and CI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover
    from .logdir import Logdir


def load(path: Any, runs: str | None = None, **kwargs: Any) -> "Logdir":
    """Read every run under `path` (a logdir, a run directory or a single event file)."""
    from .logdir import load as _load

    return _load(path, runs=runs, **kwargs)


def diagnose(logdir: Any, **kwargs: Any):
    """Roles, features, findings and health for every run of `logdir` (a path or a loaded Logdir)."""
    from .engine import diagnose as _diagnose

    return _diagnose(logdir, **kwargs)


__all__ = ["load", "diagnose", "__version__"]
