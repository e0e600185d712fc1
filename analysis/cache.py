"""The decoded-column cache: the morning's reopen decodes only what was appended since the last one.

Each run directory has one entry under `$XDG_CACHE_HOME/tbtriage/columns` (`~/.cache/...` by default): its
reader's whole state after a read, i.e. every tag's columns (steps int64, wall times and values float64), each
file's byte offset, and the bookkeeping that lets the reader resume exactly where it stopped (restarts, purges,
notes and their tallies, skipped counts, histograms, text, hparams). The unit is the run rather than the file
because the reader merges a run's files: a restart in one file supersedes points of another, so per-file columns
would have to be merged again on every open; inside the entry every file is still recorded by its identity
(path, size, mtime_ns, device and inode, and a hash of its first 4 KiB).

A run on an object store (`storage.RemoteStorage`) has its entry keyed by the run's URL rather than a local
path, and each object is recorded by its URL, size and ETag (the listing's `version`) with the hash of its
first 4 KiB, read through the store by one small ranged read. On open, an object the listing shows with the
same ETag and size is the object that was read: a hit, with no request beyond the listing. One with a new
ETag that is longer, whose first 4 KiB and whose bytes around the stored offset are unchanged (the reader's
fingerprint, two small ranged reads), only grew: it is resumed from the stored offset, and only the new bytes
are fetched. Anything else (shorter, the same size under a new ETag, a changed head) is stale: a cold read.

On open (`restore`), an entry is used only when every file it records is still the file that was read: same
inode, not shorter, the same first 4 KiB and the same bytes around the offset read to; a file of the same size
must also have the same mtime. A file that only grew is resumed from its stored offset (the reader decodes the
appended bytes alone); a file that shrank, was replaced or rewritten, or a new file that sorts before one
already read, sends the whole run to a cold read. The columns of a hit are memory-mapped from the entry, not
decoded or copied, so a logdir larger than memory still opens.

An entry is one file: a fixed prefix (magic, header length, CRC-32 of the header, length of the verdict), a JSON
header (format, tbtriage version, the run's key, the state, and a table of arrays with their offsets), the arrays,
each on a 64-byte boundary, then the run's cached verdict when the writer had it (a pool's worker: `verdict_cache`
reads and checks it there, against its own digest; one file a run instead of two, and a file created costs more
than its bytes). The data is checked against the 64-bit sum of its words, stored in the header: a CRC
of a gigabyte costs seconds on a slow core, the sum runs at memory speed and still catches a truncated,
zeroed or bit-flipped entry. An entry is written to a temporary name and renamed over the old one
(`os.replace`), so a crash never leaves half an entry that a later open reads. The cache is capped
(`TBTRIAGE_CACHE_MAX`, default 2 GiB): past the cap the least recently used entries go (each hit stamps its
entry's times), the runs' cached verdicts beside them (`verdict_cache`) included. `TBTRIAGE_NO_CACHE=1` (the commands' `--no-cache`) turns it off. Nothing is ever written to
the logdir.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import mmap
import os
import struct
import tempfile
import threading
import time
import zlib
from functools import lru_cache
from pathlib import Path

import numpy as np

from . import __version__
from .cache_base import HEAD_BYTES, cache_dir, enabled, head_hash, recorded_head_hash, root  # noqa: F401 - `cache.X`
from .datamodel import Note, Series, TextEntry

#: Bumped whenever the entry layout or the meaning of the reader's state changes: older entries are ignored.
FORMAT = 2
MAGIC = b"TBTCOL\x00\x01"
_PREFIX = struct.Struct("<8sQII")  # magic, header length, CRC-32 of the header, length of the verdict at the end
#: Arrays start on this boundary: aligned for every dtype, and word-aligned for the data sum.
ALIGN = 64
#: Default size cap of the whole cache: a month of mornings on a big sweep, small against a disk.
DEFAULT_MAX_BYTES = 2 << 30
#: Data read at a time while checking an entry's sum: large enough for numpy's speed, small against memory.
_CHECK_CHUNK = 8 << 20
#: A header longer than this is not one we wrote (a state of 10,000 files and tags is a few MB).
_MAX_HEADER = 1 << 30
_DTYPES = {"i8": np.int64, "f8": np.float64}
_SUFFIX = ".tbc"
#: Every kind of entry the size cap counts: decoded columns, and beside them the verdicts of `verdict_cache` and
#: the logdirs' health indexes of `health_index`.
ENTRY_SUFFIXES = (_SUFFIX, ".tbv", ".tbh")
#: A temporary entry older than this was left by a writer that died (a write takes seconds at most).
_STALE_TMP_S = 3600


def max_bytes() -> int:
    """The cache's size cap: `TBTRIAGE_CACHE_MAX` in bytes (suffixes K, M, G, T allowed), else 2 GiB."""
    text = os.environ.get("TBTRIAGE_CACHE_MAX", "").strip().upper().removesuffix("B")
    if not text:
        return DEFAULT_MAX_BYTES
    scale = 1
    if text[-1:] in ("K", "M", "G", "T"):
        scale = 1 << (10 * ("KMGT".index(text[-1]) + 1))
        text = text[:-1]
    try:
        return max(0, int(float(text) * scale))
    except ValueError:
        return DEFAULT_MAX_BYTES


