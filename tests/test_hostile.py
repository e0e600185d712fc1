"""A logdir is untrusted input. Whatever a crashed writer, a half-synced bucket or an adversary left in it,
every command answers in time with one clear line per problem, keeps the intact data, and never writes
to the logdir."""

from __future__ import annotations

import json
import struct
import tracemalloc

import numpy as np
import pytest

import tbtriage
from tests._hostile import (
    event_file,
    frame_with_length,
    good_points,
    length_delimited,
    raw_event,
    scalar_event,
    tensor,
    tensor_event,
    varint,
)
from tests._hostile import (
    run_cli as cli,
)

KERNELS = ["pure", "jit"]


def data_notes(run) -> list:
    return [n for n in run.notes if n.kind == "data_integrity"]


# -- 1. lengths that point backwards or past the end never hang a kernel -------------------------------


def negative_tag_length_event() -> bytes:
    value = length_delimited(1, b"loss", declared=-11) + b"\x15" + struct.pack("<f", 1.0)
    return raw_event(length_delimited(1, value))


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_tag_length_of_minus_11_is_one_note_in_both_kernels_not_a_hang(tmp_path, kernel):
    event_file(tmp_path / "ld" / "r", good_points(0, 10) + [negative_tag_length_event()] + good_points(10, 10))
    done = cli("report", str(tmp_path / "ld"), "--format", "json", kernel=kernel)
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(done.stdout)["runs"]
    assert run["tags"]["loss"]["points"] == 20  # every intact record on both sides kept
    (integrity,) = [f for f in run["findings"] if f["kind"] == "data_integrity"]
    assert "r/events.out.tfevents" in integrity["evidence"]["file"] and integrity["evidence"]["offset"] > 0


NEGATIVE_LENGTHS = {
    "summary value": lambda: raw_event(varint(10) + varint(-3) + b"xx"),
    "tensor": lambda: raw_event(length_delimited(1, length_delimited(1, b"t") + varint(8 << 3 | 2) + varint(-5))),
    "tensor shape": lambda: raw_event(
        length_delimited(
            1, length_delimited(1, b"t") + length_delimited(8, b"\x08\x01" + varint(2 << 3 | 2) + varint(-7))
        )
    ),
    "tensor content": lambda: raw_event(
        length_delimited(
            1, length_delimited(1, b"t") + length_delimited(8, b"\x08\x01" + varint(4 << 3 | 2) + varint(-4))
        )
    ),
    "packed floats": lambda: raw_event(
        length_delimited(
            1, length_delimited(1, b"t") + length_delimited(8, b"\x08\x01" + varint(5 << 3 | 2) + varint(-8))
        )
    ),
    "float past its message": lambda: raw_event(length_delimited(1, length_delimited(1, b"t") + b"\x15\x00")),
    "wall time past the record": lambda: b"\x09\x00\x00",
}


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("where", sorted(NEGATIVE_LENGTHS))
def test_every_length_is_checked_before_it_moves_the_reader(tmp_path, kernel, where):
    event_file(tmp_path / "r", good_points(0, 5) + [NEGATIVE_LENGTHS[where]()] + good_points(5, 5))
    run = tbtriage.load(tmp_path / "r", kernel=kernel).runs["."]
    assert len(run.scalars["loss"]) == 10
    assert len(data_notes(run)) == 1


# -- 2 and 3. a bad tensor is one note naming file and offset; shapes never size an allocation --------

BAD_TENSORS = {
    "content not a whole number of floats": tensor(1, (2,), content=b"\x00" * 5),
    "odd bfloat16 buffer": tensor(14, (1,), content=b"\x00" * 3),
    "negative dimension": tensor(1, (-1,), floats=[1.0]),
    "2**40 x 2**40 shape": tensor(1, (1 << 40, 1 << 40), content=b"\x00" * 8),
}


