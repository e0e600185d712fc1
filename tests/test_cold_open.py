"""A cold open of many runs with the cache on, as a user meets it: the pool's workers read the runs and judge them
(`pipeline.read_and_judge`, as `report` does), every run's health is on screen before the app's own process reads
a column, the verdicts are the report's, and the columns are read afterwards (mapped from the cache the workers
filled; with `--no-cache`, decoded again in the app into its private spill).

Runs are the health index's tests' runs (three seeds, seed1 stalled: `stalled` is judged in the app's process once
every span is known); the pool is let in for three runs (`POOL_MIN_RUNS`) on two processes whatever the machine."""

from __future__ import annotations

import threading

import pytest

from tbtriage.analysis import health_index, pipeline
from tbtriage.analysis.decode import cache_dir
from tbtriage.analysis.engine import run_report_dict
from tbtriage.analysis.spill import is_mapped
from tbtriage.tui import warm_open
from tbtriage.tui.app import make_app
from tests._app_data import drive, settle, until
from tests.test_health_index import _rows, logdir  # noqa: F401 - the fixture
from tests.test_verdict_cache import EVERY_RUN, NOW, _cold


@pytest.fixture(autouse=True)
def pooled(monkeypatch) -> None:
    monkeypatch.setattr(pipeline, "POOL_MIN_RUNS", 2)
    monkeypatch.setattr(pipeline, "usable_cores", lambda: 2)


class _HeldLazyRead:
    """The app's lazy read of the columns (`warm_open.ReadOrder`) waits until `release()`."""

    def __init__(self, monkeypatch) -> None:
        self.gate = threading.Event()
        original = warm_open.ReadOrder.take

        def take(order):
            assert self.gate.wait(30), "the test never let the read go on"
            return original(order)

        monkeypatch.setattr(warm_open.ReadOrder, "take", take)

    def release(self) -> None:
        self.gate.set()


async def _judged_by_the_pool(app, pilot) -> None:
    """Until the pool's pass has shown every run's health (and one frame more)."""
    await until(pilot, lambda: app.loaded, "no health from the pool", timeout=60)
    await pilot.pause()


def test_a_cold_open_shows_every_runs_health_from_workers_that_read_before_the_app_reads_a_column(logdir, monkeypatch):  # noqa: F811
    expected = {r["run"]: r for r in _cold(logdir, monkeypatch)}
    held = _HeldLazyRead(monkeypatch)
    app = make_app(logdir, follow=False, clock=lambda: NOW)

    async def scenario(app, pilot):
        await _judged_by_the_pool(app, pilot)
        assert set(app.reports) == EVERY_RUN
        assert app.columns_read == set()  # judged by the workers, which read the runs: none read here yet
        assert {name: run_report_dict(r) for name, r in app.reports.items()} == expected  # the report's verdicts
        assert _rows(app)["seed1"][0] == "warning"  # stalled: judged here once every span was known
        held.release()
        await settle(app, pilot)
        assert app.columns_read == EVERY_RUN and app.progress is None
        assert len(app.runs["seed0"].scalars["train/loss"]) == 300  # read now: charts have their points
        assert {name: run_report_dict(r) for name, r in app.reports.items()} == expected

    try:
        drive(app, scenario, wait=False)
    finally:
        held.release()
    assert health_index.read(logdir, None, NOW) is not None  # the next open is a warm one


def test_with_no_cache_the_pool_judges_too_and_the_columns_are_read_afterwards_into_the_spill(logdir, monkeypatch):  # noqa: F811
    expected = {r["run"]: r for r in _cold(logdir, monkeypatch)}
    monkeypatch.setenv("TBTRIAGE_NO_CACHE", "1")
    held = _HeldLazyRead(monkeypatch)
    app = make_app(logdir, follow=False, clock=lambda: NOW)

    async def scenario(app, pilot):
        await _judged_by_the_pool(app, pilot)
        assert app.columns_read == set()  # judged by the workers: none read here yet
        assert {name: run_report_dict(r) for name, r in app.reports.items()} == expected
        assert _rows(app)["seed1"][0] == "warning"  # stalled: judged here once every span was known
        held.release()
        await settle(app, pilot)
        assert app.columns_read == EVERY_RUN and app.progress is None
        loss = app.runs["seed0"].scalars["train/loss"]
        assert len(loss) == 300 and is_mapped(loss.values)  # decoded here, then moved to the private spill
        assert {name: run_report_dict(r) for name, r in app.reports.items()} == expected

    try:
        drive(app, scenario, wait=False)
    finally:
        held.release()
    assert not list(cache_dir().rglob("*.tb?"))  # --no-cache: no column, verdict or index entry written


