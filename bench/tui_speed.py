"""How fast the app is on a large logdir: first frame from the shell, loading milestones, keypress-to-redraw.

    python bench/tui_speed.py                           # 50 runs x 1M points of one tag, in a temp dir
    python bench/tui_speed.py --runs 10 --points 200000 # smaller
    python bench/tui_speed.py --logdir runs/            # your own logdir
    python bench/tui_speed.py --runs 0 --table-runs 2000 # only the runs-table figure

First frame: `python -m tbtriage LOGDIR` is started in a pseudo-terminal (160x48) and timed until the
chart pane's first line is on the terminal; a bare Textual app drawing that line is timed the same way
(the floor any Textual app pays), and so are `tbtriage --help` and `tbtriage report --help`.

The app runs headless (Textual's `run_test`) at 160x48 with the real reader and engine. Redraw is
timed from the key press to the end of the first `render()` that draws the chart prepared for the
new view (preparation runs in a thread worker), with five runs overlaid, three times in the same run:
with the chart's per-series caches (EMA per weight, bucket pyramids, the sorted outlier ranking; warmed
in the worker after the first draw, timed) and its lines' cells computed with numpy (`chart_canvas`);
the same with plotext drawing the lines dot by dot (the baseline for the numpy lines, as the chart drew
before them); and on the direct path that rescans every point on each key and lets plotext draw the
lines (the baseline for the caches, as the chart worked before either). The first chart-drawing
baseline is plotext drawing one raw series without min/max bucketing (what a naive chart does); the
others draw the overlaid chart at the outlier range with plotext's lines, clipped to the plot first
and not.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TAG = "train/loss"
SIZE = (160, 48)
#: Keys timed after loading, in this order (smoothing, log-y, the three x axes, outliers, zoom, pan, reset, next run).
KEYS = ("s", "l", "x", "x", "x", "o", "plus", "right_square_bracket", "0", "s", "l", "o")
OVERLAID_RUNS = 5


def generate(root: Path, runs: int, points: int) -> None:
    """`runs` runs with one loss tag of `points` points each; every fifth run goes NaN for its last 10 %."""
    from tbtriage.analysis.event_writer import encode_scalar_block, event_file_name, file_version_event, frame_records

    rng = np.random.default_rng(0)
    t0 = 1.7e9
    chunk = 250_000  # written in slices so memory stays flat
    for r in range(runs):
        directory = root / f"run_{r:02d}"
        directory.mkdir(parents=True)
        with open(directory / event_file_name(t0), "wb") as out:
            out.write(frame_records([file_version_event(t0)]))
            for lo in range(0, points, chunk):
                steps = np.arange(lo, min(lo + chunk, points), dtype=np.int64)
                values = 0.3 + 2.0 * np.exp(-steps / (points / 4)) + 0.05 * rng.standard_normal(steps.size)
                if r % 5 == 4:
                    values[steps > points * 0.9] = np.nan
                out.write(encode_scalar_block([TAG], steps, t0 + steps * 0.05, values[None, :]))


def use_direct_path() -> None:
    """Make the chart rescan every point on each key (the baseline): bucketing from the raw columns, the
    EMA computed once per weight and kept (as the widget did before its caches), nothing warmed ahead."""
    from tbtriage.analysis.smoothing import ema
    from tbtriage.tui import chart_data
    from tbtriage.tui.widgets import tag_chart

    smoothed: dict[tuple[int, float], tuple[object, np.ndarray]] = {}

    def smoother(request, weight):
        key = (id(request.series), weight)
        if key not in smoothed or smoothed[key][0] is not request.series:
            smoothed[key] = (request.series, ema(request.series.values, weight))
        return smoothed[key][1]

    tag_chart.bucket_lines_cached = lambda requests, options, width, caches: chart_data.bucket_lines(
        requests, options, width, smoother
    )
    tag_chart.TagChart.full_x_range = lambda self: chart_data.full_x_range(self.requests, self.options.x_axis)
    chart_data.SeriesCache.warm = lambda self, axis, cancelled=None: None


async def measure(logdir: Path, direct: bool = False, rounds: int = 3) -> dict[str, object]:
    """Loading milestones and key-press redraws in one app session. The chart's own path: `rounds` pairs of key
    sequences with numpy lines, each followed by a pair drawn by plotext (in pairs: a sequence leaves the smoothing
    two weights on, so a pair covers both states), figures["redraw"] and figures["plotext lines"]. The direct path
    (plotext lines): `rounds` sequences, figures["redraw"]."""
    from tbtriage.analysis.config import Config
    from tbtriage.tui.app import make_app
    from tbtriage.tui.chart_data import ChartCaches
    from tbtriage.tui.widgets.tag_chart import TagChart

    if direct:
        use_direct_path()
    renders: list[float] = []
    original = TagChart.render

    def timed_render(self):
        result = original(self)
        # Only a render of the chart prepared for what is asked now counts (a stale one is drawn meanwhile).
        if self.id == "chart" and self._prepared is not None and self._prepared[0] == self._key():
            renders.append(time.perf_counter())
        return result

    TagChart.render = timed_render
    figures: dict[str, object] = {}
    start = time.perf_counter()
    app = make_app(logdir, config=Config(), follow=False)
    async with app.run_test(size=SIZE) as pilot:
        figures["first frame"] = time.perf_counter() - start
        milestones = {
            "runs listed": lambda: bool(app.runs),
            "events read": lambda: app.logdir is not None,
            "all analysed": lambda: app.loaded,
            "chart mounted": lambda: app.main_screen.chart is not None,  # a step of the warm-up (`tui.warm_up`)
        }
        while milestones:
            for name, reached in list(milestones.items()):
                if reached():
                    figures[name] = time.perf_counter() - start
                    del milestones[name]
            await asyncio.sleep(0.01)
        await pilot.pause()
        figures["runs"] = len(app.runs)
        figures["points"] = sum(len(s) for run in app.runs.values() for s in run.scalars.values())

        chart = app.main_screen.chart
        assert chart is not None
        for _ in range(OVERLAID_RUNS):
            await pilot.press("space", "j")
        # The chart's worker goes on computing the caches the keys will read; a user reads the chart first.
        while chart.preparing or chart._prepared is None or chart._prepared[0] != chart._key():
            await asyncio.sleep(0.005)
        await pilot.pause()
        ways = [False] * rounds if direct else [True, True, False, False] * rounds
        redraws: dict[bool, dict[str, list[float]]] = {True: {}, False: {}}
        for numpy_lines in ways:
            TagChart.numpy_lines = numpy_lines
            for key in KEYS:
                pressed = time.perf_counter()
                await pilot.press(key)
                while not renders or renders[-1] < pressed:
                    await asyncio.sleep(0.001)
                redraws[numpy_lines].setdefault(key, []).append(renders[-1] - pressed)
                while chart.preparing:
                    await asyncio.sleep(0.005)  # the next key waits for this one's work, caches included
        figures["redraw"], figures["plotext lines"] = (
            (redraws[False], {}) if direct else (redraws[True], redraws[False])
        )
        caches = ChartCaches()
        start = time.perf_counter()
        for request in chart.requests:
            caches(request.series).warm("step")
        figures["warm"] = time.perf_counter() - start
        figures["chart cells"] = (chart.size.width, chart.size.height)
        figures["series"] = [(r.run, len(r.series)) for r in chart.requests]
        await pilot.press("q")
    TagChart.render = original
    TagChart.numpy_lines = True
    return figures


#: The chart pane's line before any run is chosen: on the terminal once the first screen is drawn, whatever
#: has been read (the runs pane's title only gains its count once the runs are discovered).
FIRST_SCREEN = re.compile(rb"Select a run and a tag to chart")
#: A bare Textual app, for the floor any Textual app pays from the shell to its first frame.
BARE_APP = """
from textual.app import App
from textual.widgets import Label
class Bare(App):
    def compose(self):
        yield Label("Select a run and a tag to chart.")
