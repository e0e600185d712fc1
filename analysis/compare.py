"""Across runs: each run's best metric, groups of runs (seeds of one config) compared, and an hparams table.

Everything here is a pure function of `RunReport`s, except the hparams sources that live beside the
event files (config files, read through `run_config`, never written).
"""

from __future__ import annotations

import json
import re
import weakref
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .datamodel import RunReport, Series
from .findings import SEVERITIES
from .run_config import run_hparams
from .smoothing import running_median, scale_noise

#: A trailing replicate marker: `_seed3`, `-seed3`, `seed3`, `_s3`, `-run2`, `_rep1`, `_trial4`, `/seed1`, `_3`.
#: A bare number needs an underscore (`resnet18_lr1e-5` must not lose its `-5`); `resnet50` keeps its digits.
DEFAULT_GROUP_PATTERN = re.compile(
    r"^(?P<group>.+?)(?:[_\-./](?:seed|run|rep|trial|s|r)[_\-]?\d+|seed\d+|_\d+)$", re.IGNORECASE
)
#: An hparams table wider than this does not fit a terminal; columns that differ between runs go first.
MAX_HPARAM_COLUMNS = 12
#: Longest hparam value kept in a table cell.
MAX_CELL_CHARS = 40
#: Two curves have parted when their difference stays beyond this many sigmas of their combined own noise ...
PART_SIGMAS = 3.0
#: ... for this many consecutive points (after a running median over as many points, so one spike is not a parting).
PART_HOLD = 5
#: ... and beyond this fraction of the curves' value range: noiseless curves (synthetic, or logged as means)
#: would otherwise part at the first rounding difference.
PART_MIN_FRACTION = 0.01
#: Longest grid the two curves are compared on; a longer run is compared every k-th step (the parting step is then
#: exact to within k steps: 50 on a million-point run), which keeps a comparison well under 100 ms.
PART_GRID = 20_000
#: Metric tags from held-out data rank above training-set metrics when a run logs both.
_HELD_OUT = re.compile(r"(^|[/_\-.])(val|valid|validation|eval|test|dev)([/_\-.]|$)", re.I)


@dataclass(frozen=True)
class BestMetric:
    """A run's best value of its main metric, and when it got there."""

    tag: str
    role: str | None
    direction: int  # +1 higher is better, -1 lower is better
    value: float
    step: int


@dataclass(frozen=True)
class Stat:
    """Mean ± sample standard deviation of the finite values among `count` runs."""

    mean: float | None
    std: float | None  # None with fewer than two finite values
    finite: int
    count: int

    @classmethod
    def of(cls, values: Sequence[float | None]) -> Stat:
        arr = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
        finite = arr[np.isfinite(arr)]
        mean = float(finite.mean()) if finite.size else None
        std = float(finite.std(ddof=1)) if finite.size >= 2 else None
        return cls(mean, std, int(finite.size), int(arr.size))


@dataclass(frozen=True)
class GroupSummary:
    """Runs sharing a name up to their replicate suffix, compared as one config."""

    name: str
    runs: tuple[str, ...]
    metric_tag: str | None  # the best-metric tag most of the group shares
    best_metric: Stat
    final_loss: Stat
    worst_health: int | None
    worst_run: str | None
    severity_counts: dict[str, int]  # findings by severity over the group


@dataclass(frozen=True)
class HparamsTable:
    """Hyperparameters per run: `columns` differ between runs (or are the only ones); `constant` are shared."""

    columns: tuple[str, ...]  # what fits a table: differing keys first
    rows: dict[str, dict[str, Any]]  # run -> every hyperparameter it records (not only `columns`)
    constant: dict[str, Any]
    sources: dict[str, tuple[str, ...]]  # run -> where its values came from
    dropped: int  # differing columns left out for width


@dataclass(frozen=True)
class Comparison:
    best: dict[str, BestMetric | None]
    groups: tuple[GroupSummary, ...]
    hparams: HparamsTable | None


