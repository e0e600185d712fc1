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


def test_the_pool_reads_with_the_kernel_all_its_bytes_call_for_not_each_tasks(cache, monkeypatch, tmp_path):
    """Sized on one task's 16 runs, a 1.5 GB logdir was read by the pure-Python kernel (~30x the compiled one's
    time): the report's workers read with the kernel chosen once for every byte the pool reads."""
    from tbtriage.analysis import pipeline
    from tbtriage.analysis.logdir import open_logdir
    from tests._event_files import write_pytorch_run

    root = tmp_path / "logdir"
    for i in range(2 * pipeline.CHUNK_RUNS):
        write_pytorch_run(root / f"run_{i:02d}", n=60, seed=i)
    logdir = open_logdir(root)
    found, only = logdir.discover()
    logdir.find((found, only))
    sizes = {name: logdir._readers[name].pending_bytes(resume=False) for name in found}
    one_task = max(sum(sorted(sizes.values())[-pipeline.CHUNK_RUNS :]), 1)
    # The compiled kernel pays from a size above any one task's bytes and below the whole pool's.
    threshold = one_task + 1
    assert sum(sizes.values()) >= threshold
    for module in (decode, pipeline):
        monkeypatch.setattr(module, "JIT_MIN_BYTES", threshold)
        monkeypatch.setattr(module, "JIT_COLD_MIN_BYTES", threshold)
    monkeypatch.setattr(decode, "numba_available", lambda: True)
    loaded = []
    monkeypatch.setattr(decode, "jit_module", lambda: loaded.append("numba") or "compiled")
    assert decode.choose_kernel(one_task) is _kernel  # what a task sized on its own bytes would read with

    tasks = []
    read_task = pipeline.ReadTask

    def task_spy(*args, **kwargs):
        tasks.append(read_task(*args, **kwargs))
        return tasks[-1]

    def no_pool(*args, **kwargs):
        raise OSError("no pool in this test: the tasks are what it checks")

    monkeypatch.setattr(pipeline, "ReadTask", task_spy)
    monkeypatch.setattr(pipeline, "_new_pool", no_pool)
    monkeypatch.setenv("TBTRIAGE_NO_CACHE", "1")
    with pytest.raises(OSError, match="no pool"):
        pipeline.read_and_judge(logdir, found, only, None, None, workers=2)
    assert len(tasks) == 2
    assert all(task.read_with == "jit" for task in tasks)
    # Chosen without loading numba in the report's process (~0.3 s before the pool starts): only the workers read.
    assert loaded == []
