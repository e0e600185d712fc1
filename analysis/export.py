"""Stream scalars out of a logdir as CSV or JSON lines, one run in memory at a time.

Columns: run, tag, step, wall_time, value (and `smoothed`, TensorBoard's debiased EMA, when asked).
Values are written exactly (shortest round-trip repr); non-finite values stay visible: `nan`/`inf`
in CSV, `null` plus a `"nonfinite"` field in JSON lines (JSON has no NaN).
"""

from __future__ import annotations

import csv
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from .datamodel import Series
from .decode import choose_kernel
from .discover import find_runs
from .json_safe import dumps
from .logdir import LogdirError
from .reader import RunReader, is_event_file

HEADER = ("run", "tag", "step", "wall_time", "value")


def iter_series(
    path, runs: str | None = None, tags: str | None = None, warnings: list[str] | None = None, kernel: str | None = None
) -> Iterator[tuple[str, str, Series]]:
    """(run, tag, series) for every matching scalar series; each run is read, yielded and dropped.

    Bad arguments (a regex, a missing logdir) raise LogdirError here, at the call, before anything
    is written: a CSV header followed by an error would look like an empty export.
    """
    root = Path(path).expanduser()
    try:
        run_re = re.compile(runs) if runs else None
        tag_re = re.compile(tags) if tags else None
    except re.error as exc:
        raise LogdirError(f"not a valid regular expression: {exc}") from None
    if root.is_file() and is_event_file(root.name):
        found = {".": root.parent}
        only = root.name
    elif root.is_dir():
        try:
            with os.scandir(root) as entries:
                next(entries, None)
        except OSError as exc:
            raise LogdirError(f"{path}: cannot list ({exc.strerror or exc})") from None
        found = find_runs(root, warnings)
        only = None
    elif root.exists():
        raise LogdirError(f"{path}: not a directory or an event file")
    else:
        raise LogdirError(f"{path}: no such directory or event file")
    readers = [
        RunReader(root, run_path, name, kernel=kernel, only_file=only)
        for name, run_path in found.items()
        if run_re is None or run_re.search(name)
    ]
    # One kernel for the whole export, chosen from the total size (stat calls only, no reading).
    module = choose_kernel(sum(r.pending_bytes() for r in readers), kernel)
    return _read_runs(readers, module, tag_re, warnings)


def _read_runs(readers: list[RunReader], module, tag_re, warnings) -> Iterator[tuple[str, str, Series]]:
    """Read one run, yield its series, then let it go: memory holds one run, however many there are."""
    readers.reverse()  # popped from the end, in name order
    while readers:
        reader = readers.pop()
        reader.read(module)
        if warnings is not None:
            warnings.extend(f"{n.file}: {n.message}" for n in reader.run.notes if n.kind == "data_integrity")
        name, scalars = reader.name, reader.run.scalars
        del reader  # the run's columns go with the last series yielded, not at the end of the export
        for tag in sorted(scalars):
            if tag_re is None or tag_re.search(tag):
                yield name, tag, scalars[tag]


def _smoothed(series: Series, weight: float | None):
    if weight is None:
        return None
    from .smoothing import ema

    return ema(series.values, weight).tolist()


def write_csv(out: IO[str], items, smoothing: float | None = None) -> int:
    """Write rows as CSV (quoted as needed: run and tag names are arbitrary text); returns rows written."""
    w = csv.writer(out, lineterminator="\n")
    w.writerow(HEADER + (("smoothed",) if smoothing is not None else ()))
    rows = 0
    for run, tag, s in items:
        n = len(s)
        cols = [[run] * n, [tag] * n, s.steps.tolist(), s.wall_times.tolist(), s.values.tolist()]
        sm = _smoothed(s, smoothing)
        if sm is not None:
            cols.append(sm)
        w.writerows(zip(*cols))
        rows += n
    return rows


def _finite(v: float) -> tuple[float | None, str | None]:
    if math.isfinite(v):
        return v, None
    return None, ("nan" if v != v else ("inf" if v > 0 else "-inf"))


def write_jsonl(out: IO[str], items, smoothing: float | None = None) -> int:
    """Write one JSON object per point; returns rows written."""
    rows = 0
    for run, tag, s in items:
        sm = _smoothed(s, smoothing)
        run_j, tag_j = dumps(run), dumps(tag)
        lines = []
        for i, (step, wall, value) in enumerate(zip(s.steps.tolist(), s.wall_times.tolist(), s.values.tolist())):
            v, bad = _finite(value)
            w, bad_wall = _finite(wall)
            line = f'{{"run": {run_j}, "tag": {tag_j}, "step": {step}, "wall_time": {dumps(w)}, "value": {dumps(v)}'
            if bad:
                line += f', "nonfinite": "{bad}"'
            if bad_wall:
                line += f', "nonfinite_wall_time": "{bad_wall}"'
            if sm is not None:
                line += f', "smoothed": {dumps(_finite(sm[i])[0])}'
            lines.append(line + "}\n")
        out.writelines(lines)
        rows += len(s)
    return rows
