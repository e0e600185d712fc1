"""The prompt for the model's explanation: a compact, structured description of one run for a small model.

Never raw series: the model sees the run's name, its hyperparameters, best and final metrics with
their steps, each rule-based finding with its evidence, and the ±5-point windows of lr, grad_norm
and memory around each critical step. The system prompt is fixed text and comes first, so
llama.cpp's prefix cache reuses it across runs. Everything is cut to a token budget that a small
model on a shared CPU can read in seconds: measured here, a 135M model on one core reads ~75 prompt
tokens/s, so 400 tokens cost ~5 s before the first word. When the data does not fit, the least
important lines go first (text summaries, windows, minor metrics and hyperparameters), never a finding
or its evidence: for those the budget grows (up to REQUIRED_GROWTH times; on the demo's worst run
352 -> 443 tokens, about 1 s more before the first word).

The prompt also records every step and number it showed (`Evidence`): the grounding check holds
the model's answer against exactly that.
"""

from __future__ import annotations

import locale
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .datamodel import Finding, RunReport, SeriesFeatures
from .findings import finding_order
from .text import number, one_line

LANGS = ("en", "zh")

#: Prompt budget for small models at a small context: ~5 s of prompt processing for a 135M model on
#: one core (75 tok/s measured), ~10 s for a 0.5B one.
SMALL_MODEL_BUDGET = 400
#: Context sizes above this are taken as "a larger model the user chose"; the budget then grows.
SMALL_CONTEXT = 4096
#: With a large context, give the prompt this fraction of it ...
LARGE_CONTEXT_PROMPT_SHARE = 1 / 6
#: ... but never more than this: beyond it even a fast model keeps the user waiting.
MAX_BUDGET = 1600
#: Tokens a ChatML-style template adds around two messages plus the assistant header.
CHAT_TEMPLATE_OVERHEAD = 16
#: Points either side of a critical step in the lr / grad_norm / memory windows (as in the seed article).
WINDOW_POINTS = 5
#: Critical points that get windows: beyond three the windows crowd out the findings themselves.
MAX_CRITICAL_POINTS = 3
#: Roles whose windows are shown around critical points, in order of importance.
WINDOW_ROLES = ("grad_norm", "lr", "gpu_mem")
#: A window whose consecutive points never move more than this fraction (and only one way) is shown as
#: its two ends: an lr schedule gliding along says nothing the ends do not, and costs 60 tokens in full.
SMOOTH_STEP = 0.05
#: A single line never exceeds this, so one verbose finding cannot starve the rest of the budget.
MAX_LINE_CHARS = 240
#: Numbers are shown with this many significant digits: enough to reason with, cheap in tokens.
SIGNIFICANT_DIGITS = 3

# Priorities: lower is more important; the budget drops the highest numbers first. The order says what
# an explanation needs most: what went wrong and the numbers behind it (every finding and its evidence,
# most severe first: these are REQUIRED), then the losses, the signal that moved first (grad_norm, then
# lr, around the first critical point), the hyperparameters that explain most pathologies, and only then
# the rest. Measured on the demo runs before findings were required, a 400-token budget dropped the
# evidence of every finding and even whole findings: the model then had nothing to explain from.
_P_FINDING = {"critical": 1, "warning": 3, "info": 5}
_P_EVIDENCE = {"critical": 2, "warning": 4, "info": 6}
#: Lines at or below this priority (findings and their evidence) are never dropped for the budget's sake...
_P_REQUIRED = 6.99
#: ... which may grow for them up to this factor: at most ~5 s more of prompt for a 135M model on one core
#: (75 tok/s) at the small budget. Past it, a run with that many findings loses its least severe ones.
REQUIRED_GROWTH = 2.0
#: The engine's likely causes of a finding (with the lr trajectory and the signal that moved first) are part
#: of what must reach the model for critical and warning findings: they are the reasoning it explains.
_P_CAUSE = {"critical": 2.5, "warning": 4.5, "info": 58}
_P_SUGGESTION = {"critical": 55, "warning": 60, "info": 90}
_P_WINDOW = 18  # + 4 per role rank (grad_norm, lr, memory, other), + 12 per later critical point
_P_METRIC = {"train_loss": 15, "val_loss": 16, "metric": 34, "loss_component": 50, "grad_norm": 52, "lr": 53}
_P_METRIC_OTHER = 65
_P_HPARAM_KEY, _P_HPARAM_OTHER = 32, 75
_P_TEXT = 95

