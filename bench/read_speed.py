"""How fast tbtriage reads event files, against TensorBoard's EventAccumulator measured in the same run.

    python bench/read_speed.py                    # generate ~4.8M points (8 runs) in a temp dir
    python bench/read_speed.py --points 9600000   # the size quoted in issue #2 (~585 MB)
    python bench/read_speed.py --logdir runs/     # your own logdir

Every reader runs in a fresh subprocess, so each figure includes its imports and its own peak RSS.
EventAccumulator is slow (~20k points/s), so it reads one run only (a subsample), and its rate is
compared with ours on that same run as well as on the whole logdir. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TAGS_PER_RUN = 6


def generate(root: Path, points: int, runs: int = 8) -> None:
    """PyTorch-style runs (simple_value) plus one TF2-style run (tensor scalars, 1/8 of the points)."""
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2

    from tbtriage.analysis.event_writer import encode_scalar_block, event_file_name, file_version_event, frame_records

    per_run = points // runs
    steps_per_run = per_run // TAGS_PER_RUN
    rng = np.random.default_rng(0)
    tags = ["train/loss", "train/lr", "train/grad_norm", "val/loss", "val/accuracy", "perf/step_time"]
    t0 = 1.7e9
    for r in range(runs - 1):
        d = root / f"run_{r:02d}"
        d.mkdir(parents=True)
        with open(d / event_file_name(t0), "wb") as f:
            f.write(frame_records([file_version_event(t0)]))
            for lo in range(0, steps_per_run, 200_000):
                steps = np.arange(lo, min(lo + 200_000, steps_per_run), dtype=np.int64)
                values = rng.standard_normal((len(tags), steps.size)).astype(np.float32) + 2.0
                f.write(encode_scalar_block(tags, steps, t0 + steps * 0.1, values))
    # The TF2-style run: one tensor scalar per event, metadata on each tag's first value.
    d = root / "tf2_run"
    d.mkdir(parents=True)
    payloads = [file_version_event(t0)]
    for i in range(steps_per_run):
        vals = []
        for tag in tags:
            v = summary_pb2.Summary.Value(
                tag=tag, tensor=tensor_pb2.TensorProto(dtype=1, float_val=[float(rng.random())])
            )
            if i == 0:
                v.metadata.plugin_data.plugin_name = "scalars"
            vals.append(v)
        payloads.append(
            event_pb2.Event(wall_time=t0 + i, step=i, summary=summary_pb2.Summary(value=vals)).SerializeToString()
        )
    (d / event_file_name(t0)).write_bytes(frame_records(payloads))


CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
t = time.perf_counter()
mode = {mode!r}
if mode == "accumulator":
    from tensorboard.backend.event_processing import event_accumulator as ea
    acc = ea.EventAccumulator({path!r}, size_guidance={{ea.SCALARS: 0, ea.TENSORS: 0}})
    acc.Reload()
    pts = sum(len(acc.Scalars(t)) for t in acc.Tags()["scalars"]) + sum(len(acc.Tensors(t)) for t in acc.Tags()["tensors"])
elif mode == "bytes":
    import os
    pts = 0
    for dp, dn, fn in os.walk({path!r}):
        for f in fn:
            with open(os.path.join(dp, f), "rb") as fh:
                while fh.read(32 << 20):
                    pass
elif mode == "kernel":
    # The compiled framing + CRC + decode loop alone, over bytes already in memory: the per-core rate.
    import os
    import numpy as np
    from tbtriage.analysis import decode
    K = decode.jit_module()
    bufs = [np.fromfile(os.path.join(dp, f), np.uint8) for dp, dn, fn in os.walk({path!r}) for f in fn]
    out, tags = decode._Outputs(True), decode.TagTable(True)
    K.scan(bufs[0], 0, min(len(bufs[0]), 4096), True, decode._CRC_TABLE, 0, *out.args(), *tags.args())
    t = time.perf_counter()
    pts = 0
    for buf in bufs:
        tags = decode.TagTable(True)
        pos = 0
        while True:
            status, pos, n, m, r = K.scan(buf, pos, len(buf), True, decode._CRC_TABLE, 0, *out.args(), *tags.args())
            pts += n
            if status != 2:
                break
else:
    import tbtriage
    from tbtriage.analysis import decode
    if mode == "jit-nocrc":
        import tbtriage.analysis.reader as R
        orig = R.RunReader.__init__
        def init(self, *a, **k):
            orig(self, *a, **k); self.verify = False
        R.RunReader.__init__ = init
    if mode == "jit-1thread":
        import tbtriage.analysis.logdir
        tbtriage.analysis.logdir.MAX_READ_THREADS = 1
    kernel = "jit" if mode.startswith("jit") else "pure"
    ld = tbtriage.load({path!r}, kernel=kernel)
    pts = sum(len(s) for r in ld.runs.values() for s in r.scalars.values())
dt = time.perf_counter() - t
# VmHWM, not ru_maxrss: the latter keeps the parent's peak across fork+exec.
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({{"seconds": dt, "points": pts, "peak_rss_mb": hwm / 1024}}))
"""


