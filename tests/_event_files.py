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


def write_keras_pair(
    root: Path,
    epochs: int = 20,
    steps_per_epoch: int = 32,
    update_freq: int | None = 10,
    nan_from_epoch: int | None = None,
    seed: int = 0,
    running_means: bool = False,
    bad_batches: tuple[int, ...] = (),
    step_loss: np.ndarray | None = None,
) -> Path:
    """A Keras `TensorBoard` callback's `train/` and `validation/` runs as TF2 writes them (tensor scalars through
    tensorboard's own writer): `epoch_loss`, `epoch_accuracy` and `epoch_learning_rate` at step = epoch index and,
    with `update_freq=N`, `batch_loss`/`batch_accuracy` every N global steps in train/ and the validation run's
    `evaluation_*_vs_iterations` at the global step of each epoch's end. The losses are NaN from `nan_from_epoch`;
    the batches at the global indices `bad_batches` have 8 times the loss. `step_loss`: every batch's own loss
    (epochs × steps_per_epoch values) instead of the default decaying curve.

    `running_means`: `batch_loss` is what TF >= 2.2 and Keras 3 write, the running mean of the epoch so far, at
    step = the number of batches trained (from 1); otherwise the batch's own loss at its 0-based index."""
    rng = np.random.default_rng(seed)
    total = epochs * steps_per_epoch
    noise = 0.03 * rng.standard_normal(total)
    step_loss = 1.4 * np.exp(-np.arange(total) / (total / 3)) + 0.2 + noise if step_loss is None else step_loss.copy()
    step_loss[list(bad_batches)] *= 8.0
    if nan_from_epoch is not None:
        step_loss[nan_from_epoch * steps_per_epoch :] = np.nan
    epoch_loss = step_loss.reshape(epochs, steps_per_epoch).mean(axis=1)
    done = np.arange(total) % steps_per_epoch + 1
    running = np.cumsum(step_loss.reshape(epochs, steps_per_epoch), axis=1).reshape(-1) / done
    val_loss = epoch_loss * 1.05 + 0.02 * rng.standard_normal(epochs)
    accuracy = np.clip(1.0 - epoch_loss / 1.6, 0.0, 1.0)
    t0 = time.time() - 3600.0
    for folder in ("train", "validation"):
        points: list[tuple[str, float, int, float]] = []  # (tag, value, step, wall time) in writing order
        for e in range(epochs):
            end = (e + 1) * steps_per_epoch - 1
            if folder == "train":
                if update_freq:
                    for s in range(e * steps_per_epoch, end + 1):
                        if running_means and (s + 1) % update_freq == 0:
                            points.append(("batch_loss", running[s], s + 1, t0 + s))
                        elif not running_means and (s - e * steps_per_epoch + 1) % update_freq == 0:
                            points += [
                                ("batch_loss", step_loss[s], s, t0 + s),
                                ("batch_accuracy", accuracy[e], s, t0 + s),
                            ]
                points += [
                    ("epoch_loss", epoch_loss[e], e, t0 + end),
                    ("epoch_accuracy", accuracy[e], e, t0 + end),
                    ("epoch_learning_rate", 1e-3, e, t0 + end),
                ]
            else:
                points += [
                    ("epoch_loss", val_loss[e], e, t0 + end + 0.5),
                    ("epoch_accuracy", accuracy[e] * 0.97, e, t0 + end + 0.5),
                ]
                if update_freq:
                    points += [
                        ("evaluation_loss_vs_iterations", val_loss[e], end, t0 + end + 0.5),
                        ("evaluation_accuracy_vs_iterations", accuracy[e] * 0.97, end, t0 + end + 0.5),
                    ]
        (root / folder).mkdir(parents=True, exist_ok=True)
        w = EventFileWriter(str(root / folder))
        seen: set[str] = set()
        for tag, x, step, wall in points:
            v = summary_pb2.Summary.Value(tag=tag, tensor=_tensor(x, 1))
            if tag not in seen:  # TF2 writes the plugin metadata with a tag's first value only
                seen.add(tag)
                v.metadata.plugin_data.plugin_name = "scalars"
            w.add_event(event_pb2.Event(wall_time=wall, step=step, summary=summary_pb2.Summary(value=[v])))
        w.close()
    return root