#: Hyperparameters that explain most pathologies; the rest are kept only when the budget allows.
KEY_HPARAMS = re.compile(
    r"(^|[._/])(lr|learning_rate|batch|bs|optim|weight_decay|wd|warmup|clip|grad_norm|max_norm|amp|fp16|bf16|"
    r"precision|dtype|sched|epochs?|dropout|momentum|beta|eps|model|arch|workers|accum)",
    re.IGNORECASE,
)

_NUMBER_IN_TEXT = re.compile(r"(?<![A-Za-z0-9_.])\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?")
_STEP_IN_TEXT = re.compile(r"\bsteps? (\d+)\b")

_SYSTEM_MD = (
    "You are a senior deep-learning engineer. Diagnose this training run from the features below. "
    "Cite only steps and numbers given there. Reply in short Markdown:\n"
    "**Pathology**: gradient explosion/vanishing, overfitting, missing warmup, fp16 overflow, data problem, or none.\n"
    "**Cause**: what happened at the critical step; which signal moved first (grad_norm, lr or loss).\n"
    "**Fixes**: concrete changes (clip threshold, lr, warmup, weight decay, augmentation, bf16, loader workers)."
)
_SYSTEM_JSON = (
    "You are a senior deep-learning engineer. Diagnose this training run from the features below. "
    "Cite only steps and numbers given there. Reply in JSON: summary (the pathology in one sentence), causes "
    "(each: cause, one of the likely cause ids listed (or other or unclear); explanation in words, no digits; "
    "confidence; evidence_steps and evidence_values: the steps and numbers from the data that show it; "
    "fixes as concrete changes)."
)
#: Instructions stay in English for both languages: small models follow English instructions best, and
#: Chinese costs ~2 tokens a character in their vocabularies (SmolLM2: 308 tokens for the Chinese
#: system prompt against 154 for the English one), which a 400-token budget cannot afford.
_ANSWER_IN_CHINESE = "\n用中文回答。"
SYSTEM_PROMPTS = {
    ("en", "md"): _SYSTEM_MD,
    ("zh", "md"): _SYSTEM_MD + _ANSWER_IN_CHINESE,
    ("en", "json"): _SYSTEM_JSON,
    ("zh", "json"): _SYSTEM_JSON + _ANSWER_IN_CHINESE,
}

_LABELS = {
    "en": {
        "run": "Run",
        "steps": "steps",
        "hparams": "Hyperparameters",
        "metrics": "Metrics (best @step; final @step)",
        "findings": "Rule-based findings",
        "context": "Around critical steps",
        "texts": "Text notes",
        "best": "best",
        "final": "final",
        "nonfinite": "non-finite from",
        "hint": "rule hint",
        "why": "likely cause",
        "also": "also possible",
        "around": "around",
        "evidence": "evidence",
        "max": "higher is better",
        "min": "lower is better",
    },
    "zh": {
        "run": "运行",
        "steps": "步",
        "hparams": "超参数",
        "metrics": "指标（最佳 @步；最终 @步）",
        "findings": "规则发现",
        "context": "关键步前后",
        "texts": "文本记录",
        "best": "最佳",
        "final": "最终",
        "nonfinite": "非有限值始于",
        "hint": "规则建议",
        "why": "可能原因",
        "also": "其他可能",
        "around": "步附近",
        "evidence": "证据",
        "max": "越高越好",
        "min": "越低越好",
    },
}

