"""Thousands of runs: `report` wall time and peak RSS (pooled and serial), and the app while it loads them.

    python bench/many_runs.py                           # issue #12's two logdirs: 10,000 runs × 4 tags × 300
                                                        # points, and 2,000 runs × 4 tags × 900 points
                                                        # (3,600 points a run, ~384 MB like the issue's)
    python bench/many_runs.py --runs 500 --points 300   # one smaller logdir
    python bench/many_runs.py --logdir runs/            # your own logdir
    python bench/many_runs.py --runs 300 --skip-app     # report only
    python bench/many_runs.py --logdir DIR --cache-modes --repeat 2   # report --no-cache / cold / warm, its steps

Logdirs are written into a temporary directory with the project's event writer (real event files, one
per run, `bench/report_speed.py`'s curves, every fifth run with a planted problem). Every measurement
runs in a fresh child process, so its figures include imports and its own peak RSS (the pool's workers
counted apart).

Baselines measured in the same run, printed as ratios:
- the serial path (`report --workers 1`) for the process pool;
- the pool judging runs that the command's own process read (`parent-reads`: `diagnose(slim=False)`, as
  `report` was before its workers read their runs) for the workers reading them;
- what two processes of a pure Python loop gain over one on this machine right now: on a shared machine
  the spare cores, not the code, bound what any pool can gain;
- TensorBoard's EventAccumulator, reading a subset of the runs (`--ea-runs`), against tbtriage reading
  the same runs.

The app (Textual's Pilot, headless, 160×48): time to the first frame, to every run's name listed, to
every run's health shown, and the key-press latency while loading (a cursor key every `--key-every`
seconds, each timed from sending it to the frame that shows the cursor moved) and the UI thread's longest
stall. The issue's bars: report on the 2,000-run logdir ≤ 8 s on a
2-core machine; in the app no key waits more than 100 ms and all health is shown within 1.3× the
report's time. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

#: (runs, tags, points per tag) of the issue's two logdirs.
SHAPES = ((10_000, 4, 300), (2_000, 4, 900))
#: Terminal size of the headless app.
APP_SIZE = (160, 48)
#: The app gives up waiting for all health after this many seconds.
APP_TIMEOUT_S = 900.0
#: The report mode whose pool judges runs this process read (`diagnose(slim=False)`): the baseline of the
#: pool's workers reading their runs themselves.
PARENT_READS = "parent-reads"
#: Iterations of the pure Python loop that measures what a second process gains here.
CALIBRATION_LOOP = 4_000_000


# ---- children (each measurement in its own process) ----------------------------------------------------


def _peak_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # KiB on Linux


#: The report process's own steps, timed apart by `--cache-modes` (module, function; each looked up by the command
#: when it runs): what runs in it alone before and after the pool (listing, twins, comparisons, rendering) bounds
#: what a second core can gain.
STAGES = (
    ("tbtriage.analysis.pipeline", "read_and_judge"),
    ("tbtriage.analysis.engine", "attach_twins"),
    ("tbtriage.analysis.engine", "rank"),
    ("tbtriage.analysis.compare", "compare"),
    ("tbtriage.analysis.side_by_side", "twin_pairs"),
    ("tbtriage.cli.report", "report_dict"),
    ("tbtriage.analysis.json_safe", "dumps"),
)


def _time_stages(start: float) -> dict[str, list[float]]:
    """Wrap each of `STAGES` in place: stage -> [wall s, CPU s of this process, seconds from start to its end]."""
    import functools
    import importlib

    times: dict[str, list[float]] = {}

    def timed(name: str, f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return f(*args, **kwargs)
            finally:
                end = time.perf_counter()
                times[name] = [end - wall, time.process_time() - cpu, end - start]

        return wrapper

    for module, name in STAGES:
        mod = importlib.import_module(module)
        setattr(mod, name, timed(name, getattr(mod, name)))
    return times


def child_report(logdir: str, workers: str, stages: bool = False) -> dict:
    start = time.perf_counter()
    times = _time_stages(start) if stages else {}
    from tbtriage.cli.main import main

    argv = ["report", logdir, "--format", "json", "--out", os.devnull]
    if workers == PARENT_READS:
        from tbtriage.analysis import engine

        whole = engine.diagnose  # the command as it was: this process reads every run, the pool only judges
        engine.diagnose = lambda *a, **k: whole(*a, **{**k, "slim": False})  # type: ignore[assignment]
    elif workers != "auto":
        argv += ["--workers", workers]
    code = main(argv)
    return {
        "seconds": time.perf_counter() - start,
        "stages": times,
        "code": code,
        "cpu_s": _cpu_s(resource.RUSAGE_SELF),
        "workers_cpu_s": _cpu_s(resource.RUSAGE_CHILDREN),
        "rss_mb": _peak_mb(resource.RUSAGE_SELF),
        "workers_rss_mb": _peak_mb(resource.RUSAGE_CHILDREN),
    }


def _rss_mb() -> float:
    """This process's resident memory now."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _cpu_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _burn(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def child_calibrate() -> dict:
    """Seconds for 4 loops in 1 process and in 2 (the ratio is what a 2-process pool can gain right now)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    out = {}
    for workers in (1, 2):
        start = time.perf_counter()
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            list(pool.map(_burn, [CALIBRATION_LOOP] * 4))
        out[str(workers)] = time.perf_counter() - start
    return out


def child_accumulator(logdir: str, count: int) -> dict:
    """EventAccumulator and tbtriage reading the same first `count` runs (every scalar)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    import tbtriage

    names = sorted(p.name for p in Path(logdir).iterdir() if p.is_dir())[:count]
    start = time.perf_counter()
    points = 0
    for name in names:
        acc = EventAccumulator(str(Path(logdir) / name), size_guidance={"scalars": 0})
        acc.Reload()
        points += sum(len(acc.Scalars(tag)) for tag in acc.Tags()["scalars"])
    ea = time.perf_counter() - start
    start = time.perf_counter()
    loaded = tbtriage.load(logdir, runs="^(" + "|".join(map(re.escape, names)) + ")$")
    ours = time.perf_counter() - start
    mine = sum(len(s) for run in loaded.runs.values() for s in run.scalars.values())
    return {"runs": len(names), "points": points, "ea_seconds": ea, "ours_points": mine, "ours_seconds": ours}


