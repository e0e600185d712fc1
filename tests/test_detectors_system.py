"""Input pipeline, multi-task balance, lr schedule, file integrity and stalled-run detectors."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tbtriage.analysis.datamodel import Note
from tbtriage.analysis.detectors.stalled import stall, stall_facts
from tbtriage.analysis.engine import analyze_run, logdir_context
from tests._engine_data import (
    BY_NAME,
    RunSpec,
    analyze_scenario,
    analyze_tags,
    build,
    kinds,
    lr_sgdr,
    lr_warmup_cosine,
    steps_every,
    to_run,
)


def _one(report, kind):
    found = [f for f in report.findings if f.kind == kind]
    assert found, f"no {kind} in {[(f.kind, f.severity, f.step) for f in report.findings]}"
    return found[0]


def test_data_time_at_70_percent_of_each_step_and_idle_gpu_is_an_input_bottleneck_from_the_start():
    finding = _one(analyze_scenario("bottleneck")["."], "input_bottleneck")
    assert finding.severity == "warning" and finding.step == 10
    assert 0.6 < finding.evidence["data_share"] < 0.8 and finding.evidence["gpu_util_median"] < 40
    assert "num_workers=" in finding.suggestion and "pin_memory=True" in finding.suggestion


def test_a_loader_that_slows_down_at_1800_is_a_bottleneck_from_there():
    finding = _one(analyze_scenario("bottleneck_late")["."], "input_bottleneck")
    assert finding.severity == "warning" and abs(finding.step - 1800) <= 60


def test_a_busy_gpu_with_fast_loading_is_fine():
    steps = steps_every(3000, 10)
    rng = np.random.default_rng(0)
    report = analyze_tags(
        {
            "time": (steps, np.full(steps.size, 0.4)),
            "data_time": (steps, np.full(steps.size, 0.01)),
            "gpu/util": (steps, rng.normal(95, 2, steps.size)),
        }
    )
    assert not kinds(report, ("critical", "warning", "info"))


def test_one_loss_term_at_90_percent_while_the_others_stay_flat_is_task_imbalance():
    finding = _one(analyze_scenario("task_imbalance")["."], "task_imbalance")
    assert finding.severity == "warning" and finding.tags[0] == "loss_cls"
    assert set(finding.evidence["stalled"]) == {"loss_box_reg", "loss_mask"}
    assert "weight" in finding.suggestion


def test_an_lr_that_jumps_100x_for_two_points_at_1700_is_an_lr_anomaly():
    finding = _one(analyze_scenario("lr_blip")["."], "lr_anomaly")
    assert finding.severity == "warning" and finding.step == 1700 and finding.evidence["kind"] == "blip"


def test_an_lr_schedule_that_ends_at_1900_of_3000_is_an_lr_anomaly_from_1900():
    finding = _one(analyze_scenario("lr_dead_tail")["."], "lr_anomaly")
    assert finding.step == 1900 and "stayed there" in finding.message


@pytest.mark.parametrize(
    "lr",
    [
        lr_warmup_cosine(steps_every(3000, 10), 1e-3, 100, 3000),  # cosine down to exactly 0 at the last step
        lr_sgdr(steps_every(3000, 10), 0.1, 500),  # warm restarts back up to the peak
        np.where(steps_every(3000, 10) < 1500, 0.1, 0.01),  # step decay
        np.linspace(0.0, 1e-3, 300),  # a run still in its warmup
    ],
)
def test_ordinary_schedules_are_not_lr_anomalies(lr):
    assert "lr_anomaly" not in kinds(analyze_tags({"lr": (steps_every(3000, 10), lr)}), ("critical", "warning", "info"))


def test_an_lr_of_zero_for_the_whole_run_is_critical():
    finding = _one(analyze_tags({"lr": (steps_every(3000, 10), np.zeros(300))}), "lr_anomaly")
    assert finding.severity == "critical"


def test_reader_notes_become_run_restart_and_data_integrity_findings():
    restart = _one(analyze_scenario("restarted")["."], "run_restart")
    assert (restart.severity, restart.step) == ("info", 1500)
    run = to_run("r", RunSpec({"loss": (np.arange(10), np.ones(10))}))
    run.notes.append(Note("data_integrity", "r/events.out.tfevents.1", "bad CRC at byte 4096: stopped there", 4096))
    finding = _one(analyze_run(run), "data_integrity")
    assert (
        finding.severity == "warning" and finding.evidence["offset"] == 4096 and finding.message.startswith("bad CRC")
    )


def test_a_run_that_stopped_writing_while_its_siblings_continue_is_stalled_in_a_live_logdir():
    reports = analyze_scenario("stalled")
    finding = _one(reports["seed1"], "stalled")
    assert finding.severity == "warning" and finding.step == 1200
    assert set(finding.evidence["still_writing"]) == {"seed0", "seed2"}
    assert not kinds(reports["seed0"]) and not kinds(reports["seed2"])


def test_runs_of_a_sequential_sweep_and_finished_runs_are_not_stalled():
    steps = steps_every(3000, 10)
    specs = {
        "first": RunSpec({"loss": (steps, 2 - steps / 3000)}, 1.0, 1_700_000_000.0),
        "second": RunSpec({"loss": (steps, 2 - steps / 3000)}, 1.0, 1_700_004_000.0),
    }
    runs = {name: to_run(name, spec) for name, spec in specs.items()}
    context = logdir_context(SimpleNamespace(runs=runs), now=1_700_007_100.0)
    assert "stalled" not in kinds(analyze_run(runs["first"], None, context), ("critical", "warning", "info"))
    # A parallel run that stopped early but whose lr schedule had run down to ~0 finished; it did not stall.
    lr = lr_warmup_cosine(steps_every(1000, 10), 1e-3, 10, 1000)
    specs = {
        "short": RunSpec({"loss": (steps[:100], 2 - steps[:100] / 3000), "lr": (steps[:100], lr)}, 1.0),
        "long": RunSpec({"loss": (steps, 2 - steps / 3000)}, 1.0),
    }
    runs = {name: to_run(name, spec) for name, spec in specs.items()}
    context = logdir_context(SimpleNamespace(runs=runs), now=runs["long"].last_wall_time + 5)
    assert "stalled" not in kinds(analyze_run(runs["short"], None, context), ("critical", "warning", "info"))


def test_the_silence_a_run_may_keep_grows_with_its_write_interval_and_the_worker_path_agrees():
    """Points every 60 s: 900 s of silence (over MIN_SILENCE_S, under 20 intervals) is the run's rhythm, 3,000 s
    a stall. The detector works the interval out only when the silence leaves the verdict open; a pool's worker
    and the verdict cache judge from `stall_facts` in full: both must say the same."""
    steps = steps_every(3000, 10)
    loss = 2 - steps / 3000
    specs = {
        "quiet": RunSpec({"loss": (steps[:285], loss[:285])}, 6.0),
        "stopped": RunSpec({"loss": (steps[:250], loss[:250])}, 6.0),
        "long": RunSpec({"loss": (steps, loss)}, 6.0),
    }
    runs = {name: to_run(name, spec) for name, spec in specs.items()}
    context = logdir_context(SimpleNamespace(runs=runs), now=runs["long"].last_wall_time + 5)
    verdicts = {}
    for name, run in runs.items():
        report = analyze_run(run, None, context)
        found = [f for f in report.findings if f.kind == "stalled"]
        facts = stall_facts(run, report.primary_tags.lr)
        assert facts is not None and facts.interval == 60.0 and facts.threshold == 1200.0
        judged = stall(facts, context)
        assert (judged is None) == (not found), name
        if found:
            assert found[0].evidence["silence_s"] == round(judged.silence, 1)
            assert found[0].evidence["typical_interval_s"] == 60.0
        verdicts[name] = bool(found)
    assert verdicts == {"quiet": False, "stopped": True, "long": False}


def test_an_old_logdir_analysed_days_later_reports_a_stall_only_as_info():
    runs = {name: to_run(name, spec) for name, spec in build(BY_NAME["stalled"]).items()}
    context = logdir_context(SimpleNamespace(runs=runs), now=max(r.last_wall_time for r in runs.values()) + 5 * 86400)
    assert _one(analyze_run(runs["seed1"], None, context), "stalled").severity == "info"


def test_a_warmup_from_zero_logged_sparsely_is_not_an_lr_stuck_at_zero():
    steps = np.arange(0, 1001, 50)
    lr = lr_warmup_cosine(steps, 1e-3, 200, 1000)  # 0 at step 0, the only point before the ramp shows
    assert "lr_anomaly" not in kinds(analyze_tags({"lr-AdamW": (steps, lr)}), ("critical", "warning", "info"))
