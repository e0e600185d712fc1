"""How fast the distributions screen answers a key on a run with many histogram tags.

    python bench/hist_speed.py                          # 50 tags x 1000 steps, 30 buckets a point (Keras/TF2)
    python bench/hist_speed.py --tags 10 --steps 200    # smaller
    python bench/hist_speed.py --buckets 500            # PyTorch's add_histogram: ~500 buckets a point

One run is written in a temp dir: a loss and, at every step, histograms of gradients, weights and ReLU
activations of `--tags / 3` layers each, `--buckets` equal buckets a point (a summary's cost depends on the
number of buckets, not on where their edges lie; PyTorch's default TensorFlow-style buckets give ~500
for a normal sample once the empty ones at both ends are dropped). The app runs headless
(Textual's `run_test`) at 160x48 with the real reader and engine. Redraw is timed from the key press to
the end of the first `render()` of the widget the key changes (the distribution chart, or the gradient
bars); a new tag's first draw includes summarising its points (cached afterwards). The baseline, measured
in the same run, is the per-point loop a plain implementation would run for one tag's bands (each point's
percentiles from its own buckets). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SIZE = (160, 48)
SAMPLES = 1000  # values per histogram (a layer's parameters are subsampled this way by many loggers)


def histogram_proto(values: np.ndarray, buckets: int):
    """A HistogramProto of `buckets` equal buckets over the values (right edges and counts, as TensorBoard's)."""
    from tensorboard.compat.proto import summary_pb2

    counts, edges = np.histogram(values, bins=buckets)
    return summary_pb2.HistogramProto(
        min=float(values.min()),
        max=float(values.max()),
        num=float(values.size),
        sum=float(values.sum()),
        sum_squares=float(values @ values),
        bucket_limit=edges[1:].tolist(),
        bucket=counts.astype(np.float64).tolist(),
    )


def tag_names(tags: int) -> list[str]:
    layers = max(tags // 3, 1)
    names = [f"grads/layer{k:02d}.weight" for k in range(layers)] + [
        f"weights/layer{k:02d}.weight" for k in range(layers)
    ]
    names += [f"activations/relu{k:02d}" for k in range(tags - len(names))]
    return names[:tags]


def generate(root: Path, tags: int, steps: int, buckets: int) -> Path:
    """One run: a loss and `tags` histograms at every step. Every step's event has the same layout, so the
    records share a length and are framed (checksummed) together in one pass."""
    from tensorboard.compat.proto import event_pb2, summary_pb2

    from tbtriage.analysis.event_writer import event_file_name, file_version_event, frame_records

    rng = np.random.default_rng(0)
    directory = root / "histograms_run"
    directory.mkdir(parents=True)
    t0 = 1.7e9
    names = tag_names(tags)
    payloads = [file_version_event(t0)]
    for step in range(steps):
        values = [summary_pb2.Summary.Value(tag="train/loss", simple_value=float(2.0 * np.exp(-step / 300) + 0.3))]
        for k, tag in enumerate(names):
            sample = rng.standard_normal(SAMPLES) * (0.01 if tag.startswith("grads") else 0.1) * (1 + k / tags)
            if tag.startswith("activations"):
                sample = np.maximum(sample, 0)
            values.append(summary_pb2.Summary.Value(tag=tag, histo=histogram_proto(sample, buckets)))
        event = event_pb2.Event(wall_time=t0 + step, step=step, summary=summary_pb2.Summary(value=values))
        payloads.append(event.SerializeToString())
    (directory / event_file_name(t0)).write_bytes(frame_records(payloads))
    return root


async def measure(logdir: Path, presses: int) -> dict[str, object]:
    from tbtriage.analysis.config import Config
    from tbtriage.tui.app import make_app
    from tbtriage.tui.widgets.distribution_chart import DistributionChart
    from tbtriage.tui.widgets.grad_heatmap import LayerBars

    renders: list[float] = []
    originals = {cls: cls.render for cls in (DistributionChart, LayerBars)}

    def timed(cls):
        def render(self):
            result = originals[cls](self)
            renders.append(time.perf_counter())
            return result

        return render

    for cls in originals:
        cls.render = timed(cls)  # type: ignore[method-assign]
    figures: dict[str, object] = {}
    app = make_app(logdir, config=Config(), follow=False)
    async with app.run_test(size=SIZE) as pilot:
        while not app.loaded:
            await asyncio.sleep(0.01)
        await pilot.pause()
        run = next(iter(app.runs.values()))
        figures["tags"] = len(run.histograms)
        figures["steps"] = max(len(h) for h in run.histograms.values())
        figures["buckets"] = int(np.median([len(c) for h in run.histograms.values() for c in h.counts[:50]]))

        async def timed_key(key: str) -> float:
            pressed = time.perf_counter()
            await pilot.press(key)
            while not renders or renders[-1] < pressed:
                await asyncio.sleep(0.001)
            return renders[-1] - pressed

        redraws: dict[str, list[float]] = {}
        redraws["h (open, first tag)"] = [await timed_key("h")]
        for _ in range(presses):
            redraws.setdefault("[ (step back)", []).append(await timed_key("left_square_bracket"))
            redraws.setdefault("] (step on)", []).append(await timed_key("right_square_bracket"))
        for _ in range(presses):
            redraws.setdefault("down (a new tag, first view)", []).append(await timed_key("down"))
        for _ in range(presses):
            redraws.setdefault("up (a tag seen before)", []).append(await timed_key("up"))
        redraws["v (gradient flow)"] = [await timed_key("v")]
        for _ in range(presses):
            redraws.setdefault("[ in the gradient flow", []).append(await timed_key("left_square_bracket"))
        figures["redraw"] = redraws
        await pilot.press("q")
    for cls, original in originals.items():
        cls.render = original  # type: ignore[method-assign]
    figures["series"] = run.histograms[sorted(run.histograms)[0]]
    return figures


def baseline(series) -> tuple[float, float]:
    """(per-point loop, ours) seconds to compute one tag's percentile bands, both from scratch."""
    from tbtriage.analysis import histograms
    from tbtriage.analysis.histograms import buckets, percentiles

    start = time.perf_counter()
    for i in range(len(series)):
        percentiles(buckets([series.limits[i]], [series.counts[i]], series.mins[i : i + 1], series.maxs[i : i + 1]))
    naive = time.perf_counter() - start
    histograms._SUMMARIES.pop(series, None)  # from scratch, not from the app's cache
    start = time.perf_counter()
    percentiles(histograms.series_buckets(series))
    return naive, time.perf_counter() - start


def engine_cost(logdir: Path) -> str:
    """What reading the histograms costs the engine: the run analysed with them and without them."""
    from dataclasses import replace

    import tbtriage
    from tbtriage.analysis.engine import analyze_run

    start = time.perf_counter()
    run = tbtriage.load(logdir).runs["histograms_run"]
    read = time.perf_counter() - start
    start = time.perf_counter()
    analyze_run(replace(run, histograms={}))
    bare = time.perf_counter() - start
    start = time.perf_counter()
    analyze_run(run)
    full = time.perf_counter() - start
    return f"read {read:.2f} s; analysed {full:.2f} s with its histograms, {bare:.2f} s without them"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tags", type=int, default=50)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--buckets", type=int, default=30, help="buckets a point (Keras/TF2: 30; PyTorch: hundreds)")
    parser.add_argument("--presses", type=int, default=10, help="presses timed per key")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tbtriage-hist-bench-") as tmp:
        start = time.perf_counter()
        logdir = generate(Path(tmp), args.tags, args.steps, args.buckets)
        size = sum(f.stat().st_size for f in logdir.rglob("*") if f.is_file())
        print(f"generated 1 run x {args.tags} histogram tags x {args.steps} steps ({size / 1e6:.0f} MB) in "
              f"{time.perf_counter() - start:.1f} s")  # fmt: skip
        print(engine_cost(logdir))
        figures = asyncio.run(measure(logdir, args.presses))
        print(f"{figures['tags']} tags x {figures['steps']} steps, median {figures['buckets']} buckets a point, "
              f"terminal {SIZE[0]}x{SIZE[1]}; keypress to redrawn:")  # fmt: skip
        steady = []
        for key, times in figures["redraw"].items():  # type: ignore[attr-defined]
            if not key.startswith(("h ", "down", "v ")):
                steady += times
            print(f"  {key:<30} median {statistics.median(times) * 1000:7.1f} ms   max {max(times) * 1000:7.1f} ms")
        print(f"  steps and tags seen before     median {statistics.median(steady) * 1000:7.1f} ms   "
              f"max {max(steady) * 1000:7.1f} ms")  # fmt: skip
        naive, ours = baseline(figures["series"])
        print(f"baseline: one tag's bands by a per-point loop {naive * 1000:.0f} ms; ours (all points at once) "
              f"{ours * 1000:.0f} ms; {naive / ours:.0f}x faster")  # fmt: skip


if __name__ == "__main__":
    main()
