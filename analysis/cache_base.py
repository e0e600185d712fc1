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
