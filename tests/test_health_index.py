"""The health index, as a user meets it: the morning's app draws every run's health from yesterday's index before it
reads a column, reads the runs it charts first, and shows exactly what a cold open shows; an index the files no
longer justify (a run appended to, rewritten, added or removed, another config or engine, a live run gone quiet) is
ignored and the runs judged again.

Runs are the verdict cache's tests' runs (`tests.test_verdict_cache`): three seeds written with the project's event
writer, seed1 stalled while the others wrote on."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from tbtriage.analysis import health_index
from tbtriage.analysis.config import Config
from tbtriage.analysis.engine import run_report_dict
from tbtriage.analysis.reader import RunReader
from tbtriage.tui import app as app_module
from tbtriage.tui import warm_open
from tbtriage.tui.app import make_app
from tbtriage.tui.warm_open import ReadOrder
from tests._app_data import drive, settle, until
from tests.test_verdict_cache import EVERY_RUN, NOW, _cold, _hits, _records, _write


@pytest.fixture
def logdir(tmp_path) -> Path:
    """The verdict cache's tests' logdir: three seeds side by side, seed1 stopped at step 120 (stalled)."""
    root = tmp_path / "logdir"
    for name, stop in (("seed0", 300), ("seed1", 121), ("seed2", 300)):
        _write(root / name, stop)
    return root


#: Far enough past NOW that the logdir is no longer live (`stalled.LIVE_WINDOW_S`): seed1's stall turns to info.
NEXT_DAY = NOW + 86_400.0


def _open(path: Path, clock: float = NOW) -> dict[str, tuple]:
    """One app session on `path` until its first pass is done; each run's row as the table shows it."""
    app = make_app(path, follow=False, clock=lambda: clock)
    rows: dict[str, tuple] = {}

    async def scenario(app, pilot):
        assert app.loaded
        rows.update(_rows(app))

    drive(app, scenario)
    return rows


def _rows(app) -> dict[str, tuple]:
    return {row.name: (row.status, row.health, row.worst, row.last_step) for row in app.store.rows(app.view)[0]}


def _index(path: Path, config: Config | None = None, now: float = NOW):
    return health_index.read(path, config, now)


class _HeldReads:
    """Every run's read waits until `release()`; `names` records the runs asked for, in order."""

    def __init__(self, monkeypatch) -> None:
        self.gate = threading.Event()
        self.names: list[str] = []
        original = RunReader.read

        def read(reader, *args, **kwargs):
            self.names.append(reader.name)
            assert self.gate.wait(30), "the test never let the read go on"
            return original(reader, *args, **kwargs)

        monkeypatch.setattr(RunReader, "read", read)

    def release(self) -> None:
        self.gate.set()


@pytest.mark.parametrize("inline", [True, False], ids=["small index, before the first frame", "large, on a thread"])
def test_a_warm_reopen_shows_every_runs_health_before_reading_any_column(logdir, monkeypatch, inline):
    expected = {r["run"]: r for r in _cold(logdir, monkeypatch)}
    first = _open(logdir)
    assert _index(logdir) is not None  # the first pass left the index behind
    if not inline:
        monkeypatch.setattr(warm_open, "INLINE_INDEX_BYTES", 0)
    held = _HeldReads(monkeypatch)
    app = make_app(logdir, follow=False, clock=lambda: NOW)

    async def scenario(app, pilot):
        await until(pilot, lambda: set(app.store.health) == EVERY_RUN, "no health from the index", timeout=30)
        await pilot.pause()
        assert app.columns_read == set() and app.logdir is None  # nothing read: every column still on disk
        assert app._index_read.inline is inline
        assert _rows(app) == first  # every row as the first session's first pass showed it, stalled seed1 included
        assert first["seed1"][0] == "warning"
        assert app.view.current_run == next(iter(app.store.rows(app.view)[0])).name  # the worst run, at once
        held.release()
        await settle(app, pilot)
        assert app.loaded and app.columns_read == EVERY_RUN
        assert {name: run_report_dict(r) for name, r in app.reports.items()} == expected
        assert len(app.runs["seed0"].scalars["train/loss"]) == 300  # read now: charts have their points

    try:
        drive(app, scenario, wait=False)
    finally:
        held.release()


def test_the_run_under_the_cursor_is_read_first_and_the_one_the_user_moves_to_next(logdir, monkeypatch):
    _open(logdir)
    held = _HeldReads(monkeypatch)
    app = make_app(logdir, follow=False, clock=lambda: NOW)

    async def scenario(app, pilot):
        await until(pilot, lambda: held.names, "nothing read", timeout=30)
        rows = [row.name for row in app.store.rows(app.view)[0]]
        assert held.names == [rows[0]] == [app.view.current_run]  # the worst run, under the cursor: read first
        await pilot.press("down", "down")  # the user moves to the third row while the first is being read
        await pilot.pause()
        assert app.view.current_run == rows[2]
        held.release()
        await settle(app, pilot)
        assert held.names == [rows[0], rows[2], rows[1]]  # the run the user went to before the one skipped
        assert app.loaded and app.reports[rows[2]].run is app.runs[rows[2]]

    try:
        drive(app, scenario, wait=False)
    finally:
        held.release()


