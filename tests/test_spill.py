"""The private spill: columns the decoded-column cache does not map are written to a temporary file and mapped back.

`--no-cache` turns the persistent cache off; the app still holds a logdir larger than memory, its columns mapped
from a spill directory under $TMPDIR that is never in the logdir or the cache, and is gone once the app exits.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import tbtriage
from tbtriage.analysis import cache
from tbtriage.analysis.config import Config
from tbtriage.analysis.engine import logdir_context
from tbtriage.analysis.spill import Spill, is_mapped, map_columns, write_columns
from tbtriage.analysis.watch import Watcher, engine_analyzer
from tbtriage.tui.app import make_app
from tests._event_files import write_pytorch_run, write_resumed_run
from tests.test_cache import picture


@pytest.fixture
def logdir(tmp_path):
    root = tmp_path / "logdir"
    for seed in range(3):
        write_pytorch_run(root / f"seed{seed}", n=400, seed=seed)
    write_resumed_run(root / "resumed")
    return root


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """$TMPDIR pointed at a fresh directory, so that what a spill leaves behind can be listed."""
    where = tmp_path / "tmpdir"
    where.mkdir()
    monkeypatch.setenv("TMPDIR", str(where))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read $TMPDIR
    return where


def _files_under(path: Path) -> set[Path]:
    return {p for p in path.rglob("*")}


def test_columns_written_and_mapped_back_are_the_same_and_the_file_is_gone(tmp_path):
    rng = np.random.default_rng(0)
    triples = [(np.arange(n, dtype=np.int64), rng.random(n), rng.standard_normal(n)) for n in (0, 1, 1000, 7)]
    triples[2][2][5] = np.nan
    path = tmp_path / "cols"
    with open(path, "wb") as f:
        lengths = write_columns(f, triples)
    mapped = map_columns(path, lengths)
    assert not path.exists()  # the mapping keeps it alive
    for before, after in zip(triples, mapped):
        for a, b in zip(before, after):
            assert a.tobytes() == b.tobytes()
            assert not b.flags.writeable
    assert all(is_mapped(column) for column in mapped[2])
    assert not is_mapped(triples[2][0])


def test_a_spilled_logdir_holds_the_same_points_mapped_from_a_private_directory_then_removed(
    logdir, private_tmp, monkeypatch
):
    monkeypatch.setenv("TBTRIAGE_NO_CACHE", "1")
    before = _files_under(logdir)
    plain = tbtriage.load(logdir)
    spill = Spill(batch_bytes=1)  # a file per run
    spilled = tbtriage.load(logdir, spill=spill)
    assert picture(spilled) == picture(plain)
    columns = [c for run in spilled.runs.values() for s in run.scalars.values() for c in (s.steps, s.values)]
    assert columns and all(is_mapped(c) for c in columns)
    assert not any(is_mapped(s.values) for run in plain.runs.values() for s in run.scalars.values())
    assert spill.files == len(spilled.runs)
    assert Path(spill.directory).parent == private_tmp
    assert list(private_tmp.iterdir()) == []  # every batch's file and directory removed once mapped
    assert _files_under(logdir) == before
    assert not cache.root().exists()
    spill.close()
    assert picture(spilled) == picture(plain)  # still readable: the mappings outlive the files


def test_points_appended_while_following_are_spilled_again(tmp_path, private_tmp, monkeypatch):
    from tensorboardX import SummaryWriter

    monkeypatch.setenv("TBTRIAGE_NO_CACHE", "1")
    writer = SummaryWriter(str(tmp_path / "logdir" / "live"))
    for i in range(100):
        writer.add_scalar("loss", 1.0 / (i + 1), i)
    writer.flush()
    spill = Spill()
    logdir = tbtriage.load(tmp_path / "logdir", spill=spill)
    for i in range(100, 150):
        writer.add_scalar("loss", 1.0 / (i + 1), i)
    writer.close()
    assert logdir.refresh() == ["live"]
    loss = logdir.runs["live"].scalars["loss"]
    assert len(loss) == 150 and is_mapped(loss.values) and is_mapped(loss.steps)
    assert spill.files == 2
    spill.close()


def test_a_temporary_directory_inside_the_logdir_is_not_written(logdir, monkeypatch):
    monkeypatch.setenv("TBTRIAGE_NO_CACHE", "1")
    inside = logdir / "tmp"
    inside.mkdir()
    monkeypatch.setenv("TMPDIR", str(inside))
    monkeypatch.setattr(tempfile, "tempdir", None)
    spill = Spill()
    loaded = tbtriage.load(logdir, spill=spill)
    assert spill.files == 0 and list(inside.iterdir()) == []
    assert not any(is_mapped(s.values) for run in loaded.runs.values() for s in run.scalars.values())


def test_the_app_without_the_cache_maps_every_run_from_a_spill_it_removes_on_exit(logdir, private_tmp, monkeypatch):
    monkeypatch.setenv("TBTRIAGE_NO_CACHE", "1")
    before = _files_under(logdir)
    app = make_app(logdir, config=Config(), follow=False, clock=lambda: 1.7e9)
    seen: dict[str, object] = {}

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(3000):
                if app.loaded:
                    break
                await pilot.pause(0.01)
            assert app.loaded
            seen["directory"] = app.spill.directory
            seen["mapped"] = [is_mapped(s.values) for run in app.runs.values() for s in run.scalars.values()]
            seen["listed"] = list(private_tmp.iterdir())
            await pilot.press("q")

    asyncio.run(scenario())
    assert seen["mapped"] and all(seen["mapped"])
    assert Path(seen["directory"]).parent == private_tmp and seen["listed"] == []  # nothing left on disk
    assert list(private_tmp.iterdir()) == []
    assert _files_under(logdir) == before
    assert not cache.root().exists()


def _resident_kb(column: np.ndarray) -> int:
    """This process's resident kilobytes of the mapping `column` views (/proc/self/smaps)."""
    address = column.__array_interface__["data"][0]
    with open("/proc/self/smaps") as f:
        inside = False
        for line in f:
            head = line.split()[0]
            if "-" in head and all(c in "0123456789abcdef-" for c in head):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= address < hi
            elif inside and line.startswith("Rss:"):
                return int(line.split()[1])
    raise AssertionError("no mapping holds the column")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
