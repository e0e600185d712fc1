"""The engine end to end on real event files: the labelled suite, the JSON contract, ranking.

Every labelled scenario of `_engine_data` is written with real writers (tensorboardX's SummaryWriter for
PyTorch-style runs, tensorboard's protos for TF2/Keras tensor scalars) into one logdir, read back with
`analysis.load` and diagnosed: every planted pathology must be found at its onset (2 % of the run or one
validation interval), and no healthy run may get a warning or a critical finding.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import tbtriage
from tbtriage.analysis.causes import CAUSES
from tbtriage.analysis.datamodel import FINDING_KINDS, SEVERITIES
from tbtriage.analysis.engine import Report, analyze_run, diagnose, scalar_span
from tests._engine_data import (
    HEALTHY,
    PATHOLOGIES,
    SCENARIOS,
    RunSpec,
    random_healthy,
    to_run,
    tolerance,
    write_scenario,
)
from tests._report_contract import assert_follows

#: Analyse as if the morning after: the logdir is not live, so a stopped run is worth an info at most.
MORNING_AFTER = 86400.0


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("labelled")
    for scenario in SCENARIOS:
        if scenario.now_offset is None:
            write_scenario(root, scenario)
    return tbtriage.load(root)


@pytest.fixture(scope="module")
def report(logdir) -> Report:
    latest = max(scalar_span(run)[1] for run in logdir.runs.values())
    return diagnose(logdir, now=latest + MORNING_AFTER)


def _run_name(scenario, run):
    return scenario.name if run == "." else f"{scenario.name}/{run}"


def test_every_finding_kind_is_covered_by_the_labelled_suite():
    planted = {e.kind for s in PATHOLOGIES for e in s.expected}
    assert planted == set(FINDING_KINDS)
    assert len(HEALTHY) >= 10


@pytest.mark.parametrize("scenario", [s for s in PATHOLOGIES if s.now_offset is None], ids=lambda s: s.name)
def test_each_planted_pathology_is_found_at_its_onset(report, scenario):
    by_name = {r.name: r for r in report.runs}
    for expected in scenario.expected:
        run = by_name[_run_name(scenario, expected.run)]
        hits = [
            f
            for f in run.findings
            if f.kind == expected.kind and SEVERITIES.index(f.severity) <= SEVERITIES.index(expected.severity)
        ]
        assert hits, f"{expected.kind} not found: {[(f.kind, f.severity, f.step) for f in run.findings]}"
        if expected.step is not None:
            allowed = tolerance(scenario, expected, {expected.run: run.run})
            assert min(abs(f.step - expected.step) for f in hits) <= allowed, [f.step for f in hits]


@pytest.mark.parametrize("scenario", HEALTHY, ids=lambda s: s.name)
def test_healthy_runs_get_no_warning_or_critical_finding(report, scenario):
    for run in report.runs:
        if run.name == scenario.name or run.name.startswith(scenario.name + "/"):
            loud = [(f.kind, f.severity, f.step, f.message) for f in run.findings if f.severity != "info"]
            assert not loud


def test_a_run_that_stops_writing_while_its_siblings_go_on_is_stalled_in_a_live_logdir(tmp_path):
    scenario = next(s for s in SCENARIOS if s.now_offset is not None)
    directory = write_scenario(tmp_path, scenario)
    logdir = tbtriage.load(directory)
    latest = max(scalar_span(run)[1] for run in logdir.runs.values())
    live = {r.name: r for r in diagnose(logdir, now=latest + scenario.now_offset).runs}
    stalled = [f for f in live["seed1"].findings if f.kind == "stalled"]
    assert stalled and stalled[0].severity == "warning" and stalled[0].step == 1200
    assert not [f for f in live["seed0"].findings + live["seed2"].findings if f.severity != "info"]


def test_runs_are_ranked_worst_first(report):
    scores = [r.health.score for r in report.runs]
    assert scores == sorted(scores)
    position = {r.name: i for i, r in enumerate(report.runs)}
    critical = [r.name for r in report.runs if any(f.severity == "critical" for f in r.findings)]
    quiet = [r.name for r in report.runs if all(f.severity == "info" for f in r.findings)]
    assert critical and quiet and max(position[n] for n in critical) < min(position[n] for n in quiet)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def test_the_json_report_follows_the_contract(report, logdir):
    text = report.to_json()
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert_follows(data)  # docs/report.schema.json: every field, type and vocabulary
    assert data["tool"] == "tbtriage" and data["version"] == tbtriage.__version__
    assert data["logdir"] == str(logdir.path)
    assert [r["run"] for r in data["runs"]] == [r.name for r in report.runs]
    for run in data["runs"]:
        assert run["files"] and isinstance(run["last_step"], int) and _is_number(run["last_wall_time"])
        assert all(info["points"] > 0 for info in run["tags"].values())
        assert run["health"]["score"] is not None
        assert set(run["health"]["components"]) == {
            "convergence",
            "stability",
            "gradient_health",
            "resource_efficiency",
            "overfitting_risk",
        }
        assert all(v is None or 0 <= v <= 100 for v in run["health"]["components"].values())
        for finding in run["findings"]:
            assert "causes" in finding  # the engine's ranked causes (may be empty)
            for cause in finding["causes"]:
                assert cause["cause"] == "unclear" or cause["cause"] in CAUSES
            assert finding["message"] and "\n" not in finding["message"] and finding["suggestion"]
            assert finding["evidence"]["summary"]


def test_nan_evidence_is_written_as_strict_json(report):
    diverged = next(r for r in report.runs if r.name == "divergence_nan")
    data = assert_follows(json.loads(Report(report.logdir, [diverged], "x").to_json()))
    context = data["runs"][0]["findings"][0]["evidence"]["context"]
    assert "NaN" in [v for _, v in context["grad_norm"]]


def test_diagnose_reads_a_path_and_keeps_only_the_runs_asked_for(tmp_path):
    scenario = next(s for s in SCENARIOS if s.name == "keras_overfit")
    directory = write_scenario(tmp_path, scenario)
    report = diagnose(str(directory), runs="train")
    assert [r.name for r in report.runs] == ["train"] and report.to_dict()["logdir"] == str(directory)
    assert [f.kind for f in report.runs[0].findings] == []  # without its validation sibling, nothing to compare
    both = diagnose(directory)
    assert {r.name for r in both.runs} == {"train", "validation"}
    assert [f.kind for f in next(r for r in both.runs if r.name == "train").findings] == ["overfitting"]


@pytest.mark.parametrize("seed", range(60))
def test_randomised_healthy_runs_get_no_warning(seed):
    specs, description = random_healthy(10_000 + seed)
    report = analyze_run(to_run("r", specs["."]))
    loud = [(f.kind, f.severity, f.message) for f in report.findings if f.severity != "info"]
    assert not loud, description


def test_a_run_of_a_million_points_is_analysed(tmp_path):
    steps = np.arange(1_000_000, dtype=np.int64)
    rng = np.random.default_rng(0)
    loss = (0.5 + 2.0 * np.exp(-steps / 200_000)) * np.exp(rng.normal(0, 0.05, steps.size))
    loss[700_000] *= 5
    report = analyze_run(to_run("big", RunSpec({"train/loss": (steps, loss)})))
    spike = next(f for f in report.findings if f.kind == "loss_spike")
    assert spike.step == 700_000


def test_any_float32_data_is_analysed_without_an_error_or_a_numpy_warning():
    import warnings

    from tbtriage.analysis.datamodel import Run, Series
    from tbtriage.analysis.engine import run_report_dict

    rng = np.random.default_rng(7)
    tags = [
        "train/loss",
        "eval/loss",
        "train/learning_rate",
        "train/grad_norm",
        "grad_norm/layer1",
        "weight_norm/fc",
        "act/relu_zero_frac",
        "loss_scale",
        "data_time",
        "time",
        "gpu/util",
        "eval/accuracy",
        "loss_cls",
        "epoch",
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(150):
            run = Run("r", path=None)
            for tag in rng.choice(tags, size=int(rng.integers(1, 6)), replace=False):
                n = int(rng.choice([0, 1, 2, 5, 30, 400]))
                steps = np.sort(rng.integers(0, 3 * n + 1, n)).astype(np.int64)  # repeats and zeros included
                values = rng.normal(0, 10 ** rng.uniform(-38, 37.5), n)
                values[rng.random(n) < rng.choice([0.0, 0.3])] = rng.choice([np.nan, np.inf, -np.inf])
                run.scalars[str(tag)] = Series(steps, steps.astype(np.float64), values)
            json.dumps(run_report_dict(analyze_run(run)), allow_nan=False)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_really_trained_network_with_sane_settings_gets_no_warning(seed):
    from tests._engine_data import train_mlp

    report = analyze_run(train_mlp(seed, epochs=4, n_train=8000))
    assert not [f for f in report.findings if f.severity != "info"] and report.health.score >= 90


@pytest.mark.parametrize(
    "settings,kind",
    [
        ({"lr": 8.0, "schedule": "constant", "epochs": 2, "n_train": 4000}, "divergence"),
        # lr 1e-6 moves the loss 1 % in 6 epochs: it never learned (no_learning, not a slow crawl).
        ({"lr": 1e-6, "schedule": "constant", "epochs": 6, "n_train": 4000}, "no_learning"),
        (
            {"n_train": 300, "epochs": 120, "batch": 32, "hidden": 256, "label_noise": 0.3, "weight_decay": 0.0},
            "overfitting",
        ),
    ],
    ids=["lr_too_high", "lr_far_too_low", "small_data_no_regularisation"],
)
def test_a_really_trained_network_with_a_bad_setting_gets_the_right_diagnosis(settings, kind):
    from tests._engine_data import train_mlp

    report = analyze_run(train_mlp(0, **settings))
    assert kind in [f.kind for f in report.findings if f.severity != "info"]


def test_fairseqs_valid_run_is_judged_beside_its_train_inner_sibling(tmp_path):
    """fairseq writes per-update training stats to `train_inner/` and evaluations to `valid/`, both under plain
    names (`loss`, `gnorm`, `accuracy`): a validation loss that climbs after its best while the training loss keeps
    falling is overfitting on the training run, not a divergence of a run judged alone."""
    from tensorboardX import SummaryWriter

    rng = np.random.default_rng(3)
    train = SummaryWriter(str(tmp_path / "train_inner"))
    for step in range(10, 900, 10):
        train.add_scalar("loss", 2.0 * np.exp(-step / 150) + 0.05 + 0.01 * rng.standard_normal(), step)
        train.add_scalar("lr", 3e-3, step)
        train.add_scalar("gnorm", 1.0 + 0.1 * rng.standard_normal(), step)
    train.close()
    valid = SummaryWriter(str(tmp_path / "valid"))
    for step in range(16, 900, 16):
        valid.add_scalar("loss", 1.3 + 0.8 * max(0.0, step - 200) / 700 * (step / 400), step)
        valid.add_scalar("accuracy", 60.0 - 10 * max(0.0, step - 200) / 700, step)
    valid.close()
    report = diagnose(tmp_path)
    kinds = {r.name: [f.kind for f in r.findings if f.severity != "info"] for r in report.runs}
    assert kinds["train_inner"] == ["overfitting"]
    assert "divergence" not in kinds["valid"]