def test_an_index_the_files_no_longer_justify_is_ignored_and_the_changed_run_judged_again(logdir, monkeypatch):
    _open(logdir)
    with open(next((logdir / "seed0").iterdir()), "ab") as f:  # seed0 trains on
        f.write(_records(300, 400))
    assert _index(logdir) is None
    expected = {r["run"]: r for r in _cold(logdir, monkeypatch)}
    app = make_app(logdir, follow=False, clock=lambda: NOW)

    async def scenario(app, pilot):
        assert app.loaded
        assert {name: run_report_dict(r) for name, r in app.reports.items()} == expected
        assert app.runs["seed0"].last_step == 399
        assert _rows(app)["seed0"][3] == 399

    drive(app, scenario)
    assert _index(logdir) is not None  # written again for the files as they are now


def test_a_run_appended_to_while_the_index_is_shown_is_judged_again_in_the_first_pass(logdir, monkeypatch):
    _open(logdir)
    held = _HeldReads(monkeypatch)
    app = make_app(logdir, follow=False, clock=lambda: NOW)

    async def scenario(app, pilot):
        await until(
            pilot, lambda: held.names, "nothing read", timeout=30
        )  # the index is shown and the lazy read has begun
        with open(next((logdir / "seed2").iterdir()), "ab") as f:  # seed2 trains on meanwhile
            f.write(_records(300, 400))
        held.release()
        await settle(app, pilot)
        assert app.loaded and app.runs["seed2"].last_step == 399
        assert _rows(app)["seed2"][3] == 399

    try:
        drive(app, scenario, wait=False)
    finally:
        held.release()
    expected = {r["run"]: r for r in _cold(logdir, monkeypatch)}
    assert {name: run_report_dict(r) for name, r in app.reports.items()} == expected
    assert _index(logdir) is not None  # written again for the files as they are now


@pytest.mark.parametrize(
    "change",
    [
        "append",
        "touch",
        "rewrite_same_size",
        "new_run",
        "removed_run",
        "config_file",
        "other_config",
        "next_day",
    ],
)
def test_every_change_that_voids_a_cached_verdict_voids_the_index(logdir, monkeypatch, change):
    _open(logdir)
    assert _index(logdir) is not None
    event_file = next((logdir / "seed2").iterdir())
    config, now = None, NOW
    if change == "append":
        with open(event_file, "ab") as f:
            f.write(_records(300, 301))
    elif change == "touch":
        os.utime(event_file, ns=(time.time_ns(), time.time_ns() + 10**9))
    elif change == "rewrite_same_size":
        data = bytearray(event_file.read_bytes())
        data[-20] ^= 0xFF
        stat = event_file.stat()
        event_file.write_bytes(bytes(data))
        os.utime(event_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size and mtime: only the bytes differ
    elif change == "new_run":
        _write(logdir / "seed3", 300)
    elif change == "removed_run":
        for path in (logdir / "seed2").iterdir():
            path.unlink()
        (logdir / "seed2").rmdir()
    elif change == "config_file":
        (logdir / "seed2" / "hparams.yaml").write_text("lr: 0.1\n")
    elif change == "other_config":
        config = Config(theme="light")
    elif change == "next_day":
        now = NEXT_DAY  # seed1's stall was judged live (a warning); a day later it is not
    assert _index(logdir, config, now) is None
    if change in ("append", "touch", "rewrite_same_size", "config_file"):
        assert "seed2" not in _hits(logdir)  # the verdict cache judges it again too


def test_the_index_holds_while_nothing_changed_and_the_clock_keeps_the_same_side_of_live(logdir):
    _open(logdir)
    assert _index(logdir, now=NOW + 60.0) is not None
    _open(logdir, clock=NEXT_DAY)  # judged again the next day (seed1 stalled, no longer live): indexed again
    assert _index(logdir, now=NEXT_DAY) is not None
    assert _index(logdir, now=NEXT_DAY + 86_400.0) is not None


def test_a_corrupt_index_is_a_miss(logdir):
    _open(logdir)
    path = health_index.index_path(logdir)
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0x01
    path.write_bytes(bytes(raw))
    assert _index(logdir) is None
    path.write_bytes(bytes(raw[:100]))
    assert _index(logdir) is None


def test_the_index_without_the_cache_is_neither_written_nor_read(logdir, monkeypatch):
    monkeypatch.setenv("TBTRIAGE_NO_CACHE", "1")
    _open(logdir)
    assert not health_index.index_path(logdir).exists()


def test_read_order_puts_the_runs_asked_for_first_and_reads_each_once():
    order = ReadOrder(["a", "b", "c", "d"])
    assert order.take() == ("a", False)
    order.want(["c", "a"])  # "a" is read already
    assert order.take() == ("c", True)
    order.want(["d"])
    assert [order.take(), order.take(), order.take()] == [("d", True), ("b", False), None]


def test_a_live_pass_that_judges_appended_points_writes_the_index_again(logdir, monkeypatch):
    monkeypatch.setattr(app_module, "INDEX_EVERY_S", 0.0)
    app = make_app(logdir, follow=False, clock=lambda: NOW)

    async def scenario(app, pilot):
        assert app.loaded and _index(logdir).health["seed2"].last_step == 299
        with open(next((logdir / "seed2").iterdir()), "ab") as f:  # seed2 trains on
            f.write(_records(300, 400))
        assert _index(logdir) is None  # the index no longer matches the files: not used, never wrong
        app.action_refresh()
        await settle(app, pilot)
        assert _rows(app)["seed2"][3] == 399

    drive(app, scenario)
    index = _index(logdir)
    assert index is not None and index.health["seed2"].last_step == 399  # what the live pass judged
    assert {name: row[3] for name, row in _open(logdir).items()} == {"seed0": 299, "seed1": 120, "seed2": 399}
