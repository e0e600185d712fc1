"""The model pipeline on its own, no app and no command: a run's findings in, a grounded explanation out.

The model is the tests' tiny random-weight llama: its words are gibberish, so these tests assert on
what the pipeline does with them (streams, stops, grounds, warns, declines), never on what it says.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tbtriage.analysis import llm
from tbtriage.analysis.explain import (
    NO_DATA,
    NO_FINDINGS,
    ONLY_NOTES,
    ExplainSession,
    fence_closer,
    nothing_to_explain,
    parameters_text,
)
from tbtriage.analysis.gguf_check import check_gguf
from tests._llm_data import blowup_report
from tests._report_data import finding, loss_curve, make_report
from tests.tiny_gguf import build_tiny_gguf


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return build_tiny_gguf(tmp_path_factory.mktemp("models") / "tiny-random-llama.gguf")


def settings_for(path: Path, **kw) -> llm.Settings:
    return llm.Settings(llm.ModelChoice(path, "--model"), threads=1, **kw)


def test_a_run_that_blew_up_gets_a_streamed_grounded_explanation(tiny_model):
    pytest.importorskip("llama_cpp")
    settings = settings_for(tiny_model, n_ctx=1792)  # a runner no other test shares: it starts cold
    session = ExplainSession(blowup_report(), settings=settings, lang="en", max_tokens=60)
    chunks: list[str] = []
    explanation = session.run(on_chunk=chunks.append)
    # Load time is the session's figure (the prompt's token count already needs the model loaded).
    assert explanation.load_s > 0
    assert ExplainSession(blowup_report(), settings=settings, max_tokens=8).run().load_s == 0.0  # loaded once
    assert len(chunks) > 5 and explanation.text == "".join(chunks).strip()
    assert explanation.model.label == "tiny-random-llama" and explanation.lang == "en"
    assert explanation.stats.finish_reason in ("stop", "length") and explanation.stats.completion_tokens <= 60
    assert explanation.prompt.tokens <= explanation.prompt.budget
    # Every number it wrote was held against what the prompt showed, and the result is one line.
    assert explanation.grounding is not None and explanation.grounding_summary
    assert "\n" not in explanation.grounding_summary
    assert not explanation.warnings  # the file carries its chat template
    # The note names the model's real size, read from its tensors, not a guess from the file size.
    size = parameters_text(check_gguf(tiny_model).parameter_count)
    assert f"A small model (~{size} parameters) gives hints" in explanation.note and size.endswith("M")


def test_a_json_explanation_names_only_findings_it_was_shown_and_cites_only_steps_shown(tiny_model):
    pytest.importorskip("llama_cpp")
    session = ExplainSession(blowup_report(), settings=settings_for(tiny_model), mode="json")
    explanation = session.run()
    assert explanation.answer is not None and explanation.answer_error is None
    assert {"divergence", "exploding_gradients"} <= explanation.prompt.evidence.causes
    # The random model writes gibberish, yet its causes and cited steps are grounded: the grammar let it
    # choose only among what the prompt showed.
    chosen = [c for c in explanation.grounding.claims if c.kind == "cause" or c.where.count("evidence_steps")]
    assert len(chosen) >= len(explanation.answer.causes) and all(c.supported for c in chosen)


def test_cancelling_keeps_what_was_written_and_says_it_was_stopped(tiny_model):
    pytest.importorskip("llama_cpp")
    session = ExplainSession(blowup_report(), settings=settings_for(tiny_model), max_tokens=300)
    cancel = threading.Event()
    seen: list[str] = []

    def on_chunk(piece: str) -> None:
        seen.append(piece)
        if len(seen) == 5:
            cancel.set()

    explanation = session.run(on_chunk=on_chunk, cancel=cancel)
    assert explanation.cancelled and len(seen) == 5 and explanation.text == "".join(seen).strip()
    assert explanation.stats.completion_tokens < 20


def test_a_healthy_run_and_an_empty_one_are_never_sent_to_the_model(tiny_model):
    pytest.importorskip("llama_cpp")
    # A context size no other test uses: the shared runner for these settings is this test's alone.
    settings = settings_for(tiny_model, n_ctx=1536)
    healthy = make_report("healthy", {"train/loss": ("train_loss", loss_curve())})
    empty = make_report("empty", {})
    noted = make_report(
        "noted",
        {"train/loss": ("train_loss", loss_curve())},
        [finding("noted", "plateau", "info", 300)],
    )
    for report, why in ((healthy, NO_FINDINGS), (empty, NO_DATA), (noted, ONLY_NOTES)):
        assert nothing_to_explain(report) == why
        explanation = ExplainSession(report, settings=settings).run()
        assert explanation.nothing_to_explain == why and explanation.text == "" and explanation.stats is None
    assert not llm.get_runner(settings).loaded, "the model was loaded for a run with nothing to explain"


def test_a_base_model_without_a_chat_template_gets_one_warning_and_a_plain_prompt(tmp_path):
    pytest.importorskip("llama_cpp")
    base = build_tiny_gguf(tmp_path / "tiny-base.gguf", chat_template=False, finetune="base")
    info = check_gguf(base)
    assert info.says_base_model and not info.has_chat_template
    assert llm.fallback_template(info) == llm.PLAIN_TEMPLATE  # it never saw ChatML's markers
    session = ExplainSession(blowup_report(), settings=settings_for(base), max_tokens=30)
    explanation = session.run()
    (warning,) = explanation.warnings
    assert warning.startswith(str(base)) and "base model (base), not instruction-tuned" in warning
    assert "no chat template: a plain-text prompt is used (best effort)" in warning and "\n" not in warning
    assert explanation.text, "the best-effort prompt still gets an answer"


def test_an_instruct_model_without_a_chat_template_is_run_with_chatml_and_a_warning(tmp_path):
    bare = build_tiny_gguf(tmp_path / "tiny-instruct.gguf", chat_template=False, finetune="Instruct")
    info = check_gguf(bare)
    assert not info.says_base_model and llm.fallback_template(info) == llm.CHATML_TEMPLATE
    assert "no chat template: ChatML is used (best effort)" in llm.template_warning(info)
    assert llm.template_warning(check_gguf(build_tiny_gguf(tmp_path / "ok.gguf"))) is None


@pytest.mark.parametrize(
    "text, closer",
    [
        ("**Cause**: lr.\n```python\ndef f():\n    raise ValueError", "\n```\n"),
        ("```\ncode\n```\nprose", ""),
        ("~~~~\nx\n~~~\nstill open\n", "~~~~\n"),  # a shorter fence does not close a longer one
        ("```\nx\n```python\n", "```\n"),  # a fence with an info string only opens
        ("no fences at all", ""),
    ],
)
def test_a_code_fence_the_answer_leaves_open_is_closed(text, closer):
    assert fence_closer(text) == closer


def test_the_grounding_line_comes_after_a_closed_fence(tiny_model):
    pytest.importorskip("llama_cpp")
    session = ExplainSession(blowup_report(), settings=settings_for(tiny_model))
    session.find_model()
    session.build_prompt()
    # What SmolLM2 once wrote in Markdown mode: a made-up function with an unclosed fence.
    explanation = session.finish("**Cause**: step 1234.\n```python\ndef train():\n    loss = nan")
    assert explanation.marked_text.endswith("loss = nan\n```\n")
    assert "step 1234 ⚠(unsupported)" in explanation.marked_text
    assert explanation.fence_closer == "\n```\n"


def test_with_the_engines_causes_shown_a_json_answer_chooses_among_those_causes(tiny_model):
    """The model's job is to choose among the engine's ranked causes and explain; the grammar holds it to them."""
    from dataclasses import replace

    from tbtriage.analysis.causes import CAUSES, Cause

    pytest.importorskip("llama_cpp")
    report = blowup_report()
    ranked = (
        Cause("no_grad_clipping", CAUSES["no_grad_clipping"].summary, 0.8,
              {"for": ["train/grad_norm leapt ×124 within 3 logged steps of step 1180"]}, "clip"),
        Cause("lr_too_high", CAUSES["lr_too_high"].summary, 0.4, {}, "lower the lr"),
    )  # fmt: skip
    report.findings = [replace(f, causes=ranked) if f.severity == "critical" else f for f in report.findings]
    explanation = ExplainSession(report, settings=settings_for(tiny_model), mode="json").run()
    assert "likely cause: no_grad_clipping (0.80): train/grad_norm leapt ×124" in explanation.prompt.user
    assert explanation.prompt.evidence.causes == {"no_grad_clipping", "lr_too_high"}
    assert explanation.answer is not None
    assert {c.cause for c in explanation.answer.causes} <= {"no_grad_clipping", "lr_too_high", "other", "unclear"}