_SECTIONS = ("hparams", "metrics", "findings", "context", "texts")


@dataclass(frozen=True)
class Evidence:
    """Every step and number the model was shown: what its answer may cite."""

    steps: frozenset[int]
    values: tuple[float, ...]
    first_step: int | None = None
    last_step: int | None = None
    #: What a JSON `cause` may name: the engine's candidate cause ids shown with the findings (the model's job
    #: is to choose among them and explain), or the finding kinds when no finding has candidate causes.
    causes: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Prompt:
    system: str
    user: str
    lang: str
    mode: str  # "md" or "json"
    tokens: int  # system + user + template overhead, as counted below
    budget: int
    counted_with: str  # "model tokenizer" or "estimate"
    dropped: tuple[str, ...]  # labels of the lines left out to fit the budget, least important first
    evidence: Evidence

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


@dataclass(frozen=True)
class _Line:
    section: str
    order: tuple  # position inside its section
    priority: float
    label: str
    text: str
    steps: tuple[int, ...] = ()
    values: tuple[float, ...] = ()
    kinds: tuple[str, ...] = ()  # the finding kind a headline line names


@dataclass
class _Facts:
    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)


def default_lang() -> str:
    """`zh` when the user's locale is Chinese, else `en`."""
    for var in ("TBTRIAGE_LANG", "LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE"):
        value = os.environ.get(var, "")
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    try:
        code = locale.getlocale()[0] or ""
    except ValueError:
        code = ""
    return "zh" if code.lower().startswith("zh") else "en"


def default_budget(n_ctx: int) -> int:
    """Prompt tokens allowed for a model run with context `n_ctx`."""
    if n_ctx <= SMALL_CONTEXT:
        return SMALL_MODEL_BUDGET
    return int(min(MAX_BUDGET, max(SMALL_MODEL_BUDGET, n_ctx * LARGE_CONTEXT_PROMPT_SHARE)))


_DIGIT_OR_PUNCT = re.compile(r"[0-9!-/:-@\[-`{-~]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def estimate_tokens(text: str) -> int:
    """A conservative token count when no tokenizer is loaded.

    Small-model BPE vocabularies (SmolLM2, Qwen) split numbers into single digits and most punctuation
    into its own token, and spend one to two tokens on a CJK character; words average ~4 characters
    per token. Overestimating only wastes budget; underestimating would overrun it.
    """
    separate = len(_DIGIT_OR_PUNCT.findall(text))
    non_ascii = len(_NON_ASCII.findall(text))
    other = len(text) - separate - non_ascii
    return separate + 2 * non_ascii + math.ceil(other / 4)


def clean_text(text: Any, limit: int = MAX_LINE_CHARS) -> str:
    """Untrusted text (tags, run names, summaries) as one short line without control characters."""
    return one_line(text, limit)


def fmt_num(value: Any) -> str:
    """A number as the model should read it: `text.number` to SIGNIFICANT_DIGITS digits."""
    try:
        float(value)
    except (TypeError, ValueError, OverflowError):
        return clean_text(value, 60)
    return number(value, SIGNIFICANT_DIGITS)


def _shown(value: float) -> float:
    """The value as the model reads it (after rounding), for the grounding check."""
    text = fmt_num(value)
    try:
        return float(text)
    except ValueError:
        return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))


# ---------------------------------------------------------------------------------------------- lines


def _hparam_lines(hparams: Mapping[str, Any], lang: str) -> list[_Line]:
    lines = []
    for i, (key, value) in enumerate(sorted(hparams.items(), key=lambda kv: str(kv[0]))):
        if value is None or isinstance(value, (dict, list, tuple)):
            continue
        key_text = clean_text(key, 60)
        important = bool(KEY_HPARAMS.search(key_text))
        lines.append(
            _Line(
                "hparams",
                (0 if important else 1, i),
                _P_HPARAM_KEY if important else _P_HPARAM_OTHER,
                f"hparam {key_text}",
                f"{key_text}={fmt_num(value)}",
                values=(_shown(value),) if _is_number(value) else (),
            )
        )
    return lines


