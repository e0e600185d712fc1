"""dead_units: ReLU activations mostly zero (or units saturated) for good.

A ReLU layer outputs zero for about half its inputs in a healthy net; when DEAD_FRAC of its outputs are
zero (the seed article's 80 % rule) the layer has lost most of its capacity, and units that stopped
firing rarely recover because they get no gradient. Judged on the recent median of every
`activation_zero_frac` tag (percentages are read as fractions). CRITICAL_FRAC (virtually every unit dead)
is critical. Layers are one finding.

A tag named only "sparsity" (`sparsity/layer1`) has no role: pruning logs the sparsity of its weights, meant to reach
90 %. Such a tag is judged here too when its values are those of a ReLU layer's zero share measured on each batch
(`_measured_sparsity`): not dense at its first point (a ReLU layer starts near INIT_ZERO_FRAC, weights start dense)
and falling as well as rising between logged points (each batch gives another share; a pruning mask only grows or
holds).

The onset is when the units died (`died_at`): the middle of the layer's rise from the level it started at
to the dead level it sits at now. Units die fast (one large update) and the share then creeps up for the
rest of the run; a fixed level such as DEAD_FRAC would date the death wherever the creep crossed it.
"""

from __future__ import annotations

import re

import numpy as np

from ..smoothing import median, running_median
from .base import RunData, confident, finding, some_of
from .histograms import from_histograms, saturated_units

#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("dead_units",)

DEAD_FRAC = 0.8
CRITICAL_FRAC = 0.98
#: A ReLU layer at initialisation outputs zero for about half its inputs (zero-mean pre-activations): the
#: level its rise starts from when the first logged point already comes after the units died.
INIT_ZERO_FRAC = 0.5


def died_at(steps: np.ndarray, share: np.ndarray, start: float, recent: float) -> int:
    """When the units died: the first step from which the share of dead (or saturated) units, as a running
    median of 3 points, stayed at or above the middle of its rise from `start` (its first point: a median
    of the first few could already hold the fast rise) to `recent`."""
    middle = 0.5 * (start + recent)
    below = np.flatnonzero(running_median(share, 3) < middle)
    first = int(below[-1]) + 1 if below.size else 0
    return int(steps[min(first, steps.size - 1)])


def _as_fraction(values: np.ndarray, all_values: np.ndarray) -> np.ndarray:
    return values / 100.0 if all_values.size and np.nanmax(all_values) > 1.0 else values


def detect(data: RunData) -> list:
    found = _dead_units(data)
    # ReLU-like activation histograms stand in for zero-fraction scalars the run did not log, and tanh/sigmoid
    # ones are judged on their saturation ends.
    found += from_histograms(data, "activation", found, _dead_units)
    return found or saturated_units(data, DEAD_FRAC, CRITICAL_FRAC, died_at)


#: A ReLU layer's zero share that falls between at least this share of its consecutive logged points was measured on
#: each batch (a share wanders both ways); a pruning mask's sparsity never falls.
FALLS_SHARE = 0.1
_SPARSITY = re.compile(r"(^|[^a-z])sparsity($|[^a-z])")
_NOT_ACTIVATIONS = re.compile(r"weight|param|prun|mask")


def _measured_sparsity(data: RunData) -> list[str]:
    """Tags named "sparsity" without a role whose values read as a ReLU layer's zero share measured per batch."""
    found = []
    for tag, (role, _) in data.roles.items():
        lowered = tag.lower()
        if role is not None or not _SPARSITY.search(lowered) or _NOT_ACTIVATIONS.search(lowered):
            continue
        values = data.finite(tag)[1] if tag in data.run.scalars else np.empty(0)
        if values.size < 3 or values.min() < 0 or values.max() > 100:
            continue
        fraction = _as_fraction(values, values)
        if fraction[0] >= INIT_ZERO_FRAC / 2 and np.count_nonzero(np.diff(fraction) < 0) >= FALLS_SHARE * (
            values.size - 1
        ):
            found.append(tag)
    return found


def _dead_units(data: RunData) -> list:
    dead = []
    for tag in data.tags("activation_zero_frac") + _measured_sparsity(data):
        feats = data.features[tag]
        steps, values = data.finite(tag)
        if values.size < 3:
            continue
        fraction = _as_fraction(values, values)
        recent = float(_as_fraction(np.array([feats.extra["recent_median"]]), values)[0])
        if recent < DEAD_FRAC:
            continue
        start = median(fraction[: max(3, values.size // 20)])
        onset = died_at(steps, fraction, min(float(fraction[0]), INIT_ZERO_FRAC), recent)
        dead.append((tag, recent, start, onset, values.size))
    if not dead:
        return []
    dead.sort(key=lambda d: -d[1])
    tag, recent, start, onset, points = dead[0]
    severity = confident("critical" if recent >= CRITICAL_FRAC else "warning", points)
    summary = f"{tag} {start:.0%} → {recent:.0%} of units output zero" + (f" since step {onset}" if onset else "")
    evidence = {
        "summary": summary,
        "tag": tag,
        "recent_zero_fraction": recent,
        "start_zero_fraction": start,
        "layers": [d[0] for d in dead[:10]],
        "layer_count": len(dead),
    }
    evidence.update(data.context_evidence(onset))
    names = some_of([d[0] for d in dead])
    message = f"dead units: {recent:.0%} of activations are zero in {names}"
    suggestion = (
        "Lower the learning rate (one large update can kill ReLUs for good), use LeakyReLU/GELU, "
        "Kaiming initialisation with a small positive bias, and BatchNorm/LayerNorm before the "
        f"activation; re-check from the last checkpoint before step {onset}"
    )
    return [finding(data, "dead_units", severity, [d[0] for d in dead[:8]], onset, None, evidence, message, suggestion)]
