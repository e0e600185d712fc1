"""Runs that hold no data, and files cut by a crash: what a user sees the morning after.

Every file here is written by a real writer (tensorboardX's SummaryWriter, tensorboard's EventFileWriter,
the project's event writer), then read back with `tbtriage.load` and diagnosed.
"""

from __future__ import annotations

import json
import os

import numpy as np

import tbtriage
from tbtriage.analysis.engine import diagnose
from tbtriage.analysis.event_writer import event_file_name, write_event_file
from tbtriage.analysis.render_markdown import run_markdown
from tests._event_files import event_files

WALL0 = 1_717_000_000.0


def _no_data_run(report, name):
    run = next(r for r in report.runs if r.name == name)
    notes = [f for f in run.findings if f.kind == "data_integrity"]
    return run, notes


def test_a_run_folder_with_only_an_empty_events_file_has_no_health_score_and_one_note(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / event_file_name(WALL0)).write_bytes(b"")
    report = diagnose(tmp_path, now=WALL0 + 60)
    run, notes = _no_data_run(report, "empty")
    assert run.health.score is None and len(notes) == 1 and notes[0].severity == "info"
    assert "no scalar data" in notes[0].message and "empty" in notes[0].message
    data = json.loads(report.to_json())
    assert data["runs"][0]["health"]["score"] is None


def test_a_header_only_file_is_no_data_never_a_perfect_score(tmp_path):
    write_event_file(tmp_path / "header" / event_file_name(WALL0), [], WALL0)
    report = diagnose(tmp_path, now=WALL0 + 60)
    run, notes = _no_data_run(report, "header")
    assert run.health.score is None and len(notes) == 1 and "header" in notes[0].message


def test_an_hparams_only_folder_beside_a_real_run_ranks_after_it_and_says_what_it_holds(tmp_path):
    from tensorboardX import SummaryWriter
    from tensorboardX.summary import hparams

    trained = SummaryWriter(str(tmp_path / "version_0"))
    for step in range(200):
        trained.add_scalar("train_loss", 2.0 * np.exp(-step / 50) + 0.1, step)
    trained.close()
    only_hparams = SummaryWriter(str(tmp_path / "version_0" / "1582009443.52"))
    for summary in hparams({"lr": 0.01, "batch": 32}, {"hp_metric": -1.0}):
        only_hparams.file_writer.add_summary(summary)
    only_hparams.close()
    report = diagnose(tmp_path)
    assert [r.name for r in report.runs] == ["version_0", "version_0/1582009443.52"]
    run, notes = _no_data_run(report, "version_0/1582009443.52")
    assert run.health.score is None and len(notes) == 1 and "hparams" in notes[0].message
    assert report.runs[0].health.score is not None
    assert "health no data" in run_markdown(run)


def _cut_run(tmp_path):
    """A tensorboardX run whose file lost the last 5 bytes of its last record (a crash mid-write)."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "run"))
    for step in range(300):
        writer.add_scalar("train/loss", 2.0 * np.exp(-step / 80) + 0.05, step, walltime=WALL0 + step)
    writer.close()
    (path,) = event_files(tmp_path / "run")
    size = os.path.getsize(path)
    with open(path, "r+b") as handle:
        handle.truncate(size - 5)
    return tbtriage.load(tmp_path)


def test_a_file_cut_mid_record_hours_after_the_last_write_is_reported_as_a_crash_artefact(tmp_path):
    logdir = _cut_run(tmp_path)
    last = logdir.runs["run"].last_wall_time
    report = diagnose(logdir, now=last + 5 * 3600)
    (cut,) = [f for f in report.runs[0].findings if f.kind == "data_integrity"]
    assert cut.severity == "info" and "incomplete record" in cut.message and "5 h ago" in cut.message
    assert report.runs[0].health.score >= 90  # the intact points were all kept and judged


def test_a_live_run_caught_mid_record_stays_silent(tmp_path):
    logdir = _cut_run(tmp_path)
    report = diagnose(logdir, now=logdir.runs["run"].last_wall_time + 10)
    assert not [f for f in report.runs[0].findings if f.kind == "data_integrity"]


def test_a_complete_file_of_a_finished_run_is_never_called_cut(tmp_path):
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "run"))
    for step in range(300):
        writer.add_scalar("train/loss", 2.0 * np.exp(-step / 80) + 0.05, step, walltime=WALL0 + step)
    writer.close()
    report = diagnose(tmp_path, now=WALL0 + 86400)
    assert not report.runs[0].findings and report.runs[0].health.score == 100