@dataclass(frozen=True)
class Parting:
    """Where two curves of one tag part: the first step their difference leaves both runs' own noise band."""

    step: int
    value_a: float  # each curve's running median at `step` (NaN where that run was non-finite)
    value_b: float
    band: float  # the half-width of the noise band the difference left


# ---- where two curves part ---------------------------------------------------------------------------


def _finite(series: Series) -> tuple[np.ndarray, np.ndarray]:
    keep = np.isfinite(series.values)
    return series.steps[keep], series.values[keep]


#: Each curve's noise (`scale_noise` of its finite values), kept while the series lives: the sick runs of a sweep
#: share one healthy twin, whose curve was measured again for each of them.
_NOISE: weakref.WeakKeyDictionary[Series, float] = weakref.WeakKeyDictionary()


def _noise(series: Series, values: np.ndarray) -> float:
    """`scale_noise(values)`, `values` being `series`' finite values (`_finite`)."""
    try:
        return _NOISE[series]
    except KeyError:
        noise = _NOISE[series] = scale_noise(values)
        return noise


def _running_median(values: np.ndarray, width: int) -> np.ndarray:
    """`np.median` of each `width`-wide window (`width` odd) of `values` padded with its edge values: what
    `smoothing.running_median` gives, and NaN where a window holds a NaN, as `np.median` has it (running_median,
    which is for values without NaN, takes the median of the others)."""
    if values.size < width:
        return values
    smooth = running_median(values, width)
    gaps = np.isnan(values)
    if gaps.any():
        smooth[np.convolve(gaps.astype(np.int64), np.ones(width, dtype=np.int64), mode="same") > 0] = np.nan
    return smooth