Bare().run()
"""
_ESCAPES = re.compile(rb"\x1b(\[[0-9;?<>=$]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\\\)|[@-_])")


def first_frame(command: list[str], timeout: float = 30.0) -> float:
    """Seconds from starting `command` in a 160x48 pseudo-terminal to FIRST_SCREEN on it; then it is quit."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    env = dict(os.environ, TERM="xterm-256color")
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    screen, drawn = b"", float("nan")
    try:
        while time.perf_counter() - start < timeout:
            if select.select([master], [], [], 0.01)[0]:
                try:
                    chunk = os.read(master, 1 << 16)
                except OSError:
                    break
                # Only the new bytes and a little before them (an escape or the title split across reads):
                # stripping the whole screen on every read would add its own time to what is measured.
                recent = screen[-4096:] + chunk
                screen += chunk
                if FIRST_SCREEN.search(_ESCAPES.sub(b"", recent)):
                    drawn = time.perf_counter() - start
                    break
        os.write(master, b"q" if "tbtriage" in command else b"\x03")  # q quits tbtriage, ctrl+c the bare app
        deadline = time.perf_counter() + 10
        while proc.poll() is None and time.perf_counter() < deadline:
            if select.select([master], [], [], 0.05)[0]:  # keep draining: a full terminal would block its exit
                try:
                    os.read(master, 1 << 16)
                except OSError:
                    break
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        os.close(master)
    return drawn


def wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def startup_figures(logdir: Path, repeats: int) -> None:
    """First frame from the shell (median of `repeats`), against a bare Textual app; --help times."""
    from bench.warm_reopen import compile_bytecode

    compile_bytecode()  # as after a wheel's install: the figure is a user's start, not Python compiling our sources
    python = sys.executable
    ours = [first_frame([python, "-m", "tbtriage", str(logdir), "--no-follow"]) for _ in range(repeats)]
    bare = [first_frame([python, "-c", BARE_APP]) for _ in range(repeats)]
    helps = {
        name: statistics.median(wall([python, "-m", "tbtriage", *args, "--help"]) for _ in range(repeats))
        for name, args in (("tbtriage --help", []), ("tbtriage report --help", ["report"]))
    }
    print(
        f"first frame from the shell (`tbtriage LOGDIR` in a {SIZE[0]}x{SIZE[1]} pty, median of {repeats}): "
        f"{statistics.median(ours) * 1000:.0f} ms (min {min(ours) * 1000:.0f}); a bare Textual app with one label: "
        f"{statistics.median(bare) * 1000:.0f} ms (min {min(bare) * 1000:.0f})"
    )
    print("  " + "; ".join(f"{name}: {t * 1000:.0f} ms" for name, t in helps.items()))


def baseline(logdir: Path, width: int, height: int) -> tuple[float, float]:
    """Seconds for plotext to draw one whole raw series, and for ours (prepare + draw) on the same series."""
    from textual_plotext import Plot

    import tbtriage
    from tbtriage.analysis.smoothing import ema
    from tbtriage.tui.chart_data import ChartOptions, SeriesRequest, prepare_chart

    first = next(iter(sorted(tbtriage.load(logdir).runs.items())))[1]
    series = first.scalars[TAG]
    plot = Plot()
    plot.plotsize(width, height)
    start = time.perf_counter()
    plot.plot(series.steps.tolist(), series.values.tolist(), marker="braille")
    plot.build()
    naive = time.perf_counter() - start

    plot.clear_figure()
    plot.plotsize(width, height)
    start = time.perf_counter()
    chart = prepare_chart([SeriesRequest("r", 0, series)], ChartOptions(), width, lambda r, w: ema(r.series.values, w))
    for line in chart.lines:
        for d in (line.raw, line.smooth):
            plot.plot(d.x.tolist(), d.y.tolist(), marker="braille")
    plot.build()
    return naive, time.perf_counter() - start


