"""`tbtriage demo`: a realistic logdir whose planted pathologies the report finds, at their onset."""

from __future__ import annotations

import argparse
import hashlib
import types

import numpy as np
import pytest

import tbtriage
from tbtriage.analysis.demo import (
    EPOCH_STEPS,
    HEALTHY_RUNS,
    MARKER,
    PLANTED,
    TOTAL_STEPS,
    DemoDirError,
    default_demo_dir,
    write_demo,
)
from tbtriage.analysis.histograms import gradient_layers
from tbtriage.analysis.roles import assign_roles
from tbtriage.cli import demo as cmd_demo
from tbtriage.cli.main import main

#: The issue's bar for an onset: within 2 % of the run length, or one validation interval for val-based kinds.
ONSET_TOLERANCE = 0.02 * TOTAL_STEPS
VAL_BASED_KINDS = {"overfitting"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    path = tmp_path_factory.mktemp("demo") / "logdir"
    written = write_demo(path)
    return written, tbtriage.load(path)


@pytest.fixture(scope="module")
def report(demo):
    return tbtriage.diagnose(demo[1])


def _digest(root):
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# ---- what is written ---------------------------------------------------------------------------------


def test_the_demo_holds_ten_or_so_runs_in_several_framework_styles(demo):
    written, loaded = demo
    assert set(loaded.runs) == set(written.runs)
    assert 10 <= len(loaded.runs) <= 13
    assert loaded.warnings == []
    tags = {tag for run in loaded.runs.values() for tag in run.scalars}
    for convention in ("train/loss", "eval/loss", "Loss/train", "train_loss", "val_loss", "lr-AdamW", "epoch_loss"):
        assert convention in tags
    assert any(run.histograms for run in loaded.runs.values())
    assert any(run.texts for run in loaded.runs.values())
    assert any(run.hparams for run in loaded.runs.values())


def test_the_planted_facts_are_in_the_files(demo):
    _, loaded = demo
    gpt = loaded.runs["gpt_small_lr3e-3_noclip"].scalars["train/loss"]
    first_nan = gpt.steps[np.flatnonzero(np.isnan(gpt.values))[0]]
    assert first_nan == 2600
    resumed = loaded.runs["bert_base_resumed"]
    assert len(resumed.files) == 2
    assert [n.step for n in resumed.notes if n.kind == "run_restart"] == [1500]
    assert np.all(np.diff(resumed.scalars["train/loss"].steps) > 0)  # the overlap resolved
    keras = loaded.runs["keras_mnist_cnn/validation"].scalars["epoch_loss"]
    assert len(keras) == 40  # TF2 tensor scalars, metadata only on each tag's first event
    assert "conv2d/kernel_0" in loaded.runs["keras_mnist_cnn/train"].histograms


def test_the_worst_run_logs_what_fills_every_panel_of_its_dashboard(demo):
    """Loss, per-layer gradients (from histograms), lr and device: the dashboard has nothing left empty."""
    _, loaded = demo
    gpt = loaded.runs["gpt_small_lr3e-3_noclip"]
    roles = {tag: role for tag, (role, _) in assign_roles(list(gpt.scalars), run_name=gpt.name).items()}
    layers, source = gradient_layers(gpt.scalars, gpt.histograms, roles)
    assert source == "histograms" and len(layers) == 4
    assert {"train_loss", "lr", "gpu_util", "step_time"} <= set(roles.values())
    # The deepest block's gradients leave their early level before the embedding's do.
    deep, embedding = layers["gradients/transformer.h.11.mlp.weight"], layers["gradients/transformer.wte.weight"]
    assert (
        deep.values[deep.steps == 2550] / deep.values[0]
        > embedding.values[embedding.steps == 2550] / embedding.values[0]
    )
    assert any(tag.startswith("activations/") for tag in gpt.histograms)


def test_writing_is_deterministic_and_fast(tmp_path):
    import time

    start = time.perf_counter()
    write_demo(tmp_path / "a")
    seconds = time.perf_counter() - start
    write_demo(tmp_path / "b")
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert seconds < 5.0  # the budget is 2 s on an idle core; this shared CI box gets slack


def test_rewriting_a_previous_demo_replaces_only_its_own_files(tmp_path):
    root = tmp_path / "demo"
    write_demo(root)
    mine = root / "bert_base_cosine_seed0" / "notes.txt"
    mine.write_text("my notes")
    write_demo(root)
    assert mine.read_text() == "my notes"
    assert (root / MARKER).is_file()


def test_a_non_empty_directory_that_is_not_a_demo_is_refused(tmp_path):
    (tmp_path / "thesis.tex").write_text("precious")
    with pytest.raises(DemoDirError, match="not empty"):
        write_demo(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["thesis.tex"]


def test_default_dir_is_cwd_or_a_temporary_one_when_cwd_is_read_only(tmp_path, monkeypatch):
    assert default_demo_dir(tmp_path) == tmp_path / "tbtriage-demo"
    monkeypatch.setattr("tbtriage.analysis.demo.os.access", lambda *_: False)
    fallback = default_demo_dir(tmp_path)
    assert fallback.parent != tmp_path and fallback.name.startswith("tbtriage-demo-")
    fallback.rmdir()


# ---- the command -------------------------------------------------------------------------------------


def test_demo_command_refuses_a_foreign_directory_with_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "data.csv").write_text("x")
    assert main(["demo", str(tmp_path), "--no-app"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not empty" in err[0]


def test_demo_without_the_app_prints_the_summary_and_the_ranked_report(tmp_path, capsys):
    assert main(["demo", str(tmp_path / "d"), "--no-app"]) == 0
    out = capsys.readouterr().out
    assert "12 runs" in out and "scalar points" in out
    assert "gpt_small_lr3e-3_noclip: divergence at step 2600" in out
    assert "| health | run | worst finding | best metric @ step | last step |" in out


def test_demo_opens_the_app_on_the_written_logdir(tmp_path, monkeypatch):
    opened = []

    def add_arguments(parser):
        parser.add_argument("logdir", nargs="?")

    app = types.SimpleNamespace(add_arguments=add_arguments, run=lambda args: opened.append(args.logdir) or 0)
    monkeypatch.setattr(cmd_demo, "_app_module", lambda: app)
    monkeypatch.setattr(cmd_demo, "has_terminal", lambda: True)
    assert cmd_demo.run(argparse.Namespace(dir=str(tmp_path / "d"), no_app=False)) == 0
    assert opened == [str(tmp_path / "d")]


def test_without_a_terminal_the_demo_prints_the_report_instead_of_opening_the_app(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cmd_demo, "_app_module", lambda: pytest.fail("the app must not open without a terminal"))
    monkeypatch.setattr(cmd_demo, "has_terminal", lambda: False)
    assert cmd_demo.run(argparse.Namespace(dir=str(tmp_path / "d"), no_app=False)) == 0
    captured = capsys.readouterr()
    assert "no terminal" in captured.err
    assert "Planted" in captured.out and "| health | run |" in captured.out


def test_demo_falls_back_to_the_summary_when_there_is_no_app(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cmd_demo, "_app_module", lambda: None)
    monkeypatch.setattr(cmd_demo, "has_terminal", lambda: True)
    assert cmd_demo.run(argparse.Namespace(dir=str(tmp_path / "d"), no_app=False)) == 0
    captured = capsys.readouterr()
    assert "app is not available" in captured.err
    assert "Planted" in captured.out


# ---- what the report finds ---------------------------------------------------------------------------


@pytest.mark.parametrize("planted", PLANTED, ids=lambda p: f"{p.run}:{p.kind}")
def test_the_report_finds_each_planted_pathology_at_its_onset(report, planted):
    by_run = {r.name: r for r in report.runs}
    found = [f for f in by_run[planted.run].findings if f.kind == planted.kind]
    assert found, (
        f"{planted.kind} not found on {planted.run}: {[(f.kind, f.step) for f in by_run[planted.run].findings]}"
    )
    if planted.step is not None:
        tolerance = EPOCH_STEPS if planted.kind in VAL_BASED_KINDS else ONSET_TOLERANCE
        onsets = [f.step for f in found]
        assert any(s is not None and abs(s - planted.step) <= tolerance for s in onsets), (planted, onsets)


@pytest.mark.parametrize("run", HEALTHY_RUNS)
def test_healthy_runs_get_nothing_at_warning_or_above(report, run):
    by_run = {r.name: r for r in report.runs}
    loud = [
        (f.kind, f.severity, f.step, f.message) for f in by_run[run].findings if f.severity in ("critical", "warning")
    ]
    assert loud == []


def test_planted_runs_rank_below_healthy_ones(report):
    order = [r.name for r in report.runs]
    worst_healthy = max(order.index(r) for r in HEALTHY_RUNS)
    assert order.index("gpt_small_lr3e-3_noclip") < worst_healthy
    assert order[0] == "gpt_small_lr3e-3_noclip"  # the NaN run is the worst of the night
