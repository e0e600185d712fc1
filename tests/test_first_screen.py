"""The way from the shell to the first screen imports only what that screen draws: a warm reopen's first frame shows
every run's health from the health index, with neither numpy, the chart (plotext), the reader and its protobufs, the
column cache, the engine, the Diagnosis pane's Markdown parser, the local model nor the package metadata's reader
imported; the app's warm-up then imports the chart's modules and the Markdown parser a step at a time and mounts the
chart in its placeholder's place, so the first key finds them ready, and the placeholder looks exactly like the empty
chart it stands for."""

from __future__ import annotations

import json
import subprocess
import sys

from textual.app import App, ComposeResult
from textual.geometry import Region

from tbtriage.analysis import health_index
from tbtriage.themes import STYLESHEET
from tbtriage.tui import START_YOUNG_OBJECTS
from tbtriage.tui.app import make_app
from tbtriage.tui.warm_up import WarmUp
from tbtriage.tui.widgets.chart_placeholder import COMING_MESSAGE, ChartPlaceholder
from tbtriage.tui.widgets.diagnosis import ANALYSING, DiagnosisPane
from tbtriage.tui.widgets.tag_chart import TagChart
from tests._app_data import decaying_loss, drive, fixed_clock, until, write_run
from tests.test_health_index import _open, logdir  # noqa: F401 - the fixture
from tests.test_verdict_cache import NOW

#: Modules the first screen does without: each is imported later, where its work starts (reading, charting, judging).
OFF_THE_FIRST_SCREEN = (
    "numpy",
    "plotext",
    "textual_plotext",
    "google.protobuf",
    "tensorboard",
    "tbtriage.analysis.reader",
    "tbtriage.analysis.events",
    "tbtriage.analysis.decode",
    "tbtriage.analysis._kernel",
    "tbtriage.analysis.cache",
    "tbtriage.analysis.verdict_cache",
    "tbtriage.analysis.engine",
    "tbtriage.analysis.smoothing",
    "tbtriage.analysis.downsample",
    # Tag roles and the run filter's parser: first asked for once a run is under the cursor or a filter is typed.
    "tbtriage.analysis.roles",
    "tbtriage.analysis.run_filter",
    "tbtriage.tui.chart_data",
    "tbtriage.tui.widgets.tag_chart",
    "tbtriage.tui.widgets.chart_canvas",
    # The Diagnosis pane's Markdown parser (its one-line "Analysing this run…" is drawn without it), Textual's
    # Markdown widget and highlighter (the local model's answer, on demand) and the report's renderer.
    "markdown_it",
    "pygments",
    "textual.widgets._markdown",
    "tbtriage.analysis.render_markdown",
    "tbtriage.analysis.llm",
    "tbtriage.tui.widgets.llm_explanation",
    # tbtriage's version is an attribute (tbtriage/_version.py) and numpy's is read from its version.py: the package
    # metadata's reader, and its search of every installed distribution, are not on the way to the first frame.
    "importlib.metadata",
)

#: What the app's warm-up (`tui.warm_up`) imports once the first screen is drawn, so that the first key finds it ready.
WARMED_UP = (
    "numpy",
    "plotext",
    "textual_plotext",
    "tbtriage.tui.widgets.tag_chart",
    "markdown_it",
    "tbtriage.analysis.render_markdown",
    "tbtriage.analysis.roles",
)

#: Opens the app on argv[1] at the fixed clock argv[2] and prints, at its first frame: whether every run shows its
#: health, which of argv[4:] are imported by then, whether the chart has taken its placeholder's place yet, and the
#: garbage collector's young threshold then and after (held while the app starts); then, once its warm-up is done
#: (what it imported from argv[3], a JSON list), which modules the UI thread imports for the first key.
_FIRST_FRAME = """
import asyncio, gc, json, sys

young_before = gc.get_threshold()[0]
from tbtriage.tui.app import make_app

import importlib.abc, threading

WARMED_UP = json.loads(sys.argv[3])

class UIThreadImports(importlib.abc.MetaPathFinder):
    # Names of the modules the UI thread imports while `on` (other threads' imports are theirs to pay for).

    def __init__(self):
        self.on, self.names = False, []

    def find_spec(self, name, path, target=None):
        if self.on and threading.current_thread() is threading.main_thread():
            self.names.append(name)
        return None

ui_imports = UIThreadImports()
sys.meta_path.insert(0, ui_imports)

async def main():
    now = float(sys.argv[2])
    app = make_app(sys.argv[1], follow=False, clock=lambda: now)
    display, seen = app._display, asyncio.Event()
    out = {}

    def displayed(screen, update):
        display(screen, update)
        if update is None or seen.is_set():
            return
        seen.set()
        rows = app.store.rows(app.view, now)[0]
        out["health"] = bool(rows) and all(row.status != "pending" for row in rows)
        out["rows"] = len(rows)
        out["imported"] = [name for name in sys.argv[4:] if name in sys.modules]
        out["chart_mounted"] = app.main_screen.chart is not None
        out["young"] = [young_before, gc.get_threshold()[0]]

    app._display = displayed
    async with app.run_test(size=(160, 48)) as pilot:
        await seen.wait()
        await pilot.pause(0.2)
        out["young"].append(gc.get_threshold()[0])
        for _ in range(400):  # the warm-up, a step at a time (`tui.warm_up`)
            if app.warm_up.done:
                break
            await asyncio.sleep(0.05)
        out["warmed_up"] = app.warm_up.done
        out["chart_mounted_after"] = app.main_screen.chart is not None
        out["imported_after"] = [name for name in WARMED_UP if name in sys.modules]
        # The first key after the warm-up moves the cursor and its run's panes follow without importing anything
        # the warm-up was for.
        before, ui_imports.on = app.view.current_run, True
        await pilot.press("down")
        await pilot.pause()
        ui_imports.on = False
        out["moved"] = app.view.current_run != before
        out["key_imported"] = ui_imports.names
        await pilot.press("q")
    print(json.dumps(out))

asyncio.run(main())
"""


