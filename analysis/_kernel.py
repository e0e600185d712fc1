"""TFRecord framing and `Event` decoding for scalar points, in a numba-compatible subset of Python.

This one source serves two paths with identical results:

* imported normally (`analysis._kernel`), the functions are plain Python and run on `bytes`
  and lists: no compile, no numba import, the right choice for small reads;
* loaded a second time under the name `analysis._kernel_jit` (see `decode.py`), every function
  is compiled by numba (`nogil`, cached on disk) and runs on numpy arrays: millions of points/s.

The kernel only handles the hot, regular case: records whose Event holds wall_time, step and a
summary of scalar values (`simple_value`, or a rank-0 numeric tensor without metadata). Every
other record (file_version, graph, session_log, histograms, text, hparams, first TF2 value of a
tag that carries plugin metadata, odd dtypes...) is handed back by offset for the Python decoder,
so unusual data costs speed, never correctness.

The bytes are untrusted. Every length read from a file is checked (negative, past its enclosing
message or record) before it moves a position, and every fixed-width value before it is read:
positions only ever move forward, so a hostile record can neither loop the scan forever nor make
it read outside its own bytes (numba does no bounds checks). A record that fails a check is handed
to Python as malformed.
"""

import math

import numpy as np

JIT = __name__.endswith("_jit")

if JIT:
    from numba import njit

    kernel = njit(cache=True, nogil=True)
    B = np.int64  # numba's int() keeps uint8, and uint/int mixes become floats: widen explicitly
else:
    import struct

    def kernel(f):
        return f

    B = int


# Status codes returned by `scan`.
ST_END = 0  # consumed every complete record up to `end`
ST_TRUNCATED = 1  # stopped at an incomplete record (a writer still writing, or a crash)
ST_FULL = 2  # output columns are full; call again from the returned position
ST_BAD_HEADER = 3  # length CRC mismatch at the returned position
ST_BAD_DATA = 4  # payload CRC mismatch at the returned position
ST_TAGS_FULL = 5  # tag intern table full; grow it and call again

# Why a record was handed to the Python decoder (`oth_kind`).
OTHER_RECORD = 0  # anything but plain scalar summaries
OTHER_MALFORMED = 1  # CRC fine but the protobuf does not parse

# Point sources (`out_src`).
SRC_SIMPLE = 0
SRC_TENSOR = 1

# TensorFlow DataType enum values the kernel decodes itself.
DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_HALF = 1, 2, 3, 9, 19

_MASK_DELTA = 0xA282EAD8


def make_crc_tables():
    """Slicing-by-8 tables for CRC32C (Castagnoli, reflected polynomial 0x82F63B78)."""
    t = np.zeros((8, 256), dtype=np.int64)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t[0, i] = c
    for k in range(1, 8):
        for i in range(256):
            c = t[k - 1, i]
            t[k, i] = (c >> 8) ^ t[0, c & 0xFF]
    return t.reshape(-1)  # flat: t[k * 256 + i] indexes the same way in numba and in Python


if JIT:
    # Assembling IEEE 754 values from their bits is several times faster in numba than a
    # per-call array view; exact for every value (a NaN's payload bits are not kept).

    @kernel
    def _f32(buf, p):
        bits = B(buf[p]) | (B(buf[p + 1]) << 8) | (B(buf[p + 2]) << 16) | (B(buf[p + 3]) << 24)
        e = (bits >> 23) & 0xFF
        m = bits & 0x7FFFFF
        if e == 0:
            v = math.ldexp(float(m), -149)
        elif e == 0xFF:
            v = math.nan if m else math.inf
        else:
            v = math.ldexp(float(m | 0x800000), e - 150)
        return -v if bits >> 31 else v

    @kernel
    def _f64(buf, p):
        lo = B(buf[p]) | (B(buf[p + 1]) << 8) | (B(buf[p + 2]) << 16) | (B(buf[p + 3]) << 24)
        hi = B(buf[p + 4]) | (B(buf[p + 5]) << 8) | (B(buf[p + 6]) << 16) | (B(buf[p + 7]) << 24)
        e = (hi >> 20) & 0x7FF
        m = ((hi & 0xFFFFF) << 32) | lo
        if e == 0:
            v = math.ldexp(float(m), -1074)
        elif e == 0x7FF:
            v = math.nan if m else math.inf
        else:
            v = math.ldexp(float(m | (1 << 52)), e - 1075)
        return -v if hi >> 31 else v

else:
    _F32 = struct.Struct("<f").unpack_from
    _F64 = struct.Struct("<d").unpack_from

    def _f32(buf, p):
        return _F32(buf, p)[0]

    def _f64(buf, p):
        return _F64(buf, p)[0]