def measure(mode: str, path: Path) -> dict:
    code = CHILD.format(root=str(ROOT), mode=mode, path=str(path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def size_of(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logdir", type=Path, help="read this logdir instead of generating one")
    ap.add_argument("--points", type=int, default=4_800_000, help="points to generate (default 4.8M)")
    ap.add_argument("--sample-run", help="run (directory) EventAccumulator and the pure path read")
    args = ap.parse_args()

    tmp = None
    if args.logdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="tbtriage-bench-")
        logdir = Path(tmp.name)
        t = time.perf_counter()
        generate(logdir, args.points)
        print(f"generated {args.points:,} points in {time.perf_counter() - t:.1f} s")
    else:
        logdir = args.logdir
    sample = logdir / args.sample_run if args.sample_run else sorted(p.parent for p in logdir.rglob("*tfevents*"))[0]
    total = size_of(logdir)
    sample_bytes = size_of(sample)
    print(f"logdir {logdir}: {total / 1e6:.0f} MB; sample run {sample.name}: {sample_bytes / 1e6:.1f} MB")

    # Warm the numba cache first: the compile is a one-time cost per machine, reported apart.
    t = time.perf_counter()
    measure("jit", sample)
    print(f"numba warm-up (compile or cache load, once per machine): {time.perf_counter() - t:.1f} s")

    rows = []
    for mode, path in [
        ("bytes", logdir),
        ("kernel", logdir),
        ("jit", logdir),
        ("jit-1thread", logdir),
        ("jit-nocrc", logdir),
        ("jit", sample),
        ("pure", sample),
        ("accumulator", sample),
    ]:
        r = measure(mode, path)
        nbytes = total if path == logdir else sample_bytes
        r.update(mode=mode, where="logdir" if path == logdir else "sample", mb_s=nbytes / 1e6 / r["seconds"])
        r["points_s"] = r["points"] / r["seconds"] if r["points"] else None
        rows.append(r)
    acc = next(r for r in rows if r["mode"] == "accumulator")
    print(
        f"\n{'reader':<24}{'on':<8}{'points':>12}{'seconds':>9}{'points/s':>13}{'MB/s':>8}{'peak RSS':>10}{'vs EA':>8}"
    )
    for r in rows:
        ratio = f"{r['points_s'] / acc['points_s']:.0f}x" if r["points_s"] and acc["points_s"] else ""
        pts_s = f"{r['points_s']:,.0f}" if r["points_s"] else "-"
        print(
            f"{r['mode']:<24}{r['where']:<8}{r['points']:>12,}{r['seconds']:>9.2f}{pts_s:>13}"
            f"{r['mb_s']:>8.0f}{r['peak_rss_mb']:>8.0f}MB{ratio:>8}"
        )
    print("\n(kernel = the compiled loop alone over bytes in memory, CRCs verified, per core;")
    print(" jit = analysis.load with the compiled kernel, every CRC verified, imports included,")
    print("       runs read on one thread per core; jit-1thread = the same on one thread;")
    print(" jit-nocrc skips CRCs, for reference only;")
    print(" pure = analysis.load without numba; bytes = reading the files and nothing else;")
    print(" EA = tensorboard's EventAccumulator, size_guidance 0, scalars and tensors)")
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
