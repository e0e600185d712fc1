"""`tbtriage report LOGDIR`: the morning report from the command line, for people, scripts, cron and CI."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest
from tensorboardX import SummaryWriter

from tbtriage.analysis.demo import write_demo
from tbtriage.cli.main import main
from tests._report_contract import assert_follows, contract_problems


def _write_run(directory, losses, every=10, val=None):
    writer = SummaryWriter(str(directory))
    for i, loss in enumerate(losses):
        step = (i + 1) * every
        writer.add_scalar("train/loss", float(loss), step)
        writer.add_scalar("train/lr", 1e-3, step)
        if val is not None and step % 100 == 0:
            writer.add_scalar("val/loss", float(val[step // 100 - 1]), step)
    writer.close()


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    """Two healthy seeds and one run that goes NaN at step 1500, written with tensorboardX."""
    root = tmp_path_factory.mktemp("runs")
    rng = np.random.default_rng(0)
    steps = np.arange(1, 201) * 10
    for seed in (0, 1):
        loss = 0.5 + 2.0 * np.exp(-steps / 500) * np.exp(rng.normal(0, 0.03, steps.size))
        _write_run(root / f"cosine_seed{seed}", loss, val=0.55 + 2.0 * np.exp(-np.arange(1, 21) * 100 / 500))
    bad = 0.5 + 2.0 * np.exp(-steps / 500) * np.exp(rng.normal(0, 0.03, steps.size))
    bad[steps >= 1500] = np.nan
    _write_run(root / "lr_too_high", bad)
    return root


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    return write_demo(tmp_path_factory.mktemp("demo") / "logdir").path


def _digest(root):
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _strict_json(text):
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return assert_follows(json.loads(text, parse_constant=refuse))  # docs/report.schema.json


def test_markdown_is_the_default_and_ranks_the_nan_run_first(logdir, capsys):
    assert main(["report", str(logdir)]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "health" not in line]
    assert "`lr_too_high`" in rows[0] and "divergence @ 1500" in rows[0]
    assert "## Groups" in out and "`cosine`" in out


def test_json_follows_the_contract_and_is_strict_json(demo_dir, capsys):
    assert main(["report", str(demo_dir), "--format", "json"]) == 0
    doc = _strict_json(capsys.readouterr().out)
    assert contract_problems(doc) == []
    assert doc["logdir"] == str(demo_dir)
    scores = [run["health"]["score"] for run in doc["runs"]]
    assert scores == sorted(scores)  # worst first
    assert len(doc["runs"]) == 12
    gpt = next(r for r in doc["runs"] if r["run"] == "gpt_small_lr3e-3_noclip")
    assert any(f["kind"] == "divergence" and f["severity"] == "critical" for f in gpt["findings"])
    assert gpt["tags"]["train/loss"] == {"role": "train_loss", "points": 400}
    # Fields added beside the contract: best metric per run, and the groups.
    seed0 = next(r for r in doc["runs"] if r["run"] == "bert_base_cosine_seed0")
    assert seed0["best_metric"]["tag"] == "eval/accuracy"
    assert any(g["group"] == "bert_base_cosine" and len(g["runs"]) == 2 for g in doc["groups"])


def test_the_contract_validator_catches_what_it_should():
    good = {"tool": "tbtriage", "version": "0.1.0", "logdir": "x", "runs": []}
    assert contract_problems(good) == []
    bad_finding = {
        "kind": "spooky",
        "severity": "fatal",
        "tags": "loss",
        "step": 1.5,
        "end_step": None,
        "evidence": [],
        "message": "",
        "suggestion": None,
    }
    run = {
        "run": "r",
        "files": [],
        "last_step": 3,
        "last_wall_time": 1.0,
        "tags": {"t": {"role": "boss", "points": -1}},
        "health": {"score": 140, "components": {"c": "high"}},
        "findings": [bad_finding],
    }
    problems = contract_problems({**good, "runs": [run]})
    for needle in (
        "kind",
        "severity",
        ".tags",
        ".step",
        "evidence",
        "message",
        "suggestion",
        "role",
        "points",
        "score",
        "components.c",
    ):
        assert any(needle in p for p in problems), needle


def test_fail_on_critical_exits_1_for_cron(logdir, capsys):
    assert main(["report", str(logdir), "--fail-on", "critical"]) == 1
    assert main(["report", str(logdir), "--fail-on", "warning"]) == 1
    assert main(["report", str(logdir), "--fail-on", "critical", "--runs", "cosine"]) == 0
    capsys.readouterr()


def test_runs_filter_and_user_group_pattern(logdir, capsys):
    assert main(["report", str(logdir), "--runs", "^cosine", "--format", "json", "--group", r"(cosine)"]) == 0
    doc = _strict_json(capsys.readouterr().out)
    assert sorted(r["run"] for r in doc["runs"]) == ["cosine_seed0", "cosine_seed1"]
    assert [g["group"] for g in doc["groups"]] == ["cosine"]
    mean = doc["groups"][0]["best_metric"]["mean"]
    assert mean is not None and math.isfinite(mean)


def test_html_goes_to_out_file_and_nothing_is_written_into_the_logdir(logdir, tmp_path, capsys):
    before = _digest(logdir)
    target = tmp_path / "report.html"
    assert main(["report", str(logdir), "--format", "html", "--out", str(target)]) == 0
    assert capsys.readouterr().out == ""
    page = target.read_text()
    assert page.startswith("<!doctype html>") and "lr_too_high" in page and "<svg" in page
    assert _digest(logdir) == before


def test_out_inside_the_logdir_is_refused(logdir, capsys):
    before = _digest(logdir)
    assert main(["report", str(logdir), "--out", str(logdir / "report.md")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "inside the logdir" in err[0]
    assert _digest(logdir) == before


@pytest.mark.parametrize(
    "extra, needle",
    [
        ([], "no such file or directory"),
        (["--group", "(unclosed"], "not a valid regular expression"),
        (["--config", "/nonexistent/tbtriage.toml"], "no such config file"),
    ],
)
def test_bad_input_gets_one_clear_line_and_exit_2(logdir, tmp_path, capsys, extra, needle):
    target = tmp_path / "missing" if not extra else logdir
    assert main(["report", str(target), *extra]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert captured.out == ""


def test_an_unreadable_logdir_gets_exit_2(tmp_path, capsys, monkeypatch):
    # Tests run as root here, where chmod cannot lock anyone out: make listing the directory fail instead.
    import os

    def refuse(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "scandir", refuse)
    (tmp_path / "locked").mkdir()
    assert main(["report", str(tmp_path / "locked")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "permission denied" in err[0].lower()


def test_the_demo_report_is_the_same_judged_in_two_processes_or_in_one(demo_dir, capsys):
    outputs = []
    for workers in ("1", "2"):
        assert main(["report", str(demo_dir), "--format", "json", "--workers", workers]) in (0, 1)
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[0])["runs"]


def test_workers_must_be_a_positive_whole_number(logdir, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(logdir), "--workers", "0"])
    assert exit_info.value.code == 2
    assert "--workers" in capsys.readouterr().err
