"""Hostile bytes for the hostile-input suite: events built with tensorboard's own protobuf classes, then
framed (and, where the test needs it, damaged) byte by byte, the way a crashed writer or an adversary would."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2

from tbtriage.analysis.event_writer import file_version_event, frame_records, masked_crc32c

#: Seconds any command may take on these few-kilobyte logdirs; generous for a cold numba compile
#: on a busy 2-core machine, far below "forever".
COMMAND_TIMEOUT_S = 180


def varint(n: int) -> bytes:
    """Protobuf base-128 varint; negative numbers as 10-byte two's complement, as protobuf writes int64."""
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def length_delimited(field: int, payload: bytes, declared: int | None = None) -> bytes:
    """A wire-type-2 field whose length varint says `declared` (default: the truth)."""
    return varint(field << 3 | 2) + varint(len(payload) if declared is None else declared) + payload


def scalar_event(step: int, tag: str = "loss", value: float = 1.0, wall: float = 1_700_000_000.0) -> bytes:
    return event_pb2.Event(
        step=step,
        wall_time=wall,
        summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]),
    ).SerializeToString()


def raw_event(summary_values: bytes, step: int = 5, wall: float = 1_700_000_000.0) -> bytes:
    """An Event whose Summary holds exactly `summary_values` (already encoded Summary.Value fields)."""
    return b"\x09" + struct.pack("<d", wall) + b"\x10" + varint(step) + length_delimited(5, summary_values)


def tensor_event(step: int, tag: str, tensor: tensor_pb2.TensorProto, plugin: str | None = None) -> bytes:
    value = summary_pb2.Summary.Value(tag=tag, tensor=tensor)
    if plugin:
        value.metadata.plugin_data.plugin_name = plugin
    return event_pb2.Event(
        step=step, wall_time=1_700_000_000.0, summary=summary_pb2.Summary(value=[value])
    ).SerializeToString()


def tensor(dtype: int, shape=(), content: bytes = b"", floats=()) -> tensor_pb2.TensorProto:
    tp = tensor_pb2.TensorProto(dtype=dtype, tensor_content=content, float_val=list(floats))
    tp.tensor_shape.CopyFrom(
        tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=s) for s in shape])
    )
    return tp


def frame_with_length(payload: bytes, declared: int) -> bytes:
    """A record whose length field says `declared` with a valid length checksum: it passes the framing check."""
    header = struct.pack("<Q", declared)
    return header + struct.pack("<I", masked_crc32c(header)) + payload + struct.pack("<I", masked_crc32c(payload))


def event_file(directory: Path, payloads: list[bytes], name: str = "events.out.tfevents.1.host") -> Path:
    """An event file holding the file_version record and then `payloads`, each framed correctly."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(frame_records([file_version_event(1_700_000_000.0), *payloads]))
    return path


def good_points(first: int, n: int, tag: str = "loss") -> list[bytes]:
    return [scalar_event(step, tag, float(step)) for step in range(first, first + n)]


def run_cli(
    *args: str, kernel: str = "auto", cwd: Path | None = None, env: dict | None = None, timeout=COMMAND_TIMEOUT_S
):
    """Run the real command line in a child process, as a user would; a hang fails the test instead of hanging it."""
    full_env = {**os.environ, "TBTRIAGE_KERNEL": kernel, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "tbtriage", *args],
        capture_output=True,
        text=True,
        errors="surrogateescape",
        timeout=timeout,
        cwd=cwd,
        env=full_env,
    )
