"""Where `tbtriage report`'s time goes: a timeline of the parent's phases and of each pool worker's tasks.

    python bench/report_timeline.py /tmp/r2000 --no-cache         # any `tbtriage report` arguments
    python bench/report_timeline.py /tmp/r2000 --events tl.txt    # also every event, one line each

Runs `tbtriage report LOGDIR --format json --out <temp file> ...` in this process with the pipeline's steps wrapped
(the workers are forks of this process, so they are wrapped too) and prints, for the parent, each phase's wall and CPU
time (imports, listing, the pool, twins, comparison, JSON), and for each worker its busy span, its idle time before
its first task and after its last, and the CPU of reading, judging, spilling the series and writing the caches (the
column entry, with the verdict in it, and making the verdict ready), with
its garbage collector's share. CPU is what to compare on a shared machine (`time.process_time`); nothing is asserted.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

T0 = time.monotonic()


class Log:
    """Events appended to one file by this process and its forked workers: pid, start, end, CPU, label."""

    def __init__(self, path: str):
        self.path = path
        self.gc_cpu = 0.0
        self._gc_start = 0.0

    def event(self, label: str, start: float, cpu: float) -> None:
        with open(self.path, "a") as f:
            f.write(f"{os.getpid()}\t{start - T0:.4f}\t{time.monotonic() - T0:.4f}\t{cpu:.4f}\t{label}\n")

    def wrap(self, owner, name: str, label: str | None = None) -> None:
        real = getattr(owner, name)
        log = self

        def timed(*args, **kwargs):
            start, cpu = time.monotonic(), time.process_time()
            try:
                return real(*args, **kwargs)
            finally:
                log.event(label or name, start, time.process_time() - cpu)

        setattr(owner, name, timed)

    def on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_start = time.process_time()
        else:
            self.gc_cpu += time.process_time() - self._gc_start


def instrument(log: Log) -> None:
    from tbtriage.analysis import cache, compare, engine, json_safe, pipeline, side_by_side, verdict_cache
    from tbtriage.analysis.reader import RunReader
    from tbtriage.cli import report

    for owner, name in (
        (pipeline, "read_and_judge"),
        (pipeline, "_unspill"),
        (pipeline, "_cached_entries"),
        (pipeline, "_new_pool"),
        (engine, "attach_twins"),
        (engine, "run_settings"),
        (engine, "rank"),
        (compare, "compare"),
        (side_by_side, "twin_pairs"),
        (report, "report_dict"),
        (json_safe, "dumps"),
        # in the workers
        (pipeline, "_spill"),
        (pipeline, "judge_run"),
        (RunReader, "read"),
        (cache, "store"),
        (verdict_cache, "entry_bytes"),  # a verdict made ready to cache (kept in the run's column entry)
        (verdict_cache, "write"),  # ... or written as a file of its own (a run whose columns were not written)
    ):
        log.wrap(owner, name, f"{owner.__name__.rsplit('.', 1)[-1]}.{name}")
    _TASK[:] = [log, pipeline._read_and_judge]
    pipeline._read_and_judge = task  # module-level: the pool sends it to the workers by name
    gc.callbacks.append(log.on_gc)


_TASK: list = []  # the log and the pipeline's own task function, once instrumented


def task(t):
    """A worker's task, timed, with its garbage collector's share."""
    log, real = _TASK
    start, cpu, gc_before = time.monotonic(), time.process_time(), log.gc_cpu
    try:
        return real(t)
    finally:
        log.event("task", start, time.process_time() - cpu)
        log.event("task.gc", start, log.gc_cpu - gc_before)


def summary(path: str, parent: int) -> list[str]:
    rows = [line.rstrip("\n").split("\t") for line in open(path)]
    events = [(int(p), float(a), float(b), float(c), label) for p, a, b, c, label in rows]
    out = ["parent (s since start):  phase                      from      to    wall     cpu"]
    for pid, a, b, c, label in events:
        if pid == parent and label not in ("pipeline._unspill",):
            out.append(f"  {label:38s} {a:7.3f} {b:7.3f} {b - a:7.3f} {c:7.3f}")
    unspill = [e for e in events if e[0] == parent and e[4] == "pipeline._unspill"]
    label = f"pipeline._unspill (x{len(unspill)})"
    wall, cpu = sum(b - a for _, a, b, _, _ in unspill), sum(e[3] for e in unspill)
    out.append(f"  {label:38s} {'':15s} {wall:7.3f} {cpu:7.3f}")
    end = max(b for _, _, b, _, label in events if label == "task") if any(e[4] == "task" for e in events) else 0.0
    workers: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    spans: dict[int, list[float]] = defaultdict(list)
    for pid, a, b, c, label in events:
        if pid != parent:
            workers[pid][label].append(c)
            if label == "task":
                spans[pid] += [a, b]
    out.append("workers:  tasks  first  last   idle-end  task-cpu  read  judge  spill  col-cache  verdict-cache  gc")
    for pid, by in sorted(workers.items()):
        first, last = min(spans[pid]), max(spans[pid])
        verdicts = sum(by["verdict_cache.entry_bytes"]) + sum(by["verdict_cache.write"])
        out.append(
            f"  {pid:7d} {len(by['task']):5d} {first:6.2f} {last:6.2f} {end - last:8.2f} {sum(by['task']):9.2f} "
            f"{sum(by['RunReader.read']):5.2f} {sum(by['pipeline.judge_run']):6.2f} {sum(by['pipeline._spill']):6.2f} "
            f"{sum(by['cache.store']):10.2f} {verdicts:14.2f} {sum(by['task.gc']):5.2f}"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("logdir")
    parser.add_argument("--events", help="keep every event in this file (tab-separated)")
    args, rest = parser.parse_known_args(argv)
    events = args.events or tempfile.mktemp(prefix="tbtriage-timeline-")
    Path(events).write_text("")
    log = Log(events)
    start, cpu = time.monotonic(), time.process_time()
    from tbtriage.cli.main import main as cli

    instrument(log)  # imports the engine, as the report would
    log.event("imports", start, time.process_time() - cpu)
    with tempfile.TemporaryDirectory() as scratch:
        start, cpu = time.monotonic(), time.process_time()
        code = cli(["report", args.logdir, "--format", "json", "--out", os.path.join(scratch, "r.json"), *rest])
        log.event("report (after imports)", start, time.process_time() - cpu)
    print("\n".join(summary(events, os.getpid())))
    print(f"parent's garbage collection: {log.gc_cpu:.3f} s CPU; exit code {code}")
    if not args.events:
        os.unlink(events)
    return 0


if __name__ == "__main__":
    sys.exit(main())
