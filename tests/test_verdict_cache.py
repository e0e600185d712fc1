"""The verdict cache, as a user meets it: the morning's `report` and app reuse yesterday's verdicts, say exactly what
a cold run says, and judge again every run whose files, config, siblings, engine or logdir context changed.

Runs are written with the project's event writer (`analysis.event_writer`) so that their wall times (what
`stalled` reads) are chosen, and Keras pairs with tensorboard's own writer (`tests._event_files`)."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

import tbtriage
from tbtriage.analysis import fingerprints, verdict_cache
from tbtriage.analysis.config import Config
from tbtriage.analysis.engine import diagnose, logdir_context, run_report_dict
from tbtriage.analysis.event_writer import encode_scalar_block, event_file_name, file_version_event, frame_records
from tbtriage.analysis.logdir import open_logdir
from tbtriage.analysis.twins import attach_twins
from tbtriage.analysis.watch import Watcher, engine_analyzer
from tbtriage.cli.main import main
from tbtriage.tui.app import make_app
from tests._app_data import drive, settle, until
from tests._event_files import write_keras_pair

CORPUS = Path(__file__).resolve().parent.parent / "bench" / "corpus" / "runs"
#: The logdir's runs trained until T0 + 3000 s; the clock reads 10 minutes later (a live logdir).
T0 = 1_700_000_000.0
NOW = T0 + 3600.0
INTERVAL = 10.0  # seconds between steps


def _records(start: int, stop: int, lr: float = 1e-3) -> bytes:
    steps = np.arange(start, stop)
    values = np.stack([2.0 - steps / 3000.0, np.full(steps.size, lr)])
    return encode_scalar_block(["train/loss", "train/lr"], steps, T0 + INTERVAL * steps, values)


def _write(run_dir: Path, stop: int, lr: float = 1e-3) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / event_file_name(T0)
    path.write_bytes(frame_records([file_version_event(T0)]) + _records(0, stop, lr))
    return path


@pytest.fixture
def logdir(tmp_path) -> Path:
    """Three seeds trained side by side; seed1 stopped at step 120 while the others wrote on to 300 (stalled)."""
    root = tmp_path / "logdir"
    _write(root / "seed0", 300)
    _write(root / "seed1", 121)
    _write(root / "seed2", 300)
    return root


EVERY_RUN = {"seed0", "seed1", "seed2"}


def _json(report) -> list[dict]:
    return sorted((run_report_dict(r) for r in report.runs), key=lambda r: r["run"])


def _cold(path: Path, monkeypatch, **kwargs) -> list[dict]:
    with monkeypatch.context() as m:
        m.setenv("TBTRIAGE_NO_CACHE", "1")
        return _json(diagnose(path, now=kwargs.pop("now", NOW), **kwargs))


def _hits(path: Path, now: float = NOW, config: Config | None = None) -> set[str]:
    """The runs whose verdict the cache gives, with the logdir as it is now."""
    loaded = tbtriage.load(path)
    context = logdir_context(loaded, now=now)
    return {name for name in loaded.runs if verdict_cache.lookup(loaded, name, context, config) is not None}


def _entries(root: Path | None = None) -> list[Path]:
    """Every file holding a cached verdict: a run's own, or its column entry where a pool's worker kept it."""
    root = root or verdict_cache.cache.root()
    kept = [path for path in root.glob("*.tbc") if _holds_verdict(path)]
    return sorted([*root.glob("*" + verdict_cache.SUFFIX), *kept])


def _holds_verdict(path: Path) -> bool:
    prefix = verdict_cache.cache._PREFIX
    return prefix.unpack(path.read_bytes()[: prefix.size])[3] > 0


def test_a_warm_report_is_the_cold_report_and_judges_no_run_again(logdir, monkeypatch):
    cold = _cold(logdir, monkeypatch)
    assert _json(diagnose(logdir, now=NOW)) == cold  # the first, which caches
    assert len(_entries()) == 3
    assert _hits(logdir) == EVERY_RUN
    assert _json(diagnose(logdir, now=NOW)) == cold
    stalled = [f for r in cold if r["run"] == "seed1" for f in r["findings"] if f["kind"] == "stalled"]
    assert stalled and stalled[0]["severity"] == "warning"  # the context part is in the cached verdict too


def test_the_report_whose_workers_read_the_runs_reuses_and_keeps_verdicts(logdir, monkeypatch):
    """`report` on many runs reads them in its pool (`diagnose(slim=True)`): the first one caches every verdict,
    the next takes every one of them from the cache (each entry is stamped as used) and says what a cold one says,
    the stalled run's context included."""
    cold = _cold(logdir, monkeypatch, workers=2, slim=True)
    assert _json(diagnose(logdir, now=NOW, workers=2, slim=True)) == cold
    assert len(_entries()) == 4  # each run's in its column entry, and the stalled run's judged again on its own
    for entry in _entries():
        os.utime(entry, (T0, T0))
    assert _json(diagnose(logdir, now=NOW, workers=2, slim=True)) == cold
    assert all(entry.stat().st_mtime > T0 for entry in _entries())  # every verdict came from the cache
    assert _json(diagnose(logdir, now=NOW, workers=1)) == cold
    stalled = [f for r in cold if r["run"] == "seed1" for f in r["findings"] if f["kind"] == "stalled"]
    assert stalled and stalled[0]["severity"] == "warning"


