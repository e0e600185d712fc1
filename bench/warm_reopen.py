"""The morning reopen: a logdir read cold, against the same logdir reopened from the decoded-column cache.

    python bench/warm_reopen.py                        # ~1 GB: 200 runs × 20 tags × 4,500 points, in /tmp
    python bench/warm_reopen.py --runs 40 --points 2000 --no-app   # a quick look
    python bench/warm_reopen.py --logdir runs/         # your own logdir (the cache goes to a temp dir)
    python bench/warm_reopen.py --gb 10 --dir /tmp/tb10g --stages cli app   # peak RSS on a 10 GB logdir

Every figure comes from a fresh child process (imports included), with its own empty cache directory per
round: `cold` reads with the cache off (the baseline), `first` reads cold and writes the cache, `warm` opens
again from it. Three stages are timed: `load` (tbtriage.load: every run's columns in hand), `report` (load,
then findings and health for every run: `tbtriage.diagnose`; warm, the verdicts come from the verdict
cache), with Textual's Pilot, `app` (the app from start to the first screen with every run's health, which
a warm reopen draws from the verdict cache before reading any run, and on to the first pass done: every run
read and its verdict confirmed, twins attached), and on request `cli` (`tbtriage report --format json` whole,
for its peak RSS: `--stages cli`). Peak RSS is the kernel's (`wait4`); the child also samples its
anonymous memory (RssAnon), which is what mapped columns leave out. The OS page cache is warm in every
round (the files were just written): the figures compare decoding with mapping, not disks. Prints figures
and ratios against the cold round measured in the same run; asserts nothing.

tbtriage's modules are compiled to bytecode first (`compile_bytecode`), as an installed wheel has them: a machine
with PYTHONDONTWRITEBYTECODE set would otherwise time Python compiling ~50 modules in every child.

`--rounds warm --cache-home DIR --repeat N` reopens N times from a cache an earlier run left in DIR (the figure a
shared machine blurs least is the median, and the CPU seconds to the screen with health).

`--gb N` sizes the generated logdir to about N GB (4 tags × 48,000 points a run, ~10 MB): `GB_DISTINCT` runs
are generated and copied (real copies, not links) up to the size, since generating is the slow part. The
issue's bar is a peak RSS ≤ 2 GB for a 10 GB logdir, in `report` (`--stages cli`: the kernel's figure for
the command's own process, its pool's workers shown apart) and in the app. `--dir` writes the logdir there
and keeps it (measure it again with `--logdir`); delete it when done.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: `--gb`: the shape of each run (tags, points per tag) and how many distinct runs the copies are made from.
GB_TAGS, GB_POINTS, GB_DISTINCT = 4, 48_000, 40


class _RssSampler(threading.Thread):
    """The peak of this process's anonymous and file-backed resident memory, sampled every 20 ms."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.anon = self.file = self.workers = 0
        self.done = False

    def sample(self) -> None:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    self.anon = max(self.anon, int(line.split()[1]))
                elif line.startswith("RssFile:"):
                    self.file = max(self.file, int(line.split()[1]))

    def run(self) -> None:
        ticks = 0
        while not self.done:
            self.sample()
            if ticks % 25 == 0:
                self.sample_descendants()
            ticks += 1
            time.sleep(0.02)

    def sample_descendants(self) -> None:
        """The largest peak RSS (VmHWM) among this process's descendants: the pool's workers, which a fork
        server starts as its children rather than ours, so that RUSAGE_CHILDREN misses them."""
        parents: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
        mine, grew = {os.getpid()}, True
        while grew:
            found = {pid for pid, ppid in parents.items() if ppid in mine} - mine
            grew, mine = bool(found), mine | found
        for pid in mine - {os.getpid()}:
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            self.workers = max(self.workers, int(line.split()[1]))
            except OSError:
                continue


