"""Shared test setup: the repository root on sys.path, so `tests._event_files` and friends import."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def s3():
    """A real S3 API (moto's server) on 127.0.0.1, for the remote and Dask tests; stopped at the end."""
    from tests._s3 import S3

    server = S3()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Every test caches under a directory of its own: none writes to the real ~/.cache, none sees another's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    monkeypatch.delenv("TBTRIAGE_NO_CACHE", raising=False)
    monkeypatch.delenv("TBTRIAGE_CACHE_MAX", raising=False)


@pytest.fixture(autouse=True)
def _unfrozen_heap():
    """The app keeps what it loaded out of the garbage collector's full passes (`gc.freeze`) for its lifetime, which
    in a test ends with the test: thaw it, so that one test's app is collected before the next."""
    import gc

    yield
    gc.unfreeze()
