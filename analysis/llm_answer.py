"""The JSON answer: its schema, the decoding grammar that forces it, and its validation.

`{summary, causes: [{cause, explanation, confidence, evidence_steps, evidence_values, fixes}]}`.
llama-cpp-python turns the JSON schema into a GBNF grammar, so even a tiny model can only emit that shape,
and every citation is grounded by construction: `cause` is one of the engine's candidate causes the prompt
showed (or `other` / `unclear`), `evidence_steps` holds only steps and `evidence_values` only values the
prompt showed, and the free text (`summary`, `explanation`, `fixes`) cannot hold a digit, so a number can
only be cited through those two lists. One gap of the schema converter
(measured in 0.3.36) is closed here: its `char` rule lets raw control characters into strings (we
allow printable text only, and escapes that cannot spell a control character). Every length in the
schema is derived from the token budget so the worst-case answer still fits in `max_tokens`: a
cut-off answer cannot be parsed, and "JSON mode always parses" is the promise.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

CONFIDENCES = ("high", "medium", "low")
#: A small model has one to three things to say; more causes are guesses.
MAX_CAUSES = 3
MAX_FIXES = 2
MAX_EVIDENCE_STEPS = 3
MAX_EVIDENCE_VALUES = 3
#: Causes an answer may give besides the findings it was shown: the honest "none of those" and "don't know".
OPEN_CAUSES = ("other", "unclear")
#: Shares of the string budget: summary, each explanation, each fix (1 summary + 3 x (explanation + 2 fixes) < 1).
SUMMARY_SHARE, CAUSE_SHARE, FIX_SHARE = 0.20, 0.10, 0.08
#: Below this many characters a fix cannot say anything useful: ask for more tokens instead
#: (a CJK character carries about as much as a short English word).
MIN_FIX_CHARS = {"en": 24, "zh": 10}

#: Printable text a string may hold, without escapes: `\u` could spell a control character, `\n` would
#: break the one-line layout, and an escape costs two bytes in the worst-case budget below (the model
#: writes 'quotes' instead). English: printable ASCII but `"`, `\` and the digits (a number is cited only
#: through `evidence_steps`/`evidence_values`, where the grammar allows only what the prompt showed);
#: Chinese adds CJK ideographs and CJK/full-width punctuation without the full-width digits (3 bytes each).
_CHAR_RULES = {
    "en": r"""char ::= [ !#-/:-\[\]-~]""",
    "zh": r"""char ::= [ !#-/:-\[\]-~] | [\u3000-\u303F\u4E00-\u9FFF\uFF00-\uFF0F\uFF1A-\uFFEF]""",
}
_DIGIT = re.compile(r"[0-9\uFF10-\uFF19]")
#: The longest a single allowed character can be, in bytes (= tokens, in the worst case of byte-level tokens).
_CHAR_BYTES = {"en": 1, "zh": 3}


_CAUSE_FIELDS = ("cause", "explanation", "confidence", "evidence_steps", "evidence_values", "fixes")


class AnswerError(ValueError):
    """The decoded text is not a valid answer (only possible if decoding was cut off or bypassed)."""


@dataclass(frozen=True)
class AnswerLimits:
    summary_chars: int
    explanation_chars: int
    fix_chars: int
    causes: tuple[str, ...]  # what `cause` may be: the finding kinds shown, then OPEN_CAUSES
    steps: tuple[int, ...]  # what `evidence_steps` may hold: the steps shown
    values: tuple[float, ...] = ()  # what `evidence_values` may hold: the values shown


@dataclass(frozen=True)
class Cause:
    cause: str
    explanation: str
    confidence: str
    evidence_steps: tuple[int, ...]
    fixes: tuple[str, ...]
    evidence_values: tuple[float, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "cause": self.cause,
            "explanation": self.explanation,
            "confidence": self.confidence,
            "evidence_steps": list(self.evidence_steps),
            "evidence_values": list(self.evidence_values),
            "fixes": list(self.fixes),
        }


