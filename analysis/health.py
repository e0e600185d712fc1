"""Health score of one run, 0–100 (100: nothing to worry about), from five components.

Each component is a score out of 100, or None when the run logs nothing it could be judged on (a missing
component is not a penalty: a run without a GPU-utilisation tag is not inefficient, it is unmeasured).

    component            judged when the run logs
    convergence          any loss, or a metric with a direction
    stability            a training loss (or loss term)
    gradient_health      grad norms, loss scale, weight norms or activation statistics
    resource_efficiency  gpu_util, or data_time+step_time
    overfitting_risk     a validation loss or metric

    A finding counts against the component its row in `findings.KINDS` names (divergence against
    convergence, overfitting against overfitting_risk, ...); kinds with no component there act only through
    the caps below.

    component = clamp(100 - data_penalty - Σ finding penalties, 0, 100)
    finding penalty: critical 60, warning 30, info 8
    data penalties:
      convergence          30 when the main loss ends above where it started
      resource_efficiency  100 - min(util_score, data_score), util_score = 100 · min(1, median gpu_util / 90 %),
                           data_score = 100 · min(1, (1 - data_time/step_time) / 0.9)
      overfitting_risk     min(20, 10 · (val/train - 2)) when the final validation loss is more than twice
                           the training loss (the seed's "ratio > 2" generalisation-gap rule)

    score = Σ w_c · component_c / Σ w_c over the components that are not None
            w: convergence .3, stability .2, gradient_health .2, resource_efficiency .1, overfitting_risk .2
    then capped by the worst finding: ≤ 40 with a critical, ≤ 80 with a warning, so a run with a critical
    finding always ranks below one without. No component and no finding: 100.

A run without a single scalar point (an empty events file, a header-only file, hparams or images only) has
nothing to be judged on: its score is None ("no data"), never 100, and the engine adds one data_integrity
note saying what the folder holds.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .datamodel import Finding, Health, SeriesFeatures
from .findings import COMPONENTS, kinds_counted_in

WEIGHTS = {
    "convergence": 0.3,
    "stability": 0.2,
    "gradient_health": 0.2,
    "resource_efficiency": 0.1,
    "overfitting_risk": 0.2,
}
PENALTY = {"critical": 60, "warning": 30, "info": 8}
CAP = {"critical": 40, "warning": 80}
#: component -> the finding kinds counted against it, read from the registry.
KINDS = {component: kinds_counted_in(component) for component in COMPONENTS}
_LOSSES = ("train_loss", "val_loss", "loss_component")
#: gpu_util at or above this median scores full marks (a busy accelerator rarely shows more).
FULL_UTIL = 90.0
#: A step spending at most this share waiting for data scores full marks.
FREE_DATA_SHARE = 0.1


def _role(value) -> str | None:
    return value[0] if isinstance(value, tuple) else value


def _by_role(features: Mapping[str, SeriesFeatures], roles) -> dict[str, list[SeriesFeatures]]:
    out: dict[str, list[SeriesFeatures]] = {}
    for tag, feats in features.items():
        role = _role(roles.get(tag)) if tag in roles else feats.role
        if role is not None and feats.final is not None:
            out.setdefault(role, []).append(feats)
    return out


def _most(series: list[SeriesFeatures]) -> SeriesFeatures | None:
    return max(series, key=lambda f: f.points) if series else None


def _resource_score(by_role: dict[str, list[SeriesFeatures]]) -> float | None:
    scores = []
    utils = by_role.get("gpu_util", [])
    # _by_role keeps only series with a finite point, so none is None; the filter says so to the type checker.
    medians = [m for f in utils if (m := f.extra.get("recent_median", f.final)) is not None]
    if medians:
        percents = [m * 100.0 if abs(m) <= 1.0 else m for m in medians]
        scores.append(100.0 * min(1.0, float(np.mean(percents)) / FULL_UTIL))
    data_time, step_time = _most(by_role.get("data_time", [])), _most(by_role.get("step_time", []))
    if data_time and step_time and step_time.extra.get("recent_median"):
        share = data_time.extra["recent_median"] / step_time.extra["recent_median"]
        scores.append(100.0 * min(1.0, max(0.0, 1.0 - share) / (1.0 - FREE_DATA_SHARE)))
    return min(scores) if scores else None


#: How a score reads where there is none.
NO_DATA = "no data"


def score_label(score: int | None) -> str:
    """A health score as text: the number, or "no data" for a run without scalar points."""
    return NO_DATA if score is None else str(score)


def health(findings: list[Finding], features: Mapping[str, SeriesFeatures], roles: Mapping) -> Health:
    """Score one run (see the module docstring for the formula)."""
    if not any(f.points for f in features.values()):
        return Health(score=None, components=dict.fromkeys(WEIGHTS))
    by_role = _by_role(features, roles)
    has = lambda *rs: any(by_role.get(r) for r in rs)  # noqa: E731
    metric_with_direction = any(f.direction for f in by_role.get("metric", []))
    data_penalty: dict[str, float | None] = {
        "convergence": 0.0 if has(*_LOSSES) or metric_with_direction else None,
        "stability": 0.0 if has("train_loss", "loss_component") else None,
        "gradient_health": 0.0
        if has("grad_norm", "grad_norm_layer", "loss_scale", "weight_norm", "activation_zero_frac")
        else None,
        "resource_efficiency": None,
        "overfitting_risk": 0.0 if has("val_loss") or metric_with_direction else None,
    }
    main_loss = _most(by_role.get("train_loss", [])) or _most(by_role.get("val_loss", []))
    if main_loss is not None and data_penalty["convergence"] is not None:
        start, end = main_loss.extra.get("start_level"), main_loss.extra.get("end_level")
        if start is not None and end is not None and end > start:
            data_penalty["convergence"] += 30.0
    resource = _resource_score(by_role)
    if resource is not None:
        data_penalty["resource_efficiency"] = 100.0 - resource
    train, val = _most(by_role.get("train_loss", [])), _most(by_role.get("val_loss", []))
    if train and val and data_penalty["overfitting_risk"] is not None:
        t_end, v_end = train.extra.get("end_level"), val.extra.get("end_level")
        if t_end and v_end and t_end > 0 and v_end / t_end > 2.0:
            data_penalty["overfitting_risk"] += min(20.0, 10.0 * (v_end / t_end - 2.0))
    components: dict[str, int | None] = {}
    for name, penalty in data_penalty.items():
        counted = [f for f in findings if f.kind in KINDS[name]]
        if penalty is None and not counted:
            components[name] = None
            continue
        total = (penalty or 0.0) + sum(PENALTY.get(f.severity, 0) for f in counted)
        components[name] = int(round(min(100.0, max(0.0, 100.0 - total))))
    present = {k: v for k, v in components.items() if v is not None}
    score = sum(WEIGHTS[k] * v for k, v in present.items()) / sum(WEIGHTS[k] for k in present) if present else 100.0
    for severity, cap in CAP.items():
        if any(f.severity == severity for f in findings):
            score = min(score, cap)
    return Health(score=int(round(max(0.0, min(100.0, score)))), components=components)
