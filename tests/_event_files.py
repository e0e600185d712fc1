"""Event files written by real writers, for the reader's tests.

PyTorch-style files come from tensorboardX's SummaryWriter; TF2-style tensor scalars, tensor
histograms and text come from tensorboard's own protobuf classes and EventFileWriter.
"""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path

import numpy as np
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter


def write_pytorch_run(path: Path, n: int = 300, seed: int = 0, nan_at: int | None = None) -> Path:
    """A tensorboardX run: loss every step, accuracy every 10, a histogram and text."""
    from tensorboardX import SummaryWriter

    rng = np.random.default_rng(seed)
    w = SummaryWriter(str(path))
    for i in range(n):
        loss = 2.0 * np.exp(-i / 80) + 0.05 * rng.standard_normal()
        if nan_at is not None and i >= nan_at:
            loss = float("nan")
        w.add_scalar("train/loss", loss, i)
        if i % 10 == 0:
            w.add_scalar("val/accuracy", 1 - np.exp(-i / 100), i)
        if i % 100 == 0:
            w.add_histogram("weights/fc", rng.standard_normal(200), i)
    w.add_text("config", "lr=0.1 [bold]x[/bold]", 0)
    w.close()
    return path


def write_resumed_run(path: Path) -> Path:
    """A tensorboardX run resumed from its step-1500 checkpoint: loss 1.0 to step 1990 in one file, then
    2.0 from step 1500 to 2990 in a second."""
    from tensorboardX import SummaryWriter

    for suffix, steps, value in ((".a", range(0, 2000, 10), 1.0), (".b", range(1500, 3000, 10), 2.0)):
        w = SummaryWriter(str(path), filename_suffix=suffix)
        for i in steps:
            w.add_scalar("loss", value, i)
        w.close()
    return path


def write_purged_run(path: Path) -> Path:
    """A tensorboardX run of 100 steps, then a second writer with purge_step=60 (a session START) and 10 steps."""
    from tensorboardX import SummaryWriter

    w = SummaryWriter(str(path), filename_suffix=".a")
    for i in range(100):
        w.add_scalar("loss", float(i), i)
    w.close()
    w = SummaryWriter(str(path), purge_step=60, filename_suffix=".b")
    for i in range(60, 70):
        w.add_scalar("loss", -1.0, i)
    w.close()
    return path


def event_files(path: Path) -> list[str]:
    return sorted(glob.glob(os.path.join(str(path), "*tfevents*")))


def _tensor(values, dtype: int, shape=()) -> tensor_pb2.TensorProto:
    arr = np.asarray(values)
    tp = tensor_pb2.TensorProto(dtype=dtype)
    tp.tensor_shape.CopyFrom(
        tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=s) for s in shape])
    )
    if dtype == 1:
        tp.float_val.extend(arr.reshape(-1).astype(np.float32).tolist())
    elif dtype == 2:
        tp.double_val.extend(arr.reshape(-1).astype(np.float64).tolist())
    elif dtype == 3:
        tp.int_val.extend(arr.reshape(-1).astype(np.int64).tolist())
    elif dtype == 9:
        tp.int64_val.extend(arr.reshape(-1).astype(np.int64).tolist())
    elif dtype == 19:
        tp.half_val.extend(arr.reshape(-1).astype(np.float16).view(np.uint16).astype(np.int64).tolist())
    elif dtype == 7:
        tp.string_val.extend(s.encode() for s in arr.reshape(-1).tolist())
    return tp


def write_tf2_run(path: Path, n: int = 200, content: bool = False) -> Path:
    """A TF2-style run: tensor scalars of several dtypes (metadata on the first value only),
    a tensor histogram and a text tensor, written with tensorboard's own writer."""
    path.mkdir(parents=True, exist_ok=True)
    w = EventFileWriter(str(path))
    seen: set[str] = set()

    def value(tag, tp, plugin):
        v = summary_pb2.Summary.Value(tag=tag, tensor=tp)
        if tag not in seen:
            seen.add(tag)
            v.metadata.plugin_data.plugin_name = plugin
        return v

    t0 = time.time()
    for i in range(n):
        vals = [
            value("loss", _tensor(1.0 / (i + 1), 1), "scalars"),
            value("lr_double", _tensor(1e-3 * 0.99**i, 2), "scalars"),
            value("half", _tensor(0.5 + i / 1000, 19), "scalars"),
            value("count_i32", _tensor(i * 3 - 7, 3), "scalars"),
            value("count_i64", _tensor(2**40 + i, 9), "scalars"),
        ]
        if content:
            tp = tensor_pb2.TensorProto(dtype=1, tensor_content=np.float32(i / 7).tobytes())
            vals.append(value("content_f32", tp, "scalars"))
        if i % 50 == 0:
            edges = np.linspace(-1, 1, 6)
            h = np.stack([edges[:-1], edges[1:], np.arange(5.0) + i], axis=1)
            vals.append(value("hist", _tensor(h, 2, h.shape), "histograms"))
        if i == 0:
            vals.append(value("notes", _tensor(np.array(["hello \x1b[31mred"]), 7, (1,)), "text"))
        ev = event_pb2.Event(wall_time=t0 + i, step=i, summary=summary_pb2.Summary(value=vals))
        w.add_event(ev)
    w.close()
    return path