@dataclass(frozen=True)
class Answer:
    summary: str
    causes: tuple[Cause, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary, "causes": [c.to_dict() for c in self.causes]}


def answer_schema(limits: AnswerLimits) -> dict[str, Any]:
    def text(n: int) -> dict[str, Any]:
        return {"type": "string", "maxLength": n}

    # The cause is chosen first, then explained: the order in which the model writes them.
    cause = {
        "type": "object",
        "properties": {
            "cause": {"enum": list(limits.causes)},
            "explanation": text(limits.explanation_chars),
            "confidence": {"enum": list(CONFIDENCES)},
            "evidence_steps": {
                "type": "array",
                "maxItems": MAX_EVIDENCE_STEPS if limits.steps else 0,
                "items": {"enum": list(limits.steps) or [0]},  # an empty enum is no schema; maxItems 0 rules
            },
            "evidence_values": {
                "type": "array",
                "maxItems": MAX_EVIDENCE_VALUES if limits.values else 0,
                "items": {"enum": list(limits.values) or [0]},
            },
            "fixes": {"type": "array", "maxItems": MAX_FIXES, "items": text(limits.fix_chars)},
        },
        "required": ["cause", "explanation", "confidence", "evidence_steps", "evidence_values", "fixes"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "summary": text(limits.summary_chars),
            "causes": {"type": "array", "minItems": 1, "maxItems": MAX_CAUSES, "items": cause},
        },
        "required": ["summary", "causes"],
        "additionalProperties": False,
    }


def worst_case_tokens(limits: AnswerLimits, lang: str) -> int:
    """The most tokens the grammar lets an answer take (each token emits at least one byte)."""
    cb = _CHAR_BYTES[lang]
    longest_step = [max(limits.steps, key=lambda s: len(str(s)))] if limits.steps else []
    longest_value = [max(limits.values, key=lambda v: len(json.dumps(v)))] if limits.values else []
    longest = {
        "summary": "s" * limits.summary_chars * cb,
        "causes": [
            {
                "cause": max(limits.causes, key=len),
                "explanation": "e" * limits.explanation_chars * cb,
                "confidence": max(CONFIDENCES, key=len),
                "evidence_steps": longest_step * MAX_EVIDENCE_STEPS,
                "evidence_values": longest_value * MAX_EVIDENCE_VALUES,
                "fixes": ["f" * limits.fix_chars * cb] * MAX_FIXES,
            }
        ]
        * MAX_CAUSES,
    }
    compact = json.dumps(longest, separators=(",", ":"))
    # The grammar allows one optional space after every punctuation mark and every value.
    spaces = sum(compact.count(ch) for ch in "{}[]:,") + len(re.findall(r'"|-?\d[\d.eE+-]*', compact))
    return len(compact) + spaces


def limits_for(
    max_tokens: int, lang: str, steps: Iterable[int], causes: Iterable[str], values: Iterable[float] = ()
) -> AnswerLimits:
    """The answer's choices (the `steps` and `causes` the prompt showed: cause ids, or finding kinds) and the string
    lengths that keep its worst case within `max_tokens`; AnswerError when no useful answer fits."""
    kinds = tuple(sorted(set(causes) - set(OPEN_CAUSES))) + OPEN_CAUSES
    shown = tuple(sorted({int(s) for s in steps}))
    numbers = tuple(sorted({float(v) for v in values if math.isfinite(float(v))}))
    structure = worst_case_tokens(AnswerLimits(0, 0, 0, kinds, shown, numbers), lang)
    chars = (max_tokens - structure) / _CHAR_BYTES[lang]
    limits = AnswerLimits(
        summary_chars=int(chars * SUMMARY_SHARE),
        explanation_chars=int(chars * CAUSE_SHARE),
        fix_chars=int(chars * FIX_SHARE),
        causes=kinds,
        steps=shown,
        values=numbers,
    )
    if limits.fix_chars < MIN_FIX_CHARS[lang]:
        need = structure + int(MIN_FIX_CHARS[lang] / FIX_SHARE * _CHAR_BYTES[lang]) + 1
        raise AnswerError(f"--max-tokens {max_tokens} is too small for a JSON answer (needs at least {need})")
    return limits