def _role_text(f: SeriesFeatures, lang: str) -> str:
    role = f.role or "?"
    if f.role == "metric" and f.direction:
        role += ", " + _LABELS[lang]["max" if f.direction > 0 else "min"]
    return role


def _metric_lines(features: Mapping[str, SeriesFeatures], lang: str) -> list[_Line]:
    lab = _LABELS[lang]
    lines = []
    for tag, f in features.items():
        if f.role in ("grad_norm_layer", "epoch") or f.points == 0:
            continue
        parts, steps, values = [], [], []
        if f.best is not None and f.best_step is not None and math.isfinite(f.best):
            parts.append(f"{lab['best']} {fmt_num(f.best)} @{f.best_step}")
            steps.append(f.best_step)
            values.append(_shown(f.best))
        if f.final is not None and f.final_step is not None:
            parts.append(f"{lab['final']} {fmt_num(f.final)} @{f.final_step}")
            steps.append(f.final_step)
            if math.isfinite(f.final):
                values.append(_shown(f.final))
        if f.first_nonfinite_step is not None:
            parts.append(f"{lab['nonfinite']} @{f.first_nonfinite_step}")
            steps.append(f.first_nonfinite_step)
        if not parts:
            continue
        priority = _P_METRIC.get(f.role or "", _P_METRIC_OTHER)
        lines.append(
            _Line(
                "metrics",
                (priority, clean_text(tag, 80)),
                priority,
                f"metric {clean_text(tag, 80)}",
                f"{clean_text(tag, 80)} ({_role_text(f, lang)}): " + "; ".join(parts),
                tuple(steps),
                tuple(values),
            )
        )
    return lines


def _evidence_items(evidence: Mapping[str, Any], facts: _Facts) -> list[str]:
    """`key=value` items of a finding's evidence; lists shortened, nested mappings flattened one level."""
    items = []
    for key, value in evidence.items():
        key_text = clean_text(key, 40)
        if isinstance(value, Mapping):
            for sub, v in list(value.items())[:4]:
                if _is_number(v) or isinstance(v, str):
                    items.append(f"{key_text}.{clean_text(sub, 30)}={fmt_num(v)}")
                    _note(f"{key}.{sub}", v, facts)
            continue
        if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
            seq = list(value.tolist() if hasattr(value, "tolist") else value)[:5]
            if seq and all(_is_number(v) for v in seq):
                items.append(f"{key_text}=[{','.join(fmt_num(v) for v in seq)}]")
                for v in seq:
                    _note(key, v, facts)
            continue
        if value is None:
            continue
        items.append(f"{key_text}={fmt_num(value)}")
        _note(key, value, facts)
    return items


def _note(key: str, value: Any, facts: _Facts) -> None:
    if not _is_number(value):
        return
    if "step" in str(key).lower() and float(value) == int(value):
        facts.steps.append(int(value))
    facts.values.append(_shown(value))