def child(stage: str, logdir: str) -> None:
    """One measured round, in this fresh process; prints its figures as JSON."""
    sampler = _RssSampler()
    sampler.start()
    start = time.perf_counter()
    cpu = time.process_time()
    figures: dict[str, object] = {}
    if stage == "app":
        import asyncio

        asyncio.run(_app_round(logdir, start, cpu, figures))
    elif stage == "cli":
        from tbtriage.cli.main import main as tbtriage_main

        figures["exit"] = tbtriage_main(["report", logdir, "--format", "json", "--out", os.devnull])
    else:
        import tbtriage

        logdir_ = tbtriage.load(logdir)
        figures["load_s"] = time.perf_counter() - start
        states: dict[str, int] = {}
        for r in logdir_._readers.values():
            states[r.cache_state or "none"] = states.get(r.cache_state or "none", 0) + 1
        figures["cache"] = states
        figures["points"] = sum(len(s) for run in logdir_.runs.values() for s in run.scalars.values())
        if stage == "report":
            report = tbtriage.diagnose(logdir_)
            figures["analyse_s"] = time.perf_counter() - start - figures["load_s"]
            figures["findings"] = sum(len(r.findings) for r in report.runs)
    figures["total_s"] = time.perf_counter() - start
    sampler.done = True
    sampler.sample()
    figures["anon_mb"], figures["file_mb"] = sampler.anon / 1024, sampler.file / 1024
    figures["workers_peak_mb"] = sampler.workers / 1024  # the largest of the pool's workers (VmHWM)
    print(json.dumps(figures))


def _columns_read(app) -> int:
    """Runs whose columns the app has read so far (every run once its logdir is read, without `columns_read`)."""
    read = getattr(app, "columns_read", None)
    if read is not None:
        return len(read)
    return len(app.logdir.runs) if app.logdir is not None else 0


async def _app_round(logdir: str, start: float, cpu: float, figures: dict) -> None:
    import asyncio

    from tbtriage.analysis.config import Config
    from tbtriage.tui.app import make_app
    from tbtriage.tui.run_rows import ASCII_GLYPHS, GLYPHS
    from tbtriage.tui.widgets.run_table import COLUMNS, RunTable

    STATUS = [key for key, _label, _width in COLUMNS].index("status")

    app = make_app(logdir, config=Config(), follow=False)
    pending = {GLYPHS["pending"], ASCII_GLYPHS["pending"]}
    health_drawn = asyncio.Event()
    display = app._display

    def every_run_has_health(table) -> bool:
        return bool(
            app.store.runs
            and table.row_count == len(app.store.runs)
            and all(table.cells_at(index)[STATUS].plain not in pending for index in range(table.row_count))
        )

    def displayed(screen, update) -> None:
        """Each frame as Textual hands it to the terminal (headless here): the first one of the main screen, and
        the first in which the runs table shows a verdict on every run (from the health index or the verdict
        cache on a warm reopen, before any run is read; on a cold one, once the first pass judged them all).
        Pilot hands the app over only once its screen is idle, which the load worker can hold off well after."""
        display(screen, update)
        if update is None or health_drawn.is_set() or not screen.query(RunTable):
            return
        if "first_frame_s" not in figures:
            figures["first_frame_s"] = time.perf_counter() - start
            figures["first_frame_cpu_s"] = time.process_time() - cpu
        if every_run_has_health(screen.query_one(RunTable)):
            figures["first_health_s"] = time.perf_counter() - start
            # CPU seconds (every thread): on a machine others share, the figure the wall clock blurs.
            figures["first_health_cpu_s"] = time.process_time() - cpu
            figures["columns_read_at_health"] = _columns_read(app)
            health_drawn.set()

    app._display = displayed  # type: ignore[method-assign]
    async with app.run_test(size=(160, 48)) as pilot:
        await health_drawn.wait()
        while app.logdir is None:
            await asyncio.sleep(0.005)
        figures["load_s"] = time.perf_counter() - start
        while not app.loaded:
            await asyncio.sleep(0.005)
        await pilot.pause()  # the frame that shows the last verdict
        figures["health_shown_s"] = time.perf_counter() - start
        figures["runs"] = len(app.reports)
        await pilot.press("q")


