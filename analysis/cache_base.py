"""Where tbtriage's caches live, whether they are on, and the hash of a file's head their entries check: the little
the health index needs before a warm reopen's first frame, without the column cache's numpy and decoding kernel."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

#: Bytes hashed at the head of every file: covers the file_version record and the first events.
HEAD_BYTES = 4096


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tbtriage"


def enabled() -> bool:
    """False when `TBTRIAGE_NO_CACHE` is set to a true value (`--no-cache` on the command line sets it)."""
    return os.environ.get("TBTRIAGE_NO_CACHE", "").strip().lower() not in ("1", "true", "yes", "on")


def root() -> Path:
    """Where the entries live: `columns` under tbtriage's XDG cache directory."""
    return cache_dir() / "columns"


def head_hash(path: str | os.PathLike[str], n: int = HEAD_BYTES) -> str | None:
    """A hash of the file's first `n` bytes (None when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return hashlib.blake2b(f.read(n), digest_size=16).hexdigest()
    except OSError:
        return None


#: Heads hashed for entries being written, by the file's identity when hashed (`recorded_head_hash`).
_RECORDED: dict[tuple, str] = {}
#: Files remembered at most: the runs of a pool's task, with room to spare.
_RECORDED_MAX = 256


def recorded_head_hash(path: str | os.PathLike[str], n: int, st: os.stat_result) -> str | None:
    """`head_hash(path, n)` for an entry about to be written, `st` being the file's `os.stat` just taken: the column
    and verdict caches record a run's files moments apart, and the second takes the first one's hash while the file's
    size, mtime and inode are still those (one open and read a file, not two). Never for checking an entry: a check
    reads the file. A hash gone stale all the same (a rewrite of the same size within the same clock tick) only
    makes the entry a miss: its check hashes the file as it is then."""
    key = (os.fspath(path), n, st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)
    got = _RECORDED.get(key)
    if got is None:
        got = head_hash(path, n)
        if got is not None:
            if len(_RECORDED) >= _RECORDED_MAX:
                _RECORDED.clear()
            _RECORDED[key] = got
    return got
