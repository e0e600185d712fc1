"""Many runs judged in a process pool get exactly the verdicts the serial path gives.

The labelled suite of `_engine_data` (every pathology, Keras `train`/`validation` siblings, a stalled run)
is written with real writers into one logdir; the pool's reports must equal the serial reports field by
field, in the same order, with each report holding the parent's own `Run`.
"""

from __future__ import annotations

import json

import pytest

import tbtriage
from tbtriage.analysis import pipeline
from tbtriage.analysis.compare import compare
from tbtriage.analysis.engine import diagnose, finding_dict, logdir_context, related_runs, run_report_dict, scalar_span
from tbtriage.analysis.fleet import report_tags
from tbtriage.analysis.pipeline import EngineAnalyzer, _pooled, analyze_runs, pool_workers
from tbtriage.analysis.watch import Watcher, engine_analyzer
from tbtriage.cli.main import main
from tbtriage.cli.report import report_dict
from tests._engine_data import SCENARIOS, write_scenario

NOW_OFFSET = 86400.0


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("pool")
    for scenario in SCENARIOS:
        write_scenario(root, scenario)
    return tbtriage.load(root)


@pytest.fixture(scope="module")
def now(logdir) -> float:
    return max(scalar_span(run)[1] for run in logdir.runs.values()) + NOW_OFFSET


def _verdicts(reports) -> str:
    """Everything a report says (the JSON contract plus every feature), as one comparable text."""
    return json.dumps(
        [
            {
                **run_report_dict(r),
                # Features as a report keeps them: a cached verdict holds no detector curves (only detectors read them).
                "features": {tag: repr(f.without_curves()) for tag, f in r.features.items()},
                "primary": repr(r.primary_tags),
                "directions": r.directions,
            }
            for r in reports
        ],
        default=str,
    )


def test_the_pool_judges_every_run_as_the_serial_path_does(logdir, now):
    context = logdir_context(logdir, now=now)
    runs = list(logdir.runs.values())
    serial = analyze_runs(runs, context, workers=1)
    pooled: list = []
    _pooled(runs, context, None, 2, pooled, None, lambda: False)  # the pool itself, no serial fallback
    assert [r.name for r in pooled] == [r.name for r in runs]
    assert _verdicts(pooled) == _verdicts(serial)
    assert all(report.run is run for report, run in zip(pooled, runs))


def test_a_pooled_report_and_its_comparison_equal_the_serial_ones(logdir, now, monkeypatch):
    monkeypatch.setenv("TBTRIAGE_NO_CACHE", "1")  # both judge every run (a cached verdict keeps no curves)
    serial = diagnose(logdir, now=now, workers=1)
    pooled = diagnose(logdir, now=now, workers=2)
    assert _verdicts(pooled.runs) == _verdicts(serial.runs)
    assert pooled.to_json() == serial.to_json()
    assert compare(pooled.runs).best == compare(serial.runs).best


def test_a_keras_validation_run_reaches_the_pool_with_its_training_sibling(logdir):
    keras = [name for name in logdir.runs if name.endswith("/validation")]
    assert keras, "the labelled suite has Keras runs"
    for name in keras:
        train = name.rsplit("/", 1)[0] + "/train"
        assert train in related_runs(name, logdir.runs)
        assert name in related_runs(train, logdir.runs)


def test_the_follower_judges_in_the_pool_as_it_does_serially(logdir, now, monkeypatch):
    monkeypatch.setenv("TBTRIAGE_NO_CACHE", "1")  # both judge every run (a cached verdict keeps no curves)
    judged = []
    serial = Watcher(logdir, engine_analyzer(), clock=lambda: now, workers=1)
    pooled = Watcher(logdir, engine_analyzer(), clock=lambda: now, workers=2)
    new_serial = serial.poll()
    new_pooled = pooled.poll(on_report=lambda report, done, total: judged.append((done, total)))
    assert [finding_dict(f) for f in new_pooled] == [finding_dict(f) for f in new_serial]
    assert _verdicts(pooled.reports.values()) == _verdicts(serial.reports.values())
    assert judged == [(i, len(logdir.runs)) for i in range(1, len(logdir.runs) + 1)]