@kernel
def crc32c_tables(buf, start, end, t):
    """CRC32C of buf[start:end], by the slicing-by-8 tables `t` (`make_crc_tables`)."""
    crc = 0xFFFFFFFF
    i = start
    while i + 8 <= end:
        lo = crc ^ (B(buf[i]) | (B(buf[i + 1]) << 8) | (B(buf[i + 2]) << 16) | (B(buf[i + 3]) << 24))
        hi = B(buf[i + 4]) | (B(buf[i + 5]) << 8) | (B(buf[i + 6]) << 16) | (B(buf[i + 7]) << 24)
        crc = (
            t[1792 + (lo & 0xFF)]
            ^ t[1536 + ((lo >> 8) & 0xFF)]
            ^ t[1280 + ((lo >> 16) & 0xFF)]
            ^ t[1024 + ((lo >> 24) & 0xFF)]
            ^ t[768 + (hi & 0xFF)]
            ^ t[512 + ((hi >> 8) & 0xFF)]
            ^ t[256 + ((hi >> 16) & 0xFF)]
            ^ t[(hi >> 24) & 0xFF]
        )
        i += 8
    while i < end:
        crc = t[(crc ^ B(buf[i])) & 0xFF] ^ (crc >> 8)
        i += 1
    return crc ^ 0xFFFFFFFF


def _hardware_crc() -> bool:
    """Whether the compiled kernel computes CRC32C with the CPU's own instruction (SSE 4.2's `crc32`, which is
    CRC32C): on x86-64 when numba compiles for this host and the host has it. Not for the plain Python path, nor
    where numba is told to compile for another CPU (`NUMBA_CPU_NAME`: a portable cache), whose code could not use it.
    """
    import platform

    from llvmlite import binding
    from numba.core import config

    if platform.machine().lower() not in ("x86_64", "amd64") or any(
        getattr(config, name, None) for name in ("CPU_NAME", "CPU_FEATURES")
    ):
        return False
    try:
        return "+sse4.2" in binding.get_host_cpu_features().flatten().split(",")
    except RuntimeError:  # llvmlite cannot tell on this host
        return False


HARDWARE_CRC = False

if JIT and _hardware_crc():
    HARDWARE_CRC = True
    # CRC32C is ~0.8 ms of the ~2 ms a 750 kB file takes to decode with the tables below (two CRCs a record,
    # ~50 bytes each); the instruction does 8 bytes in one step, ~6x faster. The same value: a reflected CRC32C
    # with no inversion of its own, inverted before and after as the table's loop is.
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def _load_u64(typingctx, arr, i):
        """The 8 bytes of the uint8 array `arr` from index `i` as one little-endian int64 (x86-64: any alignment)."""

        def codegen(context, builder, signature, args):
            data = context.make_array(signature.args[0])(context, builder, args[0]).data
            load = builder.load(builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(64).as_pointer()))
            load.align = 1
            return load

        return types.int64(arr, types.int64), codegen

    @intrinsic
    def _crc_u64(typingctx, crc, word):
        def codegen(context, builder, signature, args):
            i64 = ir.IntType(64)
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(i64, [i64, i64]), "llvm.x86.sse42.crc32.64.64"
            )
            return builder.call(fn, args)

        return types.int64(types.int64, types.int64), codegen

    @intrinsic
    def _crc_u8(typingctx, crc, byte):
        def codegen(context, builder, signature, args):
            i8, i32 = ir.IntType(8), ir.IntType(32)
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(i32, [i32, i8]), "llvm.x86.sse42.crc32.32.8"
            )
            value = builder.call(fn, [builder.trunc(args[0], i32), builder.trunc(args[1], i8)])
            return builder.zext(value, ir.IntType(64))

        return types.int64(types.int64, types.int64), codegen

    @kernel
    def crc32c(buf, start, end, t):
        """CRC32C of buf[start:end] (`t`, the tables, unused here)."""
        crc = 0xFFFFFFFF
        i = start
        while i + 8 <= end:
            crc = _crc_u64(crc, _load_u64(buf, i))
            i += 8
        while i < end:
            crc = _crc_u8(crc, B(buf[i]))
            i += 1
        return crc ^ 0xFFFFFFFF

else:
    crc32c = crc32c_tables


@kernel
def masked_crc(buf, start, end, t):
    crc = crc32c(buf, start, end, t)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


@kernel
def read_u32(buf, p):
    return B(buf[p]) | (B(buf[p + 1]) << 8) | (B(buf[p + 2]) << 16) | (B(buf[p + 3]) << 24)


