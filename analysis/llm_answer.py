"""The JSON answer: its schema, the decoding grammar that forces it, and its validation.

`{summary, causes: [{cause, confidence, evidence_steps, fixes}]}`. llama-cpp-python turns the JSON
schema into a GBNF grammar, so even a tiny model can only emit that shape. Two gaps of its schema
converter (measured in 0.3.36) are closed here: its `char` rule lets raw control characters into
strings (we allow printable text only, and escapes that cannot spell a control character), and it
ignores integer minimum/maximum (steps get a digit-count bound in the grammar, and the values are
checked after decoding). Every length in the schema is derived from the token budget so the
worst-case answer still fits in `max_tokens`: a cut-off answer cannot be parsed, and "JSON mode
always parses" is the promise.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

CONFIDENCES = ("high", "medium", "low")
#: A small model has one to three things to say; more causes are guesses.
MAX_CAUSES = 3
MAX_FIXES = 2
MAX_EVIDENCE_STEPS = 3
#: Shares of the string budget: summary, each cause, each fix (1 summary + 3 x (cause + 2 fixes) < 1).
SUMMARY_SHARE, CAUSE_SHARE, FIX_SHARE = 0.20, 0.10, 0.08
#: Below this many characters a fix cannot say anything useful: ask for more tokens instead
#: (a CJK character carries about as much as a short English word).
MIN_FIX_CHARS = {"en": 24, "zh": 10}

#: Printable text a string may hold, without escapes: `\u` could spell a control character, `\n` would
#: break the one-line layout, and an escape costs two bytes in the worst-case budget below (the model
#: writes 'quotes' instead). English: printable ASCII but `"` and `\`; Chinese adds CJK ideographs and
#: CJK/full-width punctuation (3 bytes each in UTF-8).
_CHAR_RULES = {
    "en": r"""char ::= [ !#-\[\]-~]""",
    "zh": r"""char ::= [ !#-\[\]-~] | [\u3000-\u303F\u4E00-\u9FFF\uFF00-\uFFEF]""",
}
#: The longest a single allowed character can be, in bytes (= tokens, in the worst case of byte-level tokens).
_CHAR_BYTES = {"en": 1, "zh": 3}


class AnswerError(ValueError):
    """The decoded text is not a valid answer (only possible if decoding was cut off or bypassed)."""


@dataclass(frozen=True)
class AnswerLimits:
    summary_chars: int
    cause_chars: int
    fix_chars: int
    step_digits: int


