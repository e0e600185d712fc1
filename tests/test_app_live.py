"""Runs that are still training: live follow, the run dashboard, and quitting in the middle of a load."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace

import numpy as np
from textual.widgets import Static

from tbtriage.analysis.config import Config
from tbtriage.tui.app import make_app
from tbtriage.tui.messages import RunsAnalyzed
from tbtriage.tui.screens.dashboard import RunDashboard
from tbtriage.tui.widgets.findings_list import FindingsList
from tbtriage.tui.widgets.grad_heatmap import GradHeatmap
from tbtriage.tui.widgets.run_table import COLUMNS, RunTable
from tbtriage.tui.widgets.tag_chart import TagChart
from tbtriage.tui.widgets.tag_tree import TagTree
from tests._app_data import NOW, HandAnalyzer, decaying_loss, drive, fixed_clock, settle, write_run
from tests._report_data import finding

FOLLOW = 0.05  # seconds between live passes in these tests


async def _until(pilot, condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the app"
        await pilot.pause(0.05)


def test_live_follow_picks_up_appended_points_and_new_runs(tmp_path):
    write_run(tmp_path, "training", {"train/loss": decaying_loss(50)})
    app = make_app(tmp_path, clock=fixed_clock, follow_seconds=FOLLOW, analyzer=HandAnalyzer())

    async def scenario(app, pilot):
        chart = app.screen.query_one(TagChart)
        assert len(chart.requests[0].series) == 50

        write_run(tmp_path, "training", {"train/loss": decaying_loss(30)}, first_step=50)
        write_run(tmp_path, "second_try", {"train/loss": decaying_loss(20)})
        await _until(pilot, lambda: "second_try" in app.reports and app.runs["training"].last_step == 79)
        await pilot.pause()

        assert sorted(app.screen.query_one(RunTable).names) == ["second_try", "training"]
        assert len(app.screen.query_one(TagChart).requests[0].series) == 80

    drive(app, scenario)


def test_a_finding_that_appears_while_following_is_highlighted_once(tmp_path):
    write_run(tmp_path, "training", {"train/loss": decaying_loss(50)})
    analyzer = HandAnalyzer()
    app = make_app(tmp_path, follow=False, clock=fixed_clock, analyzer=analyzer)

    async def live_pass(pilot):
        await pilot.press("r")
        await settle(app, pilot)

    async def scenario(app, pilot):
        write_run(tmp_path, "training", {"train/loss": np.full(30, np.nan)}, first_step=50)
        analyzer.plan["training"] = (10, [finding("training", "divergence", "critical", 50, tags=("train/loss",))])
        await live_pass(pilot)

        findings = app.screen.query_one(FindingsList)
        assert str(findings.get_option_at_index(0).prompt).startswith("✖ new divergence@50")
        assert any("divergence at step 50" in n.message for n in app._notifications)

        await live_pass(pilot)  # nothing new this time: the highlight has been shown once
        assert str(findings.get_option_at_index(0).prompt).startswith("✖ divergence@50")

    drive(app, scenario)


def test_f_pauses_live_follow(tmp_path):
    write_run(tmp_path, "training", {"train/loss": decaying_loss(20)})
    app = make_app(tmp_path, clock=fixed_clock, follow_seconds=FOLLOW, analyzer=HandAnalyzer())

    async def scenario(app, pilot):
        await pilot.press("f")
        assert not app.follow
        write_run(tmp_path, "training", {"train/loss": decaying_loss(20)}, first_step=20)
        await pilot.pause(FOLLOW * 6)
        assert app.runs["training"].last_step == 19
        await pilot.press("r")  # but a manual reload still reads
        await _until(pilot, lambda: app.runs["training"].last_step == 39)

    drive(app, scenario)


def test_enter_opens_the_run_dashboard_and_empty_panels_say_so(tmp_path):
    layers = {f"grad_norm/layer{i}": np.full(40, 10.0**-i) for i in range(4)}
    write_run(tmp_path, "run", {"train/loss": decaying_loss(40), "val/loss": decaying_loss(40) + 0.2, **layers})
    app = make_app(tmp_path, follow=False, clock=fixed_clock, analyzer=HandAnalyzer())

    async def scenario(app, pilot):
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, RunDashboard) and screen.run_name == "run"

        loss = screen.query_one("#loss-chart", TagChart)
        assert [r.run for r in loss.requests] == ["train/loss", "val/loss"]
        heatmap = screen.query_one(GradHeatmap)
        assert sorted(heatmap.grad_layers) == sorted(layers)
        assert "layer0" in str(heatmap.render()) and "layer3" in str(heatmap.render())
        assert screen.query_one("#panel-lr").has_class("-empty")
        assert screen.query_one("#panel-device").has_class("-empty")
        assert not screen.query_one("#panel-loss").has_class("-empty")

        await pilot.press("l")  # log-y applies to the dashboard's charts too
        assert loss.options.log_y

        await pilot.press("escape")
        assert not isinstance(app.screen, RunDashboard)

    drive(app, scenario)


def test_quitting_while_runs_are_still_being_analysed_exits_at_once(tmp_path):
    for i in range(12):
        write_run(tmp_path, f"run{i:02d}", {"train/loss": decaying_loss(10, seed=i)})
    first_started = threading.Event()

    hand = HandAnalyzer()

    def slow_analyzer(run, context, _hand=hand):
        first_started.set()
        time.sleep(0.3)
        return _hand(run, context)

    app = make_app(tmp_path, follow=False, clock=fixed_clock, analyzer=slow_analyzer)

    async def scenario(app, pilot):
        await asyncio.get_running_loop().run_in_executor(None, first_started.wait, 5)
        assert app.progress is not None  # still at work
        scenario.quit_at = time.monotonic()
        await pilot.press("q")

    started = time.monotonic()
    drive(app, scenario, wait=False)
    took = time.monotonic() - scenario.quit_at
    assert app.return_code == 0
    assert len(app.reports) < 12  # the analysis stopped instead of finishing first
    assert took < 2.0 and time.monotonic() - started < 5.0


def test_quitting_while_event_files_are_still_being_read_exits_at_once(tmp_path):
    import tbtriage

    for i in range(12):
        write_run(tmp_path, f"run{i:02d}", {"train/loss": decaying_loss(10, seed=i)})
    reading = threading.Event()
    runs_read: list[str] = []

    def slow_load(path, cancel, on_run):
        def slow_cancel():  # a big logdir: each run takes a while to read
            reading.set()
            time.sleep(0.2)
            return cancel()

        def record(name, run):
            runs_read.append(name)
            on_run(name, run)

        return tbtriage.load(path, cancel=slow_cancel, on_run=record)

    app = make_app(tmp_path, follow=False, clock=fixed_clock, analyzer=HandAnalyzer(), loader=slow_load)

    async def scenario(app, pilot):
        await asyncio.get_running_loop().run_in_executor(None, reading.wait, 5)
        scenario.quit_at = time.monotonic()
        await pilot.press("q")

    drive(app, scenario, wait=False)
    took = time.monotonic() - scenario.quit_at
    assert app.return_code == 0
    assert len(runs_read) < 12  # the reader stopped instead of reading everything first
    assert took < 2.0


def test_a_run_that_stops_writing_while_another_goes_on_is_flagged_stalled_in_the_app(tmp_path):
    # Both runs trained side by side until 2000 s before the clock; then only `steady` writes on,
    # 14 minutes later. Wall times are written into the events, so no test waits for the silence.
    start = NOW - 2000.0
    write_run(tmp_path, "hung", {"train/loss": decaying_loss(50)}, wall0=start)
    write_run(tmp_path, "steady", {"train/loss": decaying_loss(50, seed=1)}, wall0=start)
    app = make_app(tmp_path, config=Config(), clock=fixed_clock, follow_seconds=FOLLOW, recheck_silent_s=60.0)

    def stalled(name):
        report = app.reports.get(name)
        return [f for f in report.findings if f.kind == "stalled"] if report else []

    async def scenario(app, pilot):
        assert not stalled("hung") and not stalled("steady")

        write_run(tmp_path, "steady", {"train/loss": decaying_loss(30, seed=2)}, first_step=50, wall0=start + 850.0)
        await _until(pilot, lambda: bool(stalled("hung")))
        await pilot.pause()

        (finding,) = stalled("hung")
        assert finding.severity == "warning"  # the logdir is live: its newest event is 19 min old
        assert finding.evidence["still_writing"] == ["steady"]
        assert not stalled("steady")
        assert any("hung: stalled" in n.message for n in app._notifications)

    drive(app, scenario)


def test_a_live_pass_changes_only_the_rows_of_runs_that_changed(tmp_path):
    for i in range(8):
        write_run(tmp_path, f"run{i}", {"train/loss": decaying_loss(20, seed=i)})
    app = make_app(tmp_path, follow=False, clock=fixed_clock, analyzer=HandAnalyzer())

    def shown(table: RunTable) -> dict[str, list[str]]:
        return {name: [cell.plain for cell in table.cells_at(i)] for i, name in enumerate(table.names)}

    async def scenario(app, pilot):
        table = app.screen.query_one(RunTable)
        before = shown(table)

        write_run(tmp_path, "run3", {"train/loss": decaying_loss(10)}, first_step=20)
        await pilot.press("r")
        await settle(app, pilot)

        after = shown(table)
        assert sorted(after) == sorted(before)
        step = [key for key, _, _ in COLUMNS].index("step")
        assert after["run3"][step] == "29" and before["run3"][step] == "19"
        assert {name: cells for name, cells in after.items() if name != "run3"} == {
            name: cells for name, cells in before.items() if name != "run3"
        }

    drive(app, scenario)


def test_many_runs_arrive_in_a_few_coalesced_updates_not_one_redraw_per_run(tmp_path):
    for i in range(60):
        write_run(tmp_path, f"run{i:02d}", {"train/loss": decaying_loss(10, seed=i)})
    app = make_app(tmp_path, follow=False, clock=fixed_clock, analyzer=HandAnalyzer())

    async def scenario(app, pilot):
        assert len(app.reports) == 60
        assert app.screen.query_one(RunTable).row_count == 60
        # Discovered, reading progress, read, a few batches of verdicts, done: not one update per run
        # (that would be 120: a progress and a verdict each). The bound leaves room for a slow machine.
        assert app.data.version < 30

    drive(app, scenario)


def test_verdicts_on_other_runs_redraw_their_rows_and_the_status_line_without_relaying_out_the_screen(
    tmp_path, monkeypatch
):
    """While thousands of runs are analysed, each coalesced batch of verdicts must cost the UI thread one
    table sync and a one-line status redraw: not a full re-layout of the screen (what every `Static.update`
    asks for), nor a rebuild of the tag tree, findings list or diagnosis of a run the batch did not touch."""
    from textual.screen import Screen
    from textual.widgets import Markdown

    from tbtriage.tui.messages import COALESCE_S

    for i in range(40):
        write_run(tmp_path, f"run{i:02d}", {"train/loss": decaying_loss(10, seed=i)})
    app = make_app(tmp_path, follow=False, clock=fixed_clock, analyzer=HandAnalyzer())
    calls: dict[str, int] = {}

    def counting(cls, name):
        original = getattr(cls, name)

        def counted(self, *args, **kwargs):
            if name != "_refresh_layout" or self is app.main_screen:
                calls[name] = calls.get(name, 0) + 1
            return original(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, counted)

    async def scenario(app, pilot):
        current = app.view.current_run
        others = [name for name in sorted(app.reports) if name != current]
        for cls, name in ((Screen, "_refresh_layout"), (RunTable, "sync_rows"), (TagTree, "show_tags")):
            counting(cls, name)
        for cls, name in ((FindingsList, "show_findings"), (Markdown, "update")):
            counting(cls, name)
        batches = 12
        for done in range(1, batches + 1):  # new verdicts on other runs: their rows and the status line change
            reports = [replace(app.reports[name]) for name in others[(done - 1) * 3 : done * 3]]
            app.post_message(RunsAnalyzed(reports, done, batches + 1))
            await pilot.pause()
        await settle(app, pilot)
        await pilot.pause(2 * COALESCE_S)  # the last batches, merged, are shown once the interval is up
        # At most one per batch however many verdicts it holds; fewer, as batches arriving within COALESCE_S of
        # each other are merged.
        synced = calls.get("sync_rows", 0)
        assert 1 <= synced <= batches
        # A pass's last message repeats every verdict shown already: nothing of the table changes.
        app.post_message(RunsAnalyzed([app.reports[name] for name in others], batches, batches + 1))
        await settle(app, pilot)
        await pilot.pause(2 * COALESCE_S)
        assert calls.get("sync_rows", 0) == synced
        assert "analysing 12/13" in str(app.main_screen.query_one("#status").render())
        # The progress bar showing up is the one layout; one per batch would be 12 or more.
        assert calls.get("_refresh_layout", 0) <= 2
        assert "show_tags" not in calls and "show_findings" not in calls and "update" not in calls

    drive(app, scenario)


class GatedAnalyzer(HandAnalyzer):
    """Judges nothing until the test opens the gate, so the app can be seen between reading and analysing."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def __call__(self, run, context=None):
        self.gate.wait(10)
        return super().__call__(run, context)


