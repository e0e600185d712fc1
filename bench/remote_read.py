"""Remote logdirs and Dask: read throughput from S3 vs disk, listing time, the decoded-column cache on an s3://
logdir (cold vs warm load), and `report` local vs `--dask local`.

    python bench/remote_read.py                          # defaults: 2M points, 10,000 objects, 2,000 runs
    python bench/remote_read.py --skip listing dask      # read throughput and the cache only
    python bench/remote_read.py --points 8000000 --objects 10000 --runs 2000 --workers 2

The S3 API is moto's server on 127.0.0.1 (what the tests use): no network, so the figures are the cost of
the S3 protocol and of our ranged reads, not of a real store's latency (which a real one adds to each
request: one per 8 MB window of an object, plus one listing request per 1,000 objects). Each figure is compared with the
same work on the local disk, measured in the same run. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TAGS = ["train/loss", "train/lr", "train/grad_norm", "val/loss", "val/accuracy", "perf/step_time"]
T0 = 1.7e9


def write_run(directory: Path, steps: int, seed: int, tags=TAGS) -> None:
    from tbtriage.analysis.event_writer import encode_scalar_block, event_file_name, file_version_event, frame_records

    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / event_file_name(T0), "wb") as f:
        f.write(frame_records([file_version_event(T0)]))
        for lo in range(0, steps, 200_000):
            s = np.arange(lo, min(lo + 200_000, steps), dtype=np.int64)
            values = 2.0 * np.exp(-s / max(steps, 1)) + 0.05 * rng.standard_normal((len(tags), s.size))
            f.write(encode_scalar_block(tags, s, T0 + s * 0.1, values.astype(np.float32)))


def size_of(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def timed(fn, repeat: int = 3):
    """(best seconds of `repeat` runs, the last result)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def bench_read(s3, points: int, tmp: Path) -> None:
    """Decoding throughput: every load reads its bytes (the cache would serve the repeats)."""
    from tbtriage.analysis.logdir import load

    os.environ["TBTRIAGE_NO_CACHE"] = "1"

    root = tmp / "big"
    runs = 4
    for r in range(runs):
        write_run(root / f"run_{r}", points // runs // len(TAGS), seed=r)
    nbytes = size_of(root)
    url = s3.upload(root, "bench", "big")
    load(root)  # the compiled kernel loaded (or compiled) once, outside the timings
    local_s, local = timed(lambda: load(root))
    remote_s, remote = timed(lambda: load(url, storage_options=s3.options))
    n = sum(len(s) for run in local.runs.values() for s in run.scalars.values())
    assert n == sum(len(s) for run in remote.runs.values() for s in run.scalars.values())
    print(f"read {n:,} points, {nbytes / 1e6:.1f} MB in {runs} runs (best of 3):")
    print(f"  local disk : {local_s:6.3f} s  {n / local_s / 1e6:6.2f} M points/s  {nbytes / local_s / 1e6:7.1f} MB/s")
    print(
        f"  S3 (moto)  : {remote_s:6.3f} s  {n / remote_s / 1e6:6.2f} M points/s  {nbytes / remote_s / 1e6:7.1f} MB/s"
    )
    print(f"  S3 / local : {remote_s / local_s:.2f}x the time")
    del os.environ["TBTRIAGE_NO_CACHE"]


def bench_cache(s3, points: int, tmp: Path) -> None:
    """The second morning on an s3:// logdir: a cold read vs a load the cache serves (ETag and size unchanged)."""
    from tbtriage.analysis.logdir import load

    root = tmp / "morning"
    runs = 8
    for r in range(runs):
        write_run(root / f"run_{r}", points // runs // len(TAGS), seed=r)
    url = s3.upload(root, "bench", "morning")
    os.environ["TBTRIAGE_NO_CACHE"] = "1"
    cold_s, cold = timed(lambda: load(url, storage_options=s3.options))
    del os.environ["TBTRIAGE_NO_CACHE"]
    first_s, _ = timed(lambda: load(url, storage_options=s3.options), repeat=1)  # a cold read that writes entries
    warm_s, warm = timed(lambda: load(url, storage_options=s3.options))
    states = {r.cache_state for r in warm._readers.values()}
    n = sum(len(s) for run in warm.runs.values() for s in run.scalars.values())
    same = all(
        np.array_equal(s.values, cold.runs[name].scalars[tag].values, equal_nan=True)
        for name, run in warm.runs.items()
        for tag, s in run.scalars.items()
    )
    print(f"load of an s3:// logdir, {n:,} points, {size_of(root) / 1e6:.1f} MB in {runs} runs (best of 3):")
    print(f"  cold (--no-cache)             : {cold_s:6.3f} s")
    print(f"  first, writing the cache      : {first_s:6.3f} s  ({first_s / cold_s:.2f}x cold)")
    print(f"  warm (the listing, no reads)  : {warm_s:6.3f} s  ({cold_s / warm_s:.1f}x faster than cold)")
    print(f"  cache states: {sorted(states)}; values identical to the cold read: {same}")


def bench_listing(s3, objects: int, tmp: Path) -> None:
    from tbtriage.analysis.discover import find_runs
    from tbtriage.analysis.event_writer import event_file_name, file_version_event, frame_records
    from tbtriage.analysis.storage import RemoteStorage

    root = tmp / "many"
    per_run = 5
    data = frame_records([file_version_event(T0)])
    blobs = {}
    for i in range(objects):
        rel = f"run_{i // per_run:05d}/{event_file_name(T0 + i % per_run)}"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
        blobs[f"bench/many/{rel}"] = data
    t = time.perf_counter()
    s3.fs.pipe(blobs)  # concurrent PUTs
    print(
        f"listing {objects:,} objects in {objects // per_run:,} run directories (uploaded in {time.perf_counter() - t:.1f} s):"
    )
    local_s, found = timed(lambda: find_runs(root))
    storage = RemoteStorage("s3://bench/many", s3.options)
    remote_s, listed = timed(lambda: storage.find_runs())
    assert list(found) == list(listed), "the store's runs differ from the disk's"
    print(f"  local walk (os.scandir)   : {local_s * 1e3:7.1f} ms")
    print(
        f"  S3 one listing (fs.find)  : {remote_s * 1e3:7.1f} ms  ({remote_s / local_s:.1f}x; {objects // 1000 or 1} pages of 1,000)"
    )


def bench_dask(runs: int, workers: int, tmp: Path) -> None:
    from tbtriage.analysis.engine import diagnose
    from tbtriage.analysis.fleet import connect, fleet_diagnose

    root = tmp / "fleet"
    for i in range(runs):
        write_run(root / f"sweep_lr{i % 7}_seed{i:04d}", 300, seed=i, tags=TAGS[:4])
    print(f"report on {runs:,} runs ({size_of(root) / 1e6:.1f} MB), local vs Dask LocalCluster of {workers} workers:")
    now = time.time()
    local_s, local = timed(lambda: diagnose(str(root), now=now), repeat=1)
    t = time.perf_counter()
    client, cluster = connect("local", workers)  # what `report --dask local` starts
    start_s = time.perf_counter() - t
    try:
        first_s, fleet = timed(lambda: fleet_diagnose(str(root), client, now=now), repeat=1)
        warm_s, fleet = timed(lambda: fleet_diagnose(str(root), client, now=now), repeat=1)
    finally:
        client.close()
        cluster.close()
    same = fleet.to_json() == local.to_json()
    print(f"  local (one process)         : {local_s:6.2f} s")
    print(f"  cluster start ({workers} processes) : {start_s:6.2f} s")
    print(
        f"  Dask, first report          : {first_s:6.2f} s  ({first_s / local_s:.2f}x local; workers import tbtriage)"
    )
    print(f"  Dask, second report         : {warm_s:6.2f} s  ({warm_s / local_s:.2f}x local)")
    print(f"  reports identical (JSON)    : {same}")
    print(f"  machine: {os.cpu_count()} cores visible; the gain needs more cores than the work's serial part")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=2_000_000)
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=2_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skip", nargs="*", default=[], choices=["read", "cache", "listing", "dask"])
    args = parser.parse_args()
    from tests._s3 import S3

    s3 = S3()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "xdg-cache")  # never the user's ~/.cache
            if "read" not in args.skip:
                bench_read(s3, args.points, Path(tmp))
            if "cache" not in args.skip:
                bench_cache(s3, args.points, Path(tmp))
            if "listing" not in args.skip:
                bench_listing(s3, args.objects, Path(tmp))
            if "dask" not in args.skip:
                bench_dask(args.runs, args.workers, Path(tmp))
    finally:
        s3.stop()


if __name__ == "__main__":
    main()