def test_a_warm_reopen_draws_every_runs_health_before_importing_numpy_the_chart_or_the_reader(logdir):  # noqa: F811
    _open(logdir)  # yesterday's session: it wrote the health index
    assert health_index.read(logdir, None, NOW) is not None
    # A fresh interpreter, as from the shell (this one has imported everything already).
    result = subprocess.run(
        [sys.executable, "-c", _FIRST_FRAME, str(logdir), repr(NOW), json.dumps(WARMED_UP), *OFF_THE_FIRST_SCREEN],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    first = json.loads(result.stdout.strip().splitlines()[-1])
    assert first["rows"] == 3 and first["health"]  # the warm path: health in the very first frame
    assert first["imported"] == []
    assert not first["chart_mounted"]
    # After that frame, a step at a time: the Diagnosis pane's Markdown parser, the chart and what renders a report.
    assert first["warmed_up"] and first["chart_mounted_after"]
    assert first["imported_after"] == list(WARMED_UP)
    assert first["moved"] and first["key_imported"] == []  # the first key found them ready
    # Young collections: as the process had them, held from the app package's import to the first frame, then back.
    before, at_first_frame, after = first["young"]
    assert at_first_frame == START_YOUNG_OBJECTS != before and after == before


class _Both(App):
    """The placeholder beside an empty chart, each given the same room."""

    CSS = "ChartPlaceholder, TagChart { height: 1fr; width: 1fr; }"

    def compose(self) -> ComposeResult:
        yield ChartPlaceholder()
        yield TagChart()


def test_the_placeholder_draws_exactly_what_an_empty_chart_draws():
    app = _Both()

    async def scenario(app, pilot):
        placeholder, chart = app.query_one(ChartPlaceholder), app.query_one(TagChart)
        assert placeholder.size == chart.size and placeholder.size.area > 0
        region = Region(0, 0, chart.size.width, chart.size.height)
        drawn = [[(s.text, s.style) for s in strip] for strip in placeholder.render_lines(region)]
        assert drawn == [[(s.text, s.style) for s in strip] for strip in chart.render_lines(region)]
        assert "Select a run and a tag to chart." in "".join(text for line in drawn for text, _ in line)

    drive(app, scenario, size=(80, 10))


class _Diagnosis(App):
    """The Diagnosis pane alone, styled as in the app."""

    CSS_PATH = str(STYLESHEET)

    def compose(self) -> ComposeResult:
        yield DiagnosisPane(id="diagnosis", classes="pane")


def test_the_diagnosis_pane_says_its_run_is_being_analysed_from_its_first_frame():
    app = _Diagnosis()

    async def scenario(app, pilot):
        pane = app.query_one(DiagnosisPane)
        assert DiagnosisPane.PLACEHOLDER in app.export_screenshot().replace("&#160;", " ")  # no run yet
        pane.show_report(None)  # the worst run, not read yet
        await pilot.pause()
        assert ANALYSING in app.export_screenshot().replace("&#160;", " ")

    drive(app, scenario, size=(60, 8))


def test_a_series_that_comes_before_the_warm_up_reaches_the_chart_waits_for_its_step(tmp_path):
    # Mounted at once, the chart's imports and mount held the UI thread just as a warm reopen's worst run arrived,
    # and a key pressed then waited for them: the warm-up's own step mounts it, the placeholder saying it is coming.
    write_run(tmp_path, "gpt", {"train/loss": decaying_loss(50)})
    app = make_app(str(tmp_path), follow=False, clock=fixed_clock)
    app.warm_up = WarmUp(app, [])  # the warm-up has not got to the chart yet

    async def scenario(app, pilot):
        screen = app.main_screen
        await until(pilot, lambda: app.view.current_run == "gpt" and app.store.chart_requests(app.view))
        await pilot.pause()
        assert screen.chart is None
        placeholder = screen.query_one(ChartPlaceholder)
        assert placeholder.coming and COMING_MESSAGE in str(placeholder.render())
        await screen.mount_chart()  # the warm-up's step
        await pilot.pause()
        assert screen.chart is not None and [r.run for r in screen.chart.requests] == ["gpt"]
        assert not screen.query(ChartPlaceholder)

    drive(app, scenario)
