"""A logdir is untrusted input. Whatever a crashed writer, a half-synced bucket or an adversary left in it,
every command answers in time with one clear line per problem, keeps the intact data, and never writes
to the logdir."""

from __future__ import annotations

import json
import os
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tbtriage
from tbtriage.analysis.event_writer import frame_records
from tests._hostile import (
    event_file,
    frame_with_length,
    good_points,
    length_delimited,
    raw_event,
    scalar_event,
    tensor,
    tensor_event,
    varint,
)
from tests._hostile import (
    run_cli as cli,
)

KERNELS = ["pure", "jit"]


def data_notes(run) -> list:
    return [n for n in run.notes if n.kind == "data_integrity"]


# -- 1. lengths that point backwards or past the end never hang a kernel -------------------------------


def negative_tag_length_event() -> bytes:
    value = length_delimited(1, b"loss", declared=-11) + b"\x15" + struct.pack("<f", 1.0)
    return raw_event(length_delimited(1, value))


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_tag_length_of_minus_11_is_one_note_in_both_kernels_not_a_hang(tmp_path, kernel):
    event_file(tmp_path / "ld" / "r", good_points(0, 10) + [negative_tag_length_event()] + good_points(10, 10))
    done = cli("report", str(tmp_path / "ld"), "--format", "json", kernel=kernel)
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(done.stdout)["runs"]
    assert run["tags"]["loss"]["points"] == 20  # every intact record on both sides kept
    (integrity,) = [f for f in run["findings"] if f["kind"] == "data_integrity"]
    assert "r/events.out.tfevents" in integrity["evidence"]["file"] and integrity["evidence"]["offset"] > 0


NEGATIVE_LENGTHS = {
    "summary value": lambda: raw_event(varint(10) + varint(-3) + b"xx"),
    "tensor": lambda: raw_event(length_delimited(1, length_delimited(1, b"t") + varint(8 << 3 | 2) + varint(-5))),
    "tensor shape": lambda: raw_event(
        length_delimited(
            1, length_delimited(1, b"t") + length_delimited(8, b"\x08\x01" + varint(2 << 3 | 2) + varint(-7))
        )
    ),
    "tensor content": lambda: raw_event(
        length_delimited(
            1, length_delimited(1, b"t") + length_delimited(8, b"\x08\x01" + varint(4 << 3 | 2) + varint(-4))
        )
    ),
    "packed floats": lambda: raw_event(
        length_delimited(
            1, length_delimited(1, b"t") + length_delimited(8, b"\x08\x01" + varint(5 << 3 | 2) + varint(-8))
        )
    ),
    "float past its message": lambda: raw_event(length_delimited(1, length_delimited(1, b"t") + b"\x15\x00")),
    "wall time past the record": lambda: b"\x09\x00\x00",
}


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("where", sorted(NEGATIVE_LENGTHS))
def test_every_length_is_checked_before_it_moves_the_reader(tmp_path, kernel, where):
    event_file(tmp_path / "r", good_points(0, 5) + [NEGATIVE_LENGTHS[where]()] + good_points(5, 5))
    run = tbtriage.load(tmp_path / "r", kernel=kernel).runs["."]
    assert len(run.scalars["loss"]) == 10
    assert len(data_notes(run)) == 1


# -- 2 and 3. a bad tensor is one note naming file and offset; shapes never size an allocation --------

BAD_TENSORS = {
    "content not a whole number of floats": tensor(1, (2,), content=b"\x00" * 5),
    "odd bfloat16 buffer": tensor(14, (1,), content=b"\x00" * 3),
    "negative dimension": tensor(1, (-1,), floats=[1.0]),
    "2**40 x 2**40 shape": tensor(1, (1 << 40, 1 << 40), content=b"\x00" * 8),
}