ROUNDS = ("cold", "first", "warm")


def run_rounds(stage: str, logdir: Path, home: Path, rounds: tuple[str, ...] = ROUNDS, repeat: int = 1) -> None:
    """`rounds` of `stage` (cold: cache off; first: cold, writing the cache; warm: from it, `repeat` times, the
    median shown) and their figures, each against the cold round when there is one."""
    key = {"load": "load_s", "report": "total_s", "app": "first_health_s", "cli": "total_s"}[stage]
    results: dict[str, dict] = {}
    if "cold" in rounds:
        results["cold"] = measure_rss(stage, logdir, home, no_cache=True)
    if "first" in rounds:
        # One cache home for every round, so the compiled kernel's own cache is warm in each; only the
        # decoded columns (and the verdicts and indexes beside them) are dropped before the round that writes them.
        shutil.rmtree(home / "tbtriage" / "columns", ignore_errors=True)
        results["first"] = measure_rss(stage, logdir, home, no_cache=False)
    if "warm" in rounds:
        warm = sorted((measure_rss(stage, logdir, home, no_cache=False) for _ in range(repeat)), key=lambda f: f[key])
        results["warm"] = warm[len(warm) // 2]
        if repeat > 1:
            print(f"\n{stage}: warm {key} over {repeat} rounds: " + ", ".join(f"{f[key]:.3f}" for f in warm))
    base = results.get("cold")
    print(f"\n{stage}: until {'every run read' if stage == 'load' else 'every run judged'}")
    print(
        f"  {'round':6} {'process s':>9} {key:>15} {'vs cold':>8} {'peak RSS MB':>11} {'anon MB':>8} "
        f"{'workers MB':>10}  cache"
    )
    for name, f in results.items():
        extra = f.get("cache", "")
        if stage == "report":
            extra = f"load {f['load_s']:.2f} s + analysis {f['analyse_s']:.2f} s; {extra}"
        if stage == "app":
            extra = (
                f"first frame {f['first_frame_s']:.2f} s, read {f['load_s']:.2f} s, "
                f"first pass done {f['health_shown_s']:.2f} s; CPU to health {f['first_health_cpu_s']:.2f} s, "
                f"runs read by then {f['columns_read_at_health']}"
            )
        if stage == "cli":
            extra = f"exit {f['exit']}"
        ratio = f"{base[key] / f[key]:7.1f}x" if base else f"{'-':>8}"
        print(
            f"  {name:6} {f['wall_s']:9.2f} {f[key]:15.3f} {ratio} "
            f"{f['peak_mb']:11.0f} {f['anon_mb']:8.0f} {f['workers_peak_mb']:10.0f}  {extra}"
        )
    cache_mb = sum(p.stat().st_size for p in (home / "tbtriage" / "columns").glob("*.tbc")) / 1e6
    print(f"  cache entries: {cache_mb:.0f} MB")


def measure_rss(stage: str, logdir: Path, cache_home: Path, no_cache: bool) -> dict:
    """One child round with its peak RSS from wait4 (Popen reaps the child itself otherwise)."""
    env = dict(os.environ, XDG_CACHE_HOME=str(cache_home))
    env.pop("TBTRIAGE_NO_CACHE", None)
    if no_cache:
        env["TBTRIAGE_NO_CACHE"] = "1"
    start = time.perf_counter()
    cache_home.mkdir(parents=True, exist_ok=True)
    out_path = cache_home.parent / f"out-{os.getpid()}.json"
    with open(out_path, "w") as out:
        pid = os.posix_spawn(
            sys.executable,
            [sys.executable, __file__, "--child", stage, str(logdir)],
            env,
            file_actions=[(os.POSIX_SPAWN_DUP2, out.fileno(), 1)],
        )
        _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    text = out_path.read_text()
    out_path.unlink()
    if status:
        sys.exit(f"the {stage} round failed (status {status}); its output:\n{text[-2000:]}")
    figures = json.loads(text.strip().splitlines()[-1])
    figures["wall_s"] = wall
    figures["peak_mb"] = usage.ru_maxrss / 1024  # KiB on Linux
    return figures


def compile_bytecode() -> None:
    """tbtriage's modules compiled to bytecode once, outside every figure, as a wheel's install does and as any
    first start does unless PYTHONDONTWRITEBYTECODE is set (as it is on some machines, where every child would
    otherwise compile ~50 modules from source on the way to its first frame: ~0.1 s of CPU no user pays)."""
    import compileall

    for package in ("analysis", "tui", "themes", "tbtriage"):
        compileall.compile_dir(ROOT / package, quiet=1)


def generate_gb(logdir: Path, gb: float) -> int:
    """About `gb` GB of runs: `GB_DISTINCT` generated, then copied under new names until the size is reached."""
    from bench.report_speed import generate

    size = generate(logdir, GB_DISTINCT, GB_TAGS, GB_POINTS)
    per_run, copies = size / GB_DISTINCT, 0
    while size + per_run <= gb * 1e9:
        source = logdir / f"run_{copies % GB_DISTINCT:03d}"
        shutil.copytree(source, logdir / f"copy{copies // GB_DISTINCT}_{source.name}")
        size += per_run
        copies += 1
    return int(size)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child", nargs=2, metavar=("STAGE", "LOGDIR"), help=argparse.SUPPRESS)
    parser.add_argument("--logdir", help="measure this logdir instead of generating one")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--tags", type=int, default=20)
    parser.add_argument("--points", type=int, default=4_500, help="points per tag")
    parser.add_argument(
        "--stages", nargs="+", default=["load", "report", "app"], choices=["load", "report", "app", "cli"]
    )
    parser.add_argument("--no-app", action="store_true", help="skip the app rounds")
    parser.add_argument("--gb", type=float, help="generate about this many GB (runs of 4 tags × 48,000 points)")
    parser.add_argument("--dir", help="write the generated logdir here and keep it")
    parser.add_argument(
        "--rounds", nargs="+", default=list(ROUNDS), choices=ROUNDS, help="which rounds (warm alone needs --cache-home)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="warm rounds per stage (the median is shown)")
    parser.add_argument(
        "--cache-home",
        type=Path,
        help="the XDG cache home the rounds share, kept afterwards (default: a temporary one): a later run with "
        "--rounds warm measures reopening from it",
    )
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    stages = [s for s in args.stages if not (args.no_app and s == "app")]
    with tempfile.TemporaryDirectory(prefix="tbtriage-warm-") as tmp_:
        tmp = Path(tmp_)
        if args.logdir:
            logdir = Path(args.logdir)
        else:
            from bench.report_speed import generate

            logdir = Path(args.dir) if args.dir else tmp / "logdir"
            start = time.perf_counter()
            if args.gb:
                size = generate_gb(logdir, args.gb)
                shape = f"{len(os.listdir(logdir))} runs × {GB_TAGS} tags × {GB_POINTS:,} points"
            else:
                size = generate(logdir, args.runs, args.tags, args.points)
                shape = f"{args.runs} runs × {args.tags} tags × {args.points:,} points"
            print(f"wrote {shape} ({size / 1e9:.2f} GB) in {time.perf_counter() - start:.0f} s", flush=True)
        home = args.cache_home or tmp / "cache-home"
        compile_bytecode()
        # Compiles the kernel once, outside every figure (one run is enough; a 10 GB logdir is not read for it).
        first = min((p for p in logdir.iterdir() if p.is_dir()), default=logdir)
        measure_rss("load", first, home, no_cache=True)
        for stage in stages:
            run_rounds(stage, logdir, home, tuple(args.rounds), args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
