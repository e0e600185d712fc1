"""Hold the model's answer against the evidence it was given.

A small model writes fluent numbers whether or not they exist. After the answer, every step it
cites and every value it quotes is looked up in the prompt's `Evidence` (the exact steps and the
rounded values the model was shown). What is not there is an unsupported claim: listed in JSON
(`unsupported_claims`) and marked in Markdown. The rules' findings stay the ground truth.

What counts as a claim:
- a step: a number after "step", "steps", "iteration", "@", "第", "步骤" (and the numbers chained
  to it by ",", "and", "-", "to", "至"), e.g. "step 1210", "steps 1190-1210", "第 1210 步";
- a value: any other number, except list markers, small counts (<= SMALL_COUNT) and numbers
  inside a recommendation (a fix proposes new values; it does not quote old ones);
- in a JSON answer, each `cause`: it must name one of the finding kinds the model was shown, or
  admit it does not know (OPEN_CAUSES). Otherwise `"cause": "c"` would cite no number and pass.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .llm_answer import OPEN_CAUSES
from .prompt import Evidence

#: Integers up to this are counts and ordinals ("3 spikes", "2 causes"), not quotes of the data.
SMALL_COUNT = 10
#: A quoted value may be rounded: within this relative distance of a shown value it is supported.
VALUE_REL_TOL = 0.02
#: With "about", "~", "约" a value may be rounded harder.
APPROX_REL_TOL = 0.10
#: With "about", "~", "约" a step may be off by this fraction of the run's length.
APPROX_STEP_TOL = 0.01
#: "100x" claims are checked against ratios of shown values, loosely: ratios are always rounded.
RATIO_REL_TOL = 0.15

_NUMBER = re.compile(
    r"(?<![A-Za-z0-9_.])(?P<num>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?)"
    r"(?P<suffix>%|×|x(?![A-Za-z0-9_]))?(?![A-Za-z0-9_])"
)
_STEP_BEFORE = re.compile(r"(?:\bsteps?|\biter(?:ation)?s?|\bstep\s*#|@|第|步骤|步)\s*[#:=]?\s*$", re.IGNORECASE)
_CHAIN = re.compile(r"^\s*(?:,|，|、|and|&|or|-|–|—|~|to|through|至|到|和|与)\s*(?:steps?\s*)?$", re.IGNORECASE)
_APPROX_BEFORE = re.compile(
    r"(?:~|≈|about|around|approx(?:imately)?\.?|roughly|nearly|almost|some|over|above|below|under|"
    r"more than|less than|约|大约|近|超过|左右)\s*(?:steps?\s*|第\s*)?$",
    re.IGNORECASE,
)
_LIST_MARKER = re.compile(r"^\s*(?:[-*]\s*)?$")
# A recommendation: the numbers in it are proposals, not quotes.
_ADVICE = re.compile(
    r"\b(?:set|use|using|reduce|lower|decrease|increase|raise|try|clip(?:ping)?|cap|add|enable|switch|"
    r"change|tighten|scale|limit|warm\s*up|warmup|schedule|recommend|suggest|consider|should|could)\b|"
    r"建议|设置|设为|降低|调低|调高|提高|减小|增大|改为|使用|裁剪|尝试|应该|可以",
    re.IGNORECASE,
)
_FIX_HEADING = re.compile(r"fix|remed|recommend|suggest|change|action|修复|建议|改动|调整|措施", re.IGNORECASE)
_HEADING = re.compile(r"^\s*(?:#{1,6}\s|\*\*[^*]+\*\*\s*[:：]?|[A-Za-z\u4e00-\u9fff ]{2,30}[:：]\s*$)")
_SENTENCE_END = re.compile(r"[.!?。！？;；\n]")


@dataclass(frozen=True)
class Claim:
    text: str  # as written in the answer
    kind: str  # "step", "value" or "cause"
    value: float | None  # None for a cause
    start: int  # span in the checked text
    end: int
    supported: bool
    where: str = ""  # for JSON answers: which field ("summary", "causes[0].cause", ...)
    reason: str = ""  # why it is unsupported

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "kind": self.kind, "value": self.value, "where": self.where, "reason": self.reason}


@dataclass(frozen=True)
class Grounding:
    claims: tuple[Claim, ...]

    @property
    def unsupported(self) -> tuple[Claim, ...]:
        return tuple(c for c in self.claims if not c.supported)

    @property
    def supported(self) -> tuple[Claim, ...]:
        return tuple(c for c in self.claims if c.supported)

    def to_json(self) -> list[dict[str, Any]]:
        return [c.to_dict() for c in self.unsupported]


def _parse(num: str) -> float:
    return float(num.replace(",", ""))


def _half_unit(num: str) -> float:
    """Half the value of the last written digit: what rounding to the written precision allows."""
    mantissa, _, exp = num.replace(",", "").lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10.0 ** (-decimals + (int(exp) if exp else 0))


def _advice_spans(text: str) -> list[tuple[int, int]]:
    """Spans of `text` that recommend rather than report: fix sections and sentences with advice verbs."""
    spans = []
    pos, in_fix = 0, False
    for line in text.splitlines(keepends=True):
        if _HEADING.match(line):
            in_fix = bool(_FIX_HEADING.search(line.split(":")[0].split("：")[0]))
        if in_fix:
            spans.append((pos, pos + len(line)))
        pos += len(line)
    start = 0
    for m in _SENTENCE_END.finditer(text + "\n"):
        sentence = text[start : m.end()]
        if _ADVICE.search(sentence):
            spans.append((start, m.end()))
        start = m.end()
    return spans


def _in(spans: list[tuple[int, int]], at: int) -> bool:
    return any(a <= at < b for a, b in spans)


def _value_supported(value: float, num: str, suffix: str, approx: bool, shown: list[float]) -> bool:
    candidates = [value] + ([value / 100.0] if suffix == "%" else [])
    tol_rel = APPROX_REL_TOL if approx else VALUE_REL_TOL
    unit = _half_unit(num)
    for c in candidates:
        unit_c = unit / 100.0 if c is not value else unit
        for v in shown:
            if abs(abs(v) - c) <= max(unit_c, tol_rel * abs(v)) + 1e-12:
                return True
    return False


def _ratio_supported(value: float, shown: list[float]) -> bool:
    """A quoted ratio ("124x") or one that follows from two shown values (149 / 1.2)."""
    finite = sorted({abs(v) for v in shown if v and math.isfinite(v)})
    if any(abs(v - value) <= RATIO_REL_TOL * value for v in finite):
        return True
    for i, small in enumerate(finite):
        for big in finite[i + 1 :]:
            if abs(big / small - value) <= RATIO_REL_TOL * value:
                return True
    return False


def check_text(text: str, evidence: Evidence, *, where: str = "", advice: bool = False) -> Grounding:
    """Every step and value `text` cites, each marked supported or not by `evidence`.

    `advice=True` treats the whole text as a recommendation: only its step citations are checked.
    """
    shown = list(evidence.values) + [float(s) for s in evidence.steps]
    span = None
    if evidence.first_step is not None and evidence.last_step is not None:
        span = max(1, evidence.last_step - evidence.first_step)
    advice_spans = [(0, len(text))] if advice else _advice_spans(text)
    claims: list[Claim] = []
    previous_step_end = -1
    for m in _NUMBER.finditer(text):
        num, suffix = m["num"], m["suffix"] or ""
        value = _parse(num)
        before = text[max(0, m.start() - 16) : m.start()]
        line_start = text.rfind("\n", 0, m.start()) + 1
        approx = bool(_APPROX_BEFORE.search(before))
        chained = previous_step_end >= 0 and bool(_CHAIN.match(text[previous_step_end : m.start()]))
        is_step = not suffix and float(value).is_integer() and (bool(_STEP_BEFORE.search(before)) or chained)
        if is_step:
            previous_step_end = m.end()
            step = int(value)
            ok = step in evidence.steps
            if not ok and approx and span:
                ok = any(abs(step - s) <= APPROX_STEP_TOL * span for s in evidence.steps)
            reason = "" if ok else f"step {step} is not in the evidence"
            if not ok and evidence.last_step is not None and step > evidence.last_step:
                reason = f"step {step} is past the run's last step {evidence.last_step}"
            claims.append(Claim(m.group(0), "step", float(step), m.start(), m.end(), ok, where, reason))
            continue
        previous_step_end = -1
        if _LIST_MARKER.match(text[line_start : m.start()]) and text[m.end() : m.end() + 1] in (".", ")"):
            continue
        if not suffix and value.is_integer() and value <= SMALL_COUNT and "." not in num:
            continue
        if _in(advice_spans, m.start()):
            continue
        if suffix in ("x", "×"):
            ok = _ratio_supported(value, list(evidence.values))
        else:
            ok = _value_supported(value, num, suffix, approx, shown)
        reason = "" if ok else f"{m.group(0)} matches no value in the evidence"
        claims.append(Claim(m.group(0), "value", value, m.start(), m.end(), ok, where, reason))
    return Grounding(tuple(claims))


def cause_id(text: str) -> str:
    """A cause as written ("Exploding gradients", "exploding-gradients") in the registry's spelling."""
    return "_".join(re.findall(r"[a-z0-9]+", text.lower()))


