"""Which decoding path a read takes: numba only when it pays, never a surprise compile for a small read."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbtriage.analysis import _kernel, decode


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("TBTRIAGE_KERNEL", raising=False)
    return tmp_path


def test_a_small_read_takes_the_pure_path_and_a_big_one_compiles(cache, monkeypatch):
    monkeypatch.setattr(decode, "numba_available", lambda: True)  # the choice, wherever numba is or is not
    monkeypatch.setattr(decode, "jit_module", lambda: "compiled")
    assert decode.choose_kernel(3 << 20) is _kernel  # cold cache: a 10 s compile is not worth 3 MB
    assert decode.choose_kernel(64 << 20) == "compiled"
    decode._mark_warm()
    assert decode.choose_kernel(3 << 20) == "compiled"  # warm: loading it is cheap
    assert decode.choose_kernel(100 << 10) is _kernel


def test_the_warm_marker_names_the_kernel_source_so_an_upgrade_is_cold_again(cache, monkeypatch):
    decode._mark_warm()
    assert decode._numba_cache_warm()
    real = Path.read_bytes
    monkeypatch.setattr(
        Path, "read_bytes", lambda p: real(p) + b"# a newer version" if p.name == "_kernel.py" else real(p)
    )
    assert not decode._numba_cache_warm()


def test_forcing_a_path(cache, monkeypatch):
    monkeypatch.setattr(decode, "numba_available", lambda: True)  # the choice, wherever numba is or is not
    monkeypatch.setattr(decode, "jit_module", lambda: "compiled")
    assert decode.choose_kernel(1 << 30, "pure") is _kernel
    assert decode.choose_kernel(10, "jit") == "compiled"
    monkeypatch.setenv("TBTRIAGE_KERNEL", "pure")
    assert decode.choose_kernel(1 << 30) is _kernel