def test_once_every_run_is_read_the_status_counts_the_analysis_from_zero(tmp_path):
    for i in range(3):
        write_run(tmp_path, f"run{i}", {"train/loss": decaying_loss(20, seed=i)})
    analyzer = GatedAnalyzer()
    app = make_app(tmp_path, follow=False, clock=fixed_clock, analyzer=analyzer)

    async def scenario(app, pilot):
        await _until(pilot, lambda: app.logdir is not None)
        await pilot.pause()
        status = str(app.screen.query_one("#status", Static).render())
        assert "analysing 0/3" in status and "reading" not in status
        analyzer.gate.set()
        await settle(app, pilot)
        assert "analysing" not in str(app.screen.query_one("#status", Static).render())
        assert len(app.reports) == 3

    drive(app, scenario, wait=False)


def test_a_flood_of_verdicts_redraws_the_runs_table_a_few_times_not_once_per_message(tmp_path):
    # Each announcement of new data rebuilds every run's row and sorts them: with thousands of runs, one per
    # worker message held the UI thread. Messages arriving faster than COALESCE_S are merged.
    from tbtriage.tui.app import TriageApp
    from tbtriage.tui.messages import COALESCE_S
    from tests._app_data import report_for

    for i in range(3):
        write_run(tmp_path, f"run{i}", {"train/loss": decaying_loss(20, seed=i)})
    app = make_app(tmp_path, follow=False, clock=fixed_clock, analyzer=HandAnalyzer())
    assert isinstance(app, TriageApp)

    async def scenario(app, pilot):
        redraws = []
        refresh_runs = app.main_screen.refresh_runs
        app.main_screen.refresh_runs = lambda *a, **k: (redraws.append(1), refresh_runs(*a, **k))
        runs = list(app.runs.values())
        flood = 300
        for i in range(flood):
            run = runs[i % len(runs)]
            app.post_message(RunsAnalyzed([report_for(run, score=i % 100)], i + 1, flood))
        deadline = time.monotonic() + 10
        while app.store.reports["run2"].health.score != (flood - 1) % 100:
            assert time.monotonic() < deadline
            await pilot.pause(0.01)
        await pilot.pause(2 * COALESCE_S)
        await pilot.pause()
        # Every verdict was taken, and the table shows the last ones...
        table = app.main_screen.query_one(RunTable)
        health = [key for key, _label, _width in COLUMNS].index("health")
        shown = {table.cells_at(i)[3].plain: table.cells_at(i)[health].plain for i in range(table.row_count)}
        assert shown == {r.name: str(app.store.reports[r.name].health.score) for r in runs}
        # ...after a few redraws, not one per message.
        assert 1 <= len(redraws) <= 4

    drive(app, scenario)


