"""weight_growth: weight norms growing fast late in training.

Healthy weight norms grow early and then level off (weight decay balances the updates) or keep growing
ever more slowly (~sqrt of the steps without decay). Growth that *accelerates* late in training is the
pathology the seed articles describe: logits and weights inflating as the model memorises or heads toward
instability. On log(norm), bucketed, the best two-segment linear fit gives a break point; it is
weight_growth when the second segment starts after LATE_FRAC of the run, grows by at least MIN_GROWTH in
total, at least ACCEL times faster than the first segment, and the norm is still near its maximum at the end.
"""

from __future__ import annotations

import numpy as np

from ..smoothing import bucket_medians
from .base import MIN_CONFIDENT_POINTS, RunData, confident, finding, fmt, sentence
from .histograms import from_histograms

#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("weight_growth",)

LATE_FRAC = 0.3
MIN_GROWTH = 1.5
ACCEL = 3.0
FIT_BUCKETS = 128
#: Each segment of the two-segment fit spans at least this share of the buckets.
MIN_SEGMENT = 0.1


def two_segment_fit(x: np.ndarray, y: np.ndarray, min_points: int) -> tuple[int, float, float] | None:
    """Break index k and the slopes of the least-squares lines on [0, k) and [k, n), minimising the total SSE.

    Every split is scored at once from cumulative sums (O(n)).
    """
    n = x.size
    if n < 2 * min_points:
        return None
    sums = [np.concatenate(([0.0], np.cumsum(v))) for v in (np.ones(n), x, y, x * x, x * y, y * y)]

    def sse(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        c, sx, sy, sxx, sxy, syy = (s[hi] - s[lo] for s in sums)
        var_x = sxx - sx * sx / c
        cov = sxy - sx * sy / c
        slope = np.where(var_x > 0, cov / np.where(var_x > 0, var_x, 1.0), 0.0)
        return (syy - sy * sy / c) - slope * cov, slope

    k = np.arange(min_points, n - min_points + 1)
    left, slope_left = sse(np.zeros_like(k), k)
    right, slope_right = sse(k, np.full_like(k, n))
    best = int(np.argmin(left + right))
    return int(k[best]), float(slope_left[best]), float(slope_right[best])


def detect(data: RunData) -> list:
    found = _weight_growth(data)
    # Per-layer weight histograms stand in for weight-norm scalars the run did not log.
    return found + from_histograms(data, "weight", found, _weight_growth)


def _weight_growth(data: RunData) -> list:
    grown = []
    for tag in data.tags("weight_norm"):
        steps, values = data.finite(tag)
        positive = values > 0
        steps, values = steps[positive], values[positive]
        if values.size < MIN_CONFIDENT_POINTS // 2 or steps[-1] <= steps[0]:
            continue
        buckets = bucket_medians(steps, values, FIT_BUCKETS)
        x = buckets.steps
        y = np.log(buckets.medians)
        fit = two_segment_fit(x, y, max(3, int(MIN_SEGMENT * x.size)))
        if fit is None:
            continue
        k, slope_before, slope_after = fit
        break_step = float(x[k])
        late = (break_step - x[0]) / (x[-1] - x[0])
        growth = float(np.exp(y[-1] - y[k]))
        if late < LATE_FRAC or growth < MIN_GROWTH or slope_after <= 0:
            continue
        if slope_after < ACCEL * max(slope_before, 0.0) or y[-1] < np.max(y) - np.log(1.1):
            continue
        first = int(buckets.first[k])
        earlier = float(np.exp(y[k] - y[0]))
        grown.append(
            (
                tag,
                int(steps[first]),
                float(buckets.medians[k]),
                float(buckets.medians[-1]),
                growth,
                earlier,
                values.size,
            )
        )
    if not grown:
        return []
    grown.sort(key=lambda g: -g[4])
    tag, onset, at_break, end, growth, earlier, points = grown[0]
    summary = (
        f"{tag} {fmt(at_break)} → {fmt(end)} (×{growth:.1f}) from step {onset} to the end, after "
        f"×{earlier:.2f} over everything before"
    )
    evidence = {
        "summary": summary,
        "tag": tag,
        "growth": growth,
        "earlier_growth": earlier,
        "at_onset": at_break,
        "end": end,
        "layers": [g[0] for g in grown[:10]],
    }
    wd = next((v for k, v in data.run.hparams.items() if k.rsplit(".", 1)[-1].lower() in ("weight_decay", "wd")), None)
    message = f"{tag} grew ×{growth:.1f} from step {onset}, accelerating late in training"
    advice = [
        "add or raise weight decay (AdamW 0.01–0.1)" + (f"; weight_decay is {wd} now" if wd is not None else ""),
        "decay the lr toward the end",
        "if logits grow, add label smoothing (0.1) or a z-loss on the logits",
        "check for overfitting on the validation curve",
    ]
    return [
        finding(
            data,
            "weight_growth",
            confident("warning", points),
            [g[0] for g in grown[:8]],
            onset,
            None,
            evidence,
            message,
            sentence(advice),
        )
    ]