def test_the_workers_cache_their_verdicts_and_the_report_process_reads_only_the_stalled_run(logdir, monkeypatch):
    """Each worker caches the verdicts it judged (it holds the run): the report's process reads no run but the one
    `stalled` speaks of, which it judges again in the logdir's context, mapping the columns its worker cached
    rather than decoding them a second time. A warm open then finds every verdict, the stalled one's context
    included, and a clock at which seed1 is no longer live judges it again (its entry says what the context was)."""
    cold = _cold(logdir, monkeypatch, workers=2, slim=True)
    report = diagnose(logdir, now=NOW, workers=2, slim=True)
    states = {name: reader.cache_state for name, reader in report.logdir._readers.items()}
    assert states == {"seed0": None, "seed1": "hit", "seed2": None}
    assert len(_entries()) == 4  # each run's in its column entry, and the stalled run's judged again on its own
    assert sum(path.suffix == verdict_cache.SUFFIX for path in _entries()) == 1
    assert _hits(logdir) == EVERY_RUN
    assert _json(diagnose(logdir, now=NOW, workers=2, slim=True)) == cold
    assert _hits(logdir, now=NOW + 86400.0) == {"seed0", "seed2"}


def test_a_fork_servers_workers_cache_where_the_caller_says_not_where_the_server_started(logdir, tmp_path, monkeypatch):
    """With another thread alive (the app's), pools start from a fork server, whose workers would carry the
    environment the server started with: each pool hands them the caller's cache settings."""
    stop = threading.Event()
    alive = threading.Thread(target=stop.wait)
    alive.start()
    try:
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "first"))
        diagnose(logdir, now=NOW, workers=2, slim=True)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "second"))
        report = diagnose(logdir, now=NOW, workers=2, slim=True)
    finally:
        stop.set()
        alive.join()
    # The workers cached under "second", where this process looks: the stalled run's columns, and every verdict.
    assert report.logdir._readers["seed1"].cache_state == "hit"
    assert len(_entries(tmp_path / "second" / "tbtriage" / "columns")) == 4


def test_report_and_diagnose_on_the_command_line_say_the_same_warm_and_cold(logdir, tmp_path, capsys):
    def report(*extra: str) -> dict:
        out = tmp_path / "report.json"
        assert main(["report", str(logdir), "--format", "json", "--out", str(out), *extra]) == 0
        return json.loads(out.read_text())

    cold = report("--no-cache")
    assert not _entries()  # --no-cache turns the verdict cache off too
    assert report() == cold
    assert _entries()
    assert report() == cold