# -- the entry of a run -----------------------------------------------------------------------------


def _key(reader) -> dict:
    """What makes two readers read the same thing the same way (the run's name is in its notes).

    A store's run is its URL, and the endpoint that serves it when one is set (two S3-compatible services
    can have buckets of the same name); credentials never enter the key (it is written in the entry)."""
    if reader.storage.objects:
        return {
            "url": reader.storage.url(reader.path),
            "endpoint": _endpoint(reader.storage.options),
            "name": reader.name,
            "only_file": reader.only_file,
            "verify": bool(reader.verify),
            "kernel": reader.kernel_pref,
        }
    return {
        "path": os.path.abspath(reader.path),
        "name": reader.name,
        "only_file": reader.only_file,
        "verify": bool(reader.verify),
        "kernel": reader.kernel_pref,  # a forced kernel gets its own entry: comparing kernels stays honest
    }


def entry_path(reader, key: dict | None = None) -> Path:
    """The file holding this reader's entry (it may not exist)."""
    digest = hashlib.sha256(json.dumps(key or _key(reader), sort_keys=True).encode()).hexdigest()[:40]
    return root() / (digest + _SUFFIX)


def _endpoint(options: dict) -> str | None:
    """The endpoint URL among a store's options (top level, in `client_kwargs`, or under a chained protocol)."""
    for scope in (options, *(v for v in options.values() if isinstance(v, dict))):
        for where in (scope, scope.get("client_kwargs")):
            if isinstance(where, dict) and isinstance(where.get("endpoint_url"), str):
                return where["endpoint_url"]
    return None


def _writes_into_logdir(reader) -> bool:
    """True when the cache directory lies inside the logdir (`tbtriage report ~`): the logdir is read-only to us.

    A store's logdir is a URL: the local cache cannot lie inside it."""
    if reader.storage.objects:
        return False
    return _inside(os.path.abspath(root()), os.path.abspath(reader.logdir))  # absolute: a chdir cannot fool it


@lru_cache(maxsize=64)
def _inside(directory: str, logdir: str) -> bool:
    """Whether `directory` lies inside `logdir` (each resolved once per process: the column and verdict caches ask
    for every run they write, ~30 µs of `realpath` each time; True when that cannot be told)."""
    try:
        logdir = os.path.realpath(logdir)
        return os.path.commonpath([os.path.realpath(directory), logdir]) == logdir
    except (OSError, ValueError):
        return True


def object_head_hash(storage, path: str, n: int = HEAD_BYTES) -> str | None:
    """`head_hash` of an object on a store: its first `n` bytes by one ranged read (None when it cannot be read)."""
    try:
        return hashlib.blake2b(storage.read_range(path, 0, n), digest_size=16).hexdigest()
    except OSError:
        return None


def _word_sum(raw: np.ndarray) -> int:
    """The 64-bit sum of the little-endian words of `raw` (uint8), its last word zero-padded."""
    whole = raw.size - raw.size % 8
    total = int(np.add.reduce(raw[:whole].view("<u8"), dtype=np.uint64)) if whole else 0
    if whole < raw.size:
        total += int.from_bytes(raw[whole:].tobytes().ljust(8, b"\0"), "little")
    return total % (1 << 64)


