"""The engine's "why": each finding's candidate causes, ranked by the run's own evidence, on really trained runs.

The runs come from `train_mlp` (a real numpy MLP trained with SGD + momentum): every pathology is caused by a
configuration, and the test holds the engine's top cause to that configuration.
"""

from __future__ import annotations

import pytest

from tbtriage.analysis.causes import CANDIDATES, CAUSES, Cause, rank_causes
from tbtriage.analysis.engine import analyze_run
from tbtriage.analysis.findings import FINDING_KINDS
from tests._engine_data import train_mlp


def _worst(report, kind):
    found = [f for f in report.findings if f.kind == kind and f.severity != "info"]
    assert found, f"no {kind} in {[(f.kind, f.severity) for f in report.findings]}"
    return found[0]


def test_every_candidate_names_a_cause_in_the_library_and_a_known_kind():
    assert set(CANDIDATES) <= set(FINDING_KINDS)
    for kind, priors in CANDIDATES.items():
        assert priors and set(priors) <= set(CAUSES), kind
        assert all(0 < p < 1 for p in priors.values()), kind
    assert all(row.summary and row.fix for row in CAUSES.values())


def test_a_learning_rate_that_keeps_rising_is_named_as_the_cause_of_the_divergence():
    run = train_mlp(0, lr=0.2, schedule="uncapped_warmup", epochs=3, n_train=6000)
    finding = _worst(analyze_run(run), "divergence")
    top = finding.causes[0]
    assert top.cause == "lr_schedule_unbounded" and top.confidence >= 0.7
    said = " ".join(top.evidence["for"])
    assert "train/lr rose every step" in said and f"by step {finding.step}" in said
    assert top.evidence["lr_growth"] >= 20


def test_an_absurd_constant_learning_rate_is_too_high_not_a_missing_warmup():
    run = train_mlp(0, lr=8.0, schedule="constant", epochs=2, n_train=4000)
    causes = _worst(analyze_run(run), "divergence").causes
    assert causes[0].cause == "lr_too_high"
    assert causes[0].confidence > next(c.confidence for c in causes if c.cause == "no_warmup")


def test_a_tiny_learning_rate_explains_a_run_that_does_not_learn():
    run = train_mlp(0, lr=1e-6, schedule="constant", epochs=6, n_train=4000)
    top = _worst(analyze_run(run), "no_learning").causes[0]
    assert top.cause == "lr_too_low" and "1e-06" in " ".join(top.evidence["for"])


@pytest.mark.parametrize("logged", [False, True], ids=["no_hparams", "weight_decay_logged"])
def test_overfitting_on_small_data_is_blamed_on_missing_regularisation_more_so_when_the_run_says_so(logged):
    settings = {"n_train": 300, "epochs": 120, "batch": 32, "hidden": 256, "label_noise": 0.3, "weight_decay": 0.0}
    run = train_mlp(0, **settings)
    if logged:
        run.hparams.update({"weight_decay": 0.0, "dropout": 0.0})
    top = _worst(analyze_run(run), "overfitting").causes[0]
    assert top.cause == "insufficient_regularization"
    if logged:
        assert "the run logged weight_decay=0.0" in top.evidence["for"] and top.confidence >= 0.7


def test_logged_clipping_counts_against_missing_clipping():
    run = train_mlp(0, lr=0.2, schedule="uncapped_warmup", epochs=3, n_train=6000)
    finding = _worst(analyze_run(run), "divergence")
    run.hparams["max_grad_norm"] = 1.0
    clipped = {c.cause: c for c in rank_causes(finding, *_data_and_hparams(run))}
    run.hparams["max_grad_norm"] = 0.0
    unclipped = {c.cause: c for c in rank_causes(finding, *_data_and_hparams(run))}
    assert clipped["no_grad_clipping"].confidence < unclipped["no_grad_clipping"].confidence
    assert "the run logged max_grad_norm=1.0: gradients are clipped" in clipped["no_grad_clipping"].evidence["against"]


