"""Runs side by side: where two curves part, which settings differ, and the engine's account of the difference.

Every run is written with tensorboardX and read back with `tbtriage.load`, as a user's logdir would be.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tbtriage
from tbtriage.analysis.compare import parting_step
from tbtriage.analysis.engine import diagnose
from tbtriage.analysis.side_by_side import side_by_side, twin_pairs
from tbtriage.cli.main import main
from tests._report_contract import COMPARE, REPORT, assert_follows

STEPS = 1000


def loss_curve(seed: int, rise_at: int | None = None, nan_at: int | None = None, noise: float = 0.03) -> np.ndarray:
    """A falling loss with its own noise; optionally climbing away from step `rise_at`, or NaN from `nan_at`."""
    rng = np.random.default_rng(seed)
    steps = np.arange(STEPS)
    loss = 2.0 * np.exp(-steps / 300) + 0.3 + noise * rng.standard_normal(STEPS)
    if rise_at is not None:
        loss = loss + np.where(steps >= rise_at, 0.8 * (1 - np.exp(-(steps - rise_at) / 20)), 0.0)
    if nan_at is not None:
        loss[nan_at:] = np.nan
    return loss


def write(logdir: Path, name: str, loss: np.ndarray, accuracy: np.ndarray | None = None) -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(logdir / name))
    for step, value in enumerate(loss):
        writer.add_scalar("train/loss", float(value), step)
        if accuracy is not None and step % 50 == 0:
            writer.add_scalar("val/accuracy", float(accuracy[step]), step)
    writer.close()


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    logdir = tmp_path_factory.mktemp("sweep")
    accuracy = 0.9 * (1 - np.exp(-np.arange(STEPS) / 200))
    write(logdir, "base_seed0", loss_curve(0), accuracy)
    write(logdir, "base_seed1", loss_curve(1), accuracy)
    write(logdir, "rises_at_400", loss_curve(2, rise_at=400))
    write(logdir, "gpt_lr1e-3", loss_curve(3), accuracy)
    write(logdir, "gpt_lr3e-2", loss_curve(3, nan_at=600), accuracy)
    return logdir


def test_two_seeds_of_one_config_never_part(sweep):
    runs = tbtriage.load(sweep).runs
    assert parting_step(runs["base_seed0"].scalars["train/loss"], runs["base_seed1"].scalars["train/loss"]) is None


def test_a_run_that_climbs_away_at_step_400_parts_there(sweep):
    runs = tbtriage.load(sweep).runs
    parting = parting_step(runs["rises_at_400"].scalars["train/loss"], runs["base_seed0"].scalars["train/loss"])
    assert parting is not None
    assert 400 <= parting.step <= 440
    assert parting.value_a > parting.value_b + parting.band


def test_a_run_that_goes_nan_at_600_parts_at_600_exactly(sweep):
    runs = tbtriage.load(sweep).runs
    parting = parting_step(runs["gpt_lr3e-2"].scalars["train/loss"], runs["gpt_lr1e-3"].scalars["train/loss"])
    assert parting is not None and parting.step == 600
    assert np.isnan(parting.value_a)


def test_curves_too_short_to_judge_do_not_part(tmp_path):
    write(tmp_path, "a", loss_curve(0)[:6])
    write(tmp_path, "b", loss_curve(0, rise_at=0)[:6])
    runs = tbtriage.load(tmp_path).runs
    assert parting_step(runs["a"].scalars["train/loss"], runs["b"].scalars["train/loss"]) is None


def test_side_by_side_names_the_setting_the_parting_and_the_cause(sweep):
    reports = {r.name: r for r in diagnose(str(sweep)).runs}
    pair = side_by_side([reports["gpt_lr3e-2"], reports["gpt_lr1e-3"]])
    assert pair.runs == ("gpt_lr3e-2", "gpt_lr1e-3")
    assert pair.source == "name" and pair.differs == {"lr": (0.03, 0.001)}
    assert pair.tag == "train/loss"
    assert pair.partings["gpt_lr1e-3"] is not None and pair.partings["gpt_lr1e-3"].step == 600
    loss = next(m for m in pair.metrics if m.tag == "train/loss")
    assert loss.direction == -1 and loss.final[1] == pytest.approx(float(loss_curve(3)[-1]), rel=1e-6)
    assert np.isnan(loss.final[0])
    (explanation,) = pair.explanations
    assert (explanation.run, explanation.twin, explanation.finding) == ("gpt_lr3e-2", "gpt_lr1e-3", "divergence")
    assert explanation.cause == "lr_too_high"
    assert "lr=0.03 here vs 0.001" in explanation.sentence


def test_runs_with_nothing_in_common_have_no_explanation(sweep):
    reports = {r.name: r for r in diagnose(str(sweep)).runs}
    pair = side_by_side([reports["base_seed0"], reports["rises_at_400"], reports["base_seed1"]])
    assert pair.explanations == ()
    assert pair.partings["base_seed1"] is None
    assert pair.partings["rises_at_400"] is not None


def test_the_report_pairs_each_sick_run_with_its_healthy_twin(sweep):
    pairs = twin_pairs(diagnose(str(sweep)).runs)
    assert [p.runs for p in pairs] == [("gpt_lr3e-2", "gpt_lr1e-3")]


def test_one_run_is_not_a_comparison(sweep):
    reports = diagnose(str(sweep)).runs
    with pytest.raises(ValueError, match="two or more"):
        side_by_side(reports[:1])


# ---- tbtriage compare and the report's comparison section ----------------------------------------------


def test_compare_prints_the_pair_as_markdown(sweep, capsys):
    assert main(["compare", str(sweep), "gpt_lr3e-2", "gpt_lr1e-3"]) == 0
    out = capsys.readouterr().out
    assert "## `gpt_lr3e-2` vs `gpt_lr1e-3`" in out
    assert "| `lr` | 0.03 | 0.001 |" in out
    assert "part at step 600" in out
    assert "likeliest cause: " in out


def test_compare_json_follows_its_schema(sweep, capsys):
    assert main(["compare", str(sweep), "base_seed0", "rises_at_400", "base_seed1", "--format", "json"]) == 0
    doc = assert_follows(json.loads(capsys.readouterr().out), COMPARE)
    assert [r["run"] for r in doc["runs"]] == ["base_seed0", "rises_at_400", "base_seed1"]
    partings = {p["run"]: p["step"] for p in doc["partings"]}
    assert partings["base_seed1"] is None and 400 <= partings["rises_at_400"] <= 440


def test_compare_names_an_unknown_run_in_one_line_and_exits_2(sweep, capsys):
    assert main(["compare", str(sweep), "gpt_lr3e-2", "gpt_lr9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no run named 'gpt_lr9'" in err[0] and "gpt_lr1e-3" in err[0]


def test_compare_needs_two_different_runs(sweep, capsys):
    assert main(["compare", str(sweep), "gpt_lr3e-2", "gpt_lr3e-2"]) == 2
    assert "two or more different runs" in capsys.readouterr().err


def test_the_report_has_a_comparison_section_in_markdown_and_json(sweep, capsys):
    assert main(["report", str(sweep), "--format", "json"]) == 0
    doc = assert_follows(json.loads(capsys.readouterr().out), REPORT)
    (pair,) = doc["comparisons"]
    assert [r["run"] for r in pair["runs"]] == ["gpt_lr3e-2", "gpt_lr1e-3"]
    assert pair["explanations"][0]["cause"] == "lr_too_high"
    assert main(["report", str(sweep)]) == 0
    out = capsys.readouterr().out
    assert "## Comparisons" in out and "### `gpt_lr3e-2` vs `gpt_lr1e-3`" in out
    # The HTML report carries the same section: the same points and the same table, escaped for HTML.
    assert main(["report", str(sweep), "--format", "html"]) == 0
    page = capsys.readouterr().out
    assert "<h2>Comparisons</h2>" in page and "<h3><code>gpt_lr3e-2</code> vs <code>gpt_lr1e-3</code></h3>" in page
    section = page[page.index("<h2>Comparisons</h2>") :]
    assert "likeliest cause:" in section and "part at step" in section
    health = [line for line in out.splitlines() if line.startswith("| health |")][-1]
    cells = [c.strip() for c in health.strip("|").split("|")][1:]
    assert "<tr><td>health</td>" + "".join(f"<td class=num>{c}</td>" for c in cells) + "</tr>" in section


def test_report_filter_keeps_the_runs_whose_values_pass_best_first(sweep, capsys):
    assert main(["report", str(sweep), "--format", "json", "--filter", "top 2 by best:val/accuracy gpt"]) == 0
    doc = assert_follows(json.loads(capsys.readouterr().out), REPORT)
    assert sorted(r["run"] for r in doc["runs"]) == ["gpt_lr1e-3", "gpt_lr3e-2"]
    assert main(["report", str(sweep), "--filter", "loss<"]) == 2
    assert "--filter 'loss<': loss<: expected TAG>NUMBER" in capsys.readouterr().err


def test_a_long_run_is_compared_every_kth_step_and_still_parts_near_the_right_step():
    from tbtriage.analysis.compare import PART_GRID
    from tbtriage.analysis.datamodel import Series

    n = 10 * PART_GRID
    steps = np.arange(n, dtype=np.int64)
    rng = np.random.default_rng(5)
    base = 2.0 * np.exp(-steps / (n / 3)) + 0.3
    a = Series(steps, steps * 1.0, base + 0.01 * rng.standard_normal(n))
    b = Series(steps, steps * 1.0, base + 0.01 * rng.standard_normal(n) + np.where(steps >= 123_456, 0.5, 0.0))
    parting = parting_step(b, a)
    assert parting is not None and 123_456 <= parting.step <= 123_456 + 4 * (n // PART_GRID)


@pytest.mark.parametrize("size", [5, 6, 9, 200])
def test_the_parting_running_median_is_numpys_with_nan_and_ties(size):
    from tbtriage.analysis.compare import _running_median

    rng = np.random.default_rng(size)
    for trial in range(50):
        values = np.round(rng.normal(size=size), 1)  # ties
        if trial % 3 == 0:
            values[rng.integers(size) :] = np.nan  # a run gone NaN stays NaN on the grid
        if trial % 5 == 0:
            values[rng.integers(size)] = np.nan
        if trial % 7 == 0:
            values[:] = -0.0
        padded = np.pad(values, 2, mode="edge")
        expected = np.median(np.lib.stride_tricks.sliding_window_view(padded, 5), axis=1)
        got = _running_median(values, 5)
        assert np.array_equal(got, expected, equal_nan=True)
        zeros = expected == 0
        assert np.array_equal(np.signbit(got[zeros]), np.signbit(expected[zeros]))  # never -0.0 for 0.0
