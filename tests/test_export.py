"""`tbtriage export`: every point out exactly, filtered, streamed, and bad input refused in one line."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest

import tbtriage
from tbtriage.analysis import export as export_mod
from tbtriage.cli.main import main
from tests._event_files import write_pytorch_run
from tests._report_contract import EXPORT_LINE, assert_follows


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("exp")
    write_pytorch_run(root / "bs32", n=120, seed=3, nan_at=100)
    write_pytorch_run(root / "bs64", n=80, seed=4)
    return root


def test_csv_holds_every_point_exactly(logdir, tmp_path, capsys):
    out = tmp_path / "all.csv"
    assert main(["export", str(logdir), "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().err
    rows = list(csv.DictReader(out.open()))
    loaded = tbtriage.load(logdir)
    expected = sum(len(s) for r in loaded.runs.values() for s in r.scalars.values())
    assert len(rows) == expected
    got = [float(r["value"]) for r in rows if r["run"] == "bs32" and r["tag"] == "train/loss"]
    np.testing.assert_array_equal(got, loaded.runs["bs32"].scalars["train/loss"].values)  # nan kept as nan
    assert sum(math.isnan(v) for v in got) == 20


def test_filters_and_smoothing(logdir, capsys):
    assert main(["export", str(logdir), "--runs", "64$", "--tags", "^train/", "--smoothing", "0.6"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {(r["run"], r["tag"]) for r in rows} == {("bs64", "train/loss")}
    from tbtriage.analysis.smoothing import ema

    s = tbtriage.load(logdir).runs["bs64"].scalars["train/loss"]
    np.testing.assert_allclose([float(r["smoothed"]) for r in rows], ema(s.values, 0.6), rtol=0, atol=1e-12)


def test_jsonl_is_valid_json_even_with_nan(logdir, capsys):
    assert main(["export", str(logdir), "--runs", "bs32", "--tags", "loss", "--format", "jsonl"]) == 0
    lines = capsys.readouterr().out.splitlines()
    objs = [assert_follows(json.loads(line), EXPORT_LINE) for line in lines]  # strict JSON: no bare NaN
    assert len(objs) == 120
    bad = [o for o in objs if o["value"] is None]
    assert len(bad) == 20 and all(o["nonfinite"] == "nan" and o["step"] >= 100 for o in bad)
    assert objs[0].keys() == {"run", "tag", "step", "wall_time", "value"}


def test_runs_are_read_one_at_a_time(logdir, monkeypatch):
    made = []
    real = export_mod.RunReader

    class Counting(real):
        def read(self, kernel=None):
            made.append(self.name)
            return super().read(kernel)

    monkeypatch.setattr(export_mod, "RunReader", Counting)
    it = export_mod.iter_series(logdir)
    first = next(it)
    assert first[0] == "bs32" and made == ["bs32"]  # the second run is not read yet
    list(it)
    assert made == ["bs32", "bs64"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["export", "/nonexistent/logdir"], "/nonexistent/logdir: no such file or directory"),
        (["export", ".", "--runs", "("], "not a valid regular expression"),
        (["export", ".", "--smoothing", "2"], "must be between 0 and 0.999"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_names_with_commas_quotes_and_markup_survive_csv(tmp_path, capsys):
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    # tensorboardX sanitises tag names; real files can hold anything, so write the raw proto.
    w = EventFileWriter(str(tmp_path / 'run "a", b'))
    value = summary_pb2.Summary.Value(tag='loss, [bold]x[/bold] "q"', simple_value=1.5)
    w.add_event(event_pb2.Event(step=3, wall_time=1.0, summary=summary_pb2.Summary(value=[value])))
    w.close()
    assert main(["export", str(tmp_path)]) == 0
    (row,) = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert row["run"] == 'run "a", b' and row["tag"] == 'loss, [bold]x[/bold] "q"' and row["value"] == "1.5"


def test_piping_into_head_ends_quietly(tmp_path):
    import subprocess
    import sys

    logdir = write_pytorch_run(tmp_path / "big", n=4000)  # ~260 kB of CSV: more than a pipe holds

    proc = subprocess.Popen(
        [sys.executable, "-m", "tbtriage", "export", str(logdir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=str(__import__("pathlib").Path(__file__).resolve().parent.parent),
    )
    assert proc.stdout.readline().startswith(b"run,tag,step")
    proc.stdout.close()  # what `| head -1` does
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0 and err == b""