@pytest.mark.parametrize("what", sorted(BAD_TENSORS))
def test_a_tensor_that_cannot_be_decoded_is_one_note_and_every_run_survives(tmp_path, what):
    path = event_file(
        tmp_path / "ld" / "bad",
        good_points(0, 5) + [tensor_event(5, "weights", BAD_TENSORS[what], plugin="histograms")] + good_points(6, 5),
    )
    event_file(tmp_path / "ld" / "fine", good_points(0, 20))
    for command in (["report", "--format", "json"], ["export"], ["watch", "--once"]):
        done = cli(command[0], str(tmp_path / "ld"), *command[1:], kernel="pure")
        assert done.returncode == 0, (command, done.stderr)
        assert "Traceback" not in done.stderr
    runs = tbtriage.load(tmp_path / "ld").runs
    assert len(runs["fine"].scalars["loss"]) == 20
    assert len(runs["bad"].scalars["loss"]) == 10
    (note,) = data_notes(runs["bad"])
    offset = (
        len(path.read_bytes())
        - sum(16 + len(p) for p in good_points(6, 5))
        - 16
        - len(tensor_event(5, "weights", BAD_TENSORS[what], plugin="histograms"))
    )
    assert note.file == f"bad/{path.name}" and note.offset == offset and f"byte {offset}" in note.message
    assert "weights" in note.message


def test_a_145_byte_file_declaring_2_to_the_28_values_allocates_nothing_of_that_size(tmp_path):
    event_file(tmp_path / "r", [tensor_event(1, "hist", tensor(1, (1 << 28,), floats=[1.0]), plugin="histograms")])
    tracemalloc.start()
    run = tbtriage.load(tmp_path / "r", kernel="pure").runs["."]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20 << 20, f"{peak / 1e6:.0f} MB allocated for a file of a few hundred bytes"
    assert "declares 268435456 values but 1 are stored" in data_notes(run)[0].message


def test_one_stored_value_still_fills_a_small_declared_shape_as_tensorflow_writes_it(tmp_path):
    event_file(tmp_path / "r", [tensor_event(1, "h", tensor(1, (4, 3), floats=[2.0]), plugin="histograms")])
    run = tbtriage.load(tmp_path / "r").runs["."]
    assert not data_notes(run)
    np.testing.assert_array_equal(run.histograms["h"].counts[0], [2.0] * 4)


# -- 13. floods are aggregated; a bogus huge length does not hide the records after it ----------------


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("last", [True, False], ids=["last file", "earlier file"])
def test_a_4_gb_length_mid_file_is_one_note_and_the_500_records_after_it_are_kept(tmp_path, kernel, last):
    d = tmp_path / "r"
    path = event_file(d, good_points(0, 100))
    bogus = frame_with_length(scalar_event(100), 4 << 30)
    after = b"".join(frame_with_length(p, len(p)) for p in good_points(101, 500))
    path.write_bytes(path.read_bytes() + bogus + after)
    if not last:
        event_file(d, good_points(1000, 5), name="events.out.tfevents.2.host")
    run = tbtriage.load(d, kernel=kernel).runs["."]
    assert len(run.scalars["loss"]) == 600 + (0 if last else 5)
    (note,) = data_notes(run)
    assert "declares 4294967296 bytes, past the end of the file" in note.message
    assert "incomplete record" not in note.message


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_hundred_damaged_records_are_one_note_with_the_count_and_byte_range(tmp_path, kernel):
    path = event_file(tmp_path / "r", good_points(0, 300))
    raw = bytearray(path.read_bytes())
    starts, pos = [], 0
    while pos < len(raw):
        (n,) = struct.unpack_from("<Q", raw, pos)
        starts.append(pos)
        pos += 16 + n
    for s in starts[1:201:2]:
        raw[s + 13] ^= 0xFF  # a flipped payload byte: that record's data checksum fails
    path.write_bytes(bytes(raw))
    run = tbtriage.load(tmp_path / "r", kernel=kernel).runs["."]
    (note,) = data_notes(run)
    assert note.message.startswith(f"100 damaged stretches between bytes {starts[1]} and {starts[199]}")
    assert len(run.scalars["loss"]) == 200


def test_199_backward_steps_are_one_restart_note_with_the_dropped_points_counted(tmp_path):
    steps = []
    for attempt in range(200):
        steps += [attempt, attempt + 2]  # each attempt resumes one step before where the last stopped
    event_file(tmp_path / "r", [scalar_event(s) for s in steps])
    run = tbtriage.load(tmp_path / "r").runs["."]
    (note,) = [n for n in run.notes if n.kind == "run_restart"]
    assert note.message.startswith("steps go back 199 times")
    assert "199 older points replaced" in note.message
    done = cli("report", str(tmp_path / "r"))
    assert done.stdout.count("run_restart") == 1


# -- 7. one write guard for every writer ----------------------------------------------------------------


