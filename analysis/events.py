"""Decode the records the kernel leaves to Python: whole `Event`s via tensorboard's protobuf classes.

These are the rare or irregular ones: file_version, graphs, session logs, histograms, text, hparams,
images and audio (counted, not kept), and the first TF2 value of a tag, which carries the plugin
metadata that says what its tensor means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError
from tensorboard.compat.proto import event_pb2

# TensorFlow DataType enum -> numpy dtype (bfloat16 handled apart: numpy has none).
_DTYPES = {
    1: np.float32,
    2: np.float64,
    3: np.int32,
    4: np.uint8,
    5: np.int16,
    6: np.int8,
    9: np.int64,
    10: np.bool_,
    17: np.uint16,
    19: np.float16,
    22: np.uint32,
    23: np.uint64,
}
DT_STRING = 7
DT_BFLOAT16 = 14

_SESSION_START = 1  # SessionLog.START: TensorBoard purges later-step data written before it


@dataclass
class Decoded:
    """What one Python-decoded record contributes."""

    step: int
    wall_time: float
    scalars: list[tuple[str, float, bool]] = field(default_factory=list)  # (tag, value, from tensor)
    histograms: list[tuple[str, np.ndarray, np.ndarray, float, float, float, float]] = field(default_factory=list)
    texts: list[tuple[str, str]] = field(default_factory=list)
    hparams: dict[str, Any] = field(default_factory=dict)
    plugins: dict[str, str] = field(default_factory=dict)  # tag -> plugin name, from metadata
    skipped: dict[str, int] = field(default_factory=dict)
    purge: bool = False  # a SessionLog START at `step`
    problems: list[str] = field(default_factory=list)  # values that could not be decoded, one line each


#: Most elements a tensor may expand to from a single stored value (TensorFlow's compact form, where
#: one value fills the declared shape). The summaries kept from tensors are scalars, histogram rows
#: (tens of buckets x 3) and text; a bigger compact tensor is no summary, and a declared shape is
#: untrusted: [2**28] with one value would otherwise allocate a gigabyte from a 145-byte file.
MAX_COMPACT_FILL = 1 << 16


class BadTensor(ValueError):
    """A TensorProto whose declared shape and stored values disagree (one line: what is wrong)."""


def tensor_values(tp) -> np.ndarray | None:
    """A TensorProto as a numpy array (strings as a list-backed object array); None if its dtype is unsupported.

    Raises BadTensor when the declared shape does not match the bytes present (a negative dimension,
    content that is not a whole number of elements, more or fewer values than the shape holds): the
    shape is checked against what is stored before anything is allocated from it.
    """
    dims = [int(d.size) for d in tp.tensor_shape.dim]
    if any(d < 0 for d in dims):
        raise BadTensor(f"tensor shape {dims} has a negative dimension")
    size = math.prod(dims)  # Python ints: 2**40 x 2**40 does not wrap around to a small number
    content = tp.tensor_content
    if tp.dtype == DT_STRING:
        vals = np.array([s.decode("utf-8", "replace") for s in tp.string_val], dtype=object)
    elif tp.dtype == DT_BFLOAT16:
        if len(content) % 2:
            raise BadTensor(f"bfloat16 tensor content of {len(content)} bytes is not a whole number of elements")
        raw = np.frombuffer(content, np.uint16) if content else np.array(tp.half_val, np.int64).astype(np.uint16)
        vals = (raw.astype(np.uint32) << 16).view(np.float32)
    elif tp.dtype in _DTYPES:
        dt = np.dtype(_DTYPES[tp.dtype])
        if content:
            if len(content) % dt.itemsize:
                raise BadTensor(
                    f"{dt.name} tensor content of {len(content)} bytes is not a whole number of "
                    f"{dt.itemsize}-byte elements"
                )
            vals = np.frombuffer(content, dt)
        elif dt == np.float16:
            vals = np.array(tp.half_val, np.int64).astype(np.uint16).view(np.float16)
        elif dt == np.float32:
            vals = np.array(tp.float_val, dt)
        elif dt == np.float64:
            vals = np.array(tp.double_val, dt)
        elif dt == np.int64:
            vals = np.array(tp.int64_val, dt)
        elif dt == np.bool_:
            vals = np.array(tp.bool_val, dt)
        elif dt == np.uint32:
            vals = np.array(tp.uint32_val, dt)
        elif dt == np.uint64:
            vals = np.array(tp.uint64_val, dt)
        else:
            vals = np.array(tp.int_val, np.int64).astype(dt)
    else:
        return None
    if vals.size == size:
        return vals.reshape(dims)
    if vals.size == 1 and size <= MAX_COMPACT_FILL:  # TensorFlow's compact form: one value fills the tensor
        return np.full(dims, vals[0], dtype=vals.dtype)
    raise BadTensor(f"tensor shape {dims} declares {size} values but {vals.size} are stored")


def _hparams_from(content: bytes) -> dict[str, Any]:
    from tensorboard.plugins.hparams import plugin_data_pb2

    try:
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
    except DecodeError:
        return {}
    out: dict[str, Any] = {}
    if data.HasField("session_start_info"):
        # A protobuf map iterates in an order of its own that changes from process to process: sorted, every
        # process (a pool's worker reading the run, this one, tomorrow's) lists the same hparams the same way.
        hparams = data.session_start_info.hparams
        for key in sorted(hparams):
            value = hparams[key]
            kind = value.WhichOneof("kind")
            if kind == "number_value":
                out[key] = value.number_value
            elif kind == "string_value":
                out[key] = value.string_value
            elif kind == "bool_value":
                out[key] = value.bool_value
    return out


def decode_record(payload: bytes, plugins: dict[str, str]) -> Decoded | None:
    """Decode one Event payload; None when it is not a valid Event protobuf.

    `plugins` maps tags to the plugin named by their (first) metadata; it is read and extended,
    since TF2 writers send metadata only with a tag's first value.
    """
    try:
        ev = event_pb2.Event.FromString(payload)
    except DecodeError:
        return None
    out = Decoded(step=int(ev.step), wall_time=float(ev.wall_time))
    what = ev.WhichOneof("what")
    if what in ("graph_def", "meta_graph_def"):
        out.skipped["graph"] = 1
    elif what == "tagged_run_metadata":
        out.skipped["run_metadata"] = 1
    elif what == "session_log":
        out.purge = ev.session_log.status == _SESSION_START
    elif what == "log_message":
        out.skipped["log_message"] = 1
    if what != "summary":
        return out
    for value in ev.summary.value:
        tag = value.tag
        plugin = ""
        if value.HasField("metadata") and value.metadata.plugin_data.plugin_name:
            plugin = value.metadata.plugin_data.plugin_name
            out.plugins[tag] = plugin
            plugins.setdefault(tag, plugin)
        plugin = plugin or plugins.get(tag, "")
        if plugin == "hparams":
            out.hparams.update(_hparams_from(value.metadata.plugin_data.content))
            continue
        kind = value.WhichOneof("value")
        if kind == "simple_value":
            out.scalars.append((tag, float(value.simple_value), False))
        elif kind == "histo":
            h = value.histo
            limits = np.array(h.bucket_limit, np.float64)
            counts = np.array(h.bucket, np.float64)
            out.histograms.append((tag, limits, counts, h.min, h.max, h.num, h.sum))
        elif kind == "tensor":
            _tensor_value(out, tag, plugin, value.tensor)
        elif kind in ("image", "audio"):
            out.skipped[kind] = out.skipped.get(kind, 0) + 1
        elif kind == "obsolete_old_style_histogram":
            out.skipped["old_histogram"] = out.skipped.get("old_histogram", 0) + 1
    return out


def _tensor_value(out: Decoded, tag: str, plugin: str, tp) -> None:
    try:
        vals = tensor_values(tp)
    except BadTensor as exc:
        out.problems.append(f"tag {tag!r}: {exc}")
        return
    if vals is None:
        out.skipped[plugin or "tensor"] = out.skipped.get(plugin or "tensor", 0) + 1
        return
    if plugin in ("scalars", "") and vals.ndim == 0 and vals.dtype != object:
        out.scalars.append((tag, float(vals), True))
    elif plugin == "histograms" and vals.ndim == 2 and vals.shape[1] == 3:
        v = vals.astype(np.float64)
        counts = v[:, 2]
        centres = (v[:, 0] + v[:, 1]) / 2
        num = float(counts.sum())
        lo = float(v[0, 0]) if len(v) else 0.0
        hi = float(v[-1, 1]) if len(v) else 0.0
        out.histograms.append((tag, v[:, 1].copy(), counts.copy(), lo, hi, num, float((centres * counts).sum())))
    elif plugin == "text" and vals.dtype == object:
        if vals.ndim <= 1:
            text = "\n".join(str(s) for s in np.atleast_1d(vals))
        else:
            text = "\n".join(" | ".join(str(c) for c in row) for row in vals.reshape(vals.shape[0], -1))
        out.texts.append((tag, text))
    else:
        out.skipped[plugin or "tensor"] = out.skipped.get(plugin or "tensor", 0) + 1
