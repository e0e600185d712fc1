"""`e` in the app: the charted series, raw and smoothed, as one CSV file in the current directory.

The rows are `analysis.export.write_csv`'s (the `tbtriage export` format, exact values, names
quoted), always with the `smoothed` column at the chart's current weight (0: equal to the value).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path

from tbtriage.analysis.export import write_csv
from tbtriage.tui.chart_data import SeriesRequest

#: Characters kept from a tag in the file name; the rest become `_` (tags hold `/`, spaces, anything).
_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")


def export_filename(tag: str, now: float) -> str:
    """`tbtriage-<tag>-<YYYYmmdd-HHMMSS>.csv`, safe on every filesystem."""
    safe_tag = _UNSAFE_FILENAME.sub("_", tag).strip("._") or "series"
    return f"tbtriage-{safe_tag}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}.csv"


def write_series_csv(path: Path, tag: str, requests: Sequence[SeriesRequest], weight: float) -> int:
    """Write every point of `requests` (one series of `tag` per run) to `path`; returns the rows written."""
    with open(path, "w", encoding="utf-8", newline="") as out:
        return write_csv(out, [(request.run, tag, request.series) for request in requests], smoothing=weight)