#: A stall of the UI thread at least this long is broken down by what the thread ran (`StallSampler`).
STALL_REPORT_S = 0.05
#: The longest stalls broken down in the bench's output.
STALLS_SHOWN = 6
#: How often the sampler looks at the UI thread's stack.
SAMPLE_EVERY_S = 0.002


class StallSampler:
    """What the UI thread runs, sampled every `SAMPLE_EVERY_S` from a thread of its own (the stack's frames in
    tbtriage and Textual), and the garbage collector's full collections; `breakdown` names what ran in a window."""

    def __init__(self) -> None:
        import gc
        import threading

        self.samples: list[tuple[float, tuple[str, ...]]] = []
        self.collections: list[tuple[float, float]] = []  # (start, end) of each generation-2 collection
        self._ui = threading.get_ident()
        self._stop = threading.Event()
        self._gc_start = 0.0
        gc.callbacks.append(self._on_gc)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_gc(self, phase: str, info: dict) -> None:
        if info.get("generation") == 2:
            if phase == "start":
                self._gc_start = time.perf_counter()
            else:
                self.collections.append((self._gc_start, time.perf_counter()))

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            frame = sys._current_frames().get(self._ui)
            stack = []
            while frame is not None:
                code = frame.f_code
                where = code.co_filename
                if "tbtriage" in where or "/tui/" in where or "/analysis/" in where or "textual" in where:
                    module = where.rsplit("/", 2)
                    stack.append(f"{module[-2]}/{module[-1][:-3]}.{code.co_name}")
                frame = frame.f_back
            self.samples.append((time.perf_counter(), tuple(stack)))

    def stop(self) -> None:
        import gc

        self._stop.set()
        self._thread.join()
        gc.callbacks.remove(self._on_gc)

    def breakdown(self, start: float, end: float) -> list[str]:
        """The innermost frames the UI thread was in between `start` and `end`, most sampled first, as
        "share frame < caller < caller"; a full garbage collection in the window is named too."""
        from collections import Counter

        counts = Counter(stack[:3] for at, stack in self.samples if start <= at <= end)
        total = sum(counts.values()) or 1
        lines = [
            f"{100 * n / total:3.0f}% {' < '.join(stack) or '(idle or outside)'}" for stack, n in counts.most_common(4)
        ]
        for gc_start, gc_end in self.collections:
            if gc_start < end and gc_end > start:
                lines.append(f"gc (generation 2) {1000 * (gc_end - gc_start):.0f} ms")
        return lines


