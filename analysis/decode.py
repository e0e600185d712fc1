"""Drive the framing/decoding kernel over one event file, and decode the records it hands back.

`scan_file` yields `Batch`es in file order: columns of scalar points decoded by the kernel, plus
the records the kernel left to Python (decoded here with tensorboard's protobuf classes), so the
caller never sees the difference between the compiled and the pure path.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import _kernel as _pure
from .cache_base import cache_dir

#: Read files in windows of this size, so memory stays well under the bytes read.
CHUNK_BYTES = 8 << 20
#: Points per kernel call: big enough to amortise the call, small enough to stay in cache-ish memory.
POINTS_PER_CALL = 1 << 18
OTHERS_PER_CALL = 1 << 12
#: No scalar point takes fewer bytes of its record than this (its Summary.Value: key and length, the tag's
#: key and length, and a 4-byte float with its key come to 9), so a file of B unread bytes holds fewer
#: than B // MIN_POINT_BYTES + 1 points: output columns that size never fill, and a small file (a sweep
#: holds thousands) no longer pays for columns sized for 8 MB windows (~0.17 ms a file, most of its set-up).
MIN_POINT_BYTES = 4
#: With a warm numba cache, the compiled path wins from about this many bytes: loading it costs
#: ~0.3-0.5 s, in which the pure path (~75k points/s, ~4 MB/s) reads about 2 MB.
JIT_MIN_BYTES = 2 << 20
#: With a cold cache, compiling costs ~7 s (idle 2-core machine) to ~14 s (busy): only worth it
#: when the pure path would take longer, i.e. from ~30 MB.
JIT_COLD_MIN_BYTES = 32 << 20

_CRC_TABLE = _pure.make_crc_tables()
_CRC_LIST = [int(x) for x in _CRC_TABLE]

_jit_lock = threading.Lock()
_warm = [False]  # this process has marked the compiled kernel as cached
_jit_module = None
_jit_failed = False


def numba_available() -> bool:
    return importlib.util.find_spec("numba") is not None


def _warm_marker() -> Path:
    """A file that exists once this exact kernel source has been compiled and cached by this numba.

    numba's own index files outlive a source change (a new tbtriage version), and a stale one
    would send a small read into a 10-second compile; the marker names what was compiled.
    """
    import hashlib
    import platform

    source = Path(__file__).with_name("_kernel.py").read_bytes()
    try:
        from importlib.metadata import version

        numba_version = version("numba")
    except Exception:
        numba_version = "?"
    key = hashlib.sha1(source + f"{numba_version}{sys.version_info[:2]}{platform.machine()}".encode()).hexdigest()[:16]
    return cache_dir() / "numba" / f"warm-{key}"


def _numba_cache_warm() -> bool:
    return _warm_marker().exists()


def _mark_warm() -> None:
    try:
        marker = _warm_marker()
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass  # a read-only cache only costs the next small read the pure path


def jit_module():
    """The kernel compiled by numba (cached on disk), or None where numba is unusable."""
    global _jit_module, _jit_failed
    with _jit_lock:
        if _jit_module is not None or _jit_failed:
            return _jit_module
        try:
            os.environ.setdefault("NUMBA_CACHE_DIR", str(cache_dir() / "numba"))
            name = "tbtriage.analysis._kernel_jit"
            spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("_kernel.py"))
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {name}")
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
            _jit_module = mod
        except Exception:  # numba missing or broken on this platform: the pure path is exact
            _jit_failed = True
        return _jit_module


def kernel_name(nbytes: int, prefer: str | None = None) -> str:
    """ "jit" when reading `nbytes` pays for the compiled kernel, else "pure": `choose_kernel`'s rule, decided without
    loading numba (~0.3 s), for a caller whose workers do the reading (where numba then fails to load, "jit" reads
    with the pure path all the same)."""
    prefer = prefer or os.environ.get("TBTRIAGE_KERNEL", "auto")
    if prefer == "pure" or not numba_available():
        return "pure"
    if prefer == "jit":
        return "jit"
    return "jit" if nbytes >= (JIT_MIN_BYTES if _numba_cache_warm() else JIT_COLD_MIN_BYTES) else "pure"


def choose_kernel(nbytes: int, prefer: str | None = None):
    """The kernel module to use for reading `nbytes`: compiled when it pays, pure otherwise."""
    return _pure if kernel_name(nbytes, prefer) == "pure" else jit_module() or _pure


#: A run's tag table starts with room for 32 tags and 2 KB of their names, and doubles when full (`TagTable.grow`):
#: every run keeps its table for the points appended later, and the 4,096 slots and 64 KB it started with were
#: ~90 KB resident a run, 0.9 GB of an app holding 10,000 runs of four tags.
TAG_SLOTS = 1 << 6
TAG_ARENA = 1 << 11


class TagTable:
    """The kernel's tag intern table for one run, and the tag strings it names."""

    # numpy arrays for the compiled kernel; plain lists for the pure one (faster to index from Python).
    ht: np.ndarray | list[int]
    hash: np.ndarray | list[int]
    off: np.ndarray | list[int]
    len: np.ndarray | list[int]
    arena: np.ndarray | bytearray
    state: np.ndarray | list[int]

    def __init__(self, jit: bool, slots: int = TAG_SLOTS, arena: int = TAG_ARENA):
        self.jit = jit
        self._alloc(slots, arena)
        self.names: list[str] = []
        self.escaped: list[str] = []

    def _alloc(self, slots: int, arena: int) -> None:
        if self.jit:
            self.ht = np.full(slots, -1, np.int64)
            self.hash = np.zeros(slots // 2, np.int64)
            self.off = np.zeros(slots // 2, np.int64)
            self.len = np.zeros(slots // 2, np.int64)
            self.arena = np.zeros(arena, np.uint8)
            self.state = np.zeros(2, np.int64)
        else:
            self.ht = [-1] * slots
            self.hash = [0] * (slots // 2)
            self.off = [0] * (slots // 2)
            self.len = [0] * (slots // 2)
            self.arena = bytearray(arena)
            self.state = [0, 0]

    def args(self):
        return self.ht, self.hash, self.off, self.len, self.arena, self.state

    def grow(self, kernel) -> None:
        """Double the table (re-interning every tag in id order keeps the ids)."""
        raws = self.raw_names()
        self._alloc(len(self.ht) * 2, len(self.arena) * 2)
        self.names, self.escaped = [], []
        for raw in raws:
            self.intern_bytes(kernel, raw)

    def raw_names(self) -> list[bytes]:
        """Every tag's bytes as read, in id order (names that were not UTF-8 included, unescaped)."""
        return [
            bytes(self.arena[int(self.off[i]) : int(self.off[i]) + int(self.len[i])]) for i in range(int(self.state[0]))
        ]

    def sync(self) -> None:
        """Pick up the names of tags the kernel added (bytes that are not UTF-8 escaped as `\\xNN`, so two
        tags differing only there stay two tags; `escaped` lists them, for the run's notes)."""
        from .reader import decode_name

        n = int(self.state[0])
        for i in range(len(self.names), n):
            a, b = int(self.off[i]), int(self.off[i]) + int(self.len[i])
            name, escaped = decode_name(bytes(self.arena[a:b]))
            self.names.append(name)
            if escaped:
                self.escaped.append(name)

    def intern(self, kernel, name: str) -> int:
        return self.intern_bytes(kernel, name.encode("utf-8", "surrogateescape"))

    def intern_bytes(self, kernel, raw: bytes) -> int:
        buf = np.frombuffer(raw, np.uint8) if self.jit else raw
        while True:
            tid = kernel.intern_tag(buf, 0, len(raw), *self.args())
            if tid >= 0:
                self.sync()
                return int(tid)
            self.grow(kernel)


@dataclass
class Batch:
    """Decoded records of one file, in order: kernel points, and records left to Python."""

    steps: np.ndarray
    walls: np.ndarray
    values: np.ndarray
    tags: np.ndarray  # tag ids (TagTable.names)
    srcs: np.ndarray  # SRC_SIMPLE / SRC_TENSOR
    recs: np.ndarray  # record ordinal in the file
    others: list[tuple[int, int, bytes, bool]] = field(
        default_factory=list
    )  # (ordinal, file offset, payload, malformed)


@dataclass
class ScanResult:
    """Where a file scan stopped, and what was wrong with the file on the way."""

    offset: int = 0  # next unread byte (start of an incomplete record, or end of file)
    records: int = 0
    problems: list[tuple[int, str]] = field(default_factory=list)  # (offset, one-line problem)
    truncated: bool = False
    cancelled: bool = False


class _Outputs:
    # numpy arrays for the compiled kernel; plain lists for the pure one (see below).
    step: np.ndarray | list[int]
    wall: np.ndarray | list[float]
    val: np.ndarray | list[float]
    tag: np.ndarray | list[int]
    src: np.ndarray | list[int]
    rec: np.ndarray | list[int]
    oth_off: np.ndarray | list[int]
    oth_kind: np.ndarray | list[int]
    oth_rec: np.ndarray | list[int]

    def __init__(self, jit: bool, points: int = POINTS_PER_CALL):
        """Columns for `points` points per kernel call (at most POINTS_PER_CALL)."""
        points = max(1, min(points, POINTS_PER_CALL))
        if jit:
            self.step = np.empty(points, np.int64)
            self.wall = np.empty(points, np.float64)
            self.val = np.empty(points, np.float64)
            self.tag = np.empty(points, np.int64)
            self.src = np.empty(points, np.int64)
            self.rec = np.empty(points, np.int64)
            self.oth_off = np.empty(OTHERS_PER_CALL, np.int64)
            self.oth_kind = np.empty(OTHERS_PER_CALL, np.int64)
            self.oth_rec = np.empty(OTHERS_PER_CALL, np.int64)
        else:
            # Plain lists: indexing them from Python is several times faster than numpy scalars.
            self.step = [0] * points
            self.wall = [0.0] * points
            self.val = [0.0] * points
            self.tag = [0] * points
            self.src = [0] * points
            self.rec = [0] * points
            self.oth_off = [0] * OTHERS_PER_CALL
            self.oth_kind = [0] * OTHERS_PER_CALL
            self.oth_rec = [0] * OTHERS_PER_CALL

    def args(self):
        return (self.step, self.wall, self.val, self.tag, self.src, self.rec, self.oth_off, self.oth_kind, self.oth_rec)

    def others(self, buf, kernel, n: int) -> list[tuple[int, int, bytes, bool]]:
        """(record ordinal, offset in window, payload, malformed) of the records left to Python."""
        found = []
        for i in range(n):
            o = int(self.oth_off[i])
            length = int(kernel.read_u64(buf, o))
            payload = bytes(buf[o + 12 : o + 12 + length])
            found.append((int(self.oth_rec[i]), o, payload, int(self.oth_kind[i]) == _pure.OTHER_MALFORMED))
        return found

    def take(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return (
            np.array(self.step[:n], np.int64),
            np.array(self.wall[:n], np.float64),
            np.array(self.val[:n], np.float64),
            np.array(self.tag[:n], np.int64),
            np.array(self.src[:n], np.int8),
            np.array(self.rec[:n], np.int64),
        )


def _read_window(f, start: int, size: int, jit: bool, into: np.ndarray | None = None):
    """`size` bytes of `f` from `start`: a uint8 array for the compiled kernel (a view of `into` when it is large
    enough), bytes for the pure one."""
    f.seek(start)
    if jit:
        buf = into[:size] if into is not None and into.size >= size else np.empty(size, np.uint8)
        n = f.readinto(buf.data)
        return buf[:n]
    return f.read(size)


class _Scratch:
    """The compiled kernel's window and output columns, kept for the next file: fresh ones for every file cost a
    small file as much as its decoding (a run of four 3,600-point tags: ~600 page faults, ~0.5 ms of ~4 ms).

    Borrowed for one `scan_file` and given back at its end (a free list, so scans that interleave, in one thread
    or several, never share one); everything a batch carries out of a scan is a copy.
    """

    _free: list[_Scratch] = []
    KEEP = 2  # scratches kept between scans: one per thread that reads at once, in practice

    def __init__(self) -> None:
        self.out = _Outputs(True, POINTS_PER_CALL)
        self.window = np.empty(CHUNK_BYTES, np.uint8)

    @classmethod
    def borrow(cls) -> _Scratch:
        while True:
            try:
                scratch = cls._free.pop()
            except IndexError:  # none free (another thread may have taken the last one since)
                return cls()
            if len(scratch.out.step) == POINTS_PER_CALL and scratch.window.size == CHUNK_BYTES:
                return scratch  # (else sized for settings changed since: dropped)

    def give_back(self) -> None:
        if len(self._free) < self.KEEP:
            self._free.append(self)


def scan_file(
    path: str | Path,
    offset: int,
    kernel,
    tags: TagTable,
    result: ScanResult,
    verify: bool = True,
    end: int | None = None,
    cancel: Callable[[], bool] | None = None,
    open_file: Callable[[Any], Any] | None = None,
) -> Iterator[Batch]:
    """Yield batches decoded from `path` starting at byte `offset`, filling `result` as it goes.

    Stops at the first incomplete record (result.truncated, result.offset points at it: a later
    call continues from there). A record with a bad CRC is reported in result.problems; reading
    resumes at the next position where a whole record verifies, or stops if there is none.
    `cancel` is polled between kernel calls: when it returns True the scan stops cleanly, with
    result.offset at the next unread record, so a later call carries on from there.
    `open_file(path)` opens the file for reading (default: the local file; see `storage`).
    """
    jit = kernel is not _pure
    scratch = _Scratch.borrow() if jit else None
    try:
        yield from _scan(path, offset, kernel, tags, result, verify, end, cancel, open_file, scratch)
    finally:
        if scratch is not None:
            scratch.give_back()


def _scan(
    path: str | Path,
    offset: int,
    kernel,
    tags: TagTable,
    result: ScanResult,
    verify: bool,
    end: int | None,
    cancel: Callable[[], bool] | None,
    open_file: Callable[[Any], Any] | None,
    scratch: _Scratch | None,
) -> Iterator[Batch]:
    """`scan_file`'s work, with `scratch` (the compiled kernel's) or fresh columns (the pure kernel's lists)."""
    jit = scratch is not None
    table = _CRC_TABLE if jit else _CRC_LIST
    rec = result.records
    with open(path, "rb") if open_file is None else open_file(path) as f:
        size = os.fstat(f.fileno()).st_size if end is None else end
        out: _Outputs = (
            scratch.out if scratch is not None else _Outputs(jit, max(size - offset, 0) // MIN_POINT_BYTES + 1)
        )
        base = offset
        want = CHUNK_BYTES
        while base < size:
            buf = _read_window(f, base, min(want, size - base), jit, scratch.window if scratch is not None else None)
            want = CHUNK_BYTES
            blen = len(buf)
            if blen == 0:
                break
            pos = 0
            # The pure path checks every CRC up front with numpy (a Python byte loop is ~20x
            # slower), then lets the kernel decode up to the first bad or incomplete record.
            stop, stop_status = (blen, _pure.ST_END) if jit or not verify else verify_window(buf)
            while True:
                status, pos, npts, noth, nrec = kernel.scan(
                    buf, pos, stop, verify and jit, table, rec, *out.args(), *tags.args()
                )
                pos = int(pos)
                if jit and not _warm[0]:
                    _warm[0] = True  # compiled (or loaded) and ran: later processes may rely on it
                    _mark_warm()
                if status == _pure.ST_END and stop_status != _pure.ST_END:
                    status = stop_status
                if npts or noth:
                    tags.sync()
                    others = [(r, base + o, d, m) for r, o, d, m in out.others(buf, kernel, int(noth))]
                    yield Batch(*out.take(int(npts)), others=others)
                rec += int(nrec)
                result.records = rec
                if cancel is not None and cancel() and status != _pure.ST_END:
                    result.offset = base + pos
                    result.cancelled = True
                    return
                if status == _pure.ST_FULL:
                    continue
                if status == _pure.ST_TAGS_FULL:
                    tags.grow(kernel)
                    continue
                break
            if status == _pure.ST_END:
                base += blen
                continue
            if status == _pure.ST_TRUNCATED:
                if base + blen < size:  # the window, not the file, cut this record
                    if pos > 0:
                        base += pos
                        continue
                    length = int(kernel.read_u64(buf, 0)) if blen >= 12 else -1
                    if 0 <= length and 16 + length <= size - base:
                        want = 16 + length  # one record larger than a window: read it whole
                        continue
                # The record at base + pos does not fit in the file. A writer still writing (or one
                # that crashed) leaves it last; whole records after it mean its length is corrupt
                # (a bit flip that kept the length checksum, or a hostile file), not a cut tail.
                bad = base + pos
                q = _next_record(f, bad, size, jit, kernel, table) if size - bad > 16 else -1
                if q <= 0:
                    result.offset = bad
                    result.truncated = True
                    return
                length = int(kernel.read_u64(buf, pos)) if blen - pos >= 8 else -1
                result.problems.append(
                    (
                        bad,
                        f"record at byte {bad} declares {length} bytes, past the end of the file; "
                        f"skipped {q} bytes, resumed at byte {bad + q}",
                    )
                )
                base = bad + q
                continue
            # A corrupt record at base + pos: find the next record that verifies, if any.
            bad = base + pos
            what = "bad length checksum" if status == _pure.ST_BAD_HEADER else "bad data checksum"
            q = _next_record(f, bad, size, jit, kernel, table)
            if q == 0:
                # A zero-filled tail (preallocated, or not flushed yet) is no data: maybe later.
                result.offset = bad
                result.truncated = True
                return
            if q < 0:
                result.problems.append(
                    (bad, f"{what} at byte {bad}; the {size - bad} bytes after it hold no intact record, ignored")
                )
                result.offset = size
                return
            result.problems.append((bad, f"{what} at byte {bad}; skipped {q} bytes, resumed at byte {bad + q}"))
            base = bad + q
        result.offset = max(base, offset)


def _next_record(f, bad: int, size: int, jit: bool, kernel, table) -> int:
    """How far after byte `bad` the next whole, CRC-valid record starts: -1 if none, 0 if the rest is zeros."""
    rest = _read_window(f, bad, size - bad, jit)
    if _all_zero(rest):
        return 0
    return int(kernel.resync(rest, 0, len(rest), table)) if jit else resync_numpy(rest)


def verify_window(buf: bytes) -> tuple[int, int]:
    """Frame `buf` and check every CRC with numpy: (offset of the first bad or incomplete record
    or len(buf), the status the kernel would give there), with the kernel's exact semantics."""
    from .event_writer import masked_crc32c_rows

    n = len(buf)
    starts: list[int] = []
    lengths: list[int] = []
    unpack = _U64.unpack_from
    p = 0
    while p + 12 <= n:
        (length,) = unpack(buf, p)
        starts.append(p)
        lengths.append(length)
        if length >= 1 << 62 or p + 16 + length > n:
            break
        p += 16 + length
    if not starts:
        return n, (_pure.ST_END if n == 0 else _pure.ST_TRUNCATED)
    arr = np.frombuffer(buf, np.uint8)
    st = np.array(starts, np.int64)
    ln = np.array(lengths, np.uint64)

    def stored(at: np.ndarray) -> np.ndarray:
        return arr[at[:, None] + np.arange(4)].astype(np.uint32) @ np.array([1, 1 << 8, 1 << 16, 1 << 24], np.uint32)

    bad = np.full(st.size, -1, np.int64)  # per record: status if bad
    header_ok = masked_crc32c_rows(arr[st[:, None] + np.arange(8)]) == stored(st + 8)
    bad[~header_ok] = _pure.ST_BAD_HEADER
    complete = (ln < (1 << 62)) & (st + 16 + ln.astype(np.int64) <= n)
    check = header_ok & complete
    for length in np.unique(ln[check]):
        idx = np.flatnonzero(check & (ln == length))
        body = arr[(st[idx] + 12)[:, None] + np.arange(int(length))] if length else np.empty((idx.size, 0), np.uint8)
        ok = masked_crc32c_rows(body) == stored(st[idx] + 12 + int(length))
        bad[idx[~ok]] = _pure.ST_BAD_DATA
    bad[header_ok & ~complete & (ln >= (1 << 62))] = _pure.ST_BAD_HEADER
    first = np.flatnonzero(bad >= 0)
    incomplete = np.flatnonzero(header_ok & ~complete & (ln < (1 << 62)))
    cut = min(first[0] if first.size else st.size, incomplete[0] if incomplete.size else st.size)
    if cut < st.size:
        status = int(bad[cut]) if bad[cut] >= 0 else _pure.ST_TRUNCATED
        return int(st[cut]), status
    end = int(st[-1] + 16 + int(ln[-1]))
    return end, (_pure.ST_END if end == n else _pure.ST_TRUNCATED)


_U64 = __import__("struct").Struct("<Q")
#: Offsets examined at once by `resync_numpy` (an 8-byte row each: 8 MB of temporaries).
_RESYNC_BLOCK = 1 << 20


def resync_numpy(buf: bytes) -> int:
    """`_kernel.resync` for the pure path: the first offset after 0 where a whole record verifies, or -1.

    A Python loop would checksum 8 bytes at every offset (~5 µs each: minutes for a damaged 30 MB
    file); here the length checksums of a block of offsets are computed at once with numpy, and
    only the few offsets whose length checksum matches get their payload checked.
    """
    from .event_writer import masked_crc32c, masked_crc32c_rows

    arr = np.frombuffer(buf, np.uint8)
    n = arr.size
    weights = np.array([1, 1 << 8, 1 << 16, 1 << 24], np.uint32)
    for lo in range(1, max(n - 15, 1), _RESYNC_BLOCK):
        offsets = np.arange(lo, min(lo + _RESYNC_BLOCK, n - 15), dtype=np.int64)
        if offsets.size == 0:
            break
        header = arr[offsets[:, None] + np.arange(8)]
        stored = arr[offsets[:, None] + 8 + np.arange(4)].astype(np.uint32) @ weights
        for q in offsets[masked_crc32c_rows(header) == stored]:
            q = int(q)
            (length,) = _U64.unpack_from(buf, q)
            end = q + 12 + length
            if end + 4 <= n and masked_crc32c(bytes(buf[q + 12 : end])) == int(
                arr[end : end + 4].astype(np.uint32) @ weights
            ):
                return q
    return -1


def _all_zero(buf) -> bool:
    if isinstance(buf, np.ndarray):
        return not buf.any()
    return not buf.strip(b"\0")
