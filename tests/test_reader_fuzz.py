"""Property: random corruption never crashes the reader and never loses a record before it."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto import event_pb2

import tbtriage
from tests._event_files import event_files, write_pytorch_run
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
