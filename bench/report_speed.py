"""What `tbtriage report` costs on a large logdir: reading, analysis and rendering, timed apart.

    python bench/report_speed.py                 # 50 runs × 20 tags × 50k points (~2.7 GB, in a temp dir)
    python bench/report_speed.py --small         # 5 runs × 20 tags × 5k points, for a quick look
    python bench/report_speed.py --logdir runs/  # your own logdir
    python bench/report_speed.py --runs 2000 --tags 4 --points 3600 --workers 1   # analysis cost per run, one core

The issue's bar: analysis should cost well under the reading. Figures are printed next to each other
(and the ratio analysis/read), measured in this one process; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: 20 tags a real run logs, HF/PyTorch-style names so every role is exercised.
TAGS = (
    "train/loss",
    "eval/loss",
    "eval/accuracy",
    "train/learning_rate",
    "train/grad_norm",
    "grad_norm/embed",
    "grad_norm/layer0",
    "grad_norm/layer6",
    "grad_norm/layer11",
    "grad_norm/head",
    "weight_norm/layer0",
    "weight_norm/head",
    "perf/step_time",
    "perf/data_time",
    "perf/samples_per_sec",
    "gpu/utilization",
    "gpu/memory_used_gb",
    "train/loss_scale",
    "train/epoch",
    "train/momentum",
)
#: Steps written per call to the encoder: bounds the writer's memory to ~200 MB.
CHUNK_STEPS = 100_000


def curves(rng: np.random.Generator, steps: np.ndarray, kind: int, tags: tuple[str, ...]) -> np.ndarray:
    """Plausible values for every tag at `steps`; every fifth run gets a planted problem so detectors work."""
    n = steps.size
    total = float(steps[-1] + 1)
    t = steps / total
    warm = np.minimum(steps / (0.02 * total), 1.0)
    lr = 3e-4 * warm * 0.5 * (1 + np.cos(np.pi * t))
    loss = 1.5 + 2.5 * np.exp(-6 * t) * np.exp(rng.normal(0, 0.03, n))
    grad = 1.0 + 2.0 * np.exp(-6 * t) * np.exp(rng.normal(0, 0.1, n))
    if kind == 1:  # divergence in the last fifth
        grad[t > 0.8] *= np.exp((t[t > 0.8] - 0.8) * 60)
        loss[t > 0.85] = np.nan
    elif kind == 2:  # overfitting: held-out loss turns up halfway
        pass
    elif kind == 3:  # a few gradient spikes
        grad[rng.integers(0, n, 5)] *= 50
    val = 1.6 + 2.5 * np.exp(-6 * t) + (np.maximum(t - 0.5, 0) * 1.2 if kind == 2 else 0)
    columns = {
        "train/loss": loss,
        "eval/loss": val,
        "eval/accuracy": 0.9 - 0.15 * val / val[0],
        "train/learning_rate": lr,
        "train/grad_norm": grad,
        "perf/step_time": 0.3 * np.exp(rng.normal(0, 0.05, n)),
        "perf/data_time": (0.25 if kind == 4 else 0.02) * np.exp(rng.normal(0, 0.1, n)),
        "gpu/utilization": np.clip(rng.normal(30 if kind == 4 else 95, 3, n), 0, 100),
        "gpu/memory_used_gb": 30 + rng.normal(0, 0.05, n),
        "train/loss_scale": np.full(n, 65536.0),
        "train/epoch": t * 10,
        "train/momentum": np.full(n, 0.9),
    }
    columns["perf/samples_per_sec"] = 256 / columns["perf/step_time"]
    out = np.empty((len(tags), n))
    for i, tag in enumerate(tags):
        if tag in columns:
            out[i] = columns[tag]
        elif tag.startswith("grad_norm/"):
            out[i] = grad * (0.2 + 0.1 * i / len(tags)) * np.exp(rng.normal(0, 0.05, n))
        else:  # weight norms: slow growth
            out[i] = 10 + t * (1 + i) + rng.normal(0, 0.01, n)
    return out


def generate(root: Path, runs: int, tags: int, points: int) -> int:
    """Write `runs` runs of `tags` tags × `points` steps; returns bytes written."""
    from tbtriage.analysis.event_writer import encode_scalar_block, event_file_name, file_version_event, frame_records

    names = tuple(TAGS[:tags]) + tuple(f"extra/tag{i}" for i in range(max(0, tags - len(TAGS))))
    written = 0
    for r in range(runs):
        rng = np.random.default_rng([7, r])
        directory = root / f"run_{r:03d}"
        directory.mkdir(parents=True)
        steps_all = np.arange(points, dtype=np.int64) * 10
        values_all = curves(rng, steps_all, r % 5, names)
        wall0 = 1.7e9 + r * 3600.0
        path = directory / event_file_name(wall0)
        with open(path, "wb") as f:
            f.write(frame_records([file_version_event(wall0)]))
            for lo in range(0, points, CHUNK_STEPS):
                steps = steps_all[lo : lo + CHUNK_STEPS]
                f.write(encode_scalar_block(names, steps, wall0 + steps * 0.03, values_all[:, lo : lo + CHUNK_STEPS]))
        written += path.stat().st_size
    return written


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--logdir", help="benchmark this logdir instead of generating one")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--tags", type=int, default=20)
    parser.add_argument("--points", type=int, default=50_000, help="points per tag")
    parser.add_argument("--small", action="store_true", help="5 runs × 20 tags × 5k points")
    parser.add_argument("--keep", action="store_true", help="keep the generated logdir and print its path")
    parser.add_argument(
        "--workers", type=int, help="analysis processes (default: as `report` chooses; 1: this process only, one core)"
    )
    args = parser.parse_args(argv)
    if args.small:
        args.runs, args.points = 5, 5_000

    temp = None
    if args.logdir:
        logdir = Path(args.logdir)
    else:
        temp = Path(tempfile.mkdtemp(prefix="tbtriage-bench-"))
        logdir = temp / "logdir"
        size, seconds = timed(lambda: generate(logdir, args.runs, args.tags, args.points))
        total = args.runs * args.tags * args.points
        print(
            f"generated {args.runs} runs × {args.tags} tags × {args.points} points = {total:,} points, "
            f"{size / 1e6:,.0f} MB in {seconds:.1f} s ({total / seconds / 1e6:.2f} M points/s written)"
        )
    try:
        import tbtriage
        from tbtriage.analysis.compare import compare
        from tbtriage.analysis.json_safe import json_safe as jsonable
        from tbtriage.analysis.render_html import render_html
        from tbtriage.analysis.render_markdown import render_markdown

        loaded, read_s = timed(lambda: tbtriage.load(logdir))
        points = sum(len(s) for run in loaded.runs.values() for s in run.scalars.values())
        cpu_start = time.process_time()  # this process's CPU: with --workers 1, the analysis's own cost
        report, analysis_s = timed(lambda: tbtriage.diagnose(loaded, workers=args.workers))
        analysis_cpu_s = time.process_time() - cpu_start
        comparison, compare_s = timed(lambda: compare(report.runs))
        md, md_s = timed(lambda: render_markdown(report.runs, logdir=str(logdir), comparison=comparison))
        js, json_s = timed(lambda: json.dumps(jsonable(report.to_dict()), allow_nan=False))
        page, html_s = timed(lambda: render_html(report.runs, logdir=str(logdir), comparison=comparison))
        findings = sum(len(r.findings) for r in report.runs)
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"read      {read_s:8.2f} s  {points:,} points, {len(loaded.runs)} runs ({points / read_s / 1e6:.2f} M points/s)"
        )
        workers = "as `report` chooses" if args.workers is None else f"{args.workers} process(es)"
        runs = max(len(loaded.runs), 1)
        print(
            f"analysis  {analysis_s:8.2f} s  {findings} findings, {analysis_s / runs * 1e3:.2f} ms/run "
            f"(diagnose on the loaded logdir, {workers}); this process's CPU {analysis_cpu_s:.2f} s, "
            f"{analysis_cpu_s / runs * 1e3:.2f} ms/run (on a shared machine, the cost without the waiting)"
        )
        print(f"compare   {compare_s:8.3f} s")
        print(f"markdown  {md_s:8.3f} s  {len(md) / 1e3:.0f} kB")
        print(f"json      {json_s:8.3f} s  {len(js) / 1e3:.0f} kB")
        print(f"html      {html_s:8.3f} s  {len(page) / 1e3:.0f} kB")
        print(
            f"analysis / read = {analysis_s / read_s:.3f}   "
            f"(analysis + compare + all renders) / read = {(analysis_s + compare_s + md_s + json_s + html_s) / read_s:.3f}"
        )
        print(f"peak RSS {peak_mb:,.0f} MB")
    finally:
        if temp is not None:
            if args.keep:
                print(f"kept {logdir}")
            else:
                shutil.rmtree(temp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
