"""Property: random corruption never crashes the reader and never loses a record before it."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto import event_pb2

import tbtriage
from tests._event_files import event_files, write_pytorch_run
from tests._hostile import varint
from tests._kernels import needs_compiled_kernel


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    src = write_pytorch_run(tmp_path_factory.mktemp("src") / "run", n=40)
    data = Path(event_files(src)[0]).read_bytes()
    records = []  # (end offset, {(tag, step, value)})
    pos = 0
    while pos + 12 <= len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        ev = event_pb2.Event.FromString(data[pos + 12 : pos + 12 + n])
        points = {(v.tag, ev.step, v.simple_value) for v in ev.summary.value if v.WhichOneof("value") == "simple_value"}
        pos += 16 + n
        records.append((pos, points))
    return data, records


def points_of(run) -> set:
    return {(tag, int(st_), float(v)) for tag, s in run.scalars.items() for st_, v in zip(s.steps, s.values)}


def check(tmp_path: Path, pristine, damaged: bytes, first_bad: int, kernel: str) -> None:
    data, records = pristine
    run_dir = tmp_path / "ld" / "r"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "events.out.tfevents.1.h").write_bytes(damaged)
    run = tbtriage.load(tmp_path / "ld", kernel=kernel).runs["r"]  # must not raise
    got = points_of(run)
    for end, points in records:
        if end <= first_bad:
            assert points <= got, f"a record ending at {end} before the first bad byte {first_bad} was lost"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_byte_corruption_keeps_every_record_before_it(tmp_path_factory, pristine, data):
    raw, _ = pristine
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(raw) - 1), st.integers(1, 255)), min_size=1, max_size=4))
    damaged = bytearray(raw)
    for i, x in flips:
        damaged[i] ^= x
    tmp = tmp_path_factory.mktemp("fuzz")
    check(tmp, pristine, bytes(damaged), min(i for i, _ in flips), "pure")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_truncation_and_garbage_appended_never_crash(tmp_path_factory, pristine, data):
    raw, _ = pristine
    cut = data.draw(st.integers(0, len(raw)))
    junk = data.draw(st.binary(max_size=64))
    tmp = tmp_path_factory.mktemp("fuzz")
    check(tmp, pristine, raw[:cut] + junk, cut, "pure")


@needs_compiled_kernel
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_compiled_path_survives_corruption_too(tmp_path_factory, pristine, data):
    raw, _ = pristine
    i = data.draw(st.integers(0, len(raw) - 1))
    damaged = bytearray(raw)
    damaged[i] ^= data.draw(st.integers(1, 255))
    tmp = tmp_path_factory.mktemp("fuzz")
    check(tmp, pristine, bytes(damaged), i, "jit")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_numpy_resync_finds_the_same_record_as_the_kernel(pristine, data):
    from tbtriage.analysis import _kernel, decode

    raw, _ = pristine
    start = data.draw(st.integers(0, len(raw) - 1))
    junk = data.draw(st.binary(min_size=1, max_size=300))
    rest = bytes(junk) + raw[start:]
    assert decode.resync_numpy(rest) == _kernel.resync(rest, 0, len(rest), decode._CRC_LIST)


# -- the protobuf layer inside valid frames --------------------------------------------------------------
# Framing corruption is caught by the CRCs; these records frame and checksum correctly but their Event
# bytes lie: a key with another field or wire type, a length that is negative or points past the
# message, a varint that never ends. Both kernels must finish, agree, and never raise.

#: Examples per property; raise it for a campaign (`TBTRIAGE_FUZZ_EXAMPLES=5000 pytest tests/test_reader_fuzz.py`).
FUZZ_EXAMPLES = int(os.environ.get("TBTRIAGE_FUZZ_EXAMPLES", "40"))


def varint_sites(buf: bytes, start: int = 0, end: int | None = None, depth: int = 0) -> list[tuple[int, str]]:
    """(offset, "key" or "length") of every key and length varint in a protobuf message, nested ones included."""
    end = len(buf) if end is None else end
    sites, p = [], start
    while p < end:
        sites.append((p, "key"))
        key, q = _read_varint(buf, p, end)
        if q < 0:
            break
        wire = key & 7
        if wire == 0:
            _, q = _read_varint(buf, q, end)
        elif wire == 1:
            q += 8
        elif wire == 5:
            q += 4
        elif wire == 2:
            sites.append((q, "length"))
            n, r = _read_varint(buf, q, end)
            if r < 0 or r + n > end:
                break
            if depth < 4:
                sites += varint_sites(buf, r, r + n, depth + 1)  # maybe a nested message: its sites count too
            q = r + n
        else:
            break
        if q < 0 or q > end:
            break
        p = q
    return sites


def _read_varint(buf: bytes, p: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while p < end:
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, p
        shift += 7
    return 0, -1


@st.composite
def lying_payload(draw, payloads: list[bytes]) -> tuple[int, bytes]:
    """(record index, its Event bytes with one protobuf-level lie)."""
    index = draw(st.integers(1, len(payloads) - 1))  # record 0 is file_version
    raw = bytearray(payloads[index])
    sites = varint_sites(bytes(raw))
    at, what = draw(st.sampled_from(sites))
    _, after = _read_varint(raw, at, len(raw))
    after = len(raw) if after < 0 else after
    how = draw(st.sampled_from(["wire type", "field number", "length", "endless varint", "cut"]))
    if how == "wire type":
        raw[at] = (raw[at] & ~7) | draw(st.integers(0, 7))
    elif how == "field number":
        raw[at] = (raw[at] & 0x87) | (draw(st.integers(0, 15)) << 3)
    elif how == "length":
        lie = (
            draw(st.sampled_from([-1, -11, -(1 << 62), 1 << 31, 1 << 62, 0]))
            if draw(st.booleans())
            else draw(st.integers(-(1 << 63), (1 << 63) - 1))
        )
        raw[at:after] = varint(lie)
    elif how == "endless varint":
        raw[at:] = bytes([0xFF]) * (len(raw) - at)
    else:
        raw = raw[: draw(st.integers(0, len(raw)))]
    return index, bytes(raw)


def scalar_points(run) -> set:
    return {(tag, int(s_), repr(float(v))) for tag, s in run.scalars.items() for s_, v in zip(s.steps, s.values)}


def _payloads(raw: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos + 12 <= len(raw):
        (n,) = struct.unpack_from("<Q", raw, pos)
        out.append(raw[pos + 12 : pos + 12 + n])
        pos += 16 + n
    return out


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_lying_event_inside_a_valid_frame_never_hangs_or_raises_and_both_kernels_agree(
    tmp_path_factory, pristine, data
):
    from tbtriage.analysis.event_writer import frame_records

    payloads = _payloads(pristine[0])
    index, lie = data.draw(lying_payload(payloads))
    payloads[index] = lie
    tmp = tmp_path_factory.mktemp("pbfuzz")
    (tmp / "r").mkdir()
    (tmp / "r" / "events.out.tfevents.1.h").write_bytes(frame_records(payloads))
    pure = tbtriage.load(tmp, kernel="pure").runs["r"]  # must finish and not raise
    jit = tbtriage.load(tmp, kernel="jit").runs["r"]
    assert scalar_points(pure) == scalar_points(jit)
    assert [n.message for n in pure.notes] == [n.message for n in jit.notes]
    untouched = {(t, s_, repr(float(v))) for t, s_, v in _record_points(payloads, skip=index)}
    got = scalar_points(pure)
    from_lie = got - untouched
    # Only TensorBoard's own rule may drop an untouched point: a later point of the same tag at the same or
    # an earlier step (here, from the lying record) supersedes it.
    lost = {
        (tag, step, v)
        for tag, step, v in untouched - got
        if not any(t == tag and s_ <= step for t, s_, _ in from_lie)
        and not any(n.kind == "run_restart" for n in pure.notes)
    }
    assert not lost, lost


def _record_points(payloads: list[bytes], skip: int):
    for i, p in enumerate(payloads):
        if i == skip:
            continue
        ev = event_pb2.Event.FromString(p)
        for v in ev.summary.value:
            if v.WhichOneof("value") == "simple_value":
                yield v.tag, ev.step, v.simple_value