@kernel
def read_u64(buf, p):
    """Little-endian 64-bit length; a value past 2**62 is returned as -1 (never a real length)."""
    if B(buf[p + 7]) >= 0x40:
        return -1
    return read_u32(buf, p) | (read_u32(buf, p + 4) << 32)


@kernel
def varint(buf, p, end):
    """Decode a base-128 varint at p: (value as signed int64, next position), next = -1 on error."""
    result = 0
    shift = 0
    while p < end:
        b = B(buf[p])
        p += 1
        if shift < 63:
            result |= (b & 0x7F) << shift
        elif b & 1:
            # The 10th byte carries bit 63: two's complement sign of an int64.
            result = result - 9223372036854775807 - 1
        if b < 0x80:
            return result, p
        shift += 7
        if shift > 63:
            return 0, -1
    return 0, -1


@kernel
def skip_field(buf, p, end, wire):
    """Position after a field's payload of wire type `wire` starting at p; -1 if malformed."""
    if wire == 0:
        v, p = varint(buf, p, end)
        return p
    if wire == 1:
        p += 8
    elif wire == 5:
        p += 4
    elif wire == 2:
        n, p = varint(buf, p, end)
        if p < 0 or n < 0:
            return -1
        p += n
    else:
        return -1
    return p if p <= end else -1


@kernel
def half_to_float(h):
    """IEEE 754 binary16 bits to a float (exact)."""
    sign = -1.0 if h & 0x8000 else 1.0
    e = (h >> 10) & 0x1F
    m = h & 0x3FF
    if e == 0:
        return sign * math.ldexp(float(m), -24)
    if e == 31:
        if m:
            return math.nan
        return sign * math.inf
    return sign * math.ldexp(float(m + 1024), e - 25)


@kernel
def int_field_value(field, v):
    """A varint TensorProto value as a float: int_val (7) is int32, half_val (13) holds binary16 bits."""
    if field == 7:
        v = ((v + 2147483648) & 0xFFFFFFFF) - 2147483648  # int32 semantics
    if field == 13:
        return half_to_float(v & 0xFFFF)
    return float(v)


@kernel
def tensor_scalar(buf, p, end):
    """Value of a rank-0 numeric TensorProto in buf[p:end], as (ok, value).

    ok is 0 when the tensor is not a scalar the kernel decodes (then the record goes to Python).
    """
    dtype = 0
    rank = 0
    nvals = 0
    value = 0.0
    content_p = -1
    content_n = 0
    while p < end:
        key, p = varint(buf, p, end)
        if p < 0:
            return 0, 0.0
        field = key >> 3
        wire = key & 7
        if field == 1 and wire == 0:
            dtype, p = varint(buf, p, end)
        elif field == 2 and wire == 2:  # tensor_shape: any dim makes it non-scalar
            n, p = varint(buf, p, end)
            if p < 0 or n < 0 or p + n > end:
                return 0, 0.0
            q = p
            while q < p + n:
                k2, q = varint(buf, q, p + n)
                if q < 0:
                    return 0, 0.0
                if (k2 >> 3) == 2 or (k2 >> 3) == 3:  # dim / unknown_rank
                    rank += 1
                q = skip_field(buf, q, p + n, k2 & 7)
                if q < 0:
                    return 0, 0.0
            p += n
        elif field == 4 and wire == 2:  # tensor_content
            content_n, p = varint(buf, p, end)
            if p < 0 or content_n < 0 or p + content_n > end:
                return 0, 0.0
            content_p = p
            p += content_n
        elif field == 5 and wire == 5:  # float_val, unpacked
            if p + 4 > end:
                return 0, 0.0
            value = _f32(buf, p)
            nvals += 1
            p += 4
        elif field == 5 and wire == 2:  # float_val, packed
            n, p = varint(buf, p, end)
            if p < 0 or n < 0 or p + n > end:
                return 0, 0.0
            if n >= 4:
                value = _f32(buf, p + n - 4)
            nvals += n // 4
            p += n
        elif field == 6 and wire == 1:  # double_val
            if p + 8 > end:
                return 0, 0.0
            value = _f64(buf, p)
            nvals += 1
            p += 8
        elif field == 6 and wire == 2:
            n, p = varint(buf, p, end)
            if p < 0 or n < 0 or p + n > end:
                return 0, 0.0
            if n >= 8:
                value = _f64(buf, p + n - 8)
            nvals += n // 8
            p += n
        elif (field == 7 or field == 10 or field == 13) and wire == 0:  # int_val / int64_val / half_val
            v, p = varint(buf, p, end)
            value = int_field_value(field, v)
            nvals += 1
        elif (field == 7 or field == 10 or field == 13) and wire == 2:
            n, p = varint(buf, p, end)
            if p < 0 or n < 0 or p + n > end:
                return 0, 0.0
            q = p
            while q < p + n:
                v, q = varint(buf, q, p + n)
                if q < 0:
                    return 0, 0.0
                value = int_field_value(field, v)
                nvals += 1
            p += n
        elif field == 3 and wire == 0:  # version_number
            v, p = varint(buf, p, end)
        else:
            return 0, 0.0  # string_val, other dtypes, variant...: leave to Python
        if p < 0 or p > end:
            return 0, 0.0
    if rank != 0:
        return 0, 0.0
    if content_p >= 0:
        if nvals != 0:
            return 0, 0.0
        if dtype == DT_FLOAT and content_n == 4:
            return 1, _f32(buf, content_p)
        if dtype == DT_DOUBLE and content_n == 8:
            return 1, _f64(buf, content_p)
        if dtype == DT_HALF and content_n == 2:
            return 1, half_to_float(B(buf[content_p]) | (B(buf[content_p + 1]) << 8))
        if dtype == DT_INT32 and content_n == 4:
            v = read_u32(buf, content_p)
            return 1, float(v - 4294967296 if v >= 2147483648 else v)
        return 0, 0.0
    if nvals != 1:
        return 0, 0.0
    if dtype == DT_FLOAT or dtype == DT_DOUBLE or dtype == DT_INT32 or dtype == DT_INT64 or dtype == DT_HALF:
        return 1, value
    return 0, 0.0


