"""The model's answer is held against the evidence it was shown: invented steps and numbers are caught."""

from __future__ import annotations

from tbtriage.analysis.grounding import UNSUPPORTED_MARK, check_answer, check_text, mark_unsupported, summarize
from tbtriage.analysis.prompt import Evidence, build_prompt
from tests._llm_data import BLOWUP_STEP, GRAD_RISE_STEP, LAST_STEP, blowup_report

EVIDENCE = Evidence(
    steps=frozenset({0, 1180, 1190, 1200, 1210, 1220, LAST_STEP}),
    values=(1.2, 149.0, 124.0, 0.003, 0.572, 17.5, 256.0),
    first_step=0,
    last_step=LAST_STEP,
    causes=frozenset({"divergence", "exploding_gradients"}),
)


def unsupported_texts(text: str, evidence: Evidence = EVIDENCE) -> list[str]:
    return [c.text for c in check_text(text, evidence).unsupported]


def test_an_invented_step_is_flagged_and_a_cited_real_step_is_not():
    g = check_text("The loss exploded at step 1234, right after grad_norm jumped at step 1210.", EVIDENCE)
    steps = {int(c.value): c.supported for c in g.claims if c.kind == "step"}
    assert steps == {1234: False, 1210: True}
    assert "1234" in g.unsupported[0].reason


def test_a_step_past_the_end_of_the_run_says_so():
    (claim,) = check_text("It diverged at step 5000.", EVIDENCE).unsupported
    assert "past the run's last step" in claim.reason


def test_every_step_of_a_range_or_list_is_checked():
    assert unsupported_texts("grad_norm climbed over steps 1180-1210 and again at steps 1190, 1300") == ["1300"]
    assert unsupported_texts("between step 1180 to 1777") == ["1777"]


def test_chinese_step_citations_are_checked_too():
    assert unsupported_texts("第 1234 步出现 NaN，第1210步梯度爆炸。") == ["1234"]


def test_quoted_values_match_the_shown_values_up_to_rounding():
    assert unsupported_texts("grad_norm went from 1.2 to 148.6 (about 150), a 124x jump") == []
    assert unsupported_texts("grad_norm reached 350 while the loss was 0.9") == ["350", "0.9"]


def test_a_ratio_is_supported_by_the_shown_values_it_follows_from():
    # 149 / 1.2 = 124: a derived "120x" is fine, an invented "1000x" is not.
    assert unsupported_texts("grad_norm rose 120x") == []
    assert unsupported_texts("grad_norm rose 1000x") == ["1000x"]


def test_recommended_values_are_proposals_not_quotes():
    text = (
        "**Cause**: gradient explosion at step 1210.\n"
        "**Fixes**:\n- clip the gradient norm at 1.0\n- warm up over the first 500 steps\n- lr 0.0003\n"
    )
    assert unsupported_texts(text) == []
    assert unsupported_texts("Reduce the learning rate to 1e-4 and set weight decay 0.05.") == []


def test_but_an_invented_step_inside_a_fix_is_still_flagged():
    assert unsupported_texts("**Fixes**: restart from the checkpoint at step 777.") == ["777"]


def test_list_markers_and_small_counts_are_not_claims():
    assert check_text("1. Two spikes, 3 times.\n2) See above.", EVIDENCE).claims == ()


def test_unsupported_claims_are_marked_in_the_markdown():
    text = "Exploded at step 1234 after step 1210."
    marked = mark_unsupported(text, check_text(text, EVIDENCE))
    assert marked == f"Exploded at step 1234{UNSUPPORTED_MARK} after step 1210."


def test_json_answers_check_evidence_steps_and_texts_but_not_fix_values():
    answer = {
        "summary": "Gradient explosion at step 1210 with grad_norm 149.",
        "causes": [
            {
                "cause": "lr too high, loss 7.5 at step 999",
                "explanation": "grad_norm rose 124x from step 1180, then step 1215 went NaN",
                "confidence": "high",
                "evidence_steps": [1210, 4242],
                "fixes": ["clip at 1.0", "lr 1e-4 from step 1210"],
            },
        ],
    }
    g = check_answer(answer, EVIDENCE)
    bad = sorted((c.where, c.text) for c in g.unsupported)
    assert bad == [
        ("causes[0].cause", "7.5"),
        ("causes[0].cause", "999"),
        ("causes[0].cause", "lr too high, loss 7.5 at step 999"),  # and it names no finding it was shown
        ("causes[0].evidence_steps[1]", "4242"),
        ("causes[0].explanation", "1215"),  # the free text is checked like the summary
    ]
    assert {c.to_dict()["where"] for c in g.unsupported} == {
        "causes[0].cause",
        "causes[0].evidence_steps[1]",
        "causes[0].explanation",
    }