def _index_watched(monkeypatch, logdir) -> list[bool]:  # noqa: F811
    """The pool's tasks made one run each; for each task's verdicts as the app hears of them, whether the logdir's
    health index was on disk then (in order)."""
    monkeypatch.setattr(pipeline, "CHUNK_RUNS", 1)
    original = pipeline.read_and_judge
    seen: list[bool] = []

    def read_and_judge(*args):
        *rest, on_judged = args

        def heard(batch):
            seen.append(health_index.index_path(logdir).exists())
            on_judged(batch)

        return original(*rest, heard)

    monkeypatch.setattr(pipeline, "read_and_judge", read_and_judge)
    return seen


def test_quitting_once_the_pool_judged_every_run_leaves_an_index_the_next_open_draws_from(logdir, monkeypatch):  # noqa: F811
    seen = _index_watched(monkeypatch, logdir)
    held = _HeldLazyRead(monkeypatch)
    app = make_app(logdir, follow=False, clock=lambda: NOW)
    shown: dict[str, tuple] = {}

    async def scenario(app, pilot):
        await until(
            pilot,
            lambda: app.loaded and health_index.index_path(logdir).exists(),
            "no index after the pool's pass",
            timeout=60,
        )
        assert app.columns_read == set()  # written before the lazy read took a single run
        shown.update(_rows(app))
        await app.action_quit()  # a quick quit: the lazy read never ran

    try:
        drive(app, scenario, wait=False)
    finally:
        held.release()
    assert seen == [False, False, False]  # one task per run: none of them found an index
    assert app.columns_read == set()
    index = health_index.read(logdir, None, NOW)
    assert index is not None and list(index.health) == ["seed0", "seed1", "seed2"]

    again = _HeldLazyRead(monkeypatch)
    warm = make_app(logdir, follow=False, clock=lambda: NOW)

    async def reopened(app, pilot):
        await until(
            pilot, lambda: set(app.store.health) == EVERY_RUN, "the next open did not draw from the index", timeout=30
        )
        assert app.columns_read == set() and app.reports == {}  # every run's health, not a run read or judged
        assert _rows(app) == shown
        assert shown["seed1"][0] == "warning"  # stalled, as the pool's pass judged it in the logdir's context

    try:
        drive(warm, reopened, wait=False)
    finally:
        again.release()


def test_the_index_is_not_written_while_the_pool_has_runs_left_to_judge(logdir, monkeypatch):  # noqa: F811
    seen = _index_watched(monkeypatch, logdir)
    written: list[set[str]] = []
    original = health_index.write

    def write(logdir_, shown, engine, config, now):
        written.append(set(shown))
        return original(logdir_, shown, engine, config, now)

    monkeypatch.setattr(health_index, "write", write)
    app = make_app(logdir, follow=False, clock=lambda: NOW)

    async def scenario(app, pilot):
        assert app.loaded and app.columns_read == EVERY_RUN

    drive(app, scenario)
    assert seen == [False, False, False]
    assert written == [EVERY_RUN]  # once, from every run's verdict: not again after the lazy read
    assert health_index.read(logdir, None, NOW) is not None


def test_a_cold_open_walks_the_logdir_once(logdir, monkeypatch):  # noqa: F811
    """The runs' names, the cached verdicts' look-up and the pool all work from one walk of the logdir (each walked it
    again, and a folder it skipped was warned about twice)."""
    from tbtriage.analysis import discover
    from tbtriage.analysis import logdir as logdir_module

    walks = []
    original = discover.find_runs

    def counted(*args, **kwargs):
        walks.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(discover, "find_runs", counted)
    monkeypatch.setattr(logdir_module, "find_runs", counted)
    app = make_app(logdir, follow=False, clock=lambda: NOW)

    async def scenario(app, pilot):
        await _judged_by_the_pool(app, pilot)
        await settle(app, pilot)
        assert set(app.reports) == EVERY_RUN and app.columns_read == EVERY_RUN

    drive(app, scenario, wait=False)
    assert len(walks) == 1