@pytest.mark.parametrize(
    "change, judged_again",
    [
        # seed0's file grew by one step, 10 s past the logdir's newest event: seed0, and seed1 (stalled: its
        # silence grew with it); seed2, not stalled before or after, keeps its verdict.
        (lambda root: open(root / "seed0" / event_file_name(T0), "ab").write(_records(300, 301)), {"seed0", "seed1"}),
        # A second file in seed0: a restart from step 0 that supersedes its later points, so its span shrank and
        # seed1 lost one of the runs that wrote on after it.
        (lambda root: (root / "seed0" / event_file_name(T0 + 5000)).write_bytes(_records(0, 3)), {"seed0", "seed1"}),
        # seed0's file rewritten in place with other values, at the same size.
        (lambda root: _write(root / "seed0", 300, lr=2e-3), {"seed0"}),
        # Only its mtime moved: it may have been rewritten.
        (lambda root: os.utime(root / "seed0" / event_file_name(T0), ns=(1, 1)), {"seed0"}),
        # A config file appeared beside seed0's events (causes read the hyperparameters).
        (lambda root: (root / "seed0" / "hparams.yaml").write_text("lr: 0.001\n"), {"seed0"}),
        # seed2 wrote on for 100 s: seed1's silence grew (stalled: judged again); seed0 is still not stalled.
        (lambda root: open(root / "seed2" / event_file_name(T0), "ab").write(_records(300, 310)), {"seed1", "seed2"}),
        # seed2 wrote on for 3,000 s: now seed0 stalled too, its own files unchanged (cached as not stalled).
        (lambda root: open(root / "seed2" / event_file_name(T0), "ab").write(_records(300, 600)), EVERY_RUN),
    ],
)
@pytest.mark.parametrize("how", [{}, {"workers": 2, "slim": True}], ids=["here", "workers-read"])
def test_a_verdict_is_judged_again_when_anything_it_read_changed(logdir, monkeypatch, change, judged_again, how):
    """Whoever cached the verdicts: this process (in the logdir's context), or the pool's workers that read the runs
    (without it: as not stalled, the report's process caching the stalled run's verdict)."""
    diagnose(logdir, now=NOW, **how)
    change(logdir)
    assert _hits(logdir) == EVERY_RUN - judged_again
    assert _json(diagnose(logdir, now=NOW, **how)) == _cold(logdir, monkeypatch)
    assert _hits(logdir) == EVERY_RUN  # judged again and cached again


def test_a_training_run_is_judged_again_when_its_validation_sibling_changed(tmp_path, monkeypatch):
    root = tmp_path / "keras"
    write_keras_pair(root / "mnist", epochs=12)
    write_keras_pair(root / "cifar", epochs=12, seed=1)
    diagnose(root, now=NOW)
    # The validation run has a new file: the train run read it (Keras siblings) and is judged again with it.
    shutil.copy(
        next((root / "cifar" / "train").glob("*tfevents*")), root / "cifar" / "validation" / "events.x.tfevents"
    )
    assert _hits(root) == {"mnist/train", "mnist/validation"}
    assert _json(diagnose(root, now=NOW)) == _cold(root, monkeypatch)


def test_a_later_clock_changes_only_the_verdicts_it_changes(logdir, monkeypatch):
    diagnose(logdir, now=NOW)
    days_later = NOW + 5 * 86400  # the logdir is no longer live: a stall is only info
    assert _hits(logdir, now=days_later) == {"seed0", "seed2"}
    warm = _json(diagnose(logdir, now=days_later))
    assert warm == _cold(logdir, monkeypatch, now=days_later)
    assert [f["severity"] for r in warm if r["run"] == "seed1" for f in r["findings"] if f["kind"] == "stalled"] == [
        "info"
    ]