@pytest.mark.parametrize("what", sorted(BAD_TENSORS))
def test_a_tensor_that_cannot_be_decoded_is_one_note_and_every_run_survives(tmp_path, what):
    path = event_file(
        tmp_path / "ld" / "bad",
        good_points(0, 5) + [tensor_event(5, "weights", BAD_TENSORS[what], plugin="histograms")] + good_points(6, 5),
    )
    event_file(tmp_path / "ld" / "fine", good_points(0, 20))
    for command in (["report", "--format", "json"], ["export"], ["watch", "--once"]):
        done = cli(command[0], str(tmp_path / "ld"), *command[1:], kernel="pure")
        assert done.returncode == 0, (command, done.stderr)
        assert "Traceback" not in done.stderr
    runs = tbtriage.load(tmp_path / "ld").runs
    assert len(runs["fine"].scalars["loss"]) == 20
    assert len(runs["bad"].scalars["loss"]) == 10
    (note,) = data_notes(runs["bad"])
    offset = (
        len(path.read_bytes())
        - sum(16 + len(p) for p in good_points(6, 5))
        - 16
        - len(tensor_event(5, "weights", BAD_TENSORS[what], plugin="histograms"))
    )
    assert note.file == f"bad/{path.name}" and note.offset == offset and f"byte {offset}" in note.message
    assert "weights" in note.message


def test_a_145_byte_file_declaring_2_to_the_28_values_allocates_nothing_of_that_size(tmp_path):
    event_file(tmp_path / "r", [tensor_event(1, "hist", tensor(1, (1 << 28,), floats=[1.0]), plugin="histograms")])
    tracemalloc.start()
    run = tbtriage.load(tmp_path / "r", kernel="pure").runs["."]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20 << 20, f"{peak / 1e6:.0f} MB allocated for a file of a few hundred bytes"
    assert "declares 268435456 values but 1 are stored" in data_notes(run)[0].message


def test_one_stored_value_still_fills_a_small_declared_shape_as_tensorflow_writes_it(tmp_path):
    event_file(tmp_path / "r", [tensor_event(1, "h", tensor(1, (4, 3), floats=[2.0]), plugin="histograms")])
    run = tbtriage.load(tmp_path / "r").runs["."]
    assert not data_notes(run)
    np.testing.assert_array_equal(run.histograms["h"].counts[0], [2.0] * 4)


# -- 13. floods are aggregated; a bogus huge length does not hide the records after it ----------------


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("last", [True, False], ids=["last file", "earlier file"])
def test_a_4_gb_length_mid_file_is_one_note_and_the_500_records_after_it_are_kept(tmp_path, kernel, last):
    d = tmp_path / "r"
    path = event_file(d, good_points(0, 100))
    bogus = frame_with_length(scalar_event(100), 4 << 30)
    after = b"".join(frame_with_length(p, len(p)) for p in good_points(101, 500))
    path.write_bytes(path.read_bytes() + bogus + after)
    if not last:
        event_file(d, good_points(1000, 5), name="events.out.tfevents.2.host")
    run = tbtriage.load(d, kernel=kernel).runs["."]
    assert len(run.scalars["loss"]) == 600 + (0 if last else 5)
    (note,) = data_notes(run)
    assert "declares 4294967296 bytes, past the end of the file" in note.message
    assert "incomplete record" not in note.message


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_hundred_damaged_records_are_one_note_with_the_count_and_byte_range(tmp_path, kernel):
    path = event_file(tmp_path / "r", good_points(0, 300))
    raw = bytearray(path.read_bytes())
    starts, pos = [], 0
    while pos < len(raw):
        (n,) = struct.unpack_from("<Q", raw, pos)
        starts.append(pos)
        pos += 16 + n
    for s in starts[1:201:2]:
        raw[s + 13] ^= 0xFF  # a flipped payload byte: that record's data checksum fails
    path.write_bytes(bytes(raw))
    run = tbtriage.load(tmp_path / "r", kernel=kernel).runs["."]
    (note,) = data_notes(run)
    assert note.message.startswith(f"100 damaged stretches between bytes {starts[1]} and {starts[199]}")
    assert len(run.scalars["loss"]) == 200


def test_199_backward_steps_are_one_restart_note_with_the_dropped_points_counted(tmp_path):
    steps = []
    for attempt in range(200):
        steps += [attempt, attempt + 2]  # each attempt resumes one step before where the last stopped
    event_file(tmp_path / "r", [scalar_event(s) for s in steps])
    run = tbtriage.load(tmp_path / "r").runs["."]
    (note,) = [n for n in run.notes if n.kind == "run_restart"]
    assert note.message.startswith("steps go back 199 times")
    assert "199 older points replaced" in note.message
    done = cli("report", str(tmp_path / "r"))
    assert done.stdout.count("run_restart") == 1