def test_export_out_onto_an_event_file_is_refused_and_the_file_is_untouched(tmp_path):
    path = event_file(tmp_path / "ld" / "r", good_points(0, 200))
    before = path.read_bytes()
    for target in (path, tmp_path / "ld" / "r" / "points.csv"):
        done = cli("export", str(tmp_path / "ld"), "--out", str(target))
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
        assert "never" in done.stderr
    assert path.read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "ld" / "r").iterdir()) == [path.name]


def test_report_out_through_a_symlink_into_the_logdir_is_refused(tmp_path):
    event_file(tmp_path / "ld" / "r", good_points(0, 10))
    (tmp_path / "link").symlink_to(tmp_path / "ld" / "r")
    done = cli("report", str(tmp_path / "ld"), "--out", str(tmp_path / "link" / "report.md"))
    assert done.returncode == 2 and "inside the logdir" in done.stderr
    assert not (tmp_path / "ld" / "r" / "report.md").exists()


def test_the_apps_e_export_never_writes_into_the_logdir_it_was_opened_on(tmp_path, monkeypatch):
    from tbtriage.tui.app import make_app
    from tests._app_data import decaying_loss, drive, fixed_clock, settle, write_run

    write_run(tmp_path, "r", {"train/loss": decaying_loss(50)})
    monkeypatch.chdir(tmp_path)  # `tbtriage` with no LOGDIR: the current directory is the logdir
    app = make_app(tmp_path, follow=False, clock=fixed_clock)
    said = []

    async def scenario(app, pilot):
        await settle(app, pilot)
        await pilot.press("space", "e")
        await settle(app, pilot)
        said.extend(n.message for n in app._notifications)

    drive(app, scenario)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]
    assert any("never writes" in line for line in said), said


# -- 10. exit codes: 0 ok, 1 findings, 2 bad input (one line), 3 our own bug (one line, details in a file) ---


@pytest.mark.parametrize(
    "args, message",
    [
        (["watch", "LOGDIR", "--interval", "nan"], "--interval nan: must be a positive"),
        (["watch", "LOGDIR", "--once", "--alert-timeout", "nan"], "--alert-timeout nan: must be a positive"),
        (["watch", "LOGDIR", "--once", "--alert-timeout", "-1"], "--alert-timeout -1: must be a positive"),
        (["export", "LOGDIR", "--smoothing", "nan"], "--smoothing nan: must be between"),
        (["report", "LOGDIR", "--config", "CONFIG"], "[llm] threads must be a positive whole number, not 'many'"),
    ],
)
def test_a_bad_setting_is_one_line_and_exit_2(tmp_path, args, message):
    event_file(tmp_path / "ld" / "r", good_points(0, 10))
    (tmp_path / "config.toml").write_text('[llm]\nthreads = "many"\n')
    args = [
        str(tmp_path / "ld") if a == "LOGDIR" else str(tmp_path / "config.toml") if a == "CONFIG" else a for a in args
    ]
    done = cli(*args)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and message in done.stderr


def test_an_internal_error_exits_3_with_one_line_naming_the_crash_file_never_a_traceback(tmp_path, monkeypatch, capsys):
    from tbtriage.analysis import engine
    from tbtriage.cli.main import main

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(engine, "diagnose", broken)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    event_file(tmp_path / "ld" / "r", good_points(0, 10))
    assert main(["report", str(tmp_path / "ld")]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "RuntimeError: a bug" in err
    (crash,) = (tmp_path / "cache" / "tbtriage" / "crashes").iterdir()
    assert str(crash) in err and "Traceback" in crash.read_text()


def test_the_json_report_names_the_folders_it_skipped(tmp_path):
    event_file(tmp_path / "ld" / "r", good_points(0, 10))
    bad = tmp_path / "ld" / "r2\udcff".encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")
    event_file(bad, good_points(0, 10))
    for workers in ("1", "2"):  # read here, or by the pool's workers: the logdir is listed once, each warning said once
        data = json.loads(cli("report", str(tmp_path / "ld"), "--format", "json", "--workers", workers).stdout)
        assert [w for w in data["warnings"] if "not valid UTF-8" in w] == [
            "r2\\xff: the directory name is not valid UTF-8; its other bytes are shown as \\xNN"
        ]
    for command in (["watch", "--once"], ["export"]):
        done = cli(command[0], str(tmp_path / "ld"), *command[1:])
        assert done.returncode == 0 and "warning: r2\\xff: the directory name is not valid UTF-8" in done.stderr


# -- 8. strict JSON everywhere ---------------------------------------------------------------------------


def test_a_nan_wall_time_is_strict_json_in_jsonl_export(tmp_path):
    event_file(tmp_path / "r", [scalar_event(1, wall=float("nan")), scalar_event(2, wall=float("inf"))])
    done = cli("export", str(tmp_path / "r"), "--format", "jsonl")
    rows = [
        json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} is not JSON")) for line in done.stdout.splitlines()
    ]
    assert [(r["wall_time"], r["nonfinite_wall_time"]) for r in rows] == [(None, "nan"), (None, "inf")]


