"""Filtering and ranking runs by value: the expression a user types after `/`, on runs written by tensorboardX."""

from __future__ import annotations

import numpy as np
import pytest

from tbtriage.analysis.engine import diagnose
from tbtriage.analysis.run_filter import (
    Condition,
    FilterError,
    Rank,
    RunScalars,
    apply_filter,
    parse_filter,
)

#: run -> (final train loss, accuracy peak, accuracy at the end); `diverged` ends in NaN.
PLAN = {
    "resnet_lr0.1": (0.20, 0.95, 0.93),
    "resnet_lr0.01": (0.50, 0.85, 0.85),
    "vit_lr0.1": (0.25, 0.91, 0.80),
    "diverged": (float("nan"), 0.70, 0.60),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[RunScalars]:
    from tensorboardX import SummaryWriter

    logdir = tmp_path_factory.mktemp("sweep")
    steps = np.arange(200)
    for name, (final, peak, end) in PLAN.items():
        writer = SummaryWriter(str(logdir / name))
        loss = 2.0 * np.exp(-steps / 40) + (final if np.isfinite(final) else 0.3)
        accuracy = np.concatenate([np.linspace(0.1, peak, 150), np.linspace(peak, end, 50)])
        for step in steps:
            value = float("nan") if not np.isfinite(final) and step >= 190 else float(loss[step])
            writer.add_scalar("train/loss", value, int(step))
            writer.add_scalar("val/accuracy", float(accuracy[step]), int(step))
            if name == "vit_lr0.1":
                writer.add_scalar("train/accuracy", 0.99, int(step))
        writer.close()
    return [RunScalars.of(report) for report in diagnose(str(logdir)).runs]


def kept(text: str, runs: list[RunScalars]) -> list[str]:
    return apply_filter(parse_filter(text), runs)


def test_the_grammar_reads_conditions_ranks_and_name_regexes():
    flt = parse_filter("resnet  best:val/accuracy >= 0.9 loss<0.3 top 2 by final:val/accuracy")
    assert [p.pattern for p in flt.names] == ["resnet"]
    assert flt.conditions == (Condition("best", "val/accuracy", ">=", 0.9), Condition("final", "loss", "<", 0.3))
    assert flt.rank == Rank(True, 2, "final", "val/accuracy")
    assert not parse_filter("lr=0.1").by_value  # a hydra-style run name, not a condition


def test_a_final_value_condition_keeps_runs_whose_last_value_passes(runs):
    assert sorted(kept("train/loss<0.3", runs)) == ["resnet_lr0.1", "vit_lr0.1"]
    assert sorted(kept("final:val/accuracy>0.84", runs)) == ["resnet_lr0.01", "resnet_lr0.1"]


def test_best_reads_the_peak_in_the_tags_direction(runs):
    assert sorted(kept("best:val/accuracy>=0.9", runs)) == ["resnet_lr0.1", "vit_lr0.1"]
    # A loss's best is its lowest point: the diverged run was low before it went NaN.
    assert "diverged" in kept("best:train/loss<0.4", runs)


def test_a_run_that_ended_nan_fails_every_final_condition(runs):
    assert "diverged" not in kept("final:train/loss<100", runs)
    assert "diverged" not in kept("train/loss!=0", runs)


def test_a_role_or_a_unique_suffix_names_the_tag(runs):
    assert sorted(kept("loss<0.3", runs)) == ["resnet_lr0.1", "vit_lr0.1"]  # the headline loss
    assert sorted(kept("resnet accuracy>0.84", runs)) == ["resnet_lr0.01", "resnet_lr0.1"]


def test_an_ambiguous_suffix_says_which_tags_it_fits(runs):
    with pytest.raises(FilterError, match=r"accuracy matches several tags of vit_lr0\.1 \(train/accuracy, val/"):
        kept("accuracy>0.5", runs)


def test_top_and_bottom_rank_in_the_tags_direction_best_first(runs):
    assert kept("top 2 by best:val/accuracy", runs) == ["resnet_lr0.1", "vit_lr0.1"]
    assert kept("top 2 by train/loss", runs) == ["resnet_lr0.1", "vit_lr0.1"]  # lowest loss is best
    assert kept("bottom 1 by val/accuracy", runs) == ["diverged"]
    assert kept("resnet top 1 by val/accuracy", runs) == ["resnet_lr0.1"]


@pytest.mark.parametrize(
    "text, says",
    [
        ("val/acc>", "expected TAG>NUMBER"),
        ("val/acc>>0.9", "expected TAG>NUMBER"),
        ("top ten by loss", "N must be a whole number"),
        ("top 3 loss", "expected `top N by TAG`"),
        ("top 3 by loss bottom 2 by loss", "only one"),
        ("[unclosed", "not a valid regex"),
        ("worst:loss<1", "'worst' is not best, final or last"),
    ],
)
def test_a_bad_expression_gets_one_line_saying_what_is_wrong(text, says):
    with pytest.raises(FilterError, match=None) as caught:
        parse_filter(text)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_a_tag_no_run_has_is_an_error_not_an_empty_list(runs):
    with pytest.raises(FilterError, match="no run has a tag 'val/acc'"):
        kept("val/acc>0.9", runs)