def _finding_lines(findings: list[Finding], lang: str) -> list[_Line]:
    lab = _LABELS[lang]
    ordered = sorted(findings, key=finding_order)
    lines = []
    for i, f in enumerate(ordered):
        sev = f.severity if f.severity in _P_FINDING else "info"
        where = ""
        steps: list[int] = []
        if f.step is not None:
            where = f" @{f.step}" + (f"-{f.end_step}" if f.end_step is not None and f.end_step != f.step else "")
            steps = [f.step] + ([f.end_step] if f.end_step is not None else [])
        tags = ",".join(clean_text(t, 60) for t in f.tags[:3])
        message = clean_text(f.message)
        head = f"{i + 1}. [{sev}] {f.kind}{where} ({tags}): {message}"
        # The message's own numbers ("exploded from step 2500 (×152)") are shown too, so they are evidence.
        said_steps = [int(m) for m in _STEP_IN_TEXT.findall(message)]
        said_values = [float(m.replace(",", "")) for m in _NUMBER_IN_TEXT.findall(message)]
        lines.append(
            _Line(
                "findings",
                (i, 0),
                _P_FINDING[sev] + i * 0.01,
                f"finding {f.kind}",
                head,
                tuple(steps + said_steps),
                tuple(said_values),
                kinds=(f.kind,),
            )
        )
        facts = _Facts()
        items = _evidence_items(f.evidence, facts)
        if items:
            lines.append(
                _Line(
                    "findings",
                    (i, 1),
                    _P_EVIDENCE[sev] + i * 0.01,
                    f"evidence of {f.kind}",
                    clean_text(f"{lab['evidence']}: " + ", ".join(items)),
                    tuple(facts.steps),
                    tuple(facts.values),
                )
            )
        if (cause := _cause_line(f, lab)) is not None:
            text, cause_ids = cause
            lines.append(
                _Line(
                    "findings",
                    (i, 2),
                    _P_CAUSE[sev] + i * 0.01,
                    f"{_CAUSES_LABEL}{f.kind}",
                    text,
                    tuple(int(m) for m in _STEP_IN_TEXT.findall(text)),
                    tuple(float(m.replace(",", "")) for m in _NUMBER_IN_TEXT.findall(text)),
                    kinds=cause_ids,
                )
            )
        if f.suggestion:
            lines.append(
                _Line(
                    "findings",
                    (i, 3),
                    _P_SUGGESTION[sev] + i * 0.01,
                    f"hint for {f.kind}",
                    f"{lab['hint']}: {clean_text(f.suggestion)}",
                )
            )
    return lines


_CAUSES_LABEL = "causes of "
#: Facts of the top cause quoted to the model: the strongest ones come first in the engine's evidence.
CAUSE_FACTS_SHOWN = 2


def _cause_line(f: Finding, lab: Mapping[str, str]) -> tuple[str, tuple[str, ...]] | None:
    """`likely cause: id (0.78): fact; fact; signals: …; also possible: id 0.41` and the cause ids it names."""
    if not f.causes:
        return None
    top = f.causes[0]
    facts = [str(x) for x in top.evidence.get("for", ())][:CAUSE_FACTS_SHOWN]
    if top.evidence.get("chain"):
        facts.append(f"signals in order: {top.evidence['chain']}")
    head = f"{lab['why']}: {top.cause} ({top.confidence:.2f})"
    if top.cause == "unclear":
        head = f"{lab['why']}: unclear"
    text = head + (": " + "; ".join(facts) if facts else "")
    others = [c for c in f.causes[1:3] if c.cause != "unclear"]
    if others:
        text += f"; {lab['also']}: " + ", ".join(f"{c.cause} {c.confidence:.2f}" for c in others)
    return clean_text(text, 2 * MAX_LINE_CHARS), tuple(c.cause for c in f.causes)


def critical_steps(findings: list[Finding]) -> list[int]:
    """Steps worth a context window: critical findings first, else the warnings; earliest first."""
    for severity in ("critical", "warning"):
        steps = sorted({f.step for f in findings if f.severity == severity and f.step is not None})
        if steps:
            return steps[:MAX_CRITICAL_POINTS]
    return []


def _smooth(values: np.ndarray) -> bool:
    """Monotone with no step larger than SMOOTH_STEP of the values' size: a schedule, not an event."""
    diffs = np.diff(values)
    scale = np.abs(values).max()
    monotone = (diffs >= 0).all() or (diffs <= 0).all()
    return bool(monotone and scale > 0 and (np.abs(diffs) <= SMOOTH_STEP * scale).all())