def parting_step(a: Series, b: Series) -> Parting | None:
    """The first step where curve `a` leaves curve `b` and stays away; None while they agree within their noise.

    On the steps both runs cover (the denser run's steps, the other interpolated), the difference of
    their running medians must exceed PART_SIGMAS times the two runs' combined noise sigma (each
    run's own `scale_noise`, which ignores trends), and PART_MIN_FRACTION of their value range, for
    PART_HOLD points in a row. A run that turns non-finite where the other is still finite has parted there.
    Runs longer than PART_GRID points are compared on every k-th step.
    """
    steps_a, values_a = _finite(a)
    steps_b, values_b = _finite(b)
    if steps_a.size < 2 * PART_HOLD or steps_b.size < 2 * PART_HOLD:
        return None
    lo, hi = max(a.steps[0], b.steps[0]), min(a.steps[-1], b.steps[-1])
    grid_from = a if len(a) >= len(b) else b
    grid = grid_from.steps[(grid_from.steps >= lo) & (grid_from.steps <= hi)]
    grid = grid[:: -(-grid.size // PART_GRID)] if grid.size > PART_GRID else grid
    if grid.size < 2 * PART_HOLD:
        return None
    on_a = _on_grid(a, steps_a, values_a, grid)
    on_b = _on_grid(b, steps_b, values_b, grid)
    noise = float(np.hypot(_noise(a, values_a), _noise(b, values_b)))
    span = float(max(values_a.max(), values_b.max()) - min(values_a.min(), values_b.min()))
    band = max(PART_SIGMAS * noise, PART_MIN_FRACTION * span)
    width = PART_HOLD | 1
    smooth_a, smooth_b = _running_median(on_a, width), _running_median(on_b, width)
    with np.errstate(invalid="ignore"):
        difference = np.abs(smooth_a - smooth_b)
    # A non-finite point on one side only has parted; on both sides, the two agree that far.
    one_sided = np.isnan(on_a) != np.isnan(on_b)
    apart = one_sided | (np.nan_to_num(difference, nan=0.0) > band)
    held = np.convolve(apart.astype(np.int64), np.ones(PART_HOLD, np.int64), mode="valid")
    starts = np.flatnonzero(held == PART_HOLD)
    if not starts.size:
        return None
    at = int(starts[0])
    return Parting(int(grid[at]), float(on_a[at] if one_sided[at] else smooth_a[at]),
                   float(on_b[at] if one_sided[at] else smooth_b[at]), band)  # fmt: skip


def _on_grid(series: Series, steps: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """`series` at the `grid` steps: interpolated between finite points, NaN from its first non-finite point on
    (a run that went NaN stays there as far as a comparison is concerned)."""
    out = np.interp(grid, steps, values)
    bad = ~np.isfinite(series.values)
    if bad.any():
        out[grid >= series.steps[int(np.argmax(bad))]] = np.nan
    return out


# ---- best metric -------------------------------------------------------------------------------------


def _main_tag(report: RunReport) -> str | None:
    """The tag a person would quote for this run: a held-out metric, else a validation loss, else the loss."""
    usable = [t for t, f in report.features.items() if f.points and f.best is not None]
    for role in ("metric", "val_loss", "train_loss"):
        tags = [t for t in usable if report.roles.get(t) == role]
        if role == "metric":  # a metric whose direction is unknown has no "best"
            tags = [t for t in tags if report.directions.get(t, report.features[t].direction) != 0]
        if tags:
            return min(tags, key=lambda t: (not _HELD_OUT.search(t), t))
    return None


def tag_direction(roles: Mapping[str, str | None], directions: Mapping[str, int], tag: str) -> int:
    """+1 when higher is better for `tag`, -1 when lower is (a loss, whatever its direction says), 0 unknown."""
    return int(directions.get(tag) or (-1 if roles.get(tag) in ("val_loss", "train_loss") else 0))


def series_best(series: Series, direction: int) -> tuple[float, int] | None:
    """The best finite value of `series` in `direction` (+1 highest, -1 lowest) and its first step."""
    keep = np.isfinite(series.values)
    if not direction or not keep.any():
        return None
    values = series.values[keep]
    at = int(np.argmax(values) if direction > 0 else np.argmin(values))
    return float(values[at]), int(series.steps[keep][at])


def best_metric(report: RunReport) -> BestMetric | None:
    """The run's best value of its main metric (or loss, when it logs no metric) and its step."""
    tag = _main_tag(report)
    if tag is None:
        return None
    features = report.features[tag]
    role = report.roles.get(tag)
    direction = tag_direction(report.roles, report.directions, tag) or features.direction
    if features.best is None or features.best_step is None or not np.isfinite(features.best):
        return None
    return BestMetric(tag, role, int(direction), float(features.best), int(features.best_step))


def final_loss(report: RunReport) -> float | None:
    """The last logged training loss (validation loss when no training loss); NaN when it ended non-finite."""
    for role in ("train_loss", "val_loss"):
        tags = sorted(t for t, r in report.roles.items() if r == role and t in report.features)
        for tag in tags:
            features = report.features[tag]
            series = report.run.scalars.get(tag)
            if series is not None and len(series):
                return float(series.values[-1])
            if features.final is not None:
                return float(features.final)
    return None


# ---- groups ------------------------------------------------------------------------------------------


def group_key(name: str, pattern: re.Pattern[str] | None = None) -> str:
    """The group a run belongs to: its name up to a replicate suffix (default) or what `pattern` captures.

    A user pattern's named group `group` wins, then its first group, then its whole match; a run the
    pattern does not match is a group of its own.
    """
    if pattern is None:
        match = DEFAULT_GROUP_PATTERN.match(name)
        return match["group"] if match else name
    match = pattern.search(name)
    if not match:
        return name
    if "group" in pattern.groupindex and match["group"] is not None:
        return match["group"]
    if pattern.groups and match.group(1) is not None:
        return match.group(1)
    return match.group(0)


def compile_group_pattern(text: str | None) -> re.Pattern[str] | None:
    """The user's `--group REGEX` compiled (raises `re.error` with the reason when it is invalid)."""
    return re.compile(text) if text else None


def group_runs(names: Iterable[str], pattern: re.Pattern[str] | None = None) -> dict[str, list[str]]:
    """Run names by group key, in first-seen order."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(group_key(name, pattern), []).append(name)
    return groups


def summarise_groups(
    reports: Sequence[RunReport],
    pattern: re.Pattern[str] | None = None,
    best: dict[str, BestMetric | None] | None = None,
) -> tuple[GroupSummary, ...]:
    """One summary per group, worst health first; empty when no group has two runs (nothing to compare)."""
    by_name = {r.name: r for r in reports}
    best = best if best is not None else {r.name: best_metric(r) for r in reports}
    groups = group_runs(by_name, pattern)
    if all(len(members) < 2 for members in groups.values()):
        return ()
    out = []
    for name, members in groups.items():
        member_reports = [by_name[m] for m in members]
        tags = Counter(b.tag for m in members if (b := best.get(m)) is not None)
        metric_tag = tags.most_common(1)[0][0] if tags else None
        metric_values = [b.value if (b := best.get(m)) is not None and b.tag == metric_tag else None for m in members]
        scores = [(r.health.score, r.name) for r in member_reports if r.health.score is not None]
        worst = min(scores) if scores else None
        severities = Counter(f.severity for r in member_reports for f in r.findings)
        out.append(
            GroupSummary(
                name=name,
                runs=tuple(members),
                metric_tag=metric_tag,
                best_metric=Stat.of(metric_values),
                final_loss=Stat.of([final_loss(r) for r in member_reports]),
                worst_health=worst[0] if worst else None,
                worst_run=worst[1] if worst else None,
                severity_counts={s: severities.get(s, 0) for s in SEVERITIES},
            )
        )
    out.sort(key=lambda g: (g.worst_health if g.worst_health is not None else 101, g.name))
    return tuple(out)


# ---- hparams -----------------------------------------------------------------------------------------


def hparams_of(report: RunReport) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Every hyperparameter known for a report's run and where they came from (see `run_config.run_hparams`)."""
    return run_hparams(report.run)


def _cell(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return int(value)  # the hparams plugin stores every number as a double: 256.0 was 256
    if isinstance(value, str) and len(value) > MAX_CELL_CHARS:
        return value[: MAX_CELL_CHARS - 1] + "…"
    return value


#: Run name -> (every hyperparameter, where they came from) of each run (`hparams_of`).
Hparams = Mapping[str, tuple[dict[str, Any], tuple[str, ...]]]


def hparams_table(reports: Sequence[RunReport], known: Hparams | None = None) -> HparamsTable | None:
    """Hyperparameters of every run that has any, differing columns first; None when no run has any. `known`: the
    runs' `hparams_of` already read (`twins.RunSettings.hparams`), for the runs it holds."""
    rows: dict[str, dict[str, Any]] = {}
    sources: dict[str, tuple[str, ...]] = {}
    for report in reports:
        values, where = known[report.name] if known is not None and report.name in known else hparams_of(report)
        if values:
            rows[report.name] = {str(k): _cell(v) for k, v in values.items()}
            sources[report.name] = where
    if not rows:
        return None
    keys: list[str] = []
    for row in rows.values():
        keys.extend(k for k in row if k not in keys)
    differing = [
        k for k in keys if len({json.dumps(row.get(k), sort_keys=True, default=str) for row in rows.values()}) > 1
    ]
    constant = {k: next(iter(rows.values()))[k] for k in keys if k not in differing} if len(rows) > 1 else {}
    columns = differing if len(rows) > 1 else keys
    dropped = max(0, len(columns) - MAX_HPARAM_COLUMNS)
    columns = columns[:MAX_HPARAM_COLUMNS]
    return HparamsTable(
        columns=tuple(columns),
        rows=rows,
        constant=constant,
        sources=sources,
        dropped=dropped,
    )


# ---- everything --------------------------------------------------------------------------------------


def compare(
    reports: Sequence[RunReport], group_pattern: re.Pattern[str] | None = None, hparams: Hparams | None = None
) -> Comparison:
    """Best metric per run, group comparison and hparams table for a report's runs (`hparams`: as `hparams_table`
    takes them)."""
    best = {r.name: best_metric(r) for r in reports}
    return Comparison(
        best=best, groups=summarise_groups(reports, group_pattern, best), hparams=hparams_table(reports, hparams)
    )
