"""The fast writer behind the demo and the benchmarks produces exactly what tensorboard's own code would."""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as tensorboard_crc

from tbtriage.analysis.event_writer import encode_scalar_block, frame_records, masked_crc32c, write_event_file


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=0, max_size=300))
def test_masked_crc32c_matches_tensorboards(data):
    assert masked_crc32c(data) == tensorboard_crc(data)


def _tensorboard_frame(payload: bytes) -> bytes:
    header = struct.pack("<Q", len(payload))
    return header + struct.pack("<I", tensorboard_crc(header)) + payload + struct.pack("<I", tensorboard_crc(payload))


def test_framing_of_mixed_length_records_is_byte_identical_to_tensorboards_record_writer():
    payloads = [b"", b"a", b"abc" * 40, b"xyz", b"a", bytes(range(256))]
    assert frame_records(payloads) == b"".join(_tensorboard_frame(p) for p in payloads)


def test_scalar_events_are_byte_identical_to_serialized_protos_including_step_zero_nan_and_inf():
    steps = np.array([0, 1, 127, 128, 16_383, 16_384, 2**21, 2**35], dtype=np.int64)
    wall = np.array([0.0, 1.5, 1.7e9, 1.7e9 + 1, 1.7e9 + 2, 1.7e9 + 3, 1.7e9 + 4, 1.7e9 + 5])
    tags = ["loss", "train/grad_norm", "t" * 100, "ünïcode/tag"]
    values = np.random.default_rng(0).normal(size=(len(tags), steps.size))
    values[0, 1], values[1, 2], values[2, 3], values[3, 0] = np.nan, np.inf, -np.inf, 0.0
    expected = []
    for j, step in enumerate(steps.tolist()):  # step-major: what a training loop writes
        for i, tag in enumerate(tags):
            value = summary_pb2.Summary.Value(tag=tag, simple_value=float(np.float32(values[i, j])))
            event = event_pb2.Event(wall_time=wall[j], step=step, summary=summary_pb2.Summary(value=[value]))
            expected.append(event.SerializeToString())
    assert encode_scalar_block(tags, steps, wall, values) == frame_records(expected)


def test_event_accumulator_reads_back_every_point_written(tmp_path):
    steps = np.arange(0, 5000, 7, dtype=np.int64)
    values = np.vstack([np.linspace(3, 1, steps.size), np.linspace(0, 1, steps.size)])
    run = tmp_path / "run"
    path = write_event_file(run / "events.out.tfevents.1700000000.host.0", [], 1.7e9)
    with open(path, "ab") as f:
        f.write(encode_scalar_block(["train/loss", "val/acc"], steps, 1.7e9 + steps, values))
    acc = EventAccumulator(str(run), size_guidance={"scalars": 0})
    acc.Reload()
    loss = acc.Scalars("train/loss")
    assert [e.step for e in loss] == steps.tolist()
    np.testing.assert_allclose([e.value for e in loss], values[0].astype(np.float32))
    np.testing.assert_allclose([e.wall_time for e in acc.Scalars("val/acc")], 1.7e9 + steps)