# -- 4. only regular files are opened ------------------------------------------------------------------


@pytest.mark.parametrize("command", [["report"], ["diagnose", "--run", "x"], ["export"], ["watch", "--once"]])
def test_a_fifo_as_logdir_is_one_line_not_a_hang(tmp_path, command):
    import os

    os.mkfifo(tmp_path / "events.out.tfevents.fifo")
    done = cli(command[0], str(tmp_path / "events.out.tfevents.fifo"), *command[1:], timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr


def test_a_fifo_as_config_or_as_an_event_file_in_a_run_never_blocks(tmp_path):
    import os

    event_file(tmp_path / "ld" / "r", good_points(0, 10))
    os.mkfifo(tmp_path / "ld" / "r" / "events.out.tfevents.2.fifo")
    os.mkfifo(tmp_path / "config.toml")
    done = cli("report", str(tmp_path / "ld"), "--config", str(tmp_path / "config.toml"), timeout=60)
    assert done.returncode == 2 and "not a regular file" in done.stderr
    done = cli("report", str(tmp_path / "ld"), "--format", "json", timeout=60)
    assert done.returncode == 0 and json.loads(done.stdout)["runs"][0]["tags"]["loss"]["points"] == 10


# -- 5. names that are not UTF-8 ------------------------------------------------------------------------


def not_utf8_logdir(tmp_path):
    run = Path(os.fsdecode(bytes(tmp_path / "ld") + b"/run\xff"))
    values = []
    for step in range(50):
        for tag in (b"loss\xff", b"loss\xfe"):
            values.append(
                raw_event(length_delimited(1, length_delimited(1, tag) + b"\x15" + struct.pack("<f", step)), step)
            )
    event_file(run, values)
    return tmp_path / "ld"


def test_names_that_are_not_utf8_are_escaped_reversibly_and_never_merged(tmp_path):
    run = tbtriage.load(not_utf8_logdir(tmp_path)).runs["run\\xff"]
    assert {tag: len(s) for tag, s in run.scalars.items()} == {"loss\\xff": 50, "loss\\xfe": 50}
    assert any("not valid UTF-8" in n.message for n in run.notes)


@pytest.mark.parametrize("out", ["report.md", "report.html", "points.csv"])
def test_every_writer_takes_names_that_are_not_utf8(tmp_path, out):
    logdir = not_utf8_logdir(tmp_path)
    command = "export" if out.endswith(".csv") else "report"
    args = [command, str(logdir), "--out", str(tmp_path / out)]
    if out.endswith(".html"):
        args += ["--format", "html"]
    done = cli(*args, env={"LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8"})
    assert done.returncode == 0, done.stderr
    assert "run\\xff" in (tmp_path / out).read_text(encoding="utf-8")
    done = cli("report", str(logdir), env={"PYTHONIOENCODING": "utf-8"})
    assert done.returncode == 0 and "loss\\xfe" in done.stdout


# -- 14. small things a user trips over -----------------------------------------------------------------


def test_export_with_a_bad_regex_prints_no_csv_header_first(tmp_path):
    event_file(tmp_path / "r", good_points(0, 10))
    done = cli("export", str(tmp_path / "r"), "--tags", "(")
    assert done.returncode == 2 and done.stdout == ""


# -- 9. extreme numbers ----------------------------------------------------------------------------------


def extreme_logdir(tmp_path) -> Path:
    huge = np.linspace(0, np.finfo(np.float64).max, 200)
    doubles = [
        tensor_event(i, "train/loss", tensor(2, (), content=struct.pack("<d", v)), plugin="scalars" if i == 0 else None)
        for i, v in enumerate(huge)
    ]
    event_file(tmp_path / "ld" / "huge", doubles)
    walls = [1.7e9 + 60 * i for i in range(50)]
    walls[-1] = 9.2e18  # one absurd clock reading, as the last point of its run
    event_file(tmp_path / "ld" / "absurd", [scalar_event(i, "train/loss", 1.0, wall=w) for i, w in enumerate(walls)])
    walls = [1.7e9 + 60 * i for i in range(50)]
    walls[10] = float("nan")
    event_file(tmp_path / "ld" / "nan_clock", [scalar_event(i, "train/loss", 1.0, wall=w) for i, w in enumerate(walls)])
    event_file(tmp_path / "ld" / "fine", [scalar_event(i, "train/loss", 1.0, wall=1.7e9 + 60 * i) for i in range(50)])
    return tmp_path / "ld"


def test_values_near_dbl_max_give_no_warning_and_no_nan_coordinates(tmp_path):
    logdir = extreme_logdir(tmp_path)
    for fmt in ("md", "json", "html"):
        done = cli("report", str(logdir), "--format", fmt, env={"PYTHONWARNINGS": "error::RuntimeWarning"})
        assert done.returncode == 0 and done.stderr == "", done.stderr
        if fmt == "html":
            for points in __import__("re").findall(r'points="([^"]*)"', done.stdout):
                assert "nan" not in points and "inf" not in points


def test_one_absurd_or_nan_wall_time_neither_stalls_other_runs_nor_hides_later_times(tmp_path):
    logdir = tbtriage.load(extreme_logdir(tmp_path))
    assert logdir.runs["nan_clock"].last_wall_time == 1.7e9 + 60 * 49
    assert logdir.runs["absurd"].last_wall_time == 1.7e9 + 60 * 48
    report = tbtriage.diagnose(logdir)
    assert not [f for r in report.runs for f in r.findings if f.kind == "stalled"]


# -- 12. live edits: renamed, deleted, rewritten and atomically replaced files ----------------------------


def test_a_renamed_run_is_listed_once_and_a_deleted_run_goes(tmp_path):
    event_file(tmp_path / "a", good_points(0, 10))
    event_file(tmp_path / "b", good_points(0, 10))
    logdir = tbtriage.load(tmp_path)
    (tmp_path / "a").rename(tmp_path / "a2")
    __import__("shutil").rmtree(tmp_path / "b")
    logdir.refresh()
    assert sorted(logdir.runs) == ["a2"] and logdir.removed == ["a", "b"]
    assert len(logdir.runs["a2"].scalars["loss"]) == 10


def test_a_file_rewritten_longer_in_place_is_read_again_not_mixed_with_the_old_points(tmp_path):
    path = event_file(tmp_path / "r", good_points(0, 100))
    logdir = tbtriage.load(tmp_path)
    with open(path, "r+b") as f:  # rewritten in place (same inode): different values, longer
        f.write(event_file(tmp_path / "scratch", [scalar_event(s, "loss", -1.0) for s in range(300)]).read_bytes())
    logdir.refresh()
    series = logdir.runs["r"].scalars["loss"]
    assert len(series) == 300 and set(series.values.tolist()) == {-1.0}
    assert any("rewritten" in n.message for n in logdir.runs["r"].notes)


def test_an_atomic_replace_is_read_whole_with_no_checksum_complaint(tmp_path):
    path = event_file(tmp_path / "r", good_points(0, 100))
    logdir = tbtriage.load(tmp_path)
    new = event_file(tmp_path / "staging", good_points(0, 300))
    new.replace(path)  # write elsewhere, rename over: a new inode under the old name
    logdir.refresh()
    run = logdir.runs["r"]
    assert len(run.scalars["loss"]) == 300
    assert [n.message for n in data_notes(run)] == [
        f"{path.name} was replaced by another file after it was read; the run was read again from its files as they are now"
    ]


def test_watch_alerts_when_a_file_is_truncated(tmp_path):
    from tbtriage.analysis.watch import Watcher, engine_analyzer

    path = event_file(tmp_path / "r", good_points(0, 100))
    watcher = Watcher(tbtriage.load(tmp_path), engine_analyzer(None))
    watcher.poll()
    path.write_bytes(path.read_bytes()[:1000])
    alerts = watcher.poll()
    assert any(f.kind == "data_integrity" and "shrank" in f.message for f in alerts)


def test_the_no_findings_line_is_a_paragraph_not_a_row_of_the_table(tmp_path):
    event_file(tmp_path / "ld" / "calm", [scalar_event(i, "train/loss", 1.0 / (i + 1)) for i in range(50)])
    text = cli("report", str(tmp_path / "ld")).stdout
    line = next(i for i, t in enumerate(text.splitlines()) if t.startswith("No findings"))
    assert text.splitlines()[line - 1] == ""


# -- the property: no input makes a command raise, or run longer than its size justifies ---------------

#: A command on a few-kilobyte logdir, in-process (imports done): well under a second on an idle machine.
#: The bound is the slack a busy 2-core machine needs, not the expected time; a hang blows through it.
SECONDS_PER_COMMAND = 15.0


@st.composite
def hostile_file(draw) -> bytes:
    """Valid records with garbage, lying lengths and random bytes spliced in: what a fuzzer would write."""
    parts = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["good", "garbage", "lying length", "lying frame", "tensor"]))
        if kind == "good":
            parts.append(frame_records(good_points(draw(st.integers(0, 50)), draw(st.integers(1, 20)))))
        elif kind == "garbage":
            parts.append(draw(st.binary(max_size=200)))
        elif kind == "lying length":
            value = length_delimited(1, b"loss", declared=draw(st.integers(-(1 << 63), 1 << 20)))
            parts.append(frame_records([raw_event(length_delimited(1, value + b"\x15\x00\x00\x80\x3f"))]))
        elif kind == "lying frame":
            parts.append(frame_with_length(scalar_event(1), draw(st.sampled_from([0, 1, 1 << 32, (1 << 62) - 1]))))
        else:
            dims = draw(st.lists(st.integers(-3, 1 << 40), max_size=3))
            content = draw(st.binary(max_size=16))
            dtype = draw(st.sampled_from([1, 2, 3, 9, 14, 19, 7, 99]))
            parts.append(
                frame_records([tensor_event(1, "t", tensor(dtype, dims, content=content), plugin="histograms")])
            )
    return b"".join(parts)


