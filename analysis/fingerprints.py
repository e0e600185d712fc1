"""What a cached verdict was judged with: the engine (tbtriage's, numpy's and Python's versions and the source of
every module of the analysis package) and the `Config`. Light on purpose: the health index checks both before the
app imports the engine, and the verdict cache keys its entries on the same two values."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import sys
from functools import lru_cache
from pathlib import Path

from . import __version__
from .config import Config


@lru_cache(maxsize=1)
def engine_fingerprint() -> str:
    """A change to any detector, threshold or feature (any `analysis/*.py`), or to tbtriage's, numpy's or Python's
    version, changes it: every cached verdict is then judged again."""
    base = Path(__file__).resolve().parent
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{__version__} numpy {numpy_version_text()} python {sys.version_info[:2]}".encode())
    for path in sorted(base.rglob("*.py")):
        h.update(str(path.relative_to(base)).encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


def numpy_version_text() -> str:
    """Text that changes with numpy's version, without importing numpy or `importlib.metadata` (~15 ms, and a search
    of every installed distribution, on the way to a warm reopen's first frame): the `numpy/version.py` every numpy
    build generates (its version and git revision), else the version in the package metadata."""
    spec = importlib.util.find_spec("numpy")
    if spec is not None and spec.origin:
        try:
            return (Path(spec.origin).parent / "version.py").read_text(encoding="utf-8", errors="replace")
        except OSError:
            pass
    from importlib.metadata import version

    return version("numpy")


def config_fingerprint(config: Config | None) -> str:
    """The configuration a verdict was judged with (where it was read from aside).

    Worked out once per `Config` object (the last one asked about): the verdict cache asks for it once per run it
    checks or stores, ~50 µs each (a warm 2,000-run report asks 2,000 times, serially). A `Config` is frozen, and
    nothing changes its tables once `load_config` has made it."""
    global _last_config
    last = _last_config
    if last is not None and last[0] is config:
        return last[1]
    fields = dataclasses.asdict(config or Config())
    fields.pop("path", None)
    text = json.dumps(fields, sort_keys=True, default=repr)
    fingerprint = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
    _last_config = (config, fingerprint)
    return fingerprint


#: (config, its fingerprint), replaced whole (never changed in place): a thread reads both halves of one pair.
_last_config: tuple[Config | None, str] | None = None
