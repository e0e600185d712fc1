"""Hundreds of runs in the app: a batch of verdicts changes the rows of its runs only, the rows are sorted once per
batch, and the cursor stays on its run while the rows re-sort under it."""

from __future__ import annotations

from dataclasses import replace

from tbtriage.tui import state
from tbtriage.tui.app import make_app
from tbtriage.tui.messages import COALESCE_S, RunsAnalyzed
from tbtriage.tui.widgets.run_table import RunTable
from tests._app_data import HandAnalyzer, decaying_loss, drive, fixed_clock, settle, until, write_run

RUNS = 300


def _logdir(tmp_path) -> HandAnalyzer:
    plan = {}
    for i in range(RUNS):
        name = f"run{i:03d}"
        write_run(tmp_path, name, {"train/loss": decaying_loss(20, seed=i)})
        plan[name] = (10 + (i * 37) % 80, [])
    return HandAnalyzer(plan)


def test_a_batch_of_verdicts_rebuilds_its_rows_only_sorts_once_and_keeps_the_cursor_on_its_run(tmp_path, monkeypatch):
    app = make_app(tmp_path, follow=False, clock=fixed_clock, analyzer=_logdir(tmp_path))
    sorts: list[int] = []
    syncs: list[int] = []

    def counting(module_or_class, name, calls):
        original = getattr(module_or_class, name)

        def counted(*args, **kwargs):
            calls.append(1)
            return original(*args, **kwargs)

        monkeypatch.setattr(module_or_class, name, counted)

    async def scenario(app, pilot):
        table = app.main_screen.query_one(RunTable)
        assert table.row_count == RUNS
        table.move_cursor(150)  # the user clicks a run in the middle of the list
        await settle(app, pilot)
        keep = table.current_run
        assert keep is not None and app.view.current_run == keep and table.cursor_row == 150
        before = {row.name: row for row in table._rows}
        counting(state, "sort_rows", sorts)
        counting(RunTable, "sync_rows", syncs)

        # The 60 worst runs above it are judged healthy now: they go to the bottom, and the cursor's run moves up.
        better = [
            replace(app.reports[row.name], health=replace(app.reports[row.name].health, score=100))
            for row in table._rows[:60]
        ]
        for start in range(0, len(better), 20):
            app.post_message(RunsAnalyzed(better[start : start + 20], RUNS, RUNS))
            await pilot.pause()
        await settle(app, pilot)
        await pilot.pause(2 * COALESCE_S)  # batches merged within the interval are shown once it is up

        assert table.current_run == keep == app.view.current_run
        assert table.cursor_row == 90 and table.names[table.cursor_row] == keep
        assert [row.name for row in table._rows[-60:]] == sorted(report.name for report in better)
        changed = {report.name for report in better}
        after = {row.name: row for row in table._rows}
        assert all(after[name] is before[name] for name in before if name not in changed)  # the others kept
        assert all(after[name].health == 100 for name in changed)
        assert 1 <= len(syncs) <= 3 and len(sorts) <= len(syncs)  # a sort per batch shown at most, never per verdict

    drive(app, scenario)


def test_full_collections_wait_while_the_runs_load_and_resume_once_the_load_is_done(tmp_path):
    import gc

    from tbtriage.tui import GC_THRESHOLDS
    from tbtriage.tui.app import FULL_COLLECTIONS_WHILE_LOADING
    from tests.test_app_live import GatedAnalyzer

    for i in range(3):
        write_run(tmp_path, f"run{i}", {"train/loss": decaying_loss(20, seed=i)})
    analyzer = GatedAnalyzer()
    app = make_app(tmp_path, follow=False, clock=fixed_clock, analyzer=analyzer)
    before = GC_THRESHOLDS  # young collections are held until the first frame (test_first_screen), then as before

    async def scenario(app, pilot):
        await until(pilot, lambda: app.logdir is not None, timeout=10)  # read, not judged yet
        assert gc.get_threshold() == (*before[:2], FULL_COLLECTIONS_WHILE_LOADING)
        analyzer.gate.set()
        await settle(app, pilot)
        assert app.loaded and gc.get_threshold() == before

    drive(app, scenario, wait=False)
    assert gc.get_threshold() == before


def test_the_app_keeps_each_verdict_without_the_detectors_curves(tmp_path, monkeypatch):
    # Thousands of verdicts are held for the whole session: their features keep the numbers every view and health
    # read, not the bucketed curves only the detectors read (~30 KB a run).
    import numpy as np

    import tbtriage
    from tbtriage.analysis.engine import analyze_run

    monkeypatch.setenv("TBTRIAGE_NO_CACHE", "1")
    for i in range(3):
        write_run(tmp_path, f"run{i}", {"train/loss": decaying_loss(400, seed=i), "val/loss": decaying_loss(400)})
    whole = analyze_run(tbtriage.load(tmp_path).runs["run0"])

    def curves(report) -> int:  # the bucketed level (`features.Buckets`) and any array
        return sum(type(v).__name__ == "Buckets" or isinstance(v, np.ndarray) for f in report.features.values()
                   for v in f.extra.values())  # fmt: skip

    assert curves(whole) > 0  # what the engine hands over
    app = make_app(tmp_path, follow=False, clock=fixed_clock)

    async def scenario(app, pilot):
        assert app.loaded and len(app.reports) == 3
        assert all(curves(report) == 0 for report in app.reports.values())
        kept = app.reports["run0"].features["train/loss"]
        assert kept.extra["recent_median"] == whole.features["train/loss"].extra["recent_median"]
        assert app.reports["run0"].health == whole.health

    drive(app, scenario)