@settings(max_examples=int(os.environ.get("TBTRIAGE_FUZZ_EXAMPLES", "12")), deadline=None)
@given(content=hostile_file())
def test_no_input_makes_a_command_raise_or_run_longer_than_its_size_justifies(content):
    import contextlib
    import io
    import tempfile
    import time

    from tbtriage.cli.main import main

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "ld" / "r"
        run.mkdir(parents=True)
        (run / "events.out.tfevents.1.h").write_bytes(content)
        for command in (["report", "--format", "json"], ["export", "--format", "jsonl"], ["watch", "--once"]):
            out, err = io.StringIO(), io.StringIO()
            start = time.monotonic()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main([command[0], str(Path(tmp) / "ld"), *command[1:]])
            assert code == 0, (command, err.getvalue())
            assert time.monotonic() - start < SECONDS_PER_COMMAND
            if command[0] == "report":
                json.loads(out.getvalue())  # strict JSON, whatever the bytes held


def test_watch_alerts_on_a_truncation_even_after_an_earlier_checksum_note_in_the_same_run(tmp_path):
    from tbtriage.analysis.watch import Watcher, engine_analyzer

    path = event_file(tmp_path / "r", good_points(0, 100))
    raw = bytearray(path.read_bytes())
    raw[200] ^= 0xFF
    path.write_bytes(bytes(raw))
    watcher = Watcher(tbtriage.load(tmp_path), engine_analyzer(None))
    assert [f.kind for f in watcher.poll()].count("data_integrity") == 1
    path.write_bytes(bytes(raw[:1000]))
    assert any("shrank" in f.message for f in watcher.poll())


def test_a_step_repeated_after_a_restart_is_superseded_without_a_crash(tmp_path):
    # Found by the fuzzer: the repeat has no step backwards after it to be attributed to.
    event_file(tmp_path / "r", [scalar_event(s, "loss", float(i)) for i, s in enumerate([0, 1, 2, 1, 1])])
    run = tbtriage.load(tmp_path / "r").runs["."]
    assert run.scalars["loss"].steps.tolist() == [0, 1] and run.scalars["loss"].values.tolist() == [0.0, 4.0]
    (note,) = [n for n in run.notes if n.kind == "run_restart"]
    assert note.message.startswith("steps go back from 2 to 1")
