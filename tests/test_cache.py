"""The decoded-column cache, as a user meets it: the morning's reopen maps yesterday's columns and decodes only
what was appended, gives exactly what a cold read gives, and never trusts an entry that changed under it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import tbtriage
from tbtriage.analysis import cache, reader
from tbtriage.analysis.event_writer import encode_scalar_block, event_file_name, file_version_event, frame_records
from tbtriage.cli.main import build_parser, main
from tests._event_files import event_files, write_purged_run, write_pytorch_run, write_resumed_run, write_tf2_run
from tests._kernels import KERNELS


def _scalar_records(start: int, stop: int, tags=("train/loss", "train/lr")) -> bytes:
    steps = np.arange(start, stop)
    values = np.stack([1.0 / (steps + 1), np.full(steps.size, 1e-3)])[: len(tags)]
    return encode_scalar_block(list(tags), steps, 1.7e9 + steps, values)


def _live_run(run_dir: Path, points: int) -> Path:
    """A run whose one event file is still being written: file_version, then `points` steps of two tags."""
    run_dir.mkdir(parents=True, exist_ok=True)
    f = run_dir / event_file_name(1.7e9)
    f.write_bytes(frame_records([file_version_event(1.7e9)]) + _scalar_records(0, points))
    return f


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """Every kind of run the reader has rules for: PyTorch and TF2 files (tensor scalars of every dtype,
    histograms, text), a NaN, a restart, a purge, a truncated tail, a bad checksum, an empty and a junk file."""
    root = tmp_path_factory.mktemp("logdir")
    write_pytorch_run(root / "bs64_cosine", n=400, seed=1)
    write_pytorch_run(root / "ablation" / "no_attn", n=150, seed=2, nan_at=120)
    write_tf2_run(root / "keras" / "train", n=120, content=True)
    write_resumed_run(root / "resumed")
    write_purged_run(root / "purged")
    full = Path(event_files(write_pytorch_run(root / "cut_src", n=200))[0]).read_bytes()
    shutil.rmtree(root / "cut_src")
    (root / "cut").mkdir()
    (root / "cut" / "events.out.tfevents.1.host").write_bytes(full[: len(full) - 37])
    (root / "cut" / "events.out.tfevents.0.first").write_bytes(full[: len(full) // 2 + 5])  # cut, not the last
    damaged = bytearray(full)
    damaged[len(damaged) // 2] ^= 0xFF
    (root / "crc").mkdir()
    (root / "crc" / "events.out.tfevents.9.x").write_bytes(bytes(damaged))
    (root / "crc" / "events.out.tfevents.0.empty").write_bytes(b"")
    (root / "junk").mkdir()
    (root / "junk" / "events.out.tfevents.5.notes").write_text("this is a README, not events\n" * 20)
    return root


def picture(logdir) -> dict:
    """Everything a run holds, as comparable values (arrays as bytes: NaN equals NaN, -0.0 is not 0.0)."""
    out = {}
    for name, run in logdir.runs.items():
        out[name] = {
            "files": run.files,
            "notes": run.notes,
            "hparams": run.hparams,
            "skipped": run.skipped,
            "texts": run.texts,
            "last": (run.last_step, run.last_wall_time, run.partial_tail, run.bytes_read),
            "scalars": [
                (
                    tag,
                    s.steps.dtype.str,
                    s.steps.tobytes(),
                    s.wall_times.tobytes(),
                    s.values.dtype.str,
                    s.values.tobytes(),
                )
                for tag, s in run.scalars.items()
            ],
            "histograms": [
                (tag, h.steps.tobytes(), h.wall_times.tobytes(), [x.tobytes() for x in h.limits + h.counts])
                + tuple(a.tobytes() for a in (h.mins, h.maxs, h.nums, h.sums))
                for tag, h in run.histograms.items()
            ],
        }
    return out


def cold(path, monkeypatch, **kwargs):
    with monkeypatch.context() as m:
        m.setenv("TBTRIAGE_NO_CACHE", "1")
        logdir = tbtriage.load(path, **kwargs)
    assert {r.cache_state for r in logdir._readers.values()} == {"off"}
    return logdir


def states(logdir) -> dict[str, str]:
    return {name: r.cache_state for name, r in logdir._readers.items()}


def entries() -> list[Path]:
    return sorted(cache.root().glob("*.tbc")) if cache.root().is_dir() else []


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_warm_reopen_maps_every_run_from_the_cache_and_equals_a_cold_read(source, tmp_path, monkeypatch, kernel):
    logdir = tmp_path / "logdir"
    shutil.copytree(source, logdir)
    reference = picture(cold(logdir, monkeypatch, kernel=kernel))
    first = tbtriage.load(logdir, kernel=kernel)
    assert set(states(first).values()) == {"miss"}
    assert picture(first) == reference  # the cold read that wrote the entries, its columns now mapped from them
    assert len(entries()) == len(reference)
    warm = tbtriage.load(logdir, kernel=kernel)
    assert set(states(warm).values()) == {"hit"}
    assert picture(warm) == reference
    loss = warm.runs["bs64_cosine"].scalars["train/loss"]
    assert not loss.values.flags.owndata and not loss.values.flags.writeable  # mapped, not decoded
    assert warm.refresh() == []  # and the reader carries on from the stored offsets: nothing new to read


@pytest.mark.parametrize("points", [500, 3])  # 3 points: a file shorter than the hashed head, grown past it
def test_a_grown_file_decodes_only_the_appended_bytes_and_equals_a_cold_read(tmp_path, monkeypatch, points):
    f = _live_run(tmp_path / "logdir" / "live", points)
    tbtriage.load(tmp_path / "logdir")  # yesterday's triage caches the run
    size = f.stat().st_size
    with open(f, "ab") as fh:  # the run trained overnight
        fh.write(_scalar_records(points, points + 300))
    decoded_from = []
    real_scan = reader.scan_file

    def scan(path, offset, *args, **kwargs):
        decoded_from.append((Path(path).name, offset))
        return real_scan(path, offset, *args, **kwargs)

    monkeypatch.setattr(reader, "scan_file", scan)
    warm = tbtriage.load(tmp_path / "logdir")
    assert states(warm) == {"live": "extended"}
    assert decoded_from == [(f.name, size)]  # only the appended bytes were decoded
    monkeypatch.setattr(reader, "scan_file", real_scan)
    assert picture(warm) == picture(cold(tmp_path / "logdir", monkeypatch))
    assert len(warm.runs["live"].scalars["train/loss"]) == points + 300
    again = tbtriage.load(tmp_path / "logdir")  # the extended entry replaced the old one
    assert states(again) == {"live": "hit"} and picture(again) == picture(warm)


def test_a_new_file_after_the_cached_ones_is_read_on_top_and_a_restart_in_it_resolved(tmp_path, monkeypatch):
    run_dir = tmp_path / "logdir" / "resumed"
    _live_run(run_dir, 300)
    tbtriage.load(tmp_path / "logdir")
    data = frame_records([file_version_event(1.8e9)]) + _scalar_records(200, 400)  # resumed from step 200
    (run_dir / event_file_name(1.8e9)).write_bytes(data)
    warm = tbtriage.load(tmp_path / "logdir")
    assert states(warm) == {"resumed": "extended"}
    assert picture(warm) == picture(cold(tmp_path / "logdir", monkeypatch))
    assert [n.kind for n in warm.runs["resumed"].notes] == ["run_restart"]


def test_a_new_file_that_sorts_before_the_cached_ones_sends_the_run_to_a_cold_read(tmp_path, monkeypatch):
    run_dir = tmp_path / "logdir" / "r"
    _live_run(run_dir, 100)
    tbtriage.load(tmp_path / "logdir")
    (run_dir / event_file_name(1.6e9)).write_bytes(frame_records([file_version_event(1.6e9)]) + _scalar_records(0, 50))
    warm = tbtriage.load(tmp_path / "logdir")
    assert states(warm) == {"r": "stale"}
    assert picture(warm) == picture(cold(tmp_path / "logdir", monkeypatch))


def _shrink(f: Path) -> None:
    f.write_bytes(f.read_bytes()[:300])


def _rewrite_same_size(f: Path) -> None:
    data = bytearray(f.read_bytes())
    other = frame_records([file_version_event(1.7e9)]) + _scalar_records(0, 500, tags=("train/LOSS", "train/lr"))
    assert len(other) == len(data)
    stat = f.stat()
    f.write_bytes(other)
    os.utime(f, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))


def _rewrite_longer(f: Path) -> None:
    f.write_bytes(frame_records([file_version_event(1.7e9)]) + _scalar_records(0, 900, tags=("other", "train/lr")))


def _replace(f: Path) -> None:
    """Write-then-rename (rsync's way): another inode, even with the same first bytes."""
    tmp = f.with_name(".new")
    tmp.write_bytes(f.read_bytes() + _scalar_records(500, 510))
    os.replace(tmp, f)


@pytest.mark.parametrize("change", [_shrink, _rewrite_same_size, _rewrite_longer, _replace])
def test_a_file_that_shrank_was_rewritten_or_replaced_is_read_again_in_full(tmp_path, monkeypatch, change):
    f = _live_run(tmp_path / "logdir" / "r", 500)
    tbtriage.load(tmp_path / "logdir")
    change(f)
    warm = tbtriage.load(tmp_path / "logdir")
    assert states(warm) == {"r": "stale"}
    # What is on disk now, read as a first read reads it: no stale points, no "shrank" note of a live tail.
    assert picture(warm) == picture(cold(tmp_path / "logdir", monkeypatch))
    assert states(tbtriage.load(tmp_path / "logdir")) == {"r": "hit"}  # and cached afresh


def _flip_data(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[-20] ^= 0x01  # one bit of the last column
    p.write_bytes(bytes(data))


def _flip_header(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[cache._PREFIX.size + 30] ^= 0x20
    p.write_bytes(bytes(data))


def _truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[:-64])


def _garbage(p: Path) -> None:
    p.write_bytes(b"\x89PNG not an entry" * 100)


def _empty(p: Path) -> None:
    p.write_bytes(b"")


def _lie_about_length(p: Path) -> None:
    """A header whose own checksum is right but whose table points past the data: still refused."""
    raw = p.read_bytes()
    magic, length, _, _ = cache._PREFIX.unpack_from(raw)
    header = json.loads(raw[cache._PREFIX.size : cache._PREFIX.size + length])
    header["arrays"][0][3] = 10**9
    text = json.dumps(header).encode()
    text = text.ljust(length) if len(text) <= length else text
    rest = raw[cache._PREFIX.size + length :]
    p.write_bytes(cache._PREFIX.pack(magic, len(text), __import__("zlib").crc32(text), 0) + text + rest)


@pytest.mark.parametrize("damage", [_flip_data, _flip_header, _truncate, _garbage, _empty, _lie_about_length])
def test_a_corrupt_entry_is_ignored_never_trusted_and_written_again(tmp_path, monkeypatch, damage):
    write_pytorch_run(tmp_path / "logdir" / "run", n=300)
    tbtriage.load(tmp_path / "logdir")
    (entry,) = entries()
    damage(entry)
    warm = tbtriage.load(tmp_path / "logdir")
    assert states(warm) == {"run": "corrupt"}
    assert picture(warm) == picture(cold(tmp_path / "logdir", monkeypatch))
    assert states(tbtriage.load(tmp_path / "logdir")) == {"run": "hit"}


def test_an_entry_of_another_version_is_not_used(tmp_path, monkeypatch):
    write_pytorch_run(tmp_path / "logdir" / "run", n=50)
    tbtriage.load(tmp_path / "logdir")
    monkeypatch.setattr(cache, "__version__", "0.0.0-other")
    assert states(tbtriage.load(tmp_path / "logdir")) == {"run": "corrupt"}


def test_a_half_written_entry_left_by_a_crash_is_never_read(tmp_path):
    write_pytorch_run(tmp_path / "logdir" / "run", n=50)
    tbtriage.load(tmp_path / "logdir")
    (entry,) = entries()
    half = entry.read_bytes()[: entry.stat().st_size // 2]
    entry.unlink()
    (entry.parent / f"{entry.stem}.k2j3h4.tmp").write_bytes(half)  # what a crash mid-write leaves
    assert states(tbtriage.load(tmp_path / "logdir")) == {"run": "miss"}


def test_an_unwritable_cache_costs_speed_never_the_read(tmp_path, monkeypatch):
    write_pytorch_run(tmp_path / "logdir" / "run", n=50)
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache directory would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    logdir = tbtriage.load(tmp_path / "logdir")
    assert states(logdir) == {"run": "miss"}
    assert picture(logdir) == picture(cold(tmp_path / "logdir", monkeypatch))


def test_no_cache_reads_cold_and_writes_nothing(tmp_path, monkeypatch):
    write_pytorch_run(tmp_path / "logdir" / "run", n=50)
    monkeypatch.setenv("TBTRIAGE_NO_CACHE", "1")
    assert states(tbtriage.load(tmp_path / "logdir")) == {"run": "off"}
    assert not cache.root().exists()


def test_every_reading_command_takes_no_cache_and_the_report_is_the_same_with_or_without(tmp_path):
    write_pytorch_run(tmp_path / "logdir" / "a", n=300, nan_at=200)
    write_tf2_run(tmp_path / "logdir" / "b", n=100)
    logdir = str(tmp_path / "logdir")
    for argv in (
        ["report", logdir],
        ["export", logdir],
        ["watch", logdir],
        ["diagnose", logdir, "--run", "a"],
        [logdir],
    ):
        args = build_parser(argv + ["--no-cache"])[0].parse_args(argv + ["--no-cache"])
        assert args.no_cache is True
    outs = {}
    for name, extra in (("off", ["--no-cache"]), ("cold", []), ("warm", [])):
        out = tmp_path / f"{name}.json"
        assert main(["report", logdir, "--format", "json", "--out", str(out), *extra]) == 0
        outs[name] = json.loads(out.read_text())
        if name == "off":
            assert not cache.root().exists() and "TBTRIAGE_NO_CACHE" not in os.environ
    assert len(entries()) == 2
    assert outs["off"] == outs["cold"] == outs["warm"]


def test_the_logdir_is_never_written_to_by_caching(source, tmp_path, monkeypatch):
    copy = tmp_path / "copy"
    shutil.copytree(source, copy)

    def snapshot():
        return sorted(
            (str(p.relative_to(copy)), p.stat().st_mtime_ns, p.is_file() and hashlib.sha256(p.read_bytes()).hexdigest())
            for p in copy.rglob("*")
        )

    before = snapshot()
    for _ in range(2):  # the cold read that writes the entries, and the warm one that maps them
        tbtriage.load(copy).refresh()
    assert main(["report", str(copy), "--format", "json", "--out", str(tmp_path / "r.json")]) in (0, 1)
    assert snapshot() == before


def test_a_cache_inside_the_logdir_is_not_written(tmp_path, monkeypatch):
    write_pytorch_run(tmp_path / "home" / "run", n=50)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))  # `tbtriage report ~`
    assert states(tbtriage.load(tmp_path / "home")) == {"run": "miss"}
    assert not (tmp_path / "home" / ".cache").exists()


def test_the_cache_keeps_under_its_cap_dropping_the_least_recently_used(tmp_path, monkeypatch):
    for name in "abcd":
        write_pytorch_run(tmp_path / "logdir" / name, n=200)

    def open_run(name):
        logdir = tbtriage.load(tmp_path / "logdir", runs=f"^{name}$")
        os.utime(cache.entry_path(logdir._readers[name]), ns=(clock[0], clock[0]))  # distinct times, however coarse
        clock[0] += 10**9
        return logdir._readers[name].cache_state

    clock = [10**18]
    assert [open_run(n) for n in "abc"] == ["miss"] * 3
    size = max(p.stat().st_size for p in entries())
    monkeypatch.setenv("TBTRIAGE_CACHE_MAX", str(int(size * 3.5)))
    assert open_run("a") == "hit"  # a is now the most recently used, b the least
    assert open_run("d") == "miss"  # a fourth entry does not fit: b goes
    assert sum(p.stat().st_size for p in entries()) <= size * 3.5
    assert [open_run(n) for n in "acd"] == ["hit"] * 3
    assert open_run("b") == "miss"


def test_a_full_cache_evicts_down_to_below_its_cap_so_the_next_writes_evict_nothing(tmp_path, monkeypatch):
    """An eviction stats every entry: done on every write of a full cache it made a 2,000-run read 6x slower.
    Over the cap, the cache goes down to `LOW_WATER` of it, leaving room for the next entries."""
    for name in "abcde":
        write_pytorch_run(tmp_path / "logdir" / name, n=200)
    for name in "ab":
        tbtriage.load(tmp_path / "logdir", runs=f"^{name}$")
    size = max(p.stat().st_size for p in entries())
    monkeypatch.setenv("TBTRIAGE_CACHE_MAX", str(int(size * 4.2)))
    for name in "cde":  # the fifth entry is over the cap: down to 0.9 x 4.2 = 3.78 entries' worth, not to 4.2
        tbtriage.load(tmp_path / "logdir", runs=f"^{name}$")
    assert len(entries()) == 3
    assert sum(p.stat().st_size for p in entries()) <= size * 4.2 * cache.LOW_WATER


def test_the_cache_cap_reads_sizes_with_units(monkeypatch):
    for text, expected in (("", cache.DEFAULT_MAX_BYTES), ("1000", 1000), ("512M", 512 << 20), ("2GB", 2 << 30)):
        monkeypatch.setenv("TBTRIAGE_CACHE_MAX", text)
        assert cache.max_bytes() == expected


def test_temporary_entries_left_by_a_dead_writer_are_cleared_and_a_live_writers_kept(tmp_path):
    write_pytorch_run(tmp_path / "logdir" / "run", n=50)
    cache.root().mkdir(parents=True)
    dead, live = cache.root() / "a1.x.tmp", cache.root() / "b2.y.tmp"
    for p in (dead, live):
        p.write_bytes(b"half an entry")
    os.utime(dead, (1e9, 1e9))
    tbtriage.load(tmp_path / "logdir")
    assert not dead.exists() and live.exists()


def test_letting_go_of_a_judged_runs_pages_keeps_its_values(tmp_path):
    write_pytorch_run(tmp_path / "logdir" / "run", n=300, nan_at=250)
    tbtriage.load(tmp_path / "logdir")
    run = tbtriage.load(tmp_path / "logdir").runs["run"]
    before = {tag: s.values.tobytes() for tag, s in run.scalars.items()}
    cache.release(run)  # what diagnose and the app's analyser do after judging a run
    assert {tag: s.values.tobytes() for tag, s in run.scalars.items()} == before


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors through /proc")
def test_mapped_runs_hold_no_file_descriptor_each(tmp_path):
    """10,000 mapped runs must not need 10,000 descriptors (the usual limit is 1,024)."""
    for i in range(40):
        _live_run(tmp_path / "logdir" / f"run{i:02d}", 20)
    before = len(os.listdir("/proc/self/fd"))
    cold_then_mapped = tbtriage.load(tmp_path / "logdir")
    warm = tbtriage.load(tmp_path / "logdir")
    assert set(states(warm).values()) == {"hit"} and len(warm.runs) == len(cold_then_mapped.runs) == 40
    assert len(os.listdir("/proc/self/fd")) - before < 5


def test_whether_the_cache_lies_in_the_logdir_is_told_per_cache_and_logdir_whatever_was_asked_before(
    tmp_path, monkeypatch
):
    """The answer is kept per process (the caches ask for every run they write), so it must be keyed on both paths
    as they resolve: a relative logdir after a chdir, or another cache home, is asked again."""
    from tbtriage.analysis.reader import RunReader

    outside, logdir = tmp_path / "elsewhere", tmp_path / "logs"
    (logdir / "run").mkdir(parents=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(outside))
    monkeypatch.chdir(logdir)
    reader = RunReader(".", "run", "run")
    assert not cache._writes_into_logdir(reader)
    monkeypatch.setenv("XDG_CACHE_HOME", str(logdir / ".cache"))  # now inside the logdir
    assert cache._writes_into_logdir(reader)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / ".cache"))
    assert not cache._writes_into_logdir(reader)
    monkeypatch.chdir(tmp_path)  # the same relative logdir "." is now a folder that holds the cache
    assert cache._writes_into_logdir(RunReader(".", "logs/run", "run"))


def test_an_entry_written_into_a_cache_directory_removed_meanwhile_is_made_again_and_read_back(tmp_path, monkeypatch):
    """The cache directory is made when a write finds it missing (not statted before every entry)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("TBTRIAGE_NO_CACHE", raising=False)
    run = write_pytorch_run(tmp_path / "logs" / "run", n=300, seed=3)
    for _ in range(2):
        shutil.rmtree(tmp_path / "cache", ignore_errors=True)
        r = reader.RunReader(tmp_path / "logs", run, "run")
        r.read()
        assert r.cache_state == "miss"
        again = reader.RunReader(tmp_path / "logs", run, "run")
        again.read()
        assert again.cache_state == "hit"
        for tag, series in r.run.scalars.items():
            assert again.run.scalars[tag].values.tobytes() == series.values.tobytes()