def test_the_evidence_is_exactly_what_the_prompt_showed():
    report = blowup_report()
    windows = {"train/grad_norm": [(s, 1.2 if s < GRAD_RISE_STEP else 40.0) for s in range(1160, 1270, 10)]}
    prompt = build_prompt(report, budget=1200, windows_for=lambda step: windows)
    assert BLOWUP_STEP in prompt.evidence.steps and GRAD_RISE_STEP in prompt.evidence.steps
    # A step the prompt showed is supported, one it never showed is not, even inside the run.
    assert unsupported_texts(f"NaN from step {BLOWUP_STEP}", prompt.evidence) == []
    assert unsupported_texts("NaN from step 1215", prompt.evidence) == ["1215"]


def test_numbers_in_a_finding_message_the_model_was_shown_are_evidence():
    report = blowup_report(n_findings=2)
    prompt = build_prompt(report, budget=400, windows_for=lambda step: {})
    assert "grad_norm rose 124x above its baseline" in prompt.user
    # "124x" is quoted from the message itself; 1180 and 1210 come from the headline's steps.
    assert unsupported_texts("grad_norm rose 124x between step 1180 and step 1210", prompt.evidence) == []


def unsupported_causes(cause: str) -> list[str]:
    answer = {"summary": "s", "causes": [{"cause": cause, "confidence": "low", "evidence_steps": [], "fixes": []}]}
    return [c.text for c in check_answer(answer, EVIDENCE).unsupported if c.kind == "cause"]


def test_a_json_cause_that_cites_no_number_still_has_to_name_a_finding_it_was_shown():
    # The answers a 135M model really gave: a letter, a number, a severity. None is grounded.
    for invented in ("c", "1", "critical", "best", "overfitting"):  # overfitting: a kind, but not in this run
        assert unsupported_causes(invented) == [invented], invented
    # A finding it was shown, however it spells it, or an honest "don't know", is grounded.
    for named in (
        "exploding_gradients",
        "Exploding gradients",
        "exploding-gradients",
        "divergence",
        "unclear",
        "Other",
    ):
        assert unsupported_causes(named) == [], named
    answer = {"summary": "s", "causes": [{"cause": "c", "confidence": "high", "evidence_steps": [], "fixes": []}]}
    (claim,) = check_answer(answer, EVIDENCE).unsupported
    assert claim.reason == "names no cause shown (divergence, exploding_gradients, other, unclear)"
    assert summarize(check_answer(answer, EVIDENCE)) == "1 of 1 cited causes, steps and values are not in the evidence:"


def test_the_causes_a_json_answer_may_name_are_the_findings_the_prompt_kept():
    report = blowup_report()
    prompt = build_prompt(report, budget=1200, windows_for=lambda step: {})
    shown = {f.kind for f in report.findings if f"] {f.kind}" in prompt.user}
    assert {"divergence", "exploding_gradients"} <= shown and prompt.evidence.causes == shown
    tight = build_prompt(report, budget=200, windows_for=lambda step: {})
    assert tight.evidence.causes < shown, "a finding the budget dropped is not a cause the model may name"


def test_a_json_answers_cited_values_must_be_values_it_was_shown():
    shown = EVIDENCE.values[0]
    cause = {"cause": "divergence", "confidence": "low", "evidence_steps": [], "fixes": [], "explanation": "x"}
    answer = {"summary": "s", "causes": [{**cause, "evidence_values": [shown, 123456.5]}]}
    g = check_answer(answer, EVIDENCE)
    (bad,) = [c for c in g.unsupported if c.kind == "value"]
    assert bad.where == "causes[0].evidence_values[1]" and bad.reason == "123456.5 is not in the evidence"
    assert [c for c in g.claims if c.kind == "value" and c.supported][0].value == shown