@kernel
def intern_tag(buf, p, n, ht, tag_hash, tag_off, tag_len, arena, state):
    """Id of the tag bytes buf[p:p+n] in the intern table, adding it if new; -1 when full.

    state[0] = number of tags, state[1] = arena bytes used. The table is open addressing on a
    32-bit FNV-1a hash, confirmed by comparing bytes, so distinct tags never share an id.
    """
    h = 2166136261
    for i in range(p, p + n):
        h = ((h ^ B(buf[i])) * 16777619) & 0xFFFFFFFF
    mask = len(ht) - 1
    slot = h & mask
    while True:
        tid = ht[slot]
        if tid < 0:
            break
        if tag_hash[tid] == h and tag_len[tid] == n:
            a = tag_off[tid]
            same = True
            for i in range(n):
                if arena[a + i] != buf[p + i]:
                    same = False
                    break
            if same:
                return tid
        slot = (slot + 1) & mask
    ntags = state[0]
    used = state[1]
    if ntags * 2 >= len(ht) or ntags >= len(tag_hash) or used + n > len(arena):
        return -1
    for i in range(n):
        arena[used + i] = buf[p + i]
    ht[slot] = ntags
    tag_hash[ntags] = h
    tag_off[ntags] = used
    tag_len[ntags] = n
    state[0] = ntags + 1
    state[1] = used + n
    return ntags