@dataclass(frozen=True)
class Cause:
    cause: str
    confidence: str
    evidence_steps: tuple[int, ...]
    fixes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "cause": self.cause,
            "confidence": self.confidence,
            "evidence_steps": list(self.evidence_steps),
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

    cause = {
        "type": "object",
        "properties": {
            "cause": text(limits.cause_chars),
            "confidence": {"enum": list(CONFIDENCES)},
            "evidence_steps": {
                "type": "array",
                "maxItems": MAX_EVIDENCE_STEPS,
                "items": {"type": "integer", "minimum": 0},
            },
            "fixes": {"type": "array", "maxItems": MAX_FIXES, "items": text(limits.fix_chars)},
        },
        "required": ["cause", "confidence", "evidence_steps", "fixes"],
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
    longest = {
        "summary": "s" * limits.summary_chars * cb,
        "causes": [
            {
                "cause": "c" * limits.cause_chars * cb,
                "confidence": max(CONFIDENCES, key=len),
                "evidence_steps": [10**limits.step_digits - 1] * MAX_EVIDENCE_STEPS,
                "fixes": ["f" * limits.fix_chars * cb] * MAX_FIXES,
            }
        ]
        * MAX_CAUSES,
    }
    compact = json.dumps(longest, separators=(",", ":"))
    # The grammar allows one optional space after every punctuation mark and every value.
    spaces = sum(compact.count(ch) for ch in "{}[]:,") + len(re.findall(r'"|\d+', compact))
    return len(compact) + spaces


def limits_for(max_tokens: int, lang: str, last_step: int | None) -> AnswerLimits:
    """String lengths that keep the worst-case answer within `max_tokens`; AnswerError when impossible."""
    digits = max(1, len(str(int(last_step)))) if last_step is not None and last_step > 0 else 10
    empty = AnswerLimits(0, 0, 0, digits)
    structure = worst_case_tokens(empty, lang)
    chars = (max_tokens - structure) / _CHAR_BYTES[lang]
    limits = AnswerLimits(
        summary_chars=int(chars * SUMMARY_SHARE),
        cause_chars=int(chars * CAUSE_SHARE),
        fix_chars=int(chars * FIX_SHARE),
        step_digits=digits,
    )
    if limits.fix_chars < MIN_FIX_CHARS[lang]:
        need = structure + int(MIN_FIX_CHARS[lang] / FIX_SHARE * _CHAR_BYTES[lang]) + 1
        raise AnswerError(f"--max-tokens {max_tokens} is too small for a JSON answer (needs at least {need})")
    return limits


def answer_grammar(limits: AnswerLimits, lang: str) -> str:
    """GBNF text forcing the answer's shape, with the tightened `char` and step rules."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    gbnf = json_schema_to_gbnf(json.dumps(answer_schema(limits)))
    rules = gbnf.splitlines()
    char_at = [i for i, r in enumerate(rules) if r.startswith("char ::=")]
    int_at = [i for i, r in enumerate(rules) if r.startswith("integer ::=")]
    if len(char_at) != 1 or len(int_at) != 1:
        raise RuntimeError("llama-cpp-python's JSON-schema grammar changed shape; cannot tighten its rules")
    rules[char_at[0]] = _CHAR_RULES[lang]
    # Steps: no sign, no leading zeros, no more digits than the run's last step has.
    more = f" [0-9]{{0,{limits.step_digits - 1}}}" if limits.step_digits > 1 else ""
    rules[int_at[0]] = f'integer ::= ("0" | [1-9]{more}) space'
    if not any("integral-part" in r for r in rules if not r.startswith("integral-part ::=")):
        rules = [r for r in rules if not r.startswith("integral-part ::=")]
    return "\n".join(rules)


def _text(value: Any, field_name: str, limit: int) -> str:
    if not isinstance(value, str):
        raise AnswerError(f"{field_name} is not a string")
    if any(ord(ch) < 32 and ch not in "\n\t" for ch in value):
        raise AnswerError(f"{field_name} holds a control character")
    if len(value) > limit:
        raise AnswerError(f"{field_name} is longer than {limit} characters")
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
        if not isinstance(item, dict) or set(item) != {"cause", "confidence", "evidence_steps", "fixes"}:
            raise AnswerError(f"{where} must have exactly cause, confidence, evidence_steps, fixes")
        if item["confidence"] not in CONFIDENCES:
            raise AnswerError(f"{where}.confidence must be one of {', '.join(CONFIDENCES)}")
        steps = item["evidence_steps"]
        if not isinstance(steps, list) or len(steps) > MAX_EVIDENCE_STEPS:
            raise AnswerError(f"{where}.evidence_steps must be a list of at most {MAX_EVIDENCE_STEPS} steps")
        for s in steps:
            if not isinstance(s, int) or isinstance(s, bool) or s < 0 or s >= 10**limits.step_digits:
                raise AnswerError(f"{where}.evidence_steps holds {s!r}, not a step of this run")
        fixes = item["fixes"]
        if not isinstance(fixes, list) or len(fixes) > MAX_FIXES:
            raise AnswerError(f"{where}.fixes must be a list of at most {MAX_FIXES} strings")
        causes.append(
            Cause(
                cause=_text(item["cause"], f"{where}.cause", limits.cause_chars),
                confidence=item["confidence"],
                evidence_steps=tuple(steps),
                fixes=tuple(_text(f, f"{where}.fixes", limits.fix_chars) for f in fixes),
            )
        )
    return Answer(_text(data["summary"], "summary", limits.summary_chars), tuple(causes))
