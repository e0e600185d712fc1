"""Filter and rank runs by a scalar's value: `val/acc>0.9`, `best:eval/accuracy>=0.8`, `top 10 by train/loss`.

The app's `/` filter and `report --filter` read one small language, parsed here by hand (never `eval`):

    FILTER    := TERM (" " TERM)*              every term must hold
    TERM      := CONDITION | RANK | REGEX
    CONDITION := [MODE ":"] TAG OP NUMBER      OP: > >= < <= == !=  (a lone `=` is left to names: `lr=0.1`)
    RANK      := ("top" | "bottom") N "by" [MODE ":"] TAG
    MODE      := "best" | "final" | "last"     default: final (the last logged value; `last` says the same)
    REGEX     := any other word: a case-insensitive regex the run's name must contain a match of

`best` is the best value in the tag's direction (highest for a metric, lowest for a loss); `top N` keeps the
N best runs by the value (bottom: the N worst) and lists them best first. TAG is a tag name, a unique
suffix of one (`accuracy` for `eval/accuracy`), or a role (`loss`, `train_loss`, `val_loss`, `metric`, `lr`,
`grad_norm`: the run's headline series of that kind). A run that lacks the tag, or whose value is NaN, fails
a condition and ranks last. Mistakes raise `FilterError` with one line saying what is wrong.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .datamodel import PrimaryTags, RunReport, Series

MODES = ("best", "final", "last")
DEFAULT_MODE = "final"
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
    ">": operator.gt, "<": operator.lt,
}  # fmt: skip
#: Roles a filter may name instead of a tag, and the headline series each stands for.
ROLE_TAGS: dict[str, Callable[[PrimaryTags], str | None]] = {
    "loss": lambda p: p.loss,
    "train_loss": lambda p: p.train_loss,
    "val_loss": lambda p: p.val_loss,
    "metric": lambda p: p.val_metric,
    "lr": lambda p: p.lr,
    "grad_norm": lambda p: p.grad_norm,
}
#: The syntax as the `?` help lists it: (example, what it keeps).
SYNTAX = (
    ("resnet", "runs whose name matches the regex (every word must hold)"),
    ("val/acc>0.9", "runs whose last value of the tag passes (> >= < <= == !=)"),
    ("best:TAG>=0.8", "the best value in the tag's direction instead (final: or last: the last value)"),
    ("top 10 by TAG", "the 10 best runs by the tag's value, best first (bottom 5 by TAG: the worst)"),
    ("TAG", "a tag, a unique end of one (accuracy), or a role: loss, metric, lr, grad_norm"),
)

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf|nan"
_CONDITION = re.compile(
    rf"^(?:(?P<mode>[a-z]+):)?(?P<tag>[^<>=!\s]+?)(?P<op>>=|<=|==|!=|>|<)(?P<value>{_NUMBER})$", re.I
)
_HAS_OPERATOR = re.compile(r"[<>]|[=!]=")
_TIGHTEN = re.compile(r"\s*(>=|<=|==|!=|>|<)\s*")  # `loss < 0.3` is `loss<0.3`
#: Where a tag suffix may start: a name boundary, so `acc` never matches `val/bacc`.
_BOUNDARY = "/_.-"


class FilterError(ValueError):
    """A filter that cannot be read or applied; the message is one line for the filter bar."""


@dataclass(frozen=True)
class Condition:
    mode: str
    tag: str
    op: str
    value: float


@dataclass(frozen=True)
class Rank:
    best_first: bool  # top: the best N; bottom: the worst N
    count: int
    mode: str
    tag: str


@dataclass(frozen=True)
class RunFilter:
    names: tuple[re.Pattern[str], ...] = ()
    conditions: tuple[Condition, ...] = ()
    rank: Rank | None = None

    @property
    def by_value(self) -> bool:
        """Whether the filter reads values (and so needs each run's scalars), not only names."""
        return bool(self.conditions) or self.rank is not None


@dataclass(frozen=True)
class RunScalars:
    """What a filter reads of one run: its curves, their roles and directions, its headline series."""

    name: str
    scalars: Mapping[str, Series]
    roles: Mapping[str, str | None]
    directions: Mapping[str, int]
    primary: PrimaryTags | None = None

    @classmethod
    def of(cls, report: RunReport) -> RunScalars:
        return cls(report.name, report.run.scalars, report.roles, report.directions, report.primary_tags)


def _tag_ref(text: str) -> tuple[str, str]:
    """`best:val/acc` -> ("best", "val/acc")."""
    mode, colon, tag = text.partition(":")
    if not colon or mode.lower() not in MODES:
        return DEFAULT_MODE, text
    return mode.lower(), tag


def parse_filter(text: str) -> RunFilter:
    """The filter `text` means; FilterError (one line) when it cannot be read."""
    words = _TIGHTEN.sub(r"\1", text.strip()).split()
    names: list[re.Pattern[str]] = []
    conditions: list[Condition] = []
    rank: Rank | None = None
    i = 0
    while i < len(words):
        word = words[i]
        if word.lower() in ("top", "bottom"):
            if rank is not None:
                raise FilterError("only one `top N by TAG` or `bottom N by TAG` per filter")
            rank = _rank(words[i : i + 4])
            i += 4
            continue
        match = _CONDITION.match(word)
        if match:
            mode = (match["mode"] or DEFAULT_MODE).lower()
            if mode not in MODES:
                raise FilterError(f"{word}: {match['mode']!r} is not best, final or last")
            conditions.append(Condition(mode, match["tag"], match["op"], float(match["value"])))
        elif _HAS_OPERATOR.search(word) and not word.startswith(("^", "(")):
            raise FilterError(f"{word}: expected TAG>NUMBER (operators > >= < <= == !=), e.g. val/acc>0.9")
        else:
            try:
                names.append(re.compile(word, re.IGNORECASE))
            except re.error as exc:
                raise FilterError(f"{word}: not a valid regex ({exc})") from None
        i += 1
    return RunFilter(tuple(names), tuple(conditions), rank)


def _rank(words: list[str]) -> Rank:
    usage = "expected `top N by TAG` or `bottom N by TAG`"
    if len(words) < 2 or not words[1].isdigit() or int(words[1]) < 1:
        raise FilterError(f"{' '.join(words[:2])}: N must be a whole number of runs ({usage})")
    if len(words) < 4 or words[2].lower() != "by":
        raise FilterError(f"{' '.join(words)}: {usage}")
    mode, tag = _tag_ref(words[3])
    return Rank(words[0].lower() == "top", int(words[1]), mode, tag)


# ---- evaluation --------------------------------------------------------------------------------------


def resolve_tag(ref: str, run: RunScalars) -> str | None:
    """The run's tag `ref` names: the tag itself, the one tag ending in it at a name boundary, or a role's
    headline series. None when the run has none; FilterError when the suffix fits several tags."""
    if ref in run.scalars:
        return ref
    low = ref.lower()
    suffixed = [t for t in run.scalars if t.lower().endswith(low) and t[-len(ref) - 1] in _BOUNDARY]
    if len(suffixed) == 1:
        return suffixed[0]
    role = ROLE_TAGS.get(low)
    if role is not None and run.primary is not None:
        tag = role(run.primary)
        if tag is not None and tag in run.scalars:
            return tag
    if len(suffixed) > 1:
        shown = ", ".join(sorted(suffixed)[:3]) + (", …" if len(suffixed) > 3 else "")
        raise FilterError(f"{ref} matches several tags of {run.name} ({shown}): write more of the name")
    return None


def run_value(run: RunScalars, ref: str, mode: str) -> float | None:
    """The run's value of tag `ref`: its best (in the tag's direction) or its last logged value."""
    tag = resolve_tag(ref, run)
    series = run.scalars.get(tag) if tag is not None else None
    if tag is None or series is None or not len(series):
        return None
    if mode == "best":
        from .compare import series_best, tag_direction  # not on the app's way to its first frame

        best = series_best(series, tag_direction(run.roles, run.directions, tag) or 1)
        return best[0] if best is not None else None
    return float(series.values[-1])


def _holds(condition: Condition, value: float | None) -> bool:
    return value is not None and not math.isnan(value) and OPERATORS[condition.op](value, condition.value)


def apply_filter(flt: RunFilter, runs: Sequence[RunScalars]) -> list[str]:
    """Names of the runs `flt` keeps: in their given order, or best first when it ranks.

    FilterError when a condition or rank names a tag no run has (a typo, not a filter that keeps nothing).
    """
    from .compare import tag_direction  # not on the app's way to its first frame

    for ref in {c.tag for c in flt.conditions} | ({flt.rank.tag} if flt.rank else set()):
        if runs and not any(resolve_tag(ref, run) is not None for run in runs):
            raise FilterError(f"no run has a tag {ref!r}")
    kept = [
        run
        for run in runs
        if all(p.search(run.name) for p in flt.names)
        and all(_holds(c, run_value(run, c.tag, c.mode)) for c in flt.conditions)
    ]
    if flt.rank is None:
        return [run.name for run in kept]
    rank = flt.rank
    scored = []
    for run in kept:
        value = run_value(run, rank.tag, rank.mode)
        tag = resolve_tag(rank.tag, run)
        direction = (tag_direction(run.roles, run.directions, tag) if tag else 0) or 1
        key = -direction * value if value is not None and not math.isnan(value) else math.inf
        scored.append((key if rank.best_first else -key if math.isfinite(key) else math.inf, run.name))
    order = sorted(range(len(scored)), key=lambda i: scored[i][0])  # stable: ties keep the runs' order
    return [scored[i][1] for i in order[: rank.count]]