@kernel
def scan(
    buf,
    pos,
    end,
    verify,
    t,
    rec0,
    out_step,
    out_wall,
    out_val,
    out_tag,
    out_src,
    out_rec,
    oth_off,
    oth_kind,
    oth_rec,
    ht,
    tag_hash,
    tag_off,
    tag_len,
    arena,
    state,
):
    """Frame and decode records in buf[pos:end].

    Returns (status, position, points written, other records written, records framed).
    `position` is where the next call must start (the start of the record that stopped the scan
    for every status but ST_END). `rec0` numbers the first record, so points and other records
    can be put back in file order (`out_rec`, `oth_rec`; `oth_off` holds each other record's offset).
    """
    npts = 0
    noth = 0
    nrec = 0
    cap = len(out_step)
    ocap = len(oth_off)
    while True:
        if pos + 12 > end:
            return (ST_END if pos == end else ST_TRUNCATED), pos, npts, noth, nrec
        length = read_u64(buf, pos)
        if verify and masked_crc(buf, pos, pos + 8, t) != read_u32(buf, pos + 8):
            return ST_BAD_HEADER, pos, npts, noth, nrec
        if length < 0:
            return ST_BAD_HEADER, pos, npts, noth, nrec
        d0 = pos + 12
        d1 = d0 + length
        if d1 + 4 > end:
            return ST_TRUNCATED, pos, npts, noth, nrec
        if verify and masked_crc(buf, d0, d1, t) != read_u32(buf, d1):
            return ST_BAD_DATA, pos, npts, noth, nrec
        if noth >= ocap:
            return ST_FULL, pos, npts, noth, nrec
        rec = rec0 + nrec
        start_pts = npts
        # One pass over the Event: 1 wall_time, 2 step, 5 summary. Serializers write fields in
        # number order; a record that does not (or has any other field) goes to Python whole.
        wall = 0.0
        step = 0
        simple = True
        malformed = False
        in_summary = False
        p = d0
        while p < d1 and simple:
            key, p = varint(buf, p, d1)
            if p < 0:
                malformed = True
                break
            field = key >> 3
            wire = key & 7
            if field == 1 and wire == 1 and not in_summary:
                if p + 8 > d1:
                    malformed = True
                    break
                wall = _f64(buf, p)
                p += 8
            elif field == 2 and wire == 0 and not in_summary:
                step, p = varint(buf, p, d1)
            elif field == 5 and wire == 2:
                in_summary = True
                n, p = varint(buf, p, d1)
                if p < 0 or n < 0 or p + n > d1:
                    malformed = True
                    break
                s1 = p + n
                while p < s1:
                    vkey, p = varint(buf, p, s1)
                    if p < 0:
                        malformed = True
                        break
                    if vkey != 10:  # Summary.value = field 1, length-delimited
                        simple = False
                        break
                    vn, p = varint(buf, p, s1)
                    if p < 0 or vn < 0 or p + vn > s1:
                        malformed = True
                        break
                    v1 = p + vn
                    q = p
                    p = v1
                    tag_p = -1
                    tag_n = 0
                    kind = -1
                    val = 0.0
                    while q < v1:
                        k, q = varint(buf, q, v1)
                        if q < 0:
                            malformed = True
                            break
                        f = k >> 3
                        w = k & 7
                        if f == 1 and w == 2:
                            tag_n, q = varint(buf, q, v1)
                            if q < 0 or tag_n < 0 or q + tag_n > v1:
                                malformed = True
                                break
                            tag_p = q
                            q += tag_n
                        elif f == 2 and w == 5:
                            if q + 4 > v1:
                                malformed = True
                                break
                            val = _f32(buf, q)
                            kind = SRC_SIMPLE
                            q += 4
                        elif f == 8 and w == 2:
                            tn, q = varint(buf, q, v1)
                            if q < 0 or tn < 0 or q + tn > v1:
                                malformed = True
                                break
                            ok, tv = tensor_scalar(buf, q, q + tn)
                            if ok == 0:
                                simple = False
                                break
                            val = tv
                            kind = SRC_TENSOR
                            q += tn
                        elif f == 7:
                            q = skip_field(buf, q, v1, w)  # node_name: ignored, as TensorBoard does
                        else:
                            simple = False  # metadata, histogram, image, audio...: Python decodes
                            break
                        if q < 0 or q > v1:
                            malformed = True
                            break
                    if malformed or not simple:
                        break
                    if kind < 0 or tag_p < 0:
                        simple = False
                        break
                    if npts >= cap:
                        return ST_FULL, pos, start_pts, noth, nrec
                    tid = intern_tag(buf, tag_p, tag_n, ht, tag_hash, tag_off, tag_len, arena, state)
                    if tid < 0:
                        return ST_TAGS_FULL, pos, start_pts, noth, nrec
                    out_step[npts] = step
                    out_wall[npts] = wall
                    out_val[npts] = val
                    out_tag[npts] = tid
                    out_src[npts] = kind
                    out_rec[npts] = rec
                    npts += 1
                if malformed:
                    break
            else:
                simple = False
            if p < 0 or p > d1:
                malformed = True
                break
        if malformed or not simple:
            npts = start_pts  # hand the whole record to Python, points included
            oth_off[noth] = pos
            oth_kind[noth] = OTHER_MALFORMED if malformed else OTHER_RECORD
            oth_rec[noth] = rec
            noth += 1
        nrec += 1
        pos = d1 + 4


@kernel
def resync(buf, pos, end, t):
    """First offset after `pos` where a whole, CRC-valid record starts; -1 if none in buf[pos:end].

    Both CRCs must match (a 2**-64 chance for garbage), so resuming there is safe.
    """
    q = pos + 1
    while q + 16 <= end:
        if masked_crc(buf, q, q + 8, t) == read_u32(buf, q + 8):
            length = read_u64(buf, q)
            if length >= 0 and q + 16 + length <= end:
                if masked_crc(buf, q + 12, q + 12 + length, t) == read_u32(buf, q + 12 + length):
                    return q
        q += 1
    return -1
