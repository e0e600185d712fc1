"""input_bottleneck: data loading dominates the step time, or the accelerator sits idle.

- data_time / step_time: the median share of each step spent waiting for the next batch, over the run
  after its first STARTUP_FRAC (the first iterations build workers, caches and cuDNN plans), or over its
  last RECENT_FRAC when that is worse (a cache that stopped fitting in memory, a slower disk). At DATA_WARN
  (half the step, the seed article's "data time exceeds compute time") the GPU idles half the time: a
  warning; from DATA_INFO it is worth knowing.
- gpu_util: the median utilisation after the start (or over the recent part, when lower), read as
  percent (fractions ×100). Below UTIL_WARN the
  device is idle more than half the time; below UTIL_INFO it is worth knowing (the seed's 60 % rule sits in
  between).
The onset is where the bad share starts and stays (per bucket of the aligned series), often the first step.
Fewer than MIN_CONFIDENT_POINTS points give info, unless the share is at DATA_WARN at STEADY_SHARE of at least
STEADY_POINTS points: a ratio that bad at every point is not a fluke.
"""

from __future__ import annotations

import numpy as np

from ..smoothing import bucket_medians, median
from .base import MIN_CONFIDENT_POINTS, RunData, confident, finding, fmt, sentence

#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("input_bottleneck",)

STARTUP_FRAC = 0.05
RECENT_FRAC = 0.25
DATA_WARN = 0.5
DATA_INFO = 0.3
UTIL_WARN = 50.0
UTIL_INFO = 70.0
ONSET_BUCKETS = 50
#: With at least STEADY_POINTS aligned points of which STEADY_SHARE wait for data at DATA_WARN or more, the
#: warning stands on fewer than MIN_CONFIDENT_POINTS points.
STEADY_POINTS = 8
STEADY_SHARE = 0.9