def clip_figures(logdir: Path, width: int, height: int, repeats: int = 5) -> list[tuple[str, float, float, float]]:
    """Per view of the five overlaid series whose y range cuts lines off (the outlier range, raw or smoothed, zoomed):
    seconds to draw the chart (our plotext calls and its build, median of `repeats`) with lines clipped to the plot
    and their cells computed with numpy (ours); clipped and drawn dot by dot by plotext; and not clipped (plotext
    drawing every segment dot by dot, off the plot too: the first baseline)."""
    from textual.geometry import Size
    from textual_plotext import Plot

    import tbtriage
    from tbtriage.analysis.smoothing import ema
    from tbtriage.themes import load_themes
    from tbtriage.tui.chart_data import ChartOptions, SeriesRequest, full_x_range, prepare_chart
    from tbtriage.tui.widgets.tag_chart import Y_LABEL_CELLS, draw_chart

    runs = sorted(tbtriage.load(logdir).runs.items())[:OVERLAID_RUNS]
    requests = [SeriesRequest(name, slot, run.scalars[TAG]) for slot, (name, run) in enumerate(runs)]
    theme = load_themes()["dark"]
    variables = {**theme.to_color_system().generate(), **theme.variables}
    full = full_x_range(requests, "step")
    assert full is not None
    middle = (full[0] + 0.4 * (full[1] - full[0]), full[0] + 0.6 * (full[1] - full[0]))
    views = {
        "raw, 5-95%": ChartOptions(smoothing=0.0, ignore_outliers=True),
        "smoothed, 5-95%": ChartOptions(ignore_outliers=True),
        "raw, 5-95%, log-y, zoomed": ChartOptions(smoothing=0.0, ignore_outliers=True, log_y=True, window=middle),
    }
    found = []
    for name, options in views.items():
        chart = prepare_chart(requests, options, width - Y_LABEL_CELLS, lambda r, w: ema(r.series.values, w))
        times: dict[tuple[bool, bool], list[float]] = {}
        for _ in range(repeats):  # the three ways alternate, so a busy moment of the machine hits each alike
            for clip, numpy_lines in ((True, True), (True, False), (False, False)):
                plot = Plot()
                start = time.perf_counter()
                draw_chart(plot, chart, variables, Size(width, height), ascii_only=False, legend=False, clip=clip,
                           numpy_lines=numpy_lines)  # fmt: skip
                plot.plotsize(width, height)
                plot.build()
                times.setdefault((clip, numpy_lines), []).append(time.perf_counter() - start)
        ours, clipped, whole = (statistics.median(t) for t in times.values())
        found.append((name, ours, clipped, whole))
    return found