def _window_text(points: list[tuple[int, float]]) -> str:
    """The points of a window as cheaply as the model can still read them.

    Evenly spaced steps (the usual case) are written once as a range and a stride, then the values;
    a window whose values all show the same is one value. Otherwise `step:value` pairs.
    """
    shown = [fmt_num(v) for _, v in points]
    steps = [s for s, _ in points]
    if len(set(shown)) == 1:
        return f"{shown[0]} (flat, steps {steps[0]}..{steps[-1]})" if len(steps) > 1 else f"{steps[0]}:{shown[0]}"
    values = np.array([v for _, v in points], dtype=np.float64)
    if np.isfinite(values).all() and _smooth(values):
        return f"{shown[0]} to {shown[-1]} (smooth, steps {steps[0]}..{steps[-1]})"
    strides = {b - a for a, b in zip(steps, steps[1:])}
    if len(strides) == 1:
        return f"steps {steps[0]}..{steps[-1]} every {strides.pop()}: " + " ".join(shown)
    return " ".join(f"{s}:{v}" for s, v in zip(steps, shown))


def _window_lines(report: RunReport, lang: str, windows_for: Callable[[int], Mapping[str, Any]]) -> list[_Line]:
    lab = _LABELS[lang]
    lines = []
    covered_until: int | None = None  # a critical step inside the previous window adds nothing new
    rank = 0
    for step in critical_steps(report.findings):
        if covered_until is not None and step <= covered_until:
            continue
        windows = windows_for(step)
        where = f"{lab['around']} {step}" if lang == "en" else f"{step}{lab['around']}"
        last_seen = []
        for name, points in windows.items():
            if not points:
                continue
            role = report.roles.get(name, name)
            role_rank = WINDOW_ROLES.index(role) if role in WINDOW_ROLES else len(WINDOW_ROLES)
            pts = [(int(s), float(v)) for s, v in points]
            last_seen.append(pts[-1][0])
            lines.append(
                _Line(
                    "context",
                    (rank, role_rank, clean_text(name, 60)),
                    _P_WINDOW + role_rank * 4 + rank * 12,
                    f"window {clean_text(name, 60)} @{step}",
                    clean_text(f"{where} {clean_text(name, 60)}: {_window_text(pts)}"),
                    (step,) + tuple(s for s, _ in pts),
                    tuple(_shown(v) for _, v in pts if math.isfinite(v)),
                )
            )
        if last_seen:
            covered_until = max(last_seen)
            rank += 1
    return lines


def _text_lines(report: RunReport) -> list[_Line]:
    lines = []
    for i, (tag, entries) in enumerate(sorted(report.run.texts.items())):
        if not entries:
            continue
        entry = entries[0]
        lines.append(
            _Line(
                "texts",
                (i,),
                _P_TEXT + i * 0.01,
                f"text {clean_text(tag, 60)}",
                clean_text(f"{clean_text(tag, 60)}: {entry.text}", 160),
            )
        )
    return lines


def _default_windows(report: RunReport) -> Callable[[int], Mapping[str, Any]]:
    from .features import context_windows

    def windows_for(step: int) -> Mapping[str, Any]:
        return context_windows(report.run, report.roles, step, k=WINDOW_POINTS)

    return windows_for


# ---------------------------------------------------------------------------------------------- build


def _render(header: str, lines: list[_Line], lang: str) -> str:
    lab = _LABELS[lang]
    out = [header]
    for section in _SECTIONS:
        chosen = sorted((ln for ln in lines if ln.section == section), key=lambda ln: ln.order)
        if chosen:
            out.append(f"{lab[section]}:")
            out.extend(ln.text for ln in chosen)
    return "\n".join(out)