def test_what_the_app_loaded_is_kept_out_of_the_garbage_collectors_full_passes(tmp_path):
    # A full collection walks every object the process holds, with every thread stopped: on 2,000 runs each took
    # 100-165 ms while they loaded, the longest waits for a key. What was loaded lives as long as the app.
    import gc

    for i in range(3):
        write_run(tmp_path, f"run{i}", {"train/loss": decaying_loss(20, seed=i)})
    app = make_app(tmp_path, follow=False, clock=fixed_clock, analyzer=HandAnalyzer())
    gc.unfreeze()

    async def scenario(app, pilot):
        tracked = {id(obj) for obj in gc.get_objects()}
        assert gc.get_freeze_count() > 0
        assert id(app.logdir) not in tracked
        assert all(id(app.runs[name].scalars) not in tracked for name in app.runs)

    try:
        drive(app, scenario)
    finally:
        gc.unfreeze()


def test_twins_are_attached_once_a_pass_has_judged_every_run_not_after_every_batch(tmp_path, monkeypatch):
    """Twins compare each sick run with the healthy ones over the whole logdir: attached after every batch of
    verdicts, a 2,000-run logdir took 461 s to show its health instead of 8 s."""
    from tbtriage.analysis.watch import Watcher
    from tbtriage.tui.messages import Throttle

    for i in range(40):
        write_run(tmp_path, f"run{i:02d}", {"train/loss": decaying_loss(10, seed=i)})
    monkeypatch.setattr(Throttle, "ready", lambda self: True)  # every verdict is a batch of its own
    calls = []
    twinned = Watcher.twinned

    def counted(self):
        calls.append(len(self.reports))
        return twinned(self)

    monkeypatch.setattr(Watcher, "twinned", counted)
    from tbtriage.tui.app import TriageApp

    batches = []
    on_analyzed = TriageApp.on_runs_analyzed

    def counting(self, message):
        batches.append(len(message.reports))
        return on_analyzed(self, message)

    monkeypatch.setattr(TriageApp, "on_runs_analyzed", counting)
    app = make_app(tmp_path, follow=False, clock=fixed_clock, analyzer=HandAnalyzer())

    async def scenario(app, pilot):
        assert len(app.reports) == 40
        assert len(batches) >= 10  # the pass went out in many batches...
        assert 1 <= len(calls) <= 2 and all(n == 40 for n in calls)  # ...and twins were attached over all 40 once

    drive(app, scenario)
