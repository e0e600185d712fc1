"""Stream scalars out of a logdir as CSV or JSON lines, one run in memory at a time.

Columns: run, tag, step, wall_time, value (and `smoothed`, TensorBoard's debiased EMA, when asked).
Values are written exactly (shortest round-trip repr); non-finite values stay visible: `nan`/`inf`
in CSV, `null` plus a `"nonfinite"` field in JSON lines (JSON has no NaN).
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from .datamodel import Series
from .decode import choose_kernel
from .discover import find_runs
from .logdir import LogdirError
from .reader import RunReader, is_event_file

HEADER = ("run", "tag", "step", "wall_time", "value")


def iter_series(
    path, runs: str | None = None, tags: str | None = None, warnings: list[str] | None = None, kernel: str | None = None
) -> Iterator[tuple[str, str, Series]]:
    """(run, tag, series) for every matching scalar series; each run is read, yielded and dropped."""
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
        found = find_runs(root, warnings)
        only = None
    else:
        raise LogdirError(f"{path}: no such directory or event file")
    readers = [
        RunReader(root, run_path, name, kernel=kernel, only_file=only)
        for name, run_path in found.items()
        if run_re is None or run_re.search(name)
    ]
    # One kernel for the whole export, chosen from the total size (stat calls only, no reading).
    module = choose_kernel(sum(r.pending_bytes() for r in readers), kernel)
    for reader in readers:
        name = reader.name
        reader.read(module)
        if warnings is not None:
            warnings.extend(f"{n.file}: {n.message}" for n in reader.run.notes if n.kind == "data_integrity")
        for tag in sorted(reader.run.scalars):
            if tag_re is None or tag_re.search(tag):
                yield name, tag, reader.run.scalars[tag]


def _smoothed(series: Series, weight: float | None):
    if weight is None:
        return None
    from .smoothing import ema

    return ema(series.values, weight).tolist()


def write_csv(out: IO[str], items, smoothing: float | None = None) -> int:
    """Write rows as CSV (quoted as needed: run and tag names are arbitrary text); returns rows written."""
    w = csv.writer(out, lineterminator="\n")
    # The csv module quotes a field holding its line terminator but not a bare CR, which readers take for a
    # line break: rows of a name holding one are written fully quoted, so the name survives exactly.
    quoted = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)
    w.writerow(HEADER + (("smoothed",) if smoothing is not None else ()))
    rows = 0
    for run, tag, s in items:
        n = len(s)
        writer = quoted if "\r" in run or "\r" in tag else w
        cols = [[run] * n, [tag] * n, s.steps.tolist(), s.wall_times.tolist(), s.values.tolist()]
        sm = _smoothed(s, smoothing)
        if sm is not None:
            cols.append(sm)
        writer.writerows(zip(*cols))
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
        run_j, tag_j = json.dumps(run), json.dumps(tag)
        lines = []
        for i, (step, wall, value) in enumerate(zip(s.steps.tolist(), s.wall_times.tolist(), s.values.tolist())):
            v, bad = _finite(value)
            line = f'{{"run": {run_j}, "tag": {tag_j}, "step": {step}, "wall_time": {wall!r}, "value": {json.dumps(v)}'
            if bad:
                line += f', "nonfinite": "{bad}"'
            if sm is not None:
                line += f', "smoothed": {json.dumps(_finite(sm[i])[0])}'
            lines.append(line + "}\n")
        out.writelines(lines)
        rows += len(s)
    return rows