def _padded(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


# -- restoring ----------------------------------------------------------------------------------------


def restore(reader) -> str:
    """Give `reader` the state its cache entry holds, when that entry is sound and its files unchanged.

    Returns what happened: "off" (cache disabled), "miss" (no entry), "stale" (a file changed in a way
    only a full read can follow), "corrupt" (the entry fails a check; it is ignored, never trusted) or "hit".
    Only on "hit" is the reader touched.
    """
    if not enabled():
        return "off"
    key = _key(reader)
    path = entry_path(reader, key)
    try:
        f = open(path, "rb")
    except OSError:
        return "miss"
    with f:
        try:
            header, data_start = _read_header(f, key)
            if not _files_unchanged(reader, header["state"]["files"]):
                return "stale"
            view = _checked_map(f, data_start, header)
            state = _State(header["state"], _arrays(view, data_start, header))
        except (ValueError, KeyError, TypeError, IndexError, AttributeError, OSError, UnicodeDecodeError):
            return "corrupt"  # whatever part of it fails, none of it reaches the reader
    state.apply(reader)
    _Budget.touch(path)
    return "hit"


def _read_header(f, key: dict) -> tuple[dict, int]:
    prefix = f.read(_PREFIX.size)
    if len(prefix) != _PREFIX.size:
        raise ValueError("short prefix")
    magic, length, crc, verdict = _PREFIX.unpack(prefix)
    if magic != MAGIC or length > _MAX_HEADER:
        raise ValueError("not an entry")
    raw = f.read(length)
    if len(raw) != length or zlib.crc32(raw) != crc:
        raise ValueError("header checksum")
    header = json.loads(raw.decode("ascii"))
    if header["format"] != FORMAT or header["version"] != __version__ or header["key"] != key:
        raise ValueError("another format, version or run")
    data_start = _padded(_PREFIX.size + length)
    # After the data: the run's verdict when the writer had it (`embedded_verdict`), checked by the verdict cache.
    if os.fstat(f.fileno()).st_size != data_start + int(header["data_len"]) + verdict:
        raise ValueError("wrong length")
    return header, data_start


def _files_unchanged(reader, files: list) -> bool:
    """Every file the entry read is still there with the bytes it read, and no new file sorts among them."""
    names = reader._list_files()
    known = {f["name"] for f in files}
    last_known = max(known) if known else None
    if any(n not in known and last_known is not None and n < last_known for n in names):
        return False  # a cold read would put it before files already read: their order changes
    if reader.storage.objects:
        return all(_object_unchanged(reader, f) for f in files)
    for f in files:
        p = reader.path / f["name"]
        try:
            st = os.stat(p)
        except OSError:
            return False
        if (st.st_dev, st.st_ino) != (f["dev"], f["ino"]) or st.st_size < f["size"]:
            return False
        if st.st_size == f["size"] and st.st_mtime_ns != f["mtime_ns"]:
            return False  # rewritten in place at the same length
        if f["offset"] == 0 and st.st_size != f["size"]:
            return False  # nothing was read from it (empty, unreadable): what it holds now is all new
        if f["offset"] and head_hash(p, min(HEAD_BYTES, f["size"])) != f["head"]:
            return False
        if not _bytes_at_offset_unchanged(reader, f):
            return False
    return True


def _bytes_at_offset_unchanged(reader, f: dict) -> bool:
    """The bytes around the offset the entry read to are the ones it read (the reader's own fingerprint)."""
    identity = f["identity"]
    if identity is None:
        return True
    fp = reader._fingerprint(f["name"], f["offset"])
    return fp is not None and fp.hex() == identity[2]


def _object_unchanged(reader, f: dict) -> bool:
    """An object the entry read is the same object (same ETag and size: nothing is read), or that object
    grown (a new ETag, longer, the same head and the same bytes around the stored offset)."""
    path = reader._file(f["name"])
    try:
        stat = reader.storage.stat(path)  # from the listing taken before the readers: no request
    except OSError:
        return False
    if stat.size < f["size"]:
        return False
    if stat.version is not None and stat.version == f["version"] and stat.size == f["size"]:
        return True  # the very object that was read: its bytes cannot have changed
    if stat.size == f["size"] or f["offset"] == 0:
        return False  # rewritten under a new ETag, or nothing was read from it: what it holds now is all new
    if object_head_hash(reader.storage, path, min(HEAD_BYTES, f["size"])) != f["head"]:
        return False
    return _bytes_at_offset_unchanged(reader, f)


def _checked_map(f, data_start: int, header: dict) -> memoryview | None:
    """The entry mapped read-only, once its data's word sum matches the header.

    The sum reads the mapping itself (no copy out of the page cache), then lets its pages go, so checking
    leaves nothing resident in this process.
    """
    data_len = int(header["data_len"])
    if not data_len:
        if int(header["data_sum"]):
            raise ValueError("data checksum")
        return None
    if data_len % ALIGN:
        raise ValueError("data length")
    # Not the verdict after the data: a page of it mapped in would be read in with the last columns' (the kernel maps
    # the cached pages around each one touched), ~4 kB a run more resident for a warm report that touches them.
    view = map_file(f.fileno(), data_start + data_len)
    words = np.frombuffer(view, "<u8", data_len // 8, data_start)
    total, step = 0, _CHECK_CHUNK // 8
    for at in range(0, words.size, step):
        total += int(np.add.reduce(words[at : at + step], dtype=np.uint64))
    drop_pages(view)
    if total % (1 << 64) != int(header["data_sum"]):
        raise ValueError("data checksum")
    return view


def _arrays(view: memoryview | None, data_start: int, header: dict) -> dict[str, np.ndarray]:
    out = {}
    end = data_start + int(header["data_len"])
    for name, dtype, offset, count in header["arrays"]:
        dt = np.dtype(_DTYPES[dtype])
        at = data_start + int(offset)
        if count < 0 or at % ALIGN or at + count * dt.itemsize > end:
            raise ValueError("array outside the data")
        out[name] = np.frombuffer(view, dt, int(count), at) if count and view is not None else np.empty(0, dt)
    return out


class _State:
    """A reader's state as the entry holds it, rebuilt fully before any of it reaches the reader."""

    def __init__(self, s: dict, arrays: dict[str, np.ndarray]):
        from .reader import _Column, _FileState, _histogram_series, _Tally

        self.files = {}
        for f in s["files"]:
            st = _FileState(f["name"], int(f["index"]), int(f["offset"]), int(f["records"]))
            st.problems_seen = {tuple(p) if isinstance(p, list) else int(p) for p in f["problems_seen"]}
            st.tallies = {what: _Tally(*t) for what, t in f["tallies"].items()}
            st.noted_empty, st.noted_unreadable = bool(f["noted_empty"]), bool(f["noted_unreadable"])
            ident = f["identity"]
            if ident is None:
                st.identity = None
            else:  # JSON turned the storage identity (a local file's (device, inode)) into a list; the reader compares tuples
                where = tuple(ident[0]) if isinstance(ident[0], list) else ident[0]
                st.identity = (where, ident[1], bytes.fromhex(ident[2]))
            st.restarts = f["restarts"]
            self.files[st.name] = st
        self.cols = {}
        steps, walls, values = arrays["steps"], arrays["walls"], arrays["values"]
        seg_starts, seg_files = arrays["seg_starts"], arrays["seg_files"]
        if not (steps.size == walls.size == values.size) or seg_starts.size != seg_files.size:
            raise ValueError("columns of different lengths")
        at = segs = 0
        for tag, from_tensor_only, n, m in s["cols"]:
            if n < 0 or m < 0 or at + n > steps.size or segs + m > seg_starts.size:
                raise ValueError("a column outside the arrays")
            col = _Column.__new__(_Column)  # not __init__: its five empty arrays a tag add up over thousands
            col.new = []
            # Slices of one mapped array per kind: a view costs far less than a mapping per tag.
            col.steps, col.walls, col.values = steps[at : at + n], walls[at : at + n], values[at : at + n]
            col.seg_starts, col.seg_files = seg_starts[segs : segs + m], seg_files[segs : segs + m]
            col.from_tensor_only = bool(from_tensor_only)
            self.cols[tag] = col
            at, segs = at + n, segs + m
        self.hists = {}
        for i, tag in enumerate(s["hists"]):
            ints, floats = arrays[f"h{i}i"].reshape(-1, 4), arrays[f"h{i}f"].reshape(-1, 5)
            limits, counts = arrays[f"h{i}l"], arrays[f"h{i}c"]
            items, at_l, at_c = [], 0, 0
            for (rec, step, n_l, n_c), fl in zip(ints.tolist(), floats.tolist()):
                lim, cnt = limits[at_l : at_l + n_l], counts[at_c : at_c + n_c]
                if lim.size != n_l or cnt.size != n_c:
                    raise ValueError("histogram outside its arrays")
                items.append((rec, step, fl[0], lim, cnt, fl[1], fl[2], fl[3], fl[4]))
                at_l, at_c = at_l + n_l, at_c + n_c
            self.hists[tag] = items
        self.histograms = {tag: _histogram_series(items) for tag, items in self.hists.items()}
        self.scalars = {
            tag: Series(self.cols[tag].steps, self.cols[tag].walls, self.cols[tag].values) for tag in s["scalars"]
        }
        self.tags = _SavedTags([raw.encode("latin-1") for raw in s["tag_names"]])
        r = s["run"]
        self.run = {
            "files": list(r["files"]),
            "texts": {
                tag: [TextEntry(int(a), float(b), str(c)) for a, b, c in items] for tag, items in r["texts"].items()
            },
            "hparams": dict(r["hparams"]),
            "notes": [Note(*n) for n in r["notes"]],
            "skipped": {k: int(v) for k, v in r["skipped"].items()},
            "last_step": r["last_step"],
            "last_wall_time": r["last_wall_time"],
            "bytes_read": int(r["bytes_read"]),
            "partial_tail": tuple(r["partial_tail"]) if r["partial_tail"] is not None else None,
        }
        self.plugins = dict(s["plugins"])
        self.restart_keys = {tuple(k) for k in s["restart_keys"]}
        self.escaped_noted = int(s["escaped_noted"])

    def apply(self, reader) -> None:
        reader._files, reader._cols, reader._hists = self.files, self.cols, self.hists
        reader._plugins, reader._restart_keys, reader._escaped_noted = (
            self.plugins,
            self.restart_keys,
            self.escaped_noted,
        )
        reader._tags, reader._kernel = self.tags, None  # the next read interns these names in its own kernel
        run = reader.run
        for name, value in self.run.items():
            setattr(run, name, value)
        run.scalars, run.histograms = self.scalars, self.histograms


class _SavedTags:
    """A run's tag names as the entry keeps them: what the reader's next read re-interns in the kernel it
    chooses (`TagTable.raw_names`), without interning thousands of tags on an open that decodes nothing."""

    def __init__(self, raw: list[bytes]):
        self._raw = raw
        self.escaped: list[str] = []  # only read after a read, by when the reader has its own table

    def raw_names(self) -> list[bytes]:
        return self._raw


# -- storing ------------------------------------------------------------------------------------------


def store(reader, map_back: bool = True, verdict: bytes = b"") -> bool:
    """Write `reader`'s state as its entry (atomically), then map its columns from it; True when written.

    Mapping the columns back from the entry is what bounds a cold read's memory: each run's decoded
    arrays leave the heap as soon as it is cached. `map_back=False` keeps them in the heap, for a caller that lets
    the run go soon anyway (a pool's worker, at the end of its task): analysing columns just mapped costs their
    page faults, ~0.5 ms a 3,600-point run of 4 tags, a third of what caching adds to a cold read.

    `verdict`: the run's cached verdict (`verdict_cache.entry_bytes`), kept in the same file (`embedded_verdict`)
    by a caller that has both at hand (a pool's worker): one file a run instead of two.
    """
    if not enabled() or _writes_into_logdir(reader) or any(col.new for col in reader._cols.values()):
        return False
    try:
        state, arrays = _snapshot(reader)
        header_state = json.dumps(state, ensure_ascii=True, allow_nan=True)
    except (OSError, TypeError, ValueError):
        return False  # a value the entry cannot hold: this run is simply read cold next time
    table, offset, total = [], 0, 0
    for name, pieces in arrays:
        raws = [np.ascontiguousarray(p).view(np.uint8).reshape(-1) for p in pieces]
        dtype = pieces[0].dtype.str[1:] if pieces else "f8"
        nbytes = sum(r.size for r in raws)
        table.append((name, dtype, offset, sum(p.size for p in pieces), raws))
        total = (total + _pieces_sum(raws)) % (1 << 64)
        offset += _padded(nbytes)
    key = _key(reader)
    header = json.dumps(
        {
            "format": FORMAT,
            "version": __version__,
            "key": key,
            "data_len": offset,
            "data_sum": total,
            "arrays": [t[:4] for t in table],
            "state": "__STATE__",
        },
        ensure_ascii=True,
    ).replace('"__STATE__"', header_state, 1)
    head = header.encode("ascii")
    path = entry_path(reader, key)
    data_start = _padded(_PREFIX.size + len(head))

    def write(f) -> None:
        start = _PREFIX.size + len(head)
        parts: list = [_PREFIX.pack(MAGIC, len(head), zlib.crc32(head), len(verdict)), head, bytes(data_start - start)]
        for _, _, _, _, raws in table:
            nbytes = 0
            for raw in raws:
                parts.append(raw.data)
                nbytes += raw.size
            parts.append(bytes(_padded(nbytes) - nbytes))
        parts.append(verdict)  # last: the columns lie where they lie in an entry without one
        # Array by array, never joined: a 345 kB entry written in one call came back mapped in larger page-cache
        # folios, and a warm report that touches a few columns of each run held twice the resident memory.
        for part in parts:
            f.write(part)

    if not write_entry(path, write):
        return False
    if map_back:
        _map_columns(reader, path, data_start + offset, data_start, table)
    return True


def _pieces_sum(raws: list[np.ndarray]) -> int:
    """`_word_sum` of the pieces written back to back: every piece is 8-byte words (int64, float64), so the sum of
    the pieces is the whole's; one sum over them joined (a copy at memory speed) costs less than one per piece."""
    if any(r.size % 8 for r in raws):
        return sum(_word_sum(r) for r in raws) % (1 << 64)
    if not raws:
        return 0
    words = np.concatenate(raws).view("<u8") if len(raws) > 1 else raws[0].view("<u8")
    return int(np.add.reduce(words, dtype=np.uint64))


def embedded_verdict(reader) -> tuple[Path, bytes] | None:
    """The verdict `store` kept in the run's entry, unchecked (its own digest is the verdict cache's to check), with
    the entry's path; None when there is none (no entry, one without a verdict, or not an entry at all)."""
    path = entry_path(reader)
    try:
        with open(path, "rb") as f:
            prefix = f.read(_PREFIX.size)
            if len(prefix) != _PREFIX.size:
                return None
            magic, _, _, length = _PREFIX.unpack(prefix)
            if magic != MAGIC or not length:
                return None
            f.seek(-length, os.SEEK_END)  # an entry shorter than that: OSError
            raw = f.read(length)
    except OSError:
        return None
    return (path, raw) if len(raw) == length else None


def write_entry(path: Path, write) -> bool:
    """Write an entry of the cache atomically (`write(f)` fills a temporary file, renamed over `path`), then count
    it against the size cap (evicting the least recently used entries of every kind); False when it cannot be
    written: a full or read-only cache disk costs speed, never the read."""
    try:
        try:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem + ".", suffix=".tmp")
        except FileNotFoundError:  # the first entry (or the cache was removed): made here, not statted per entry
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                write(f)
                size = f.tell()
            os.replace(tmp, path)
        except BaseException:
            _remove(Path(tmp))
            raise
    except OSError:
        return False
    _BUDGETS.get(path.parent).added(path, size)
    return True


def touch(path: Path) -> None:
    """Stamp an entry of the cache as used now (the size cap evicts the least recently used first)."""
    _Budget.touch(path)


def _snapshot(reader) -> tuple[dict, list[tuple[str, list[np.ndarray]]]]:
    """The reader's state as JSON-able values, and its arrays: (name, pieces written back to back)."""
    arrays: list[tuple[str, list[np.ndarray]]] = []
    files = []
    for st in reader._files.values():
        if reader.storage.objects:
            files.append(_object_record(reader, st))
            continue
        p = reader.path / st.name
        stat = _stat_or_none(p)
        files.append(
            {
                **_file_state(st),
                "size": stat.st_size if stat else -1,
                "mtime_ns": stat.st_mtime_ns if stat else -1,
                "dev": stat.st_dev if stat else -1,
                "ino": stat.st_ino if stat else -1,
                # The head as it was: a file smaller than HEAD_BYTES that grows keeps its first bytes.
                "head": recorded_head_hash(p, min(HEAD_BYTES, stat.st_size), stat) if st.offset and stat else None,
            }
        )
    cols = [[tag, col.from_tensor_only, len(col.steps), len(col.seg_starts)] for tag, col in reader._cols.items()]
    for name, attr, dtype in (
        ("steps", "steps", np.int64),
        ("walls", "walls", np.float64),
        ("values", "values", np.float64),
        ("seg_starts", "seg_starts", np.int64),
        ("seg_files", "seg_files", np.int64),
    ):
        arrays.append((name, [getattr(col, attr).astype(dtype, copy=False) for col in reader._cols.values()]))
    for i, items in enumerate(reader._hists.values()):
        ints = np.array([(it[0], it[1], len(it[3]), len(it[4])) for it in items], np.int64).reshape(-1)
        floats = np.array([(it[2], it[5], it[6], it[7], it[8]) for it in items], np.float64).reshape(-1)
        limits = np.concatenate([np.asarray(it[3], np.float64) for it in items]) if items else np.empty(0)
        counts = np.concatenate([np.asarray(it[4], np.float64) for it in items]) if items else np.empty(0)
        arrays += [(f"h{i}i", [ints]), (f"h{i}f", [floats]), (f"h{i}l", [limits]), (f"h{i}c", [counts])]
    run = reader.run
    state = {
        "files": files,
        "cols": cols,
        "scalars": list(run.scalars),
        "hists": list(reader._hists),
        "tag_names": [raw.decode("latin-1") for raw in (reader._tags.raw_names() if reader._tags else [])],
        "plugins": reader._plugins,
        "restart_keys": [list(k) for k in reader._restart_keys],
        "escaped_noted": reader._escaped_noted,
        "run": {
            "files": run.files,
            "texts": {tag: [[e.step, e.wall_time, e.text] for e in items] for tag, items in run.texts.items()},
            "hparams": run.hparams,
            "notes": [[n.kind, n.file, n.message, n.offset, n.step, n.severity] for n in run.notes],
            "skipped": run.skipped,
            "last_step": run.last_step,
            "last_wall_time": run.last_wall_time,
            "bytes_read": run.bytes_read,
            "partial_tail": list(run.partial_tail) if run.partial_tail else None,
        },
    }
    return state, arrays


def _file_state(st) -> dict:
    """What the reader knows of one file, whatever holds it."""
    return {
        "name": st.name,
        "index": st.index,
        "offset": st.offset,
        "records": st.records,
        "problems_seen": [list(p) if isinstance(p, tuple) else p for p in st.problems_seen],
        "tallies": {w: [t.count, t.first, t.last, t.message, t.note_index] for w, t in st.tallies.items()},
        "noted_empty": st.noted_empty,
        "noted_unreadable": st.noted_unreadable,
        "identity": None
        if st.identity is None or st.identity[2] is None
        else [st.identity[0], st.identity[1], st.identity[2].hex()],
        "restarts": st.restarts,
    }


def _object_record(reader, st) -> dict:
    """One object's state and identity: its URL, size and ETag as listed, and the hash of its head."""
    path = reader._file(st.name)
    try:
        stat = reader.storage.stat(path)
    except OSError:
        stat = None
    size = stat.size if stat else -1
    return {
        **_file_state(st),
        "url": reader.storage.url(path),
        "size": size,
        "version": stat.version if stat else None,
        "head": object_head_hash(reader.storage, path, min(HEAD_BYTES, size)) if st.offset and stat else None,
    }


def _stat_or_none(p: Path):
    try:
        return os.stat(p)
    except OSError:
        return None


def _map_columns(reader, path: Path, data_end: int, data_start: int, table: list) -> None:
    """Swap the reader's in-memory columns for views of the entry just written (the same values)."""
    try:
        with open(path, "rb") as f:
            view = map_file(f.fileno(), data_end)
    except (OSError, ValueError):
        return
    kinds = {
        t[0]: np.frombuffer(view, _DTYPES[t[1]], t[3], data_start + t[2])
        for t in table
        if t[0] in ("steps", "walls", "values") and t[3]
    }
    if len(kinds) < 3:
        return
    run, at = reader.run, 0
    for tag, col in reader._cols.items():
        n = len(col.steps)
        col.steps, col.walls, col.values = (kinds[k][at : at + n] for k in ("steps", "walls", "values"))
        at += n
        if tag in run.scalars:
            run.scalars[tag] = Series(col.steps, col.walls, col.values)


def release(*runs) -> None:
    """Let go of the resident pages of the runs' mapped columns (after analysing them): they stay in the page
    cache and come back on the next touch, but no longer count in this process's memory, so judging a
    logdir larger than memory holds one run's pages at a time, not all of them. A mapping several runs share (a
    spill file's) is let go of once."""
    views = {}
    for run in runs:
        for series in run.scalars.values():
            base = series.values
            while isinstance(base, np.ndarray):
                base = base.base
            if isinstance(base, memoryview):
                views[id(base)] = base
    for view in views.values():
        drop_pages(view)


# -- mappings -----------------------------------------------------------------------------------------
#
# `mmap.mmap` keeps a duplicate of the file's descriptor for as long as the map lives (before Python 3.13's
# trackfd=False): a warm open of 10,000 runs would hold 10,000 descriptors, past the usual limit of 1,024, and
# every later open (event files included) would fail. On POSIX the entry is mapped through libc instead, which
# keeps none; the mapping goes when the last array viewing it does.


class _Unmap:
    """Unmaps an address range when collected (hung on the ctypes buffer that spans it)."""

    __slots__ = ("addr", "size")

    def __init__(self, addr: int, size: int):
        self.addr, self.size = addr, size

    def __del__(self) -> None:
        try:
            libc = _libc()
            if libc is not None:
                libc.munmap(self.addr, self.size)
        except Exception:  # noqa: BLE001 - at interpreter exit the process unmaps everything anyway
            pass


_LIBC: list = []


def _libc():
    """libc with mmap, munmap and madvise typed, or None where there is none to call (Windows)."""
    if not _LIBC:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.mmap.restype = ctypes.c_void_p
            libc.mmap.argtypes = (
                ctypes.c_void_p,
                ctypes.c_size_t,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_int64,
            )
            libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
            libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
            if not all(hasattr(mmap, n) for n in ("PROT_READ", "MAP_SHARED", "MADV_DONTNEED")):
                raise AttributeError("no POSIX mmap constants")
        except (OSError, AttributeError, TypeError):
            libc = None
        _LIBC.append(libc)
    return _LIBC[0]


def map_file(fd: int, size: int | None = None) -> memoryview:
    """The whole file (or its first `size` bytes) read-only in memory, as a read-only memoryview that holds no file
    descriptor."""
    size = os.fstat(fd).st_size if size is None else size
    libc = _libc()
    if libc is None or size == 0:
        return memoryview(mmap.mmap(fd, size, access=mmap.ACCESS_READ))
    addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if addr is None or addr == ctypes.c_void_p(-1).value:
        raise OSError(ctypes.get_errno(), "cannot map the cache entry")
    buf = (ctypes.c_char * size).from_address(addr)
    buf._unmap = _Unmap(addr, size)  # type: ignore[attr-defined]  # unmapped with the buffer, not before
    return memoryview(buf).toreadonly()  # PROT_READ pages: a write must fail in Python, not fault the process


def drop_pages(view: memoryview) -> None:
    """Take a mapping's pages out of this process's resident memory (they stay in the page cache)."""
    owner = view.obj
    try:
        if isinstance(owner, mmap.mmap):
            if hasattr(mmap, "MADV_DONTNEED"):
                owner.madvise(mmap.MADV_DONTNEED)
        elif isinstance(owner, ctypes.Array):
            libc = _libc()
            if libc is not None:
                libc.madvise(ctypes.addressof(owner), ctypes.sizeof(owner), mmap.MADV_DONTNEED)
    except (OSError, ValueError):
        pass


# -- the size cap -------------------------------------------------------------------------------------


#: Share of the cap an eviction brings the cache down to: the next one waits until a tenth of it was written.
LOW_WATER = 0.9


class _Budget:
    """The entries of one cache directory and their sizes, kept under the cap (listed once per process)."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.lock = threading.Lock()
        self.sizes: dict[Path, int] | None = None
        self.total: int | None = None  # the sum of `sizes`, kept as entries come and go

    def _scan(self) -> dict[Path, int]:
        if self.sizes is None:
            self.sizes = {}
            try:
                with os.scandir(self.directory) as it:
                    for e in it:
                        try:
                            if e.name.endswith(ENTRY_SUFFIXES):
                                self.sizes[Path(e.path)] = e.stat().st_size
                            elif e.name.endswith(".tmp") and e.stat().st_mtime < time.time() - _STALE_TMP_S:
                                os.unlink(e.path)  # left by a writer that crashed: never read, now removed
                        except OSError:
                            continue
            except OSError:
                pass
        return self.sizes

    @staticmethod
    def touch(path: Path) -> None:
        """Stamp an entry as used now (the cap evicts the least recently used first)."""
        try:
            os.utime(path)
        except OSError:
            pass

    def added(self, path: Path, size: int | None = None) -> None:
        """Count a new entry; once the cache is over its cap, evict the least recently used others down to
        `LOW_WATER` of it. Each eviction stats every entry, so it must be rare: evicting only down to the cap made
        a full cache pay that on every entry written (a 2,000-run read into a full 2 GiB cache: 6x slower)."""
        cap = max_bytes()
        if size is None:  # unknown to the caller: the entry as it is now
            try:
                size = os.stat(path).st_size
            except OSError:
                return
        with self.lock:
            sizes = self._scan()
            if self.total is None:
                self.total = sum(sizes.values())
            self.total += size - sizes.get(path, 0)
            sizes[path] = size
            if self.total <= cap:
                return
            used = {}
            for p in sizes:
                try:
                    used[p] = os.stat(p).st_mtime_ns  # other processes may have used or removed entries since
                except OSError:
                    used[p] = -1
            for old in sorted(sizes, key=used.__getitem__):
                if self.total <= cap * LOW_WATER:
                    break
                if old == path:
                    continue
                _remove(old)
                self.total -= sizes.pop(old)


class _Budgets:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_dir: dict[Path, _Budget] = {}

    def get(self, directory: Path) -> _Budget:
        with self.lock:
            budget = self.by_dir.get(directory)
            if budget is None:
                budget = self.by_dir[directory] = _Budget(directory)
            return budget


_BUDGETS = _Budgets()


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