def build_prompt(
    report: RunReport,
    *,
    lang: str = "en",
    mode: str = "md",
    budget: int = SMALL_MODEL_BUDGET,
    count_tokens: Callable[[str], int] | None = None,
    hparams: Mapping[str, Any] | None = None,
    windows_for: Callable[[int], Mapping[str, Any]] | None = None,
    count_chat: Callable[[str, str], int] | None = None,
    max_budget: int | None = None,
) -> Prompt:
    """The system and user messages asking the model to explain `report`, within `budget` tokens.

    `count_tokens` should be the loaded model's tokenizer; without it a conservative estimate is used.
    `count_chat(system, user)`, when given, counts the whole prompt through the model's chat template
    and is what the final check uses (the template's own tokens and merges at its seams included).
    Every finding and its evidence are kept, even past `budget` (up to REQUIRED_GROWTH times it, and never
    past `max_budget`: what the model's context leaves beside the answer); the returned `budget` is then
    the larger one they needed.
    `hparams` defaults to the hparams plugin's values (pass `run_config.run_hparams(run)` to add config
    files); `windows_for(step)` defaults to `features.context_windows` around that step.
    """
    if lang not in LANGS:
        raise ValueError(f"unknown language {lang!r} (choose from {', '.join(LANGS)})")
    count = count_tokens or estimate_tokens
    lab = _LABELS[lang]
    system = SYSTEM_PROMPTS[(lang, "json" if mode == "json" else "md")]
    run = report.run
    span = ""
    first_steps = [f.first_step for f in report.features.values() if f.first_step is not None]
    first_step = min(first_steps) if first_steps else None
    if run.last_step is not None:
        span = f" ({lab['steps']} {first_step if first_step is not None else 0}-{run.last_step})"
    header = f"{lab['run']}: {clean_text(report.name, 100)}{span}"

    lines = (
        _hparam_lines(run.hparams if hparams is None else hparams, lang)
        + _metric_lines(report.features, lang)
        + _finding_lines(report.findings, lang)
        + _window_lines(report, lang, windows_for or _default_windows(report))
        + _text_lines(report)
    )
    by_priority = sorted(lines, key=lambda ln: ln.priority)

    fixed = count(system) + count(header) + CHAT_TEMPLATE_OVERHEAD
    required_limit = max(budget, min(budget * REQUIRED_GROWTH, max_budget or budget * REQUIRED_GROWTH))
    kept: list[_Line] = []
    used = 0
    open_sections: set[str] = set()
    for line in by_priority:
        cost = count(line.text + "\n")
        if line.section not in open_sections:
            cost += count(lab[line.section] + ":\n")
        limit = required_limit if line.priority <= _P_REQUIRED else budget
        if fixed + used + cost > limit:
            break  # strictly by importance: everything less important than this line goes too
        kept.append(line)
        used += cost
        open_sections.add(line.section)
    # The budget the prompt was held to: larger than asked only when the findings needed it.
    budget = max(budget, fixed + used)

    # Per-line counts ignore merges across line breaks; confirm on the real text and trim if needed.
    while True:
        user = _render(header, kept, lang)
        if count_chat is not None:
            total = count_chat(system, user)
        else:
            total = count(system) + count(user) + CHAT_TEMPLATE_OVERHEAD
        if total <= budget or not kept:
            break
        kept.pop()

    kept_ids = {id(ln) for ln in kept}
    dropped = tuple(ln.label for ln in by_priority if id(ln) not in kept_ids)
    steps: set[int] = set()
    values: list[float] = []
    kinds: set[str] = set()
    cause_ids: set[str] = set()
    for ln in kept:
        steps.update(ln.steps)
        values.extend(ln.values)
        (cause_ids if ln.label.startswith(_CAUSES_LABEL) else kinds).update(ln.kinds)
    cause_ids.discard("unclear")  # always allowed (grounding's open causes)
    if run.last_step is not None:
        steps.add(int(run.last_step))
    if first_step is not None:
        steps.add(int(first_step))
    evidence = Evidence(frozenset(steps), tuple(values), first_step, run.last_step, frozenset(cause_ids or kinds))
    return Prompt(
        system=system,
        user=user,
        lang=lang,
        mode="json" if mode == "json" else "md",
        tokens=total,
        budget=budget,
        counted_with="model tokenizer" if count_tokens else "estimate",
        dropped=dropped,
        evidence=evidence,
    )