def test_a_warm_poll_leaves_no_wall_times_resident_and_reads_spans_of_unchanged_runs_once(tmp_path, monkeypatch):
    # The logdir's context reads every wall time of every run. On a warm reopen no run is analysed (each verdict
    # comes from the verdict cache), and nothing let go of them: a third of a 10 GB logdir's columns stayed in memory.
    for seed in range(3):
        write_pytorch_run(tmp_path / "logdir" / f"seed{seed}", n=20_000, seed=seed)
    Watcher(tbtriage.load(tmp_path / "logdir"), engine_analyzer(Config()), clock=lambda: 1.7e9).poll()  # caches
    logdir = tbtriage.load(tmp_path / "logdir")  # every run mapped from the column cache
    watcher = Watcher(logdir, engine_analyzer(Config()), clock=lambda: 1.7e9)
    watcher.poll()
    assert {r.cache_state for r in logdir._readers.values()} == {"hit"}
    walls = [s.wall_times for run in logdir.runs.values() for s in run.scalars.values()]
    assert walls and all(is_mapped(w) for w in walls)
    assert [_resident_kb(w) for w in walls] == [0] * len(walls)
    assert watcher._context([]) == logdir_context(logdir, now=1.7e9)
    calls = []
    monkeypatch.setattr("tbtriage.analysis.watch.scalar_span", lambda run: calls.append(run.name))
    watcher.poll()
    assert calls == []  # nothing changed: no run's wall times read again


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
def test_a_first_poll_with_the_cache_leaves_no_columns_resident(tmp_path):
    # Each verdict is cached after its run was judged and let go of, and caching it reads the run again.
    for seed in range(3):
        write_pytorch_run(tmp_path / "logdir" / f"seed{seed}", n=20_000, seed=seed)
    logdir = tbtriage.load(tmp_path / "logdir")  # read cold, columns mapped from the entries just written
    Watcher(logdir, engine_analyzer(Config()), clock=lambda: 1.7e9).poll()
    columns = [c for run in logdir.runs.values() for s in run.scalars.values() for c in (s.wall_times, s.values)]
    assert columns and all(is_mapped(c) for c in columns)
    assert [_resident_kb(c) for c in columns] == [0] * len(columns)