def answer_grammar(limits: AnswerLimits, lang: str) -> str:
    """GBNF text forcing the answer's shape and choices, with the tightened `char` rule."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    gbnf = json_schema_to_gbnf(json.dumps(answer_schema(limits)))
    rules = gbnf.splitlines()
    char_at = [i for i, r in enumerate(rules) if r.startswith("char ::=")]
    if len(char_at) != 1:
        raise RuntimeError("llama-cpp-python's JSON-schema grammar changed shape; cannot tighten its rules")
    rules[char_at[0]] = _CHAR_RULES[lang]
    return "\n".join(rules)


def _text(value: Any, field_name: str, limit: int) -> str:
    if not isinstance(value, str):
        raise AnswerError(f"{field_name} is not a string")
    if any(ord(ch) < 32 and ch not in "\n\t" for ch in value):
        raise AnswerError(f"{field_name} holds a control character")
    if len(value) > limit:
        raise AnswerError(f"{field_name} is longer than {limit} characters")
    if _DIGIT.search(value):
        raise AnswerError(f"{field_name} holds a digit (numbers are cited in evidence_steps/evidence_values)")
    return value


def parse_answer(text: str, limits: AnswerLimits) -> Answer:
    """The validated answer in `text`; AnswerError naming the first problem."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise AnswerError(f"the answer is not JSON ({exc})") from None
    if not isinstance(data, dict) or set(data) != {"summary", "causes"}:
        raise AnswerError("the answer must be an object with exactly summary and causes")
    causes_in = data["causes"]
    if not isinstance(causes_in, list) or not 1 <= len(causes_in) <= MAX_CAUSES:
        raise AnswerError(f"causes must be a list of 1 to {MAX_CAUSES} items")
    causes = []
    for i, item in enumerate(causes_in):
        where = f"causes[{i}]"
        if not isinstance(item, dict) or set(item) != set(_CAUSE_FIELDS):
            raise AnswerError(f"{where} must have exactly {', '.join(_CAUSE_FIELDS)}")
        if item["cause"] not in limits.causes:
            raise AnswerError(f"{where}.cause {item['cause']!r} names no cause shown ({', '.join(limits.causes)})")
        if item["confidence"] not in CONFIDENCES:
            raise AnswerError(f"{where}.confidence must be one of {', '.join(CONFIDENCES)}")
        steps = item["evidence_steps"]
        if not isinstance(steps, list) or len(steps) > MAX_EVIDENCE_STEPS:
            raise AnswerError(f"{where}.evidence_steps must be a list of at most {MAX_EVIDENCE_STEPS} steps")
        for s in steps:
            if not isinstance(s, int) or isinstance(s, bool) or s not in limits.steps:
                raise AnswerError(f"{where}.evidence_steps holds {s!r}, not a step the prompt showed")
        values = item["evidence_values"]
        if not isinstance(values, list) or len(values) > MAX_EVIDENCE_VALUES:
            raise AnswerError(f"{where}.evidence_values must be a list of at most {MAX_EVIDENCE_VALUES} values")
        for v in values:
            if not isinstance(v, (int, float)) or isinstance(v, bool) or float(v) not in limits.values:
                raise AnswerError(f"{where}.evidence_values holds {v!r}, not a value the prompt showed")
        fixes = item["fixes"]
        if not isinstance(fixes, list) or len(fixes) > MAX_FIXES:
            raise AnswerError(f"{where}.fixes must be a list of at most {MAX_FIXES} strings")
        causes.append(
            Cause(
                cause=item["cause"],
                explanation=_text(item["explanation"], f"{where}.explanation", limits.explanation_chars),
                confidence=item["confidence"],
                evidence_steps=tuple(steps),
                evidence_values=tuple(float(v) for v in values),
                fixes=tuple(_text(f, f"{where}.fixes", limits.fix_chars) for f in fixes),
            )
        )
    return Answer(_text(data["summary"], "summary", limits.summary_chars), tuple(causes))
