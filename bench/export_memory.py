"""Peak memory of `tbtriage export` against the number of runs: the README promises one run in memory at a time.

    python bench/export_memory.py                         # 1, 2, 4, 8 runs of 1M points each (~40 MB a run)
    python bench/export_memory.py --points 4000000 --runs 1 8

Each export runs in a fresh subprocess (`--out` a temp file, the pure and the compiled kernel as chosen by
size), and its own peak RSS comes from `os.wait4`. The baseline is the 1-run export measured in the same run:
with one run in memory at a time, the ratio stays near 1 however many runs there are. Prints figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TAGS = ["train/loss", "train/lr", "train/grad_norm", "val/loss"]


def generate(root: Path, runs: int, points: int) -> None:
    from tbtriage.analysis.event_writer import encode_scalar_block, event_file_name, file_version_event, frame_records

    steps = np.arange(points // len(TAGS), dtype=np.int64)
    rng = np.random.default_rng(0)
    for r in range(runs):
        d = root / f"run{r:02d}"
        d.mkdir(parents=True)
        values = rng.standard_normal((len(TAGS), steps.size))
        body = encode_scalar_block(TAGS, steps, 1.7e9 + steps * 0.1, values)
        (d / event_file_name(1.7e9)).write_bytes(frame_records([file_version_event(1.7e9)]) + body)


def peak_rss_mb(args: list[str]) -> tuple[float, float]:
    """(peak RSS in MB, seconds) of one child process."""
    start = time.perf_counter()
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    took = time.perf_counter() - start
    if status:
        sys.exit(f"{' '.join(args)} failed: {child.stderr.read().decode()}")
    return usage.ru_maxrss / 1024, took  # ru_maxrss is in KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000, help="points per run (default 1M)")
    parser.add_argument("--runs", type=int, nargs="+", default=[1, 2, 4, 8], help="run counts to measure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tbtriage-export-mem-") as tmp:
        tmp = Path(tmp)
        generate(tmp / "ld", max(args.runs), args.points)
        size = sum(f.stat().st_size for f in (tmp / "ld").rglob("*tfevents*")) / max(args.runs)
        print(f"{args.points:,} points a run ({size / 1e6:.0f} MB a run), export --format csv --out FILE")
        base = None
        for n in args.runs:
            pattern = "^(" + "|".join(f"run{r:02d}" for r in range(n)) + ")$"
            rss, took = peak_rss_mb(
                [
                    sys.executable,
                    "-m",
                    "tbtriage",
                    "export",
                    str(tmp / "ld"),
                    "--runs",
                    pattern,
                    "--out",
                    str(tmp / "out.csv"),
                ]
            )
            base = base or rss
            print(f"  {n:2d} run(s): peak RSS {rss:6.0f} MB  ({rss / base:.2f}x the 1-run export)  {took:5.1f} s")


if __name__ == "__main__":
    main()