def _after_startup(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if steps.size < 5:
        return steps, values
    cut = steps[0] + STARTUP_FRAC * (steps[-1] - steps[0])
    keep = steps >= cut
    return steps[keep], values[keep]


def _onset(steps: np.ndarray, bad: np.ndarray, first_step: int) -> int:
    """First step from which the buckets are mostly bad to the end (`first_step` when that is from the start)."""
    if steps.size == 0:
        return first_step
    buckets = bucket_medians(steps.astype(np.float64), bad.astype(np.float64), ONSET_BUCKETS)
    good = np.flatnonzero(buckets.medians < 0.5)
    start = int(good[-1]) + 1 if good.size else 0
    if start >= len(buckets) or start == 0:
        return first_step
    return int(steps[buckets.first[start]])


def _typical(steps: np.ndarray, values: np.ndarray, worse_is_higher: bool) -> float:
    """The median over the run, or over its recent part when that is worse."""
    overall = median(values)
    recent = values[steps >= steps[0] + (1 - RECENT_FRAC) * (steps[-1] - steps[0])]
    if recent.size < 3:
        return overall
    latest = median(recent)
    return max(overall, latest) if worse_is_higher else min(overall, latest)


def _most_points(data: RunData, role: str) -> str | None:
    tags = data.tags(role)
    return max(tags, key=lambda t: (data.features[t].points, -len(t))) if tags else None


def _data_share(data: RunData) -> dict | None:
    data_tag, step_tag = _most_points(data, "data_time"), _most_points(data, "step_time")
    if data_tag is None or step_tag is None:
        return None
    ds, dv = data.finite(data_tag)
    ss, sv = data.finite(step_tag)
    if ds.size == ss.size and np.array_equal(ds, ss):  # the usual case: both logged at every step
        common, di, si = ds, np.arange(ds.size), np.arange(ss.size)
    else:
        common, di, si = np.intersect1d(ds, ss, return_indices=True)
    if common.size < 5:
        return None
    steps, share = _after_startup(common, dv[di] / np.where(sv[si] > 0, sv[si], np.nan))
    finite = np.isfinite(share)
    steps, share = steps[finite], share[finite]
    if share.size < 3:
        return None
    typical_share = _typical(steps, share, worse_is_higher=True)
    if typical_share < DATA_INFO:
        return None
    onset = _onset(steps, share >= DATA_INFO, int(common[0]))
    from_onset = steps >= onset
    # A share that is bad at (nearly) every logged point proves itself with fewer points than a median does:
    # detectron2 logs every 20 iterations, so a short run has 16 points that all say 96 %.
    steady = share.size >= STEADY_POINTS and float(np.mean(share >= DATA_WARN)) >= STEADY_SHARE
    return {
        "tags": [data_tag, step_tag],
        "share": typical_share,
        "data_time": median(dv[di][np.isin(common, steps[from_onset])]),
        "step_time": median(sv[si][np.isin(common, steps[from_onset])]),
        "onset": onset,
        "end": int(steps[-1]),
        "points": int(common.size),
        "steady": steady,
    }


def _utilisation(data: RunData) -> dict | None:
    tags = data.tags("gpu_util")
    # nvitop writes mean/min/max/last of each metric: the mean is the one that describes the interval.
    means = [t for t in tags if t.lower().rstrip(")").endswith("mean")] or tags
    if not means:
        return None
    medians, onsets, ends, points = [], [], [], 0
    for tag in means:
        steps, values = data.finite(tag)
        if values.size < 5:
            continue
        percent = values * 100.0 if values.max() <= 1.0 else values
        first = int(steps[0])
        steps, percent = _after_startup(steps, percent)
        medians.append(_typical(steps, percent, worse_is_higher=False))
        onsets.append(_onset(steps, percent < UTIL_INFO, first))
        ends.append(int(steps[-1]))
        points = max(points, values.size)
    if not medians:
        return None
    util = float(np.mean(medians))
    if util >= UTIL_INFO:
        return None
    return {"tags": means, "util": util, "onset": min(onsets), "end": max(ends), "points": points}


def detect(data: RunData) -> list:
    share = _data_share(data)
    util = _utilisation(data)
    if share is None and util is None:
        return []
    parts, tags = [], []
    severe = False
    evidence: dict = {}
    onsets, ends, points = [], [], []
    steady = False
    if share:
        parts.append(
            f"{share['tags'][0]} {fmt(share['data_time'])} of {fmt(share['step_time'])} per step "
            f"({share['share']:.0%} waiting for data)"
        )
        tags += share["tags"]
        severe |= share["share"] >= DATA_WARN
        evidence.update(data_share=share["share"], data_time=share["data_time"], step_time=share["step_time"])
        onsets.append(share["onset"])
        ends.append(share["end"])
        points.append(share["points"])
        steady = share["steady"]
    if util:
        parts.append(f"{util['tags'][0]} median {util['util']:.0f}%")
        tags += util["tags"][:4]
        severe |= util["util"] < UTIL_WARN
        evidence["gpu_util_median"] = util["util"]
        onsets.append(util["onset"])
        ends.append(util["end"])
        points.append(util["points"])
    evidence["summary"] = "; ".join(parts)
    workers = next(
        (
            v
            for k, v in data.run.hparams.items()
            if k.rsplit(".", 1)[-1].lower() in ("num_workers", "workers", "dataloader_num_workers")
        ),
        None,
    )
    pin = next((v for k, v in data.run.hparams.items() if k.rsplit(".", 1)[-1].lower() == "pin_memory"), None)
    if workers is not None:
        evidence["num_workers"] = workers
    if share:
        message = f"input bottleneck: {share['share']:.0%} of each step is spent waiting for data"
    else:
        assert util is not None  # one of the two is set (checked on entry)
        message = f"the GPU is idle most of the time ({util['util']:.0f}% median utilisation)"
    worker_target = 8 if not isinstance(workers, (int, float)) or workers < 4 else int(workers) * 2
    advice = [
        f"DataLoader(num_workers={worker_target}"
        + (f", up from {workers}" if workers is not None else "")
        + ", pin_memory=True, persistent_workers=True, prefetch_factor=4)"
        + (" (pin_memory is off now)" if pin is False else ""),
        "move decoding/augmentation to the GPU (DALI, torchvision.transforms.v2 on tensors) or cache preprocessed data",
        "check storage read throughput; a larger batch raises utilisation when the model itself is small",
    ]
    severity = confident(
        "warning" if severe else "info", max(points), STEADY_POINTS if steady else MIN_CONFIDENT_POINTS
    )
    return [
        finding(data, "input_bottleneck", severity, tags, min(onsets), max(ends), evidence, message, sentence(advice))
    ]