async def table_updates(runs: int, verdicts: int) -> tuple[float, float]:
    """Seconds per analysed run for the runs table of `runs` rows: ours (virtual) and rebuilt (the baseline).

    Verdicts arrive one run at a time, worst health first after each; ours hands the virtual table the
    new order (it draws only the visible rows, when the frame is drawn), the baseline clears a Textual
    DataTable and adds every row again (what the app did for each analysed run before updates were
    coalesced and the table made virtual).
    """
    from textual.app import App
    from textual.widgets import DataTable

    from tbtriage.tui.run_rows import RunRow, sort_rows
    from tbtriage.tui.widgets.run_table import COLUMNS, RunTable

    pending = [RunRow(f"run_{i:05d}", "pending", None, "", 3600, 1.0) for i in range(runs)]
    scored = [RunRow(r.name, "warning", (i * 37) % 100, "plateau@1200", 3600, 1.0) for i, r in enumerate(pending)]

    class TableApp(App):
        def compose(self):
            yield RunTable(id="runs")
            yield DataTable(id="baseline")

    async def one(update) -> float:
        app = TableApp()
        async with app.run_test(size=SIZE) as pilot:
            table = app.query_one(RunTable)
            baseline = app.query_one(DataTable)
            for key, label, width in COLUMNS:
                baseline.add_column(label, key=key, width=width)
            table.sync_rows(sort_rows(pending, "health"), {}, now=2.0)
            await pilot.pause()
            rows = list(pending)
            start = time.perf_counter()
            for i in range(verdicts):
                rows[i] = scored[i]
                update(table, baseline, sort_rows(rows, "health"))
            elapsed = (time.perf_counter() - start) / verdicts
            await pilot.press("q")
        return elapsed

    def rebuild(table, baseline, rows) -> None:
        baseline.clear()
        for row in rows:
            baseline.add_row(*table._cells(row, None), key=row.name)

    ours = await one(lambda table, _, rows: table.sync_rows(rows, {}, now=2.0))
    rebuilt = await one(rebuild)
    return ours, rebuilt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--logdir", type=Path)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--table-runs", type=int, default=2000, help="rows in the runs-table update figure (0: none)")
    parser.add_argument("--repeats", type=int, default=5, help="first-frame and --help timings per figure")
    parser.add_argument(
        "--rounds", type=int, default=3,
        help="pairs of key sequences per way of drawing lines (and sequences on the direct path)",
    )  # fmt: skip
    parser.add_argument(
        "--keys-only", action="store_true", help="only the key-press figures (no first frame, drawing or naive figures)"
    )
    parser.add_argument("--startup-only", action="store_true", help="only the first-frame and --help figures")
    args = parser.parse_args()
    if args.table_runs and not args.startup_only:
        verdicts = min(100, args.table_runs)
        ours, rebuilt = asyncio.run(table_updates(args.table_runs, verdicts))
        print(
            f"runs table of {args.table_runs} runs, {verdicts} verdicts arriving one by one: virtual table "
            f"{ours * 1000:.2f} ms per verdict; rebuilt (baseline) {rebuilt * 1000:.1f} ms; {rebuilt / ours:.0f}x faster"
            " (and the app applies verdicts in batches, at most 4 a second)"
        )
    if args.runs == 0 and args.logdir is None:
        return
    with tempfile.TemporaryDirectory(prefix="tbtriage-bench-") as tmp:
        logdir = args.logdir
        if logdir is None:
            logdir = Path(tmp)
            start = time.perf_counter()
            generate(logdir, args.runs, args.points)
            size = sum(f.stat().st_size for f in logdir.rglob("*") if f.is_file())
            print(
                f"generated {args.runs} runs x {args.points:,} points ({size / 1e6:.0f} MB) in {time.perf_counter() - start:.1f} s"
            )
        if not args.keys_only:
            startup_figures(logdir, args.repeats)
        if args.startup_only:
            return
        figures = asyncio.run(measure(logdir, rounds=args.rounds))
        direct = asyncio.run(measure(logdir, direct=True, rounds=args.rounds))
        print(f"logdir: {logdir} ({figures['runs']} runs, {figures['points']:,} points), terminal {SIZE[0]}x{SIZE[1]}")
        for name in ("first frame", "runs listed", "events read", "all analysed"):
            print(f"  {name:<13} {figures[name] * 1000:9.0f} ms after start")
        width, height = figures["chart cells"]
        print(
            f"keypress to chart redrawn ({len(figures['series'])} runs overlaid, "
            f"{sum(n for _, n in figures['series']):,} points, chart {width}x{height}; {' '.join(KEYS)} pressed "
            f"{2 * args.rounds} times with numpy lines and with plotext lines, alternating in pairs, then "
            f"{args.rounds} times on the direct path)"
        )
        print(
            f"  the caches (EMA per weight, pyramids, x columns, outlier ranking) of these series take "
            f"{figures['warm'] * 1000:.0f} ms to compute, once, in the chart's worker after its first draw"
        )
        print(
            "  cached: the caches and numpy lines; plotext lines: the caches, lines drawn by plotext dot by dot;"
            " direct: neither (ratios: the baseline's median over ours)"
        )
        print(
            f"  {'key':<22} {'cached median':>14} {'max':>8}   {'plotext lines':>14} {'max':>8}   ratio"
            f"   {'direct median':>14} {'max':>8}   ratio"
        )
        columns: list[list[float]] = [[], [], []]
        for key, times in figures["redraw"].items():
            found = (times, figures["plotext lines"][key], direct["redraw"][key])
            for column, values in zip(columns, found):
                column += values
            print(_row(key, *found))
        print(_row("all keys", *columns))
        if args.keys_only:
            return
        print(
            f"drawing the chart ({width}x{height}): lines clipped to the plot and their cells computed with numpy (ours),"
            " clipped and drawn by plotext, not clipped (plotext):"
        )
        for name, ours, clipped, whole in clip_figures(logdir, width, height):
            print(
                f"  {name:<28} ours {ours * 1000:6.1f} ms   clipped {clipped * 1000:6.1f} ms {clipped / ours:5.1f}x"
                f"   whole {whole * 1000:6.1f} ms {whole / ours:5.1f}x"
            )
        naive, ours = baseline(logdir, width, height)
        print(
            f"baseline: plotext drawing one raw {figures['series'][0][1]:,}-point series: {naive * 1000:.0f} ms; "
            f"ours (bucketing + EMA + draw, raw and smoothed): {ours * 1000:.0f} ms; {naive / ours:.0f}x faster"
        )


def _row(key: str, ours: list[float], *baselines: list[float]) -> str:
    mine = statistics.median(ours)
    row = f"  {key:<22} {mine * 1000:11.1f} ms {max(ours) * 1000:5.0f} ms"
    for times in baselines:
        theirs = statistics.median(times)
        row += f"   {theirs * 1000:11.1f} ms {max(times) * 1000:5.0f} ms   {theirs / mine:4.1f}x"
    return row


if __name__ == "__main__":
    main()