def test_with_nothing_but_the_loss_the_answer_is_unclear_not_a_guess():
    run = train_mlp(0, lr=8.0, schedule="constant", epochs=2, n_train=4000)
    for tag in ("train/lr", "train/grad_norm", "act/relu_zero_frac"):
        del run.scalars[tag]
    causes = _worst(analyze_run(run), "divergence").causes
    assert causes[0].cause == "unclear" and "candidates:" in causes[0].summary
    assert all(isinstance(c, Cause) for c in causes) and len({c.cause for c in causes}) == len(causes)


def test_which_signal_moved_first_is_stated_with_steps():
    run = train_mlp(0, lr=0.2, schedule="uncapped_warmup", epochs=3, n_train=6000)
    finding = _worst(analyze_run(run), "exploding_gradients")
    moved = finding.causes[0].evidence["moved_first"]
    steps = [step for step, _tag in moved]
    assert steps == sorted(steps) and {"train/loss", "train/grad_norm"} <= {tag for _step, tag in moved}
    assert all(step <= finding.step for step in steps)
    chain = finding.causes[0].evidence["chain"]
    assert chain.startswith("train/lr rose every step since 1") and "train/grad_norm left its range at" in chain


def _data_and_hparams(run):
    """The RunData the engine builds for `run`, and the run's hparams (to re-rank one finding by hand)."""
    from tbtriage.analysis import engine

    captured = {}
    original = engine.rank_causes

    def capture(finding, data, hparams):
        captured["data"] = data
        return original(finding, data, hparams)

    engine.rank_causes = capture
    try:
        analyze_run(run)
    finally:
        engine.rank_causes = original
    return captured["data"], dict(run.hparams)


def _named(name, run, **hparams):
    run.name = name
    run.hparams.update(hparams)
    return run


def test_a_healthy_twin_that_differs_only_in_lr_makes_lr_the_cause_and_says_where_the_curves_part():
    from tbtriage.analysis.twins import attach_twins

    sick = _named("mlp_a", train_mlp(0, lr=0.5, schedule="constant", epochs=2, n_train=4000), lr=0.5, seed=0)
    well = _named("mlp_b", train_mlp(1, lr=0.05, schedule="constant", epochs=2, n_train=4000), lr=0.05, seed=1)
    other = _named("mlp_c", train_mlp(2, lr=0.05, schedule="constant", epochs=2, n_train=4000), lr=0.05, depth=9, wd=1)
    reports = [analyze_run(run) for run in (sick, well, other)]
    (sick_finding,) = [f for f in reports[0].findings if f.severity != "info"][:1]
    before = sick_finding.causes
    attach_twins(reports)
    after = _worst(reports[0], sick_finding.kind).causes
    top = after[0]
    assert top.cause == "lr_too_high"
    assert top.confidence > next(c.confidence for c in before if c.cause == "lr_too_high")
    assert top.evidence["twin"]["run"] == "mlp_b" and top.evidence["twin"]["differs"] == {"lr": [0.5, 0.05]}
    assert isinstance(top.evidence["twin"]["parted_at"], int)
    assert any("the healthy twin mlp_b differs only in lr=0.5 here vs 0.05" in fact for fact in top.evidence["for"])
    assert not any(f.causes and "twin" in f.causes[0].evidence for f in reports[1].findings)
    # The twin had no warmup either: a missing warmup cannot be what sets the two apart.
    for cause in (c for c in after if c.cause == "no_warmup"):
        assert "the healthy twin mlp_b shares this configuration and trained fine" in cause.evidence["against"]


def test_run_names_that_differ_in_one_setting_token_are_twins_when_no_hparams_were_logged():
    from tbtriage.analysis.twins import find_twin

    sick = _named("gpt/lr0.5_bs64", train_mlp(0, lr=0.5, schedule="constant", epochs=2, n_train=4000))
    well = _named("gpt/lr0.05_bs64", train_mlp(1, lr=0.05, schedule="constant", epochs=2, n_train=4000))
    unrelated = _named("gpt/lr0.05_bs64_extra", train_mlp(2, lr=0.05, schedule="constant", epochs=2, n_train=4000))
    reports = [analyze_run(run) for run in (sick, well, unrelated)]
    twin = find_twin(reports[0], reports)
    assert twin is not None and twin.run == "gpt/lr0.05_bs64" and twin.differs == {"lr": (0.5, 0.05)}
    assert twin.source == "name"
