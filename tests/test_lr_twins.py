"""`oscillation` that only a healthy lr twin can show: a run that bounces on a higher level than its sibling that
differs from it only in a lower lr.

The bouncing run and its twin are the labelled corpus's (`bench/corpus/runs`: a tanh MLP really trained by
PyTorch, SGD momentum 0.9 at lr 0.45 and at lr 0.02, logged by PyTorch's SummaryWriter the way the HF Trainer
names its tags), placed in a logdir named as a sweep names its runs. The healthy pair is a numpy MLP really
trained at two lrs, logged with tensorboardX.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tbtriage.analysis.engine import diagnose
from tests._engine_data import train_mlp

CORPUS = Path(__file__).resolve().parent.parent / "bench" / "corpus" / "runs"
BOUNCING = "lr_too_high_oscillation__hf__s1"  # lr 0.45
HEALTHY = "healthy_sgd__hf__s0"  # lr 0.02, same model and data


def _copy(folder: str, to: Path) -> None:
    to.mkdir(parents=True)
    for events in (CORPUS / folder).glob("events.out.tfevents.*"):
        shutil.copy(events, to / events.name)


def _alarms(report, name):
    run = next(r for r in report.runs if r.name == name)
    return run, [f for f in run.findings if f.severity in ("warning", "critical")]


def _write(run, path: Path) -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(path))
    for tag, series in run.scalars.items():
        for step, value in zip(series.steps, series.values):
            writer.add_scalar(tag, float(value), int(step))
    writer.close()


def test_a_run_bouncing_above_its_lower_lr_twin_is_oscillation_blamed_on_the_lr(tmp_path):
    _copy(BOUNCING, tmp_path / "mlp_lr0.45")
    _copy(HEALTHY, tmp_path / "mlp_lr0.02")
    alone = diagnose(str(tmp_path / "mlp_lr0.45"))
    assert not any(f.kind == "oscillation" and f.severity == "warning" for f in alone.runs[0].findings)
    health_alone = alone.runs[0].health.score

    report = diagnose(str(tmp_path))
    run, _ = _alarms(report, "mlp_lr0.45")
    (found,) = [f for f in run.findings if f.kind == "oscillation"]
    assert found.severity == "warning" and found.tags == ("train/loss",)
    evidence = found.evidence
    assert evidence["twin"] == "mlp_lr0.02" and (evidence["lr"], evidence["twin_lr"]) == (0.45, 0.02)
    assert evidence["level"] >= 1.5 * evidence["twin_level"]
    assert evidence["relative_scatter"] >= 1.5 * evidence["twin_relative_scatter"]
    assert found.step is not None and found.step >= 320 and found.end_step == 640  # the second half
    assert "mlp_lr0.02" in found.message and "lower lr (0.02 vs 0.45 here)" in found.message
    assert "toward the twin's (0.02" in found.suggestion
    assert found.causes[0].cause == "lr_too_high"
    assert "the healthy twin mlp_lr0.02 differs only in lr=0.45 here vs 0.02" in found.causes[0].evidence["for"]
    # Scored again with it, and ranked with that score: the bouncing run comes first.
    assert run.health.score is not None and run.health.score <= min(80, health_alone)
    assert report.runs[0].name == "mlp_lr0.45"
    twin, twin_alarms = _alarms(report, "mlp_lr0.02")
    assert not twin_alarms and twin.health.score == 100


def test_a_twin_that_differs_in_the_batch_size_says_nothing_about_the_lr(tmp_path):
    # The same two curves, but the names say a batch-size ablation: a different level is the batch's to have.
    _copy(BOUNCING, tmp_path / "mlp_bs16")
    _copy(HEALTHY, tmp_path / "mlp_bs64")
    report = diagnose(str(tmp_path))
    run, _ = _alarms(report, "mlp_bs16")
    assert not any(f.kind == "oscillation" and f.severity != "info" for f in run.findings)


def test_a_twin_with_another_model_is_not_an_lr_twin(tmp_path):
    _copy(BOUNCING, tmp_path / "mlp_lr0.45")
    _copy(HEALTHY, tmp_path / "cnn_lr0.02")
    report = diagnose(str(tmp_path))
    run, _ = _alarms(report, "mlp_lr0.45")
    assert not any(f.kind == "oscillation" and f.severity != "info" for f in run.findings)


def test_two_healthy_lrs_of_a_sweep_stay_healthy_though_the_higher_one_ends_higher(tmp_path):
    # A ReLU MLP at lr 0.07 ends ~1.5x above the same net at lr 0.01 but scatters about as much: a slower,
    # worse optimum, not an optimizer bouncing in its valley.
    for lr in (0.01, 0.07):
        _write(train_mlp(0, lr=lr, schedule="constant", epochs=3, n_train=4000, weight_decay=0), tmp_path / f"m_lr{lr}")
    report = diagnose(str(tmp_path))
    for run in report.runs:
        assert not [f for f in run.findings if f.severity != "info"], run.name
        assert not any(f.kind == "oscillation" for f in run.findings), run.name


def test_saved_configs_that_differ_only_in_the_lr_make_twins_and_one_more_difference_does_not(tmp_path):
    import json

    bouncing = {"lr": 0.45, "batch_size": 64, "model": "mlp", "seed": 1}
    for logdir, twin_batch in (("same", 64), ("ablation", 256)):
        _copy(BOUNCING, tmp_path / logdir / "a")
        (tmp_path / logdir / "a" / "config.json").write_text(json.dumps(bouncing))
        _copy(HEALTHY, tmp_path / logdir / "b")
        twin = {**bouncing, "lr": 0.02, "batch_size": twin_batch, "seed": 0}
        (tmp_path / logdir / "b" / "config.json").write_text(json.dumps(twin))
    run, _ = _alarms(diagnose(str(tmp_path / "same")), "a")
    assert [f.evidence["twin"] for f in run.findings if f.kind == "oscillation"] == ["b"]
    run, _ = _alarms(diagnose(str(tmp_path / "ablation")), "a")
    assert not any(f.kind == "oscillation" and f.severity != "info" for f in run.findings)
