"""Stream scalars out of a logdir as CSV or JSON lines, one run in memory at a time.

Columns: run, tag, step, wall_time, value (and `smoothed`, TensorBoard's debiased EMA, when asked).
Values are written exactly (shortest round-trip repr); non-finite values stay visible: `nan`/`inf`
in CSV, `null` plus a `"nonfinite"` (or `"nonfinite_wall_time"`) field in JSON lines (strict JSON has
no NaN: `jq` and Python's `json` must read every line).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from typing import IO, Any

from .datamodel import Series
from .decode import choose_kernel
from .json_safe import dumps
from .logdir import compile_filter, open_logdir
from .reader import RunReader

HEADER = ("run", "tag", "step", "wall_time", "value")


def iter_series(
    path,
    runs: str | None = None,
    tags: str | None = None,
    warnings: list[str] | None = None,
    kernel: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Iterator[tuple[str, str, Series]]:
    """(run, tag, series) for every matching scalar series; each run is read, yielded and dropped.

    Bad arguments (a regex, a missing logdir) raise LogdirError here, at the call, before anything
    is written: a CSV header followed by an error would look like an empty export.
    `path` may be an fsspec URL (`storage_options` go to fsspec).
    """
    run_re, tag_re = compile_filter("--runs", runs), compile_filter("--tags", tags)
    logdir = open_logdir(path, kernel=kernel, storage_options=storage_options)
    found, only = logdir.discover()
    if warnings is not None:
        warnings.extend(logdir.warnings)
    readers = [
        RunReader(logdir.path, run_path, name, kernel=kernel, only_file=only, storage=logdir.storage)
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

    return ema(series.values, weight)


#: Points turned into Python rows at once: the rows of a whole 10M-point series would take gigabytes as
#: Python objects, while the run's own columns take 24 bytes a point.
ROWS_PER_CHUNK = 1 << 16


def _chunks(s: Series, smoothed):
    """(steps, walls, values, smoothed or None) as Python lists, ROWS_PER_CHUNK points at a time."""
    for a in range(0, len(s), ROWS_PER_CHUNK):
        b = a + ROWS_PER_CHUNK
        yield (
            s.steps[a:b].tolist(),
            s.wall_times[a:b].tolist(),
            s.values[a:b].tolist(),
            None if smoothed is None else smoothed[a:b].tolist(),
        )


def write_csv(out: IO[str], items, smoothing: float | None = None) -> int:
    """Write rows as CSV (quoted as needed: run and tag names are arbitrary text); returns rows written."""
    w = csv.writer(out, lineterminator="\n")
    # The csv module quotes a field holding its line terminator but not a bare CR, which readers take for a
    # line break: rows of a name holding one are written fully quoted, so the name survives exactly.
    quoted = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)
    w.writerow(HEADER + (("smoothed",) if smoothing is not None else ()))
    rows = 0
    for run, tag, s in items:
        writer = quoted if "\r" in run or "\r" in tag else w
        for steps, walls, values, sm in _chunks(s, _smoothed(s, smoothing)):
            n = len(steps)
            cols = [[run] * n, [tag] * n, steps, walls, values] + ([sm] if sm is not None else [])
            writer.writerows(zip(*cols))
            rows += n
    return rows


def _finite(v: float) -> tuple[float | None, str | None]:
    if math.isfinite(v):
        return v, None
    return None, ("nan" if v != v else ("inf" if v > 0 else "-inf"))


def _num(v: float | None) -> str:
    # A finite float's repr is valid JSON and round-trips exactly; `_finite` has turned the rest into None.
    return "null" if v is None else repr(v)


def write_jsonl(out: IO[str], items, smoothing: float | None = None) -> int:
    """Write one JSON object per point; returns rows written."""
    rows = 0
    for run, tag, s in items:
        run_j, tag_j = dumps(run), dumps(tag)
        for steps, walls, values, sm in _chunks(s, _smoothed(s, smoothing)):
            lines = []
            for i, (step, wall, value) in enumerate(zip(steps, walls, values)):
                v, bad = _finite(value)
                w, bad_wall = _finite(wall)
                line = f'{{"run": {run_j}, "tag": {tag_j}, "step": {step}, "wall_time": {_num(w)}, "value": {_num(v)}'
                if bad:
                    line += f', "nonfinite": "{bad}"'
                if bad_wall:
                    line += f', "nonfinite_wall_time": "{bad_wall}"'
                if sm is not None:
                    line += f', "smoothed": {_num(_finite(sm[i])[0])}'
                lines.append(line + "}\n")
            out.writelines(lines)
            rows += len(steps)
    return rows