def test_another_engine_or_config_judges_every_run_again(logdir, monkeypatch):
    diagnose(logdir, now=NOW)
    try:
        with monkeypatch.context() as m:
            m.setattr(fingerprints, "__version__", "0.0.0-another")
            verdict_cache.engine_fingerprint.cache_clear()
            assert _hits(logdir) == set()
    finally:
        verdict_cache.engine_fingerprint.cache_clear()
    assert _hits(logdir) == EVERY_RUN
    roles = Config(roles=(("^train/loss$", "metric"),))
    assert _hits(logdir, config=roles) == set()
    assert _json(diagnose(logdir, now=NOW, config=roles)) == _cold(logdir, monkeypatch, config=roles)
    assert _hits(logdir, config=roles) == EVERY_RUN


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage"])
def test_a_corrupt_entry_is_ignored_never_trusted(logdir, monkeypatch, damage):
    cold = _cold(logdir, monkeypatch)
    diagnose(logdir, now=NOW)
    for entry in _entries():
        raw = bytearray(entry.read_bytes())
        if damage == "flip":
            raw[len(raw) // 2] ^= 0x40
        elif damage == "truncate":
            raw = raw[: len(raw) - 9]
        else:
            raw = bytearray(b"\x80\x05not a verdict" * 40)
        entry.write_bytes(bytes(raw))
    assert _hits(logdir) == set()
    assert _json(diagnose(logdir, now=NOW)) == cold


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_verdict_kept_in_a_column_entry_is_checked_as_its_own_file_is(logdir, monkeypatch, damage):
    """A pool's worker keeps each run's verdict in the run's column entry (one file a run, not two): damaged there,
    it is a miss as a damaged verdict file is, never trusted, and the report still says what a cold one says."""
    cold = _cold(logdir, monkeypatch, workers=2, slim=True)
    diagnose(logdir, now=NOW, workers=2, slim=True)
    columns = sorted(verdict_cache.cache.root().glob("*.tbc"))
    assert len(columns) == 3 and all(_holds_verdict(path) for path in columns)
    prefix = verdict_cache.cache._PREFIX
    for entry in columns:
        raw = bytearray(entry.read_bytes())
        length = prefix.unpack(raw[: prefix.size])[3]  # the verdict's, at the end of the entry
        if damage == "flip":
            raw[len(raw) - length // 2] ^= 0x40
        else:
            raw = raw[: len(raw) - length // 2]
        entry.write_bytes(bytes(raw))
    assert _hits(logdir) == {"seed1"}  # its own file: judged again here, in the logdir's context (it is stalled)
    assert _json(diagnose(logdir, now=NOW, workers=2, slim=True)) == cold


def test_a_run_not_read_to_its_end_is_never_cached(logdir):
    with open(logdir / "seed0" / event_file_name(T0), "ab") as f:
        f.write(_records(300, 310)[:-7])  # a last record cut short: a live writer mid-record, or a crash
    diagnose(logdir, now=NOW)
    assert "seed0" not in _hits(logdir)
    assert len(_entries()) == 2


def _cached_then_unread(path: Path, monkeypatch):
    """(the cold report by run, a logdir whose readers read nothing yet, and the verdicts `before_reading` gives
    for it) after one report has cached every run."""
    cold = {r["run"]: r for r in _cold(path, monkeypatch)}
    diagnose(path, now=NOW)
    unread = open_logdir(path)
    unread.find()
    return cold, unread, verdict_cache.before_reading(unread, None, NOW)


def test_before_reading_gives_every_verdict_without_reading_a_run(logdir, monkeypatch):
    cold, unread, found = _cached_then_unread(logdir, monkeypatch)
    assert set(found) == set(cold)
    assert all(not run.scalars for run in unread.runs.values())  # nothing was read
    # What the report writes of each run, from the cache alone (steps, times, files and tag counts included).
    assert {name: run_report_dict(r) for name, r in found.items()} == cold
    # All or none: a run without a sound entry has no span yet, and every verdict's context needs it.
    with open(logdir / "seed0" / event_file_name(T0), "ab") as f:
        f.write(_records(300, 301))
    again = open_logdir(logdir)
    again.find()
    assert verdict_cache.before_reading(again, None, NOW) == {}


# ---- twins: attached over every run, every time, from the engine's verdicts ------------------------------------


@pytest.fixture
def twins_logdir(tmp_path) -> Path:
    """A run bouncing above its lower-lr twin (the corpus's, see tests/test_lr_twins.py), and that twin."""
    root = tmp_path / "sweep"
    for folder, name in (("lr_too_high_oscillation__hf__s1", "mlp_lr0.45"), ("healthy_sgd__hf__s0", "mlp_lr0.02")):
        (root / name).mkdir(parents=True)
        for events in (CORPUS / folder).glob("events.out.tfevents.*"):
            shutil.copy(events, root / name / events.name)
    return root


def _oscillation(reports: list[dict]) -> dict:
    (found,) = [f for r in reports if r["run"] == "mlp_lr0.45" for f in r["findings"] if f["kind"] == "oscillation"]
    return found


def test_attaching_twins_again_changes_nothing(twins_logdir, monkeypatch):
    report = diagnose(twins_logdir, now=NOW)
    once = _json(report)
    assert _oscillation(once)["evidence"]["twin"] == "mlp_lr0.02"
    attach_twins(report.runs)
    attach_twins(report.runs)
    assert _json(report) == once


def test_the_follower_shows_what_report_says_twins_included(twins_logdir, monkeypatch):
    expected = _cold(twins_logdir, monkeypatch)
    with monkeypatch.context() as m:
        m.setenv("TBTRIAGE_NO_CACHE", "1")
        watcher = Watcher(tbtriage.load(twins_logdir), engine_analyzer(), clock=lambda: NOW)
        new = watcher.poll()
        shown = sorted((run_report_dict(r) for r in watcher.shown.values()), key=lambda r: r["run"])
        assert shown == expected
        assert any(f.kind == "oscillation" and f.run == "mlp_lr0.45" for f in new)
        # The engine's own verdict stays as judged: no oscillation without the twin.
        assert not any(f.kind == "oscillation" for f in watcher.reports["mlp_lr0.45"].findings)
        watcher.poll()  # nothing changed: twins attached again, the same findings, nothing new
        assert sorted((run_report_dict(r) for r in watcher.shown.values()), key=lambda r: r["run"]) == expected


def test_the_app_shows_what_report_says_twins_included(twins_logdir, monkeypatch):
    expected = {r["run"]: r for r in _cold(twins_logdir, monkeypatch)}
    app = make_app(twins_logdir, follow=False, clock=lambda: NOW)

    async def scenario(app, pilot):
        assert app.loaded
        assert {name: run_report_dict(r) for name, r in app.reports.items()} == expected
        assert _oscillation([run_report_dict(app.reports["mlp_lr0.45"])])["causes"][0]["cause"] == "lr_too_high"

    drive(app, scenario)


def test_a_warm_app_shows_every_verdict_before_it_reads_a_run(logdir, monkeypatch):
    expected = {r["run"]: r for r in _cold(logdir, monkeypatch)}
    diagnose(logdir, now=NOW)
    reading = threading.Event()

    def loader(path, **kwargs):
        reading.wait(30)  # the read waits until the test has seen the first screen
        return tbtriage.load(path, **kwargs)

    app = make_app(logdir, follow=False, clock=lambda: NOW, loader=loader)

    async def scenario(app, pilot):
        await until(pilot, lambda: set(app.reports) == set(expected), "no verdict before the read", timeout=30)
        assert app.logdir is None  # not read yet
        assert {name: run_report_dict(r) for name, r in app.reports.items()} == expected
        assert app.runs["seed1"].last_step == 120  # the row's step, from the cached run
        reading.set()
        await settle(app, pilot)
        assert app.loaded and app.logdir is not None
        assert {name: run_report_dict(r) for name, r in app.reports.items()} == expected
        assert len(app.runs["seed0"].scalars["train/loss"]) == 300  # read now: charts have their points

    try:
        drive(app, scenario, wait=False)
    finally:
        reading.set()


def test_verdicts_share_the_column_cache_size_cap(logdir, monkeypatch):
    cold = _cold(logdir, monkeypatch)
    monkeypatch.setenv("TBTRIAGE_CACHE_MAX", "1")  # every entry but the newest is evicted as the next is written
    assert _json(diagnose(logdir, now=NOW)) == cold
    kept = list(verdict_cache.cache.root().iterdir())
    assert len(kept) == 1 and kept[0].suffix == verdict_cache.SUFFIX  # the last verdict written evicted the rest
    assert _json(diagnose(logdir, now=NOW)) == cold


def test_before_reading_holds_back_the_verdicts_twins_may_change(twins_logdir, monkeypatch):
    cold, _, found = _cached_then_unread(twins_logdir, monkeypatch)
    # The bouncing run gets its oscillation only against its twin's points, once read: it waits for them. What is
    # shown is what report says.
    assert set(found) == {"mlp_lr0.02"}
    assert run_report_dict(found["mlp_lr0.02"]) == cold["mlp_lr0.02"]