def _cause_claim(text: str, evidence: Evidence, where: str) -> Claim:
    allowed = evidence.causes | set(OPEN_CAUSES)
    ok = cause_id(text) in allowed
    reason = "" if ok else f"names no cause shown ({', '.join(sorted(allowed))})"
    return Claim(text, "cause", None, 0, 0, ok, where, reason)


def check_answer(answer: Mapping[str, Any], evidence: Evidence) -> Grounding:
    """Claims of a JSON answer ({summary, causes: [{cause, explanation, confidence, evidence_steps,
    evidence_values, fixes}]})."""
    claims: list[Claim] = list(check_text(str(answer.get("summary", "")), evidence, where="summary").claims)
    for i, cause in enumerate(answer.get("causes", [])):
        claims.append(_cause_claim(str(cause.get("cause", "")), evidence, f"causes[{i}].cause"))
        claims += check_text(str(cause.get("cause", "")), evidence, where=f"causes[{i}].cause").claims
        explanation = str(cause.get("explanation", ""))
        claims += check_text(explanation, evidence, where=f"causes[{i}].explanation").claims
        for j, step in enumerate(cause.get("evidence_steps", [])):
            ok = isinstance(step, int) and step in evidence.steps
            reason = "" if ok else f"step {step} is not in the evidence"
            where = f"causes[{i}].evidence_steps[{j}]"
            claims.append(Claim(str(step), "step", float(step), 0, 0, ok, where, reason))
        for j, value in enumerate(cause.get("evidence_values", [])):
            ok = isinstance(value, (int, float)) and float(value) in evidence.values
            reason = "" if ok else f"{value} is not in the evidence"
            where = f"causes[{i}].evidence_values[{j}]"
            claims.append(Claim(str(value), "value", float(value), 0, 0, ok, where, reason))
        for j, fix in enumerate(cause.get("fixes", [])):
            claims += check_text(str(fix), evidence, where=f"causes[{i}].fixes[{j}]", advice=True).claims
    return Grounding(tuple(claims))


#: Appended to an unsupported claim in Markdown: visible in a terminal and in the Markdown widget.
UNSUPPORTED_MARK = " ⚠(unsupported)"


def mark_unsupported(text: str, grounding: Grounding, mark: str = UNSUPPORTED_MARK) -> str:
    """`text` with `mark` after each unsupported claim (claims must come from `check_text(text, ...)`)."""
    out, pos = [], 0
    for claim in sorted(grounding.unsupported, key=lambda c: c.start):
        if claim.end <= pos or claim.where:
            continue
        out.append(text[pos : claim.end])
        out.append(mark)
        pos = claim.end
    out.append(text[pos:])
    return "".join(out)


def summarize(grounding: Grounding) -> str:
    """One line on how the answer held up, for the pane and the command (each lists the claims after it)."""
    checked, bad = len(grounding.claims), len(grounding.unsupported)
    what = (
        "cited causes, steps and values"
        if any(c.kind == "cause" for c in grounding.claims)
        else "cited steps and values"
    )
    if not checked:
        return "the answer cites no steps or values to check."
    if not bad:
        return f"all {checked} {what} are in the evidence."
    return f"{bad} of {checked} {what} are not in the evidence:"