def test_a_stand_in_analyzer_runs_in_this_process_and_a_cancel_stops_between_runs(logdir, now):
    context = logdir_context(logdir, now=now)
    seen = []

    def stand_in(run, ctx):
        seen.append(run.name)
        return EngineAnalyzer()(run, ctx)

    runs = list(logdir.runs.values())
    reports = analyze_runs(runs, context, stand_in, workers=2, cancel=lambda: len(seen) >= 3)
    assert seen == [r.name for r in runs[:3]] and len(reports) == 3


def test_few_runs_are_judged_serially_and_many_on_every_core():
    assert pool_workers(10) == 1
    assert pool_workers(10_000) >= 1
    assert pool_workers(10, workers=4) == 4 and pool_workers(3, workers=4) == 3


POOL_FROM_AN_APP = """
import sys, threading
import tbtriage
from tbtriage.analysis.engine import logdir_context
from tbtriage.analysis.pipeline import _pooled, analyze_runs

class Capture:  # what a Textual app puts in sys.stderr: writable, with no file descriptor
    def write(self, text): return len(text)
    def flush(self): pass
    def fileno(self): return -1

def main():
    logdir = tbtriage.load(sys.argv[1])
    context = logdir_context(logdir, now=0.0)
    runs = list(logdir.runs.values())
    sys.stderr = Capture()
    pooled = []
    _pooled(runs, context, None, 2, pooled, None, lambda: False)
    serial = analyze_runs(runs, context, workers=1)
    sys.stderr = sys.__stderr__
    same = [r.health for r in pooled] == [r.health for r in serial] and [len(r.findings) for r in pooled] == [
        len(r.findings) for r in serial
    ]
    print("judged", len(pooled), "same" if same else "different")

if __name__ == "__main__":
    idle = threading.Event()
    ui = threading.Thread(target=idle.wait)  # another thread alive, as in the app: no fork of this process
    ui.start()
    worker = threading.Thread(target=main)
    worker.start()
    worker.join()
    idle.set()
"""


def test_an_app_whose_stderr_has_no_file_descriptor_still_gets_a_pool(tmp_path):
    """Textual replaces sys.stderr with a capture whose fileno is -1; the fork server's resource tracker
    must still start (it failed with 'bad value(s) in fds_to_keep' and the app fell back to one core)."""
    import subprocess
    import sys

    from tests._event_files import write_pytorch_run

    for seed in range(3):
        write_pytorch_run(tmp_path / "runs" / f"seed{seed}", n=200, seed=seed, nan_at=150 if seed == 2 else None)
    script = tmp_path / "pool_from_app.py"
    script.write_text(POOL_FROM_AN_APP)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "runs")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "judged 3 same"


# ---- the pool's workers read the runs (`read_and_judge`, `diagnose(slim=True)`, `tbtriage report`) ---------


def _slim_matches_serial(root, now, **kwargs) -> None:
    serial = diagnose(root, now=now, workers=1)
    pooled = diagnose(root, now=now, workers=2, slim=True, **kwargs)
    assert [r.name for r in pooled.runs] == [r.name for r in serial.runs]
    assert _verdicts(pooled.runs) == _verdicts(serial.runs)
    assert pooled.to_json() == serial.to_json()
    assert report_dict(pooled, compare(pooled.runs)) == report_dict(serial, compare(serial.runs))
    for report in pooled.runs:  # only the series the report reads afterwards came back, and no histograms
        assert set(report.run.scalars) == report_tags(report) & set(report.tag_points())
        assert not report.run.histograms
        # nor the detectors' bucketed curves (only detectors read them): ~90 KB a run, every run held here
        assert all(f.extra.keys() == f.without_curves().extra.keys() for f in report.features.values())


def test_workers_that_read_their_runs_give_the_serial_verdicts_stalled_runs_included(logdir, now, monkeypatch):
    monkeypatch.setenv("TBTRIAGE_NO_CACHE", "1")
    serial = diagnose(logdir.path, now=now, workers=1)
    assert any(f.kind == "stalled" for r in serial.runs for f in r.findings), "the suite has a stalled run"
    _slim_matches_serial(logdir.path, now)


