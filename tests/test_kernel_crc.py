"""The compiled kernel's CRC32C (the CPU's `crc32` instruction where it has one) is tensorboard's CRC, at every
length and offset, and a record it checks is framed and judged as the plain Python path judges it."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as tensorboard_crc

from tbtriage.analysis import _kernel as pure
from tbtriage.analysis import decode

from ._kernels import needs_compiled_kernel

_LIST = [int(x) for x in decode._CRC_TABLE]


@needs_compiled_kernel
@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=120), st.integers(0, 9), st.integers(0, 9))
def test_compiled_crc_is_tensorboards_at_any_offset(data, before, after):
    jit = decode.jit_module()
    buf = np.frombuffer(bytes(before) + data + bytes(after), np.uint8)
    end = before + len(data)
    assert jit.masked_crc(buf, before, end, decode._CRC_TABLE) == tensorboard_crc(data)
    assert jit.crc32c(buf, before, end, decode._CRC_TABLE) == pure.crc32c(bytes(buf), before, end, _LIST)


@needs_compiled_kernel
def test_the_crc_instruction_is_used_where_the_cpu_has_it():
    """On an x86-64 host with SSE 4.2 the compiled kernel uses the instruction (what the test above then checks);
    elsewhere, the tables: never an instruction the host lacks."""
    import platform

    from llvmlite import binding

    has = platform.machine().lower() in ("x86_64", "amd64") and "+sse4.2" in binding.get_host_cpu_features().flatten()
    jit = decode.jit_module()
    assert jit.HARDWARE_CRC == (has and jit._hardware_crc())
    if not has:
        pytest.skip("no SSE 4.2 here: the tables are the compiled CRC")
    assert jit.HARDWARE_CRC
    assert jit.crc32c is not jit.crc32c_tables


@needs_compiled_kernel
def test_a_record_with_one_flipped_bit_is_a_bad_record_on_both_paths():
    payload = b"\x09" + struct.pack("<d", 1.5) + b"\x10\x07"  # wall_time, step 7: a record the kernel frames
    header = struct.pack("<Q", len(payload))
    good = header + struct.pack("<I", tensorboard_crc(header)) + payload + struct.pack("<I", tensorboard_crc(payload))
    for flip in (3, 9, 14, len(good) - 6):
        bad = bytearray(good)
        bad[flip] ^= 0x10
        statuses = []
        for kernel, buf, table in ((decode.jit_module(), np.frombuffer(bytes(bad), np.uint8), decode._CRC_TABLE),
                                   (pure, bytes(bad), _LIST)):  # fmt: skip
            tags = decode.TagTable(kernel is not pure)
            out = decode._Outputs(kernel is not pure, 4)
            statuses.append(kernel.scan(buf, 0, len(bad), True, table, 0, *out.args(), *tags.args())[:2])
        assert statuses[0] == statuses[1]
        assert statuses[0][0] in (pure.ST_BAD_HEADER, pure.ST_BAD_DATA)
