"""Across runs: best metric per run, seeds grouped and compared, the hyperparameters table."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tbtriage.analysis.compare import (
    Stat,
    best_metric,
    compare,
    final_loss,
    group_key,
    group_runs,
    hparams_of,
    hparams_table,
    summarise_groups,
)
from tests._report_data import accuracy_curve, finding, loss_curve, make_report, series


@pytest.mark.parametrize(
    "name, group",
    [
        ("bert_base_cosine_seed0", "bert_base_cosine"),
        ("bert_base_cosine-seed12", "bert_base_cosine"),
        ("bertseed3", "bert"),
        ("resnet_s3", "resnet"),
        ("gpt-run2", "gpt"),
        ("vit_rep1", "vit"),
        ("vit_3", "vit"),
        ("sweep/lr0.1/seed1", "sweep/lr0.1"),
        ("resnet50", "resnet50"),  # a model size is not a replicate number
        ("resnet18_lr1e-5", "resnet18_lr1e-5"),  # nor is an exponent
        ("keras/validation", "keras/validation"),
    ],
)
def test_the_default_pattern_strips_only_a_replicate_suffix(name, group):
    assert group_key(name) == group


def test_a_user_pattern_groups_by_its_named_group_then_first_group_then_whole_match():
    assert group_key("lr0.1_bs64_seed2", re.compile(r"(?P<group>lr[\d.]+)_")) == "lr0.1"
    assert group_key("lr0.1_bs64_seed2", re.compile(r"_(bs\d+)_")) == "bs64"
    assert group_key("lr0.1_bs64_seed2", re.compile(r"bs\d+")) == "bs64"
    # A run the pattern does not match stays a group of its own.
    assert group_key("baseline", re.compile(r"bs\d+")) == "baseline"


def test_group_runs_keeps_first_seen_order():
    groups = group_runs(["b_seed0", "a_seed0", "b_seed1", "c"])
    assert groups == {"b": ["b_seed0", "b_seed1"], "a": ["a_seed0"], "c": ["c"]}


def test_best_metric_respects_direction_and_prefers_a_held_out_metric():
    acc = accuracy_curve(top=0.9, peak_at=1200)  # higher is better, peaks at 1200 then slips
    train_acc = series(acc.steps, np.full(len(acc), 0.99))
    report = make_report(
        "r",
        {"train/loss": ("train_loss", loss_curve()), "train/acc": ("metric", train_acc), "val/acc": ("metric", acc)},
    )
    best = best_metric(report)
    assert best.tag == "val/acc"
    assert best.step == 1200
    assert best.value == pytest.approx(acc.values[acc.steps == 1200][0])


def test_a_lower_is_better_metric_is_best_at_its_minimum():
    steps = np.arange(1, 11) * 100
    ppl = series(steps, [50, 40, 30, 25, 22, 21, 23, 26, 30, 35])
    report = make_report("lm", {"val/ppl": ("metric", ppl)}, directions={"val/ppl": -1})
    best = best_metric(report)
    assert (best.tag, best.value, best.step, best.direction) == ("val/ppl", 21.0, 600, -1)


def test_without_a_metric_the_best_validation_loss_counts_and_nan_is_never_best():
    steps = np.arange(1, 11) * 100
    val = series(steps, [3, 2, 1.5, 1.2, np.nan, 1.1, 1.3, np.inf, 1.4, 1.5])
    report = make_report("r", {"train/loss": ("train_loss", loss_curve()), "val/loss": ("val_loss", val)})
    best = best_metric(report)
    assert (best.tag, best.value, best.step) == ("val/loss", 1.1, 600)


def test_a_run_with_only_unknown_tags_has_no_best_metric():
    report = make_report("r", {"custom/thing": (None, loss_curve())})
    assert best_metric(report) is None


def test_final_loss_is_the_last_logged_training_loss_even_when_it_is_nan():
    steps = np.arange(1, 6) * 10
    report = make_report("r", {"loss": ("train_loss", series(steps, [3, 2, 1, np.nan, np.nan]))})
    assert np.isnan(final_loss(report))


def test_stat_is_mean_and_sample_std_over_finite_values():
    s = Stat.of([1.0, 2.0, 3.0, float("nan"), None])
    assert (s.mean, s.std, s.finite, s.count) == (2.0, 1.0, 3, 5)
    assert Stat.of([4.0]).std is None
    assert Stat.of([None]).mean is None


def test_seeds_of_one_config_are_compared_as_a_group():
    reports = [
        make_report(
            f"cosine_seed{i}",
            {"loss": ("train_loss", loss_curve(seed=i)), "val/acc": ("metric", accuracy_curve(top=t))},
            score=s,
        )
        for i, (t, s) in enumerate([(0.90, 95), (0.86, 60), (0.88, 90)])
    ]
    reports[1].findings.append(finding("cosine_seed1", "loss_spike", "warning", 700))
    reports.append(make_report("step_decay", {"loss": ("train_loss", loss_curve(seed=9))}, score=99))
    groups = {g.name: g for g in summarise_groups(reports)}
    cosine = groups["cosine"]
    assert cosine.runs == ("cosine_seed0", "cosine_seed1", "cosine_seed2")
    assert cosine.metric_tag == "val/acc"
    bests = [accuracy_curve(top=t).values.max() for t in (0.90, 0.86, 0.88)]
    assert cosine.best_metric.mean == pytest.approx(np.mean(bests))
    assert cosine.best_metric.std == pytest.approx(np.std(bests, ddof=1))
    assert (cosine.worst_health, cosine.worst_run) == (60, "cosine_seed1")
    assert cosine.severity_counts == {"critical": 0, "warning": 1, "info": 0}
    assert groups["step_decay"].runs == ("step_decay",)
    # Worst group first.
    assert summarise_groups(reports)[0].name == "cosine"


def test_no_groups_when_every_run_stands_alone():
    reports = [make_report(n, {"loss": ("train_loss", loss_curve())}) for n in ("a", "b", "c")]
    assert summarise_groups(reports) == ()


def test_hparams_come_from_plugin_config_files_and_text_summaries_without_touching_the_run_dir(tmp_path):
    yaml_run = tmp_path / "lightning"
    yaml_run.mkdir()
    (yaml_run / "hparams.yaml").write_text("lr: 0.001\nbatch_size: 128\noptimizer:\n  name: adam\n")
    args_run = tmp_path / "script"
    args_run.mkdir()
    (args_run / "args.json").write_text(json.dumps({"lr": 0.1, "batch_size": 64, "clip": 1.0}))
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}

    reports = [
        make_report("lightning", {"loss": ("train_loss", loss_curve())}, path=yaml_run),
        make_report("script", {"loss": ("train_loss", loss_curve())}, path=args_run),
        make_report("plugin", {"loss": ("train_loss", loss_curve())}, hparams={"lr": 0.01, "batch_size": 32.0}),
        make_report(
            "hf",
            {"loss": ("train_loss", loss_curve())},
            texts={"args/text_summary": json.dumps({"learning_rate": 3e-4, "seed": 1}, indent=2)},
        ),
        make_report(
            "md",
            {"loss": ("train_loss", loss_curve())},
            texts={"hparams/text_summary": "| key | value |\n|---|---|\n| lr | 0.2 |\n| batch_size | 16 |"},
        ),
        make_report("none", {"loss": ("train_loss", loss_curve())}),
    ]
    values, sources = hparams_of(reports[0])
    assert values == {"lr": 0.001, "batch_size": 128, "optimizer.name": "adam"}
    assert sources == ("hparams.yaml",)
    assert hparams_of(reports[1])[0]["clip"] == 1.0
    assert hparams_of(reports[3])[0] == {"learning_rate": 3e-4, "seed": 1}
    assert hparams_of(reports[4])[0] == {"lr": "0.2", "batch_size": "16"}

    table = hparams_table(reports)
    assert "none" not in table.rows
    assert table.rows["plugin"]["batch_size"] == 32  # the plugin's doubles shown as the ints they were
    assert table.rows["lightning"]["lr"] == 0.001
    assert {"lr", "batch_size"} <= set(table.columns)
    assert table.sources["plugin"] == ("hparams plugin",)
    # Read only: nothing created, nothing modified.
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before

    # The hparams the twins' settings were read from (`twins.run_settings`) make the same table, without reading a
    # run's config files again; a run they do not hold is read.
    from tbtriage.analysis.twins import run_settings

    settings = run_settings(reports[1:])
    assert settings["script"] == {"lr": 0.1, "batch_size": 64, "clip": 1.0}
    (yaml_run / "hparams.yaml").write_text("lr: 0.5\n")  # read again: not among the settings
    (args_run / "args.json").write_text("{}")  # not read again: the settings hold it
    again = hparams_table(reports, settings.hparams)
    assert again.rows["lightning"]["lr"] == 0.5 and again.rows["script"] == table.rows["script"]
    assert compare(reports, None, settings.hparams).hparams == again


def test_columns_equal_in_every_run_are_listed_once_as_constant():
    reports = [
        make_report(f"r{i}", {"loss": ("train_loss", loss_curve())}, hparams={"lr": lr, "wd": 0.01})
        for i, lr in enumerate((0.1, 0.2))
    ]
    table = hparams_table(reports)
    assert table.columns == ("lr",)
    assert table.constant == {"wd": 0.01}


def test_compare_bundles_best_groups_and_hparams():
    reports = [
        make_report("a_seed0", {"loss": ("train_loss", loss_curve())}, hparams={"lr": 0.1}),
        make_report("a_seed1", {"loss": ("train_loss", loss_curve(seed=1))}, hparams={"lr": 0.1}),
    ]
    result = compare(reports)
    assert set(result.best) == {"a_seed0", "a_seed1"}
    assert result.groups[0].name == "a"
    assert result.hparams.constant == {"lr": 0.1}
