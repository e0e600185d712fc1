"""The scalar rules, applied to what a run's histograms say per layer.

A run that logs weight, gradient or activation histograms (PyTorch `add_histogram`, Keras
`histogram_freq=1`, TF2 tensor histograms) but no per-layer norm scalars still shows where in the network
things go wrong. Rather than a second set of thresholds, each histogram tag becomes the scalar the
scalar rules already judge:

- a gradient histogram -> the layer's gradient norm (`grad_norm_layer`): exploding and vanishing layers;
- a weight histogram -> the layer's weight norm (`weight_norm`; biases left out: they start at 0, so any
  growth is "fast"): weight growth per layer;
- a ReLU-like activation histogram (nothing below 0) -> its mass at zero (`activation_zero_frac`): dead units.

Bounded activations (a tag naming tanh or sigmoid whose values stay in its range) are judged here on their
mass at the saturation ends, with the dead-units thresholds: a saturated unit passes no gradient either.

The owning detector modules (`gradients`, `weights`, `activations`) call `from_histograms` after their own
rules, so each kind keeps one owner; a kind their scalars already reported is not reported twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ..datamodel import Finding
from ..features import series_features
from ..histograms import histogram_kind, layer_name, layer_series, mass_at_ends, saturation_ends, series_buckets
from ..smoothing import median
from .base import RunData, confident, finding, some_of

#: Histogram kind -> the role its per-point number (`histograms.layer_series`) plays for the scalar rules.
VIEW_ROLES = {"gradient": "grad_norm_layer", "weight": "weight_norm", "activation": "activation_zero_frac"}

#: Recent points judged for saturation: the last RECENT_SHARE of them (at least 3).
RECENT_SHARE = 0.2


def histogram_view(data: RunData, kind: str) -> RunData | None:
    """`data` with each histogram of `kind` added as a scalar of its view role, or None when the run has
    none, or already logs scalars of that role (per-layer norms are read from those, not estimated)."""
    role = VIEW_ROLES[kind]
    if data.tags(role):
        return None
    series = {tag: s for tag, s in layer_series(data.run.histograms, kind).items() if tag not in data.run.scalars}
    if not series:
        return None
    run = replace(data.run, scalars={**data.run.scalars, **series})
    roles = {**data.roles, **{tag: (role, 0) for tag in series}}
    features = {**data.features, **{tag: series_features(tag, s, role, 0) for tag, s in series.items()}}
    return replace(data, run=run, roles=roles, features=features)


def _from_histograms(found: Finding, data: RunData) -> Finding:
    layers = [layer_name(t) for t in found.tags if t in data.run.histograms]
    return replace(found, evidence={**found.evidence, "source": "histograms", "layer_names": layers[:10]})


def from_histograms(
    data: RunData, kind: str, found: list[Finding], rule: Callable[[RunData], list[Finding]]
) -> list[Finding]:
    """What `rule` finds on the run's `kind` histograms (as their view role's scalars), in kinds `found`
    does not hold yet; each finding says in its evidence that it comes from histograms, and which layers."""
    view = histogram_view(data, kind)
    if view is None:
        return []
    known = {f.kind for f in found}
    return [_from_histograms(f, data) for f in rule(view) if f.kind not in known]


def saturated_units(
    data: RunData,
    dead_frac: float,
    critical_frac: float,
    died_at: Callable[[np.ndarray, np.ndarray, float, float], int],
) -> list[Finding]:
    """dead_units from tanh/sigmoid activation histograms: the recent median of their mass at the saturation
    ends is at least `dead_frac` (critical from `critical_frac`), with the onset when the units saturated:
    `died_at(steps, mass, start, recent)`, the dead_units owner's one definition of it."""
    hot = []
    for tag, hist in sorted(data.run.histograms.items()):
        # The name must say tanh or sigmoid (values in [0, 1] fit either range) before buckets are worth building.
        if len(hist) < 3 or histogram_kind(tag) != "activation" or saturation_ends(tag, 0.0, 1.0) is None:
            continue
        b = series_buckets(hist)
        ends = saturation_ends(tag, float(np.nanmin(b.left[:, 0])), float(np.nanmax(b.right[:, -1])))
        if ends is None:
            continue
        mass = mass_at_ends(b, ends)
        finite = np.isfinite(mass)
        steps, mass = hist.steps[finite], mass[finite]
        if mass.size < 3:
            continue
        recent = median(mass[-max(3, int(RECENT_SHARE * mass.size)) :])
        if recent < dead_frac:
            continue
        start = median(mass[: max(3, mass.size // 20)])
        onset = died_at(steps, mass, float(mass[0]), recent)
        hot.append((tag, recent, start, onset, mass.size, ends))
    if not hot:
        return []
    hot.sort(key=lambda h: -h[1])
    tag, recent, start, onset, points, ends = hot[0]
    low, high = (f"{e:g}" for e in ends)
    summary = f"{tag} {start:.0%} → {recent:.0%} of values within reach of {low} or {high}" + (
        f" since step {onset}" if onset else ""
    )
    evidence = {
        "summary": summary,
        "tag": tag,
        "recent_saturated_fraction": recent,
        "start_saturated_fraction": start,
        "layers": [h[0] for h in hot[:10]],
        "layer_names": [layer_name(h[0]) for h in hot[:10]],
        "layer_count": len(hot),
        "source": "histograms",
    }
    evidence.update(data.context_evidence(onset))
    names = some_of([h[0] for h in hot])
    message = f"saturated units: {recent:.0%} of activations sit at {low}/{high} in {names}"
    suggestion = (
        "Saturated tanh/sigmoid units pass almost no gradient: scale the inputs, use Xavier initialisation, "
        "add normalisation (LayerNorm/BatchNorm) before the activation or switch to ReLU/GELU, and lower the "
        f"learning rate if the saturation began at step {onset}"
    )
    severity = confident("critical" if recent >= critical_frac else "warning", points)
    return [finding(data, "dead_units", severity, [h[0] for h in hot[:8]], onset, None, evidence, message, suggestion)]
