"""dead_units: ReLU activations mostly zero (or units saturated) for good.

A ReLU layer outputs zero for about half its inputs in a healthy net; when DEAD_FRAC of its outputs are
zero (the seed article's 80 % rule) the layer has lost most of its capacity, and units that stopped
firing rarely recover because they get no gradient. Judged on the recent median of every
`activation_zero_frac` tag (percentages are read as fractions), with the onset where the level crossed
DEAD_FRAC for the last time. CRITICAL_FRAC (virtually every unit dead) is critical. Layers are one finding.
"""

from __future__ import annotations

import numpy as np

from .base import RunData, confident, finding, some_of
from .histograms import from_histograms, saturated_units

#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("dead_units",)

DEAD_FRAC = 0.8
CRITICAL_FRAC = 0.98


def _as_fraction(values: np.ndarray, all_values: np.ndarray) -> np.ndarray:
    return values / 100.0 if all_values.size and np.nanmax(all_values) > 1.0 else values


def detect(data: RunData) -> list:
    found = _dead_units(data)
    # ReLU-like activation histograms stand in for zero-fraction scalars the run did not log, and tanh/sigmoid
    # ones are judged on their saturation ends.
    found += from_histograms(data, "activation", found, _dead_units)
    return found or saturated_units(data, DEAD_FRAC, CRITICAL_FRAC)


def _dead_units(data: RunData) -> list:
    dead = []
    for tag in data.tags("activation_zero_frac"):
        feats = data.features[tag]
        steps, values = data.finite(tag)
        if values.size < 3:
            continue
        fraction = _as_fraction(values, values)
        recent = float(_as_fraction(np.array([feats.extra["recent_median"]]), values)[0])
        if recent < DEAD_FRAC:
            continue
        level = feats.extra["level"]
        medians = _as_fraction(level.medians, values)
        below = np.flatnonzero(medians < DEAD_FRAC)
        bucket = int(below[-1]) + 1 if below.size else 0
        bucket = min(bucket, len(level) - 1)
        start_index = int(level.first[bucket])
        crossed = np.flatnonzero(fraction[start_index:] >= DEAD_FRAC)
        onset = int(steps[start_index + (int(crossed[0]) if crossed.size else 0)])
        dead.append((tag, recent, float(np.median(fraction[: max(3, values.size // 20)])), onset, values.size))
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