def test_a_keras_run_whose_sibling_another_worker_judges_is_read_with_it(logdir, now, monkeypatch):
    """One run a task: every sibling lives in another task, and is read again as the run's related run."""
    monkeypatch.setenv("TBTRIAGE_NO_CACHE", "1")
    monkeypatch.setattr(pipeline, "CHUNK_RUNS", 1)
    _slim_matches_serial(logdir.path, now)


def test_workers_read_through_the_column_cache_cold_and_warm(logdir, now, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("TBTRIAGE_NO_CACHE", raising=False)
    _slim_matches_serial(logdir.path, now)  # cold: the workers write the entries
    assert len(list((tmp_path / "cache" / "tbtriage" / "columns").glob("*.tbc"))) == len(logdir.runs)
    # Each entry a worker wrote (keeping the columns in its heap, not mapped back) is a hit holding every point.
    warm = tbtriage.load(logdir.path)
    for name, run in logdir.runs.items():
        assert warm._readers[name].cache_state == "hit", name
        for tag, series in run.scalars.items():
            cached = warm.runs[name].scalars[tag]
            assert not cached.values.flags.writeable  # mapped from the entry, not decoded again
            assert cached.steps.tobytes() == series.steps.tobytes(), (name, tag)
            assert cached.wall_times.tobytes() == series.wall_times.tobytes(), (name, tag)
            assert cached.values.tobytes() == series.values.tobytes(), (name, tag)
    _slim_matches_serial(logdir.path, now)  # warm: mapped from them


def test_the_report_command_judges_as_the_serial_report_does(logdir, tmp_path, monkeypatch):
    monkeypatch.setenv("TBTRIAGE_NO_CACHE", "1")
    outputs = {}
    for label, extra in (("pool", []), ("serial", ["--workers", "1"]), ("filter", ["--filter", "top 5 by loss"])):
        out = tmp_path / f"{label}.json"
        main(["report", str(logdir.path), "--format", "json", "--out", str(out), *extra])
        outputs[label] = json.loads(out.read_text())
    assert outputs["pool"] == outputs["serial"]
    assert 0 < len(outputs["filter"]["runs"]) <= 5  # a filter on values reads every run's points


def test_the_workers_series_come_through_temporary_files_that_are_gone_afterwards(logdir, now, monkeypatch, tmp_path):
    import tempfile

    monkeypatch.setenv("TBTRIAGE_NO_CACHE", "1")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    report = diagnose(logdir.path, now=now, workers=2, slim=True)
    assert list(scratch.iterdir()) == []  # the spill files are removed; the mapped series still read
    shown = [r for r in report.runs if r.primary_tags.loss in r.run.scalars]
    mapped = [r for r in shown if not r.run.scalars[r.primary_tags.loss].values.flags.writeable]
    assert mapped  # (a run `stalled` speaks of is read again here: its series are this process's own)
    for r in mapped:
        ours, read = r.run.scalars[r.primary_tags.loss], logdir.runs[r.name].scalars[r.primary_tags.loss]
        assert ours.steps.tolist() == read.steps.tolist() and ours.values.tobytes() == read.values.tobytes()


def _thresholds_in_a_worker(_: int) -> tuple[int, int, int]:
    import gc

    return gc.get_threshold()


def test_a_one_shot_command_holds_off_full_collections_but_its_workers_do_not(logdir, tmp_path, monkeypatch):
    import gc

    from tbtriage.analysis.pipeline import HELD_THRESHOLDS, full_collections_held

    monkeypatch.setenv("TBTRIAGE_NO_CACHE", "1")
    usual = gc.get_threshold()
    with full_collections_held():
        with full_collections_held():  # nested (a command calling another): the outer block still holds after it
            assert gc.get_threshold() == HELD_THRESHOLDS
        assert gc.get_threshold() == HELD_THRESHOLDS
        pool = pipeline._new_pool(2, pipeline._start_worker, pipeline.LogdirContext(), None, 0)
        try:
            assert set(pool.map(_thresholds_in_a_worker, range(4))) == {usual}
        finally:
            pool.shutdown()
    assert gc.get_threshold() == usual
    out = tmp_path / "r.json"
    assert main(["report", str(logdir.path), "--format", "json", "--out", str(out)]) in (0, 1)
    assert gc.get_threshold() == usual  # the command gave the collector back as it found it