async def press_key(app, key: str, frames: list[float]) -> float | None:
    """Send `key` to `app` as its terminal would; when the first frame after the cursor left its run was drawn
    (`time.perf_counter()`; `frames`: every frame's, as the app hands them to its driver), or None when the cursor did
    not move within 5 s."""
    from textual import events

    before, sent = app.view.current_run, time.perf_counter()
    app._driver.send_message(events.Key(key, None))
    moved = None
    while time.perf_counter() - sent < 5:
        if moved is None and app.view.current_run != before:
            moved = time.perf_counter()
        if moved is not None and frames and frames[-1] >= moved:
            return frames[-1]
        await asyncio.sleep(0.001)
    return None


def child_app(logdir: str, key_every: float) -> dict:
    """Milestones and key latencies of the app loading `logdir` (seconds from the app's creation).

    All health is shown once every run's row shows its health: from every run's verdict (`app.loaded`), or on a
    warm reopen from the health index (`store.health`, every run's health as its verdict had it), which comes
    before the verdicts themselves are loaded with the columns (`verdicts`); keys are pressed until then.

    A key's latency is from sending it to the first frame drawn after the app has acted on it (the
    cursor moved to another run): what a user waits for. Pilot's `press` is not used for this: it
    returns once the whole *process* has used no CPU for a moment (`textual._wait.wait_for_idle`, up
    to 1 s, twice), which never happens while worker threads read and analyse, so it measured the
    workers, not the keys. The event loop's lag (how late a 10 ms sleep wakes) is sampled too: the
    longest time the UI thread could not answer anything.
    """
    from textual.worker import WorkerState

    from tbtriage.tui.app import make_app
    from tbtriage.tui.screens.main import MainScreen
    from tbtriage.tui.widgets.run_table import RunTable

    # The UI thread's own work per refresh of the runs table (every run's row built, sorted and synced): counted
    # and timed apart from the machine's load, which the key latencies and stalls include.
    refreshes: list[float] = []
    refresh_runs = MainScreen.refresh_runs

    def timed_refresh(self, *args, **kwargs):
        before = time.perf_counter()
        try:
            return refresh_runs(self, *args, **kwargs)
        finally:
            refreshes.append(time.perf_counter() - before)

    MainScreen.refresh_runs = timed_refresh  # type: ignore[method-assign]

    expected = sum(1 for p in Path(logdir).iterdir() if p.is_dir())
    marks: dict[str, float] = {}
    latencies: list[float] = []
    lags: list[float] = []
    frames: list[float] = []

    stalls: list[tuple[float, float, str]] = []  # (start, end, the app's stage) of each stall of STALL_REPORT_S+
    shown: dict = {}  # "app": the app, once made

    stage_rss: dict[str, float] = {}  # the app's stage ("reading", "analysing", "loaded") -> its largest RSS, MB

    async def lag_probe() -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            after = time.perf_counter()
            lags.append(after - before - 0.01)
            app = shown.get("app")
            stage = "loaded" if app is None or app.progress is None else app.progress[0]
            stage_rss[stage] = max(stage_rss.get(stage, 0.0), _rss_mb())
            if lags[-1] >= STALL_REPORT_S:
                progress = stage if app is None or app.progress is None else "{} {}/{}".format(*app.progress)
                stalls.append((before + 0.01, after, f"at {after - shown['start']:.1f} s, {progress}"))

    async def press(app, key: str) -> float | None:
        """Seconds from sending `key` to the first frame after the cursor left its run (None: it did not move)."""
        sent = time.perf_counter()
        drawn = await press_key(app, key, frames)
        return None if drawn is None else drawn - sent

    async def main() -> None:
        start = time.perf_counter()
        app = make_app(logdir, follow=False)
        shown.update(app=app, start=start)
        display = app._display

        def displayed(screen, renderable) -> None:  # every frame the compositor hands the driver
            if renderable is not None:
                frames.append(time.perf_counter())
            display(screen, renderable)

        app._display = displayed  # type: ignore[method-assign]
        async with app.run_test(size=APP_SIZE):
            marks["first_frame"] = time.perf_counter() - start
            probe = asyncio.create_task(lag_probe())
            next_key = time.perf_counter() + key_every
            while time.perf_counter() - start < APP_TIMEOUT_S:
                now = time.perf_counter()
                tables = app.screen.query(RunTable)
                if "names" not in marks and tables and tables.first().row_count >= expected:
                    marks["names"] = now - start
                if "verdicts" not in marks and app.loaded and len(app.store.reports) >= expected:
                    marks["verdicts"] = now - start
                if "health" not in marks and ("verdicts" in marks or len(app.store.health) >= expected):
                    marks["health"] = now - start  # every run's verdict, or a warm reopen's index of them all
                if "verdicts" in marks:  # done once the workers it started (a chart's) are done too
                    if not any(w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in app.workers):
                        break
                if "verdicts" not in marks and now >= next_key and tables and tables.first().row_count > 1:
                    # Down from the top row, else up: the cursor follows its run as rows re-sort, so it must move.
                    latency = await press(app, "down" if tables.first().cursor_row == 0 else "up")
                    if latency is not None:
                        latencies.append(latency)
                    next_key = time.perf_counter() + key_every
                await asyncio.sleep(0.01)
            else:
                marks["timeout"] = APP_TIMEOUT_S
            probe.cancel()

    sampler = StallSampler()
    asyncio.run(main())
    sampler.stop()
    longest = sorted(stalls, key=lambda stall: stall[0] - stall[1])[:STALLS_SHOWN]
    ordered = sorted(latencies)
    return {
        **marks,
        "keys": len(latencies),
        "keys_ms": [round(1000 * latency, 1) for latency in latencies],  # in the order pressed
        "worst_key_ms": 1000 * ordered[-1] if ordered else None,
        "median_key_ms": 1000 * ordered[len(ordered) // 2] if ordered else None,
        "worst_lag_ms": 1000 * max(lags) if lags else None,
        "rss_mb": _peak_mb(resource.RUSAGE_SELF),
        "table_refreshes": len(refreshes),
        "table_refresh_ms": 1000 * sum(refreshes) / max(len(refreshes), 1),
        "table_refresh_max_ms": 1000 * max(refreshes, default=0.0),
        "stalls": len(stalls),
        "stage_rss_mb": stage_rss,
        "longest_stalls": [
            [1000 * (end - begin), stage, sampler.breakdown(begin, end)] for begin, end, stage in longest
        ],
    }


def print_stalls(app: dict) -> None:
    """The UI thread's longest stalls, each with what it ran (the innermost tbtriage/Textual frames sampled)."""
    rss = ", ".join(f"{stage} {mb:,.0f} MB" for stage, mb in app["stage_rss_mb"].items())
    print(f"app: largest RSS while {rss}")
    print(f"app: {app['stalls']} UI-thread stalls of {1000 * STALL_REPORT_S:.0f} ms or more; the longest:")
    for ms, stage, lines in app["longest_stalls"]:
        print(f"  {ms:5.0f} ms {stage}")
        for line in lines:
            print(f"        {line}")


def child_main(argv: list[str]) -> int:
    kind, *rest = argv
    if kind == "report":
        result = child_report(rest[0], rest[1], stages=rest[2:] == ["stages"])
    elif kind == "calibrate":
        result = child_calibrate()
    elif kind == "accumulator":
        result = child_accumulator(rest[0], int(rest[1]))
    else:
        result = child_app(rest[0], float(rest[1]))
    print("RESULT " + json.dumps(result))
    return 0


#: Each round reads the logdir cold unless `--with-cache`: with the cache on, every round after the first would
#: map the columns and take the verdicts the first one cached, and the rounds would not compare.
CHILD_ENV = {"TBTRIAGE_NO_CACHE": "1"}


def run_child(*args: str, env: dict[str, str] | None = None) -> tuple[dict, float]:
    """(the child's result, its wall time from the shell: interpreter start and imports included)."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--child", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env={**os.environ, **CHILD_ENV} if env is None else env,
    )
    wall = time.perf_counter() - start
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :]), wall
    raise RuntimeError(f"child {args[0]} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")


# ---- the parent ------------------------------------------------------------------------------------------


def generate(root: Path, runs: int, tags: int, points: int) -> tuple[int, float]:
    """(bytes written, seconds): `report_speed`'s runs, one event file each."""
    import report_speed

    start = time.perf_counter()
    written = report_speed.generate(root, runs, tags, points)
    return written, time.perf_counter() - start


MODES = ("--no-cache", "cold", "warm")


def _mode_envs(home: str) -> dict[str, dict[str, str]]:
    """The environment of each of `MODES` in the cache home `home` (made here; the compiled kernel's numba cache is
    the user's, so a cold round compiles nothing)."""
    from tbtriage.analysis.decode import cache_dir

    (Path(home) / "tbtriage").mkdir()
    (Path(home) / "tbtriage" / "numba").symlink_to(cache_dir() / "numba", target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k != "TBTRIAGE_NO_CACHE"}
    env["XDG_CACHE_HOME"] = home
    return {mode: {**env, "TBTRIAGE_NO_CACHE": "1"} if mode == "--no-cache" else env for mode in MODES}


def cache_modes(
    logdir: Path, repeat: int, app: bool = True, key_every: float = 0.5, cache_dir: Path | None = None
) -> None:
    """`report` (pooled) without the cache, cold with it (an empty cache directory) and warm (the one the cold round
    filled), in turn `repeat` times: wall and CPU of the whole command (its pool's workers included), peak RSS, and
    the report process's own steps (`STAGES`); then the app in the same three modes (a cache home of its own),
    each against the report in the same mode. The cache homes are made in `cache_dir` (default: the temp
    directory; creating a file in a crowded one, as `/tmp` often is, can cost far more than under `~/.cache`)."""
    print("report, pooled: --no-cache, cold (an empty cache), warm; wall and CPU (this process + its pool workers)")
    for _ in range(repeat):
        walls: dict[str, float] = {}
        with tempfile.TemporaryDirectory(prefix="tbtriage-cache-", dir=cache_dir) as home:
            for mode, mode_env in _mode_envs(home).items():
                result, wall = run_child("report", str(logdir), "auto", "stages", env=mode_env)
                walls[mode] = wall
                cpu = result["cpu_s"] + result["workers_cpu_s"]
                steps = ", ".join(f"{name} {w:.2f} s (CPU {c:.2f}) ending at {end:.2f}"
                                  for name, (w, c, end) in sorted(result["stages"].items(), key=lambda kv: kv[1][2]))  # fmt: skip
                print(
                    f"  {mode:10s} {wall:6.2f} s from the shell, CPU {cpu:5.1f} s ({result['cpu_s']:.1f} s in the "
                    f"report process), peak RSS {result['rss_mb']:,.0f} MB (+ workers' largest "
                    f"{result['workers_rss_mb']:,.0f} MB)\n             {steps}"
                )
        if not app:
            continue
        with tempfile.TemporaryDirectory(prefix="tbtriage-cache-", dir=cache_dir) as home:
            for mode, mode_env in _mode_envs(home).items():
                shown, _ = run_child("app", str(logdir), str(key_every), env=mode_env)
                health = shown.get("health", float("nan"))
                print(
                    f"  app {mode:10s} all health shown {health:.2f} s = {health / walls[mode]:.2f}× the report's "
                    f"{walls[mode]:.2f} s (bar: ≤ 1.3); every verdict loaded "
                    f"{shown.get('verdicts', float('nan')):.2f} s; first frame {shown['first_frame']:.2f} s; keys while loading: "
                    f"worst {shown.get('worst_key_ms') or float('nan'):.0f} ms, longest UI stall "
                    f"{shown.get('worst_lag_ms') or float('nan'):.0f} ms; peak RSS {shown['rss_mb']:,.0f} MB"
                )
                print(f"  app {mode:10s} keys in the order pressed (ms): {_first_keys(shown)}")
                print_stalls(shown)


#: Key latencies listed one by one (the first ones: a warm reopen's first key pays for what the app has not yet done).
KEYS_LISTED = 12


def _first_keys(app: dict) -> str:
    keys = app.get("keys_ms", [])
    more = f" … ({len(keys) - KEYS_LISTED} more)" if len(keys) > KEYS_LISTED else ""
    return ", ".join(f"{ms:.0f}" for ms in keys[:KEYS_LISTED]) + more


def measure(logdir: Path, args: argparse.Namespace, label: str) -> None:
    runs = sum(1 for p in logdir.iterdir() if p.is_dir())
    print(f"\n== {label}: {runs:,} runs ==")
    report_s = None
    if args.cache_modes:
        cache_modes(logdir, args.repeat, app=not args.skip_app, key_every=args.key_every, cache_dir=args.cache_dir)
        return
    if not args.skip_report:
        rows = []
        for workers in ("auto", PARENT_READS, "1") * args.repeat:
            result, wall = run_child("report", str(logdir), workers)
            rows.append((workers, result, wall))
            print(
                f"report {workers:12s}  {wall:7.2f} s from the shell ({result['seconds']:.2f} s in main, CPU "
                f"{result['cpu_s']:.1f} s + {result['workers_cpu_s']:.1f} s in pool workers)   peak RSS "
                f"{result['rss_mb']:,.0f} MB (+ pool workers' largest {result['workers_rss_mb']:,.0f} MB)"
            )
        pooled = min(wall for w, _, wall in rows if w == "auto")
        serial = min(wall for w, _, wall in rows if w == "1")
        before = min(wall for w, _, wall in rows if w == PARENT_READS)
        report_s = pooled
        print(f"workers reading their runs / the parent reading them = {pooled / before:.2f}")
        calibration, _ = run_child("calibrate")
        gain = calibration["1"] / calibration["2"]
        print(
            f"best of {args.repeat}: pooled {pooled:.2f} s, serial {serial:.2f} s: pool/serial = {pooled / serial:.2f} "
            f"(a pure-Python loop in 2 processes vs 1 here now: {1 / gain:.2f}, i.e. {gain:.2f}× the throughput)"
        )
        print(f"issue bar for 2,000 runs: ≤ 8 s ({'met' if pooled <= 8 else 'not met'} at {runs:,} runs)")
    if args.ea_runs:
        acc, _ = run_child("accumulator", str(logdir), str(args.ea_runs))
        ea_rate = acc["points"] / acc["ea_seconds"]
        our_rate = acc["ours_points"] / acc["ours_seconds"]
        print(
            f"EventAccumulator on {acc['runs']} runs: {acc['ea_seconds']:.2f} s ({ea_rate / 1e3:,.0f} k points/s); "
            f"tbtriage.load on the same runs {acc['ours_seconds']:.2f} s ({our_rate / 1e3:,.0f} k points/s): "
            f"{our_rate / ea_rate:.1f}× faster; EventAccumulator would read all {runs:,} runs in "
            f"~{acc['ea_seconds'] * runs / max(acc['runs'], 1):,.0f} s"
        )
    if not args.skip_app:
        app, wall = run_child("app", str(logdir), str(args.key_every))
        worst = app.get("worst_key_ms")
        late = f" (gave up after {APP_TIMEOUT_S:.0f} s)" if "timeout" in app else ""
        print(
            f"app: first frame {app['first_frame']:.2f} s, all {runs:,} names listed "
            f"{app.get('names', float('nan')):.2f} s, all health shown {app.get('health', float('nan')):.2f} s, every "
            f"verdict loaded {app.get('verdicts', float('nan')):.2f} s{late}"
        )
        if worst is not None:
            print(
                f"app: {app['keys']} key presses while loading, median {app['median_key_ms']:.0f} ms, "
                f"worst {worst:.0f} ms (bar: ≤ 100 ms), key sent to the frame showing it; the UI thread's longest "
                f"stall {app['worst_lag_ms']:.0f} ms; peak RSS {app['rss_mb']:,.0f} MB"
            )
        print_stalls(app)
        print(
            f"app: the UI thread refreshed the runs table {app['table_refreshes']} times while loading, "
            f"{app['table_refresh_ms']:.1f} ms each on average (longest {app['table_refresh_max_ms']:.1f} ms)"
        )
        if report_s and "health" in app:
            print(f"app all-health / report = {app['health'] / report_s:.2f} (bar: ≤ 1.3)")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--logdir", type=Path, help="measure this logdir instead of generating them")
    parser.add_argument("--runs", type=int, help="generate one logdir of this many runs (with --tags, --points)")
    parser.add_argument("--tags", type=int, default=4)
    parser.add_argument("--points", type=int, default=300, help="points per tag (default 300)")
    parser.add_argument("--repeat", type=int, default=2, help="report runs per mode; the best counts (default 2)")
    parser.add_argument("--ea-runs", type=int, default=20, help="runs EventAccumulator reads (0: skip)")
    parser.add_argument("--key-every", type=float, default=0.5, help="seconds between key presses in the app")
    parser.add_argument("--skip-app", action="store_true")
    parser.add_argument("--skip-report", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the generated logdirs and print where")
    parser.add_argument(
        "--with-cache", action="store_true", help="let the rounds use the cache (later rounds then read it warm)"
    )
    parser.add_argument(
        "--cache-modes",
        action="store_true",
        help="the report, pooled, and the app: --no-cache, cold and warm in turn, the report process's steps timed",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        help="with --cache-modes: make the rounds' cache homes in this directory (default: the temp directory)",
    )
    args = parser.parse_args(argv)
    if args.with_cache:
        CHILD_ENV.clear()
    print(f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.logdir:
        measure(args.logdir, args, str(args.logdir))
        return 0
    shapes = [(args.runs, args.tags, args.points)] if args.runs else list(SHAPES)
    temp = Path(tempfile.mkdtemp(prefix="tbtriage-many-"))
    try:
        for runs, tags, points in shapes:
            logdir = temp / f"{runs}x{tags}x{points}"
            size, seconds = generate(logdir, runs, tags, points)
            print(
                f"\ngenerated {runs:,} runs × {tags} tags × {points} points ({runs * tags * points / 1e6:.1f} M points, "
                f"{size / 1e6:,.0f} MB) in {seconds:.1f} s"
            )
            measure(logdir, args, f"{runs} runs × {tags} tags × {points} points")
    finally:
        if args.keep:
            print(f"kept {temp}")
        else:
            shutil.rmtree(temp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
