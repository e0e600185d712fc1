"""The event reader, as a user meets it: every point right, bad files survived, live runs tailed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.util import tensor_util

import tbtriage
from tbtriage.analysis.logdir import LogdirError
from tests._event_files import event_files, write_purged_run, write_pytorch_run, write_resumed_run, write_tf2_run
from tests._kernels import KERNELS, needs_compiled_kernel


def accumulator(path: Path) -> ea.EventAccumulator:
    acc = ea.EventAccumulator(str(path), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0, ea.HISTOGRAMS: 0})
    acc.Reload()
    return acc


@pytest.fixture(scope="module")
def pytorch_logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("logdir")
    write_pytorch_run(root / "bs64_cosine", n=400, seed=1)
    write_pytorch_run(root / "ablation" / "no_attn", n=150, seed=2, nan_at=120)
    write_tf2_run(root / "keras" / "train", n=120, content=True)
    return root


@pytest.mark.parametrize("kernel", KERNELS)
def test_every_pytorch_point_matches_event_accumulator(pytorch_logdir, kernel):
    logdir = tbtriage.load(pytorch_logdir, kernel=kernel)
    assert sorted(logdir.runs) == ["ablation/no_attn", "bs64_cosine", "keras/train"]
    for name in ("bs64_cosine", "ablation/no_attn"):
        run = logdir.runs[name]
        acc = accumulator(pytorch_logdir / name)
        assert sorted(run.scalars) == sorted(acc.Tags()["scalars"])
        for tag in acc.Tags()["scalars"]:
            events = acc.Scalars(tag)
            s = run.scalars[tag]
            assert s.steps.dtype == np.int64 and s.wall_times.dtype == np.float64
            np.testing.assert_array_equal(s.steps, [e.step for e in events])
            np.testing.assert_array_equal(s.wall_times, [e.wall_time for e in events])
            np.testing.assert_array_equal(s.values, [e.value for e in events])  # NaN == NaN here


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_run_that_goes_nan_keeps_its_nans(pytorch_logdir, kernel):
    s = tbtriage.load(pytorch_logdir, kernel=kernel).runs["ablation/no_attn"].scalars["train/loss"]
    assert np.isnan(s.values[120:]).all() and np.isfinite(s.values[:120]).all()


@pytest.mark.parametrize("kernel", KERNELS)
def test_tf2_tensor_scalars_of_every_dtype_match_the_accumulator_tensors(pytorch_logdir, kernel):
    run = tbtriage.load(pytorch_logdir, kernel=kernel).runs["keras/train"]
    acc = accumulator(pytorch_logdir / "keras" / "train")
    tensor_tags = [t for t in acc.Tags()["tensors"] if t not in ("hist", "notes")]
    assert sorted(run.scalars) == sorted(tensor_tags)
    assert {"loss", "lr_double", "half", "count_i32", "count_i64", "content_f32"} <= set(run.scalars)
    for tag in tensor_tags:
        events = acc.Tensors(tag)
        expect = [float(tensor_util.make_ndarray(e.tensor_proto)) for e in events]
        np.testing.assert_array_equal(run.scalars[tag].values, expect)
        np.testing.assert_array_equal(run.scalars[tag].steps, [e.step for e in events])


@pytest.mark.parametrize("kernel", KERNELS)
def test_histograms_text_and_hparams_are_read(tmp_path, kernel):
    from tensorboardX import SummaryWriter

    write_pytorch_run(tmp_path / "a", n=250)
    write_tf2_run(tmp_path / "b", n=120)
    w = SummaryWriter(str(tmp_path / "c"))
    w.add_hparams({"lr": 0.1, "optimizer": "adam", "amp": True}, {"hparam/accuracy": 0.9}, name="hp")
    w.close()
    logdir = tbtriage.load(tmp_path, kernel=kernel)
    a = logdir.runs["a"]
    acc = accumulator(tmp_path / "a")
    expect = acc.Histograms("weights/fc")
    h = a.histograms["weights/fc"]
    np.testing.assert_array_equal(h.steps, [e.step for e in expect])
    np.testing.assert_array_equal(h.counts[1], list(expect[1].histogram_value.bucket))
    np.testing.assert_array_equal(h.limits[1], list(expect[1].histogram_value.bucket_limit))
    assert a.texts["config/text_summary"][0].text == "lr=0.1 [bold]x[/bold]"
    b = logdir.runs["b"]
    assert list(b.histograms["hist"].steps) == [0, 50, 100]
    np.testing.assert_array_equal(b.histograms["hist"].counts[1], np.arange(5.0) + 50)
    assert b.texts["notes"][0].text == "hello \x1b[31mred"  # kept verbatim: escaping is the view's job
    hp = logdir.runs["c/hp"].hparams
    assert hp == {"lr": 0.1, "optimizer": "adam", "amp": True}


@needs_compiled_kernel
def test_the_pure_and_compiled_paths_agree_point_for_point(pytorch_logdir):
    pure = tbtriage.load(pytorch_logdir, kernel="pure")
    jit = tbtriage.load(pytorch_logdir, kernel="jit")
    for name, run in pure.runs.items():
        other = jit.runs[name]
        assert run.scalars.keys() == other.scalars.keys()
        for tag, s in run.scalars.items():
            o = other.scalars[tag]
            np.testing.assert_array_equal(s.steps, o.steps)
            np.testing.assert_array_equal(s.values, o.values)
            np.testing.assert_array_equal(s.wall_times, o.wall_times)
        assert run.last_step == other.last_step and run.last_wall_time == other.last_wall_time


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_truncated_tail_is_not_an_error_and_reading_resumes_there(tmp_path, kernel):
    src = write_pytorch_run(tmp_path / "src", n=200)
    full = Path(event_files(src)[0]).read_bytes()
    run_dir = tmp_path / "logdir" / "live"
    run_dir.mkdir(parents=True)
    f = run_dir / "events.out.tfevents.1.host"
    cut = len(full) - 37  # the middle of the last record
    f.write_bytes(full[:cut])
    logdir = tbtriage.load(tmp_path / "logdir", kernel=kernel)
    run = logdir.runs["live"]
    assert run.notes == []  # the last file of a live run: just not finished yet
    before = len(run.scalars["train/loss"])
    read_before = run.bytes_read
    with open(f, "ab") as fh:
        fh.write(full[cut:])
    assert logdir.refresh() == ["live"]
    reference = tbtriage.load(src, kernel=kernel).runs["."]
    assert len(run.scalars["train/loss"]) == len(reference.scalars["train/loss"]) >= before
    np.testing.assert_array_equal(run.scalars["train/loss"].values, reference.scalars["train/loss"].values)
    # Only the appended bytes (plus the incomplete record's own start) were read again.
    assert run.bytes_read == len(full)
    assert run.bytes_read - read_before < 200


def flushed(writer, run_dir: Path) -> None:
    """Flush a tensorboardX writer and wait until its background thread has written everything."""
    import time

    last, deadline = -1, time.time() + 5
    while time.time() < deadline:
        writer.flush()  # tensorboardX flushes what its thread has written, not its queue: repeat
        size = sum(os.path.getsize(f) for f in event_files(run_dir))
        if size == last:
            return
        last = size
        time.sleep(0.15)


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_growing_file_is_tailed_by_offset_and_new_files_are_picked_up(tmp_path, kernel):
    from tensorboardX import SummaryWriter

    w = SummaryWriter(str(tmp_path / "run"), flush_secs=3600)
    for i in range(50):
        w.add_scalar("loss", 1.0 / (i + 1), i)
    flushed(w, tmp_path / "run")
    logdir = tbtriage.load(tmp_path, kernel=kernel)
    run = logdir.runs["run"]
    assert len(run.scalars["loss"]) == 50
    assert logdir.refresh() == []  # nothing appended: nothing re-read
    first_bytes = run.bytes_read
    for i in range(50, 80):
        w.add_scalar("loss", 1.0 / (i + 1), i)
    flushed(w, tmp_path / "run")
    assert logdir.refresh() == ["run"]
    assert len(run.scalars["loss"]) == 80 and run.scalars["loss"].steps[-1] == 79
    appended = run.bytes_read - first_bytes
    assert 0 < appended < first_bytes  # only the 30 new records' bytes
    w.close()
    w2 = SummaryWriter(str(tmp_path / "run"), filename_suffix=".second")
    w2.add_scalar("loss", 0.001, 80)
    w2.close()
    w3 = SummaryWriter(str(tmp_path / "new_run"))
    w3.add_scalar("loss", 1.0, 0)
    w3.close()
    changed = logdir.refresh()
    assert sorted(changed) == ["new_run", "run"]
    assert run.scalars["loss"].steps[-1] == 80 and len(run.files) == 2


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_bad_crc_mid_file_keeps_records_before_and_resyncs_after(tmp_path, kernel):
    src = write_pytorch_run(tmp_path / "src", n=300)
    data = bytearray(Path(event_files(src)[0]).read_bytes())
    reference = tbtriage.load(src, kernel=kernel).runs["."]
    bad_at = len(data) // 2
    data[bad_at] ^= 0xFF
    (tmp_path / "ld" / "r").mkdir(parents=True)
    (tmp_path / "ld" / "r" / "events.out.tfevents.9.x").write_bytes(bytes(data))
    run = tbtriage.load(tmp_path / "ld", kernel=kernel).runs["r"]
    (note,) = [n for n in run.notes if n.kind == "data_integrity"]
    assert note.file == "r/events.out.tfevents.9.x" and note.offset is not None and note.offset <= bad_at
    assert "checksum" in note.message and "resumed" in note.message
    # Exactly the one damaged record is lost: every other point survives, in order.
    lost = 0
    for tag, ref in reference.scalars.items():
        s = run.scalars[tag]
        assert set(s.steps.tolist()) <= set(ref.steps.tolist())
        lost += len(ref) - len(s)
    for tag, ref in reference.histograms.items():
        lost += len(ref) - len(run.histograms[tag])
    assert lost == 1


@pytest.mark.parametrize("kernel", KERNELS)
def test_empty_garbage_and_misnamed_files_get_one_line_each_and_other_data_stays(tmp_path, kernel):
    write_pytorch_run(tmp_path / "run", n=50)
    (tmp_path / "run" / "events.out.tfevents.0.empty").write_bytes(b"")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "events.out.tfevents.5.notes").write_text("this is a README, not events\n" * 20)
    logdir = tbtriage.load(tmp_path, kernel=kernel)
    assert len(logdir.runs["run"].scalars["train/loss"]) == 50
    empty = [n for n in logdir.runs["run"].notes if "empty" in n.message]
    assert len(empty) == 1 and empty[0].file == "run/events.out.tfevents.0.empty"
    (junk,) = logdir.runs["junk"].notes
    assert junk.kind == "data_integrity" and "not a TensorBoard event file" in junk.message
    assert junk.file == "junk/events.out.tfevents.5.notes"
    assert "\n" not in junk.message


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_restart_from_a_checkpoint_keeps_the_newer_points(tmp_path, kernel):
    write_resumed_run(tmp_path / "resumed")
    run = tbtriage.load(tmp_path, kernel=kernel).runs["resumed"]
    s = run.scalars["loss"]
    assert np.all(np.diff(s.steps) > 0)
    assert s.values[s.steps < 1500].tolist() == [1.0] * 150
    assert s.values[s.steps >= 1500].tolist() == [2.0] * 150
    (note,) = [n for n in run.notes if n.kind == "run_restart"]
    assert note.step == 1500 and "1990" in note.message and note.file.endswith(".b")


@pytest.mark.parametrize("kernel", KERNELS)
def test_purge_step_session_start_drops_orphaned_points_like_tensorboard(tmp_path, kernel):
    write_purged_run(tmp_path / "r")
    run = tbtriage.load(tmp_path, kernel=kernel).runs["r"]
    acc = accumulator(tmp_path / "r")
    expect = acc.Scalars("loss")
    np.testing.assert_array_equal(run.scalars["loss"].steps, [e.step for e in expect])
    np.testing.assert_array_equal(run.scalars["loss"].values, [e.value for e in expect])
    assert any(n.kind == "run_restart" and n.step == 60 for n in run.notes)


def test_nested_runs_keras_subruns_and_symlink_loops(tmp_path):
    write_pytorch_run(tmp_path / "exp1" / "seed0", n=20)
    write_pytorch_run(tmp_path / "exp1" / "seed1", n=20)
    write_tf2_run(tmp_path / "keras_model" / "train", n=10)
    write_tf2_run(tmp_path / "keras_model" / "validation", n=10)
    os.symlink(tmp_path, tmp_path / "exp1" / "loop")  # a loop back to the root
    logdir = tbtriage.load(tmp_path)
    assert sorted(logdir.runs) == ["exp1/seed0", "exp1/seed1", "keras_model/train", "keras_model/validation"]


def test_an_unreadable_directory_is_reported_and_skipped(tmp_path, monkeypatch):
    write_pytorch_run(tmp_path / "ok", n=20)
    (tmp_path / "secret").mkdir()
    real_scandir = os.scandir

    def scandir(path):
        if str(path).endswith("secret"):
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    logdir = tbtriage.load(tmp_path)
    assert list(logdir.runs) == ["ok"]
    assert len(logdir.warnings) == 1 and "secret" in logdir.warnings[0] and "permission denied" in logdir.warnings[0]


def test_loading_a_single_event_file_and_a_run_directory(tmp_path):
    write_pytorch_run(tmp_path / "r", n=30)
    f = event_files(tmp_path / "r")[0]
    assert list(tbtriage.load(f).runs) == ["."]
    assert len(tbtriage.load(tmp_path / "r").runs["."].scalars["train/loss"]) == 30
    assert list(tbtriage.load(tmp_path, runs="^r$").runs) == ["r"]
    assert list(tbtriage.load(tmp_path, runs="nomatch").runs) == []


def test_missing_paths_and_bad_filters_raise_one_clear_line(tmp_path):
    with pytest.raises(LogdirError, match="no such file or directory"):
        tbtriage.load(tmp_path / "nope")
    with pytest.raises(LogdirError, match="not a valid regular expression"):
        tbtriage.load(tmp_path, runs="(")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(LogdirError, match="not an event file"):
        tbtriage.load(tmp_path / "notes.txt")


def test_the_logdir_is_never_written_to(pytorch_logdir, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(pytorch_logdir, copy)

    def snapshot():
        return sorted((str(p.relative_to(copy)), p.stat().st_size, p.stat().st_mtime_ns) for p in copy.rglob("*"))

    before = snapshot()
    for kernel in ("pure", "jit"):  # whichever path "jit" takes here, neither may write
        tbtriage.load(copy, kernel=kernel).refresh()
    assert snapshot() == before


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_cancelled_read_stops_at_a_record_and_the_next_refresh_completes_it(tmp_path, monkeypatch, kernel):
    from tbtriage.analysis import decode

    monkeypatch.setenv("TBTRIAGE_NO_CACHE", "1")  # the cancelled read must decode, not map the reference's entry
    write_pytorch_run(tmp_path / "a", n=300)
    write_pytorch_run(tmp_path / "b", n=300)
    reference = tbtriage.load(tmp_path, kernel=kernel)
    monkeypatch.setattr(decode, "POINTS_PER_CALL", 40)  # many kernel calls per file
    polls = []

    def cancel():
        polls.append(1)
        return len(polls) > 6  # a few kernel calls in (polls also come before each run and file)

    seen = []
    logdir = tbtriage.load(tmp_path, kernel=kernel, cancel=cancel, on_run=lambda name, run: seen.append(name))
    total = sum(len(s) for r in reference.runs.values() for s in r.scalars.values())
    read = sum(len(s) for r in logdir.runs.values() for s in r.scalars.values())
    assert 0 < read < total  # stopped part-way, keeping what it had read
    assert set(seen) <= {"a", "b"} and seen  # runs that got data were reported
    seen.clear()
    logdir.refresh(on_run=lambda name, run: seen.append(name))
    assert seen  # the rest was read on the next refresh
    for name in ("a", "b"):
        run, ref = logdir.runs[name], reference.runs[name]
        assert run.notes == []  # no phantom restart from the resumed read
        for tag, s in ref.scalars.items():
            np.testing.assert_array_equal(run.scalars[tag].steps, s.steps)
            np.testing.assert_array_equal(run.scalars[tag].values, s.values)


@pytest.mark.parametrize("kernel", KERNELS)
def test_thousands_of_per_layer_tags_all_come_back(tmp_path, kernel):
    from tbtriage.analysis.event_writer import encode_scalar_block, event_file_name, file_version_event, frame_records

    tags = [f"grad_norm/layers.{i}.{'mlp' * (i % 20)}.weight" for i in range(3000)]  # > the first intern table
    steps = np.arange(3)
    values = np.random.default_rng(0).random((len(tags), 3))
    (tmp_path / "big_model").mkdir()
    data = frame_records([file_version_event(1e9)]) + encode_scalar_block(tags, steps, 1e9 + steps, values)
    (tmp_path / "big_model" / event_file_name(1e9)).write_bytes(data)
    run = tbtriage.load(tmp_path, kernel=kernel).runs["big_model"]
    assert len(run.scalars) == 3000
    for i in (0, 1999, 2048, 2999):
        np.testing.assert_array_equal(run.scalars[tags[i]].values, values[i].astype(np.float32))


def test_a_file_that_shrinks_after_reading_is_read_again_as_it_is_now_with_one_note(tmp_path):
    write_pytorch_run(tmp_path / "r", n=100)
    logdir = tbtriage.load(tmp_path)
    f = Path(event_files(tmp_path / "r")[0])
    f.write_bytes(f.read_bytes()[:300])  # an rsync or a cleanup rewrote it
    assert logdir.refresh() == ["r"]
    assert logdir.refresh() == []
    notes = [n for n in logdir.runs["r"].notes if "shrank" in n.message]
    assert len(notes) == 1 and notes[0].file.startswith("r/events.out.tfevents")
    # What is on disk now, not stale points: the first few records only.
    assert 0 < len(logdir.runs["r"].scalars["train/loss"]) < 10


def test_hparams_are_listed_in_the_same_order_in_every_process(tmp_path):
    """A protobuf map iterates in an order that changes from process to process: a pool's worker that read a
    run listed its hparams (and so the report's hparams table) unlike the process that read it before."""
    import subprocess
    import sys

    from tensorboardX import SummaryWriter

    settings = {f"{name}": i for i, name in enumerate("zeta alpha mu kappa beta omega delta lambda".split())}
    w = SummaryWriter(str(tmp_path / "sweep"))
    w.add_hparams(settings, {"hparam/accuracy": 0.9}, name="hp")
    w.close()
    code = "import sys, tbtriage; print(list(tbtriage.load(sys.argv[1]).runs['sweep/hp'].hparams))"
    seen = {
        subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(3)
    }
    assert seen == {str(sorted(settings))}


@needs_compiled_kernel
def test_scans_that_interleave_each_keep_their_own_window_and_columns(tmp_path, monkeypatch):
    """The compiled kernel's window and columns are kept from one file to the next (`decode._Scratch`): two scans
    advanced in turn (two readers in one thread, or threads) must each decode their own file, every point as a
    scan alone decodes it."""
    from tbtriage.analysis import decode

    monkeypatch.setenv("TBTRIAGE_NO_CACHE", "1")
    monkeypatch.setattr(decode, "POINTS_PER_CALL", 64)  # many batches per file
    write_pytorch_run(tmp_path / "a", n=300)
    write_pytorch_run(tmp_path / "b", n=300, seed=1)
    kernel = decode.jit_module()

    def scan(run: str):
        return decode.scan_file(event_files(tmp_path / run)[0], 0, kernel, decode.TagTable(True), decode.ScanResult())

    def values(batches) -> list[float]:
        return [v for b in batches for v in b.values.tolist()]

    alone = {run: values(scan(run)) for run in ("a", "b")}
    a, b = scan("a"), scan("b")
    together: dict[str, list] = {"a": [], "b": []}
    for pair in zip(a, b):  # one batch of each in turn
        together["a"].append(pair[0])
        together["b"].append(pair[1])
    together["a"] += list(a)
    together["b"] += list(b)
    assert {run: values(batches) for run, batches in together.items()} == alone
    assert alone["a"] != alone["b"]


def test_a_runs_activity_span_reads_only_plausible_times_and_each_series_once():
    """The span is the earliest and latest plausible time over every series (NaN, 0, negative and far-future
    stamps are ignored, a series with none adds nothing), worked out per series and kept: the logdir context,
    `stalled` and a pool's worker all ask for it."""
    from tbtriage.analysis import reader
    from tbtriage.analysis.datamodel import Run, Series

    def series(walls: list[float]) -> Series:
        n = len(walls)
        return Series(np.arange(n, dtype=np.int64), np.array(walls, dtype=np.float64), np.zeros(n))

    far = reader.MAX_PLAUSIBLE_WALL_TIME * 10
    run = Run("r", Path("r"))
    run.scalars = {
        "clean": series([1.7e9 + 5, 1.7e9 + 10]),
        "odd": series([np.nan, 0.0, -3.0, 1.7e9 + 2, far, 1.7e9 + 7]),
        "broken": series([np.nan, np.inf, far]),
        "empty": series([]),
    }
    expected = (1.7e9 + 2, 1.7e9 + 10)
    for tag, s in run.scalars.items():  # the per-series answer is the filter's, by definition
        walls = reader.plausible_wall_times(s.wall_times)
        assert reader._series_span(s) == ((float(walls.min()), float(walls.max())) if walls.size else None), tag
    assert reader.activity_span(run) == expected
    assert reader.activity_span(run) == expected  # asked again: the kept spans give the same answer
    run.scalars = {"broken": run.scalars["broken"], "empty": run.scalars["empty"]}
    assert reader.activity_span(run) is None


def _write_interleaved_run(path: Path, steps: int) -> Path:
    """Three tags logged in the same order every step (the last step cut short): the periodic shape."""
    from tensorboardX import SummaryWriter

    w = SummaryWriter(str(path))
    for i in range(steps):
        w.add_scalar("train/lr", 0.1 / (1 + i), i)
        w.add_scalar("train/loss", 1.0 / (1 + i), i)
        if i < steps - 1:
            w.add_scalar("eval/acc", i / steps, i)
    w.close()
    return path


@pytest.mark.parametrize("kernel", KERNELS)
def test_tags_logged_in_one_cycle_read_as_the_sort_by_tag_reads_them(tmp_path, kernel, monkeypatch):
    from tbtriage.analysis import reader

    _write_interleaved_run(tmp_path / "cycle", 50)
    write_pytorch_run(tmp_path / "irregular", n=60)
    seen = []
    real = reader._periodic_groups
    monkeypatch.setattr(reader, "_periodic_groups", lambda tags: seen.append(real(tags)) or seen[-1])
    fast = tbtriage.load(tmp_path, kernel=kernel)
    assert any(found is not None for found in seen) and any(found is None for found in seen)  # both paths taken
    monkeypatch.setattr(reader, "_periodic_groups", lambda tags: None)
    sorted_ = tbtriage.load(tmp_path, kernel=kernel)
    for name in ("cycle", "irregular"):
        a, b = fast.runs[name].scalars, sorted_.runs[name].scalars
        assert list(a) == list(b)
        for tag in a:
            for x, y in zip(
                (a[tag].steps, a[tag].wall_times, a[tag].values), (b[tag].steps, b[tag].wall_times, b[tag].values)
            ):
                assert x.flags.c_contiguous
                np.testing.assert_array_equal(x, y)
    acc = accumulator(tmp_path / "cycle")
    for tag in acc.Tags()["scalars"]:
        np.testing.assert_array_equal(fast.runs["cycle"].scalars[tag].values, [e.value for e in acc.Scalars(tag)])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=6, unique=True),
    st.integers(0, 40),
    st.lists(st.integers(0, 5), max_size=30),
    st.booleans(),
)
def test_periodic_groups_are_the_stable_sort_by_tag_or_none(cycle, repeats, noise, periodic):
    from tbtriage.analysis.reader import _periodic_groups

    base = cycle * repeats + cycle[: repeats % len(cycle)]
    tags = np.array(base if periodic else base + noise, np.int64)
    if not tags.size:
        return
    groups = _periodic_groups(tags)
    if groups is None:
        assert not (periodic and repeats >= 2 and len(cycle) >= 2)  # a true cycle seen twice is always found
        return
    assert [tid for tid, _ in groups] == sorted(set(tags.tolist()))
    index = np.arange(tags.size)
    for tid, where in groups:
        np.testing.assert_array_equal(index[where], np.flatnonzero(tags == tid))
