"""Logdirs on object storage: a real S3 API on 127.0.0.1 (moto's server), read through s3fs.

The story: what `tbtriage` reads from s3://bucket/prefix is what it reads from the same files on disk,
a store's grown object is followed by reading only its new bytes, a shrunk one is reported, and every
store problem (no bucket, no credentials, access denied, network down) is one clear line.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

from tbtriage.analysis.engine import diagnose
from tbtriage.analysis.export import iter_series
from tbtriage.analysis.logdir import LogdirError, load
from tbtriage.cli.main import main
from tests._event_files import event_files, write_pytorch_run, write_tf2_run


@pytest.fixture(scope="module")
def local_logdir(tmp_path_factory):
    """PyTorch- and TF2-style runs, a Keras train/validation pair, and a run with a config file."""
    root = tmp_path_factory.mktemp("remote_src")
    write_pytorch_run(root / "torch_a", n=300, seed=0)
    write_pytorch_run(root / "torch_nan", n=300, seed=1, nan_at=200)
    write_tf2_run(root / "tf2" / "train", n=120)
    write_tf2_run(root / "tf2" / "validation", n=60)
    (root / "torch_a" / "hparams.yaml").write_text("lr: 0.1\nbatch_size: 32\n")
    return root


@pytest.fixture(scope="module")
def url(s3, local_logdir):
    return s3.upload(local_logdir, "parity", "runs")


def _same_runs(a, b):
    assert list(a.runs) == list(b.runs)
    for name, run in a.runs.items():
        other = b.runs[name]
        assert list(run.scalars) == list(other.scalars), name
        for tag, series in run.scalars.items():
            got = other.scalars[tag]
            assert np.array_equal(series.steps, got.steps), (name, tag)
            assert np.array_equal(series.wall_times, got.wall_times), (name, tag)
            assert np.array_equal(series.values, got.values, equal_nan=True), (name, tag)
        assert list(run.histograms) == list(other.histograms)
        assert run.texts == other.texts and run.hparams == other.hparams
        assert [(n.kind, n.file, n.message) for n in run.notes] == [(n.kind, n.file, n.message) for n in other.notes]
        assert (run.files, run.last_step, run.partial_tail) == (other.files, other.last_step, other.partial_tail)


def test_an_s3_logdir_reads_exactly_like_the_same_files_on_disk(s3, url, local_logdir):
    remote = load(url, storage_options=s3.options)
    _same_runs(load(local_logdir), remote)
    assert sorted(remote.runs) == ["tf2/train", "tf2/validation", "torch_a", "torch_nan"]
    assert remote.runs["torch_a"].path == f"{url}/torch_a"


def _states(logdir) -> dict[str, str]:
    return {name: reader.cache_state for name, reader in logdir._readers.items()}


def _entries() -> list:
    from tbtriage.analysis.cache import root

    return sorted(root().glob("*.tbc")) if root().exists() else []


def test_the_second_load_of_an_s3_logdir_is_a_cache_hit_for_every_run_and_reads_nothing(
    s3, url, local_logdir, monkeypatch
):
    from tbtriage.analysis.storage import RemoteStorage

    now = time.time()
    first = load(url, storage_options=s3.options)
    assert set(_states(first).values()) == {"miss"} and len(_entries()) == 4
    # The entries are keyed by URL, with the endpoint that serves it, and never hold the store's credentials.
    headers = [e.read_bytes().decode("latin-1") for e in _entries()]
    assert all(f'"url": "{url}/' in h and f'"endpoint": "{s3.endpoint}"' in h for h in headers)
    assert all(s3.options["key"] not in h for h in headers)
    report = json.loads(diagnose(url, now=now, storage_options=s3.options).to_json())
    ranges = []
    real_read_range = RemoteStorage.read_range
    monkeypatch.setattr(RemoteStorage, "read_range", lambda self, *a: ranges.append(a) or real_read_range(self, *a))
    second = load(url, storage_options=s3.options)
    assert _states(second) == dict.fromkeys(first.runs, "hit")
    assert [a for a in ranges if "tfevents" in a[0]] == []  # the listing's ETags and sizes said it all
    _same_runs(first, second)
    _same_runs(load(local_logdir), second)
    assert json.loads(diagnose(url, now=now, storage_options=s3.options).to_json()) == report


def _cold(url: str, s3, monkeypatch):
    """`url` read without the cache."""
    with monkeypatch.context() as m:
        m.setenv("TBTRIAGE_NO_CACHE", "1")
        logdir = load(url, storage_options=s3.options)
    assert set(_states(logdir).values()) == {"off"}
    return logdir


def _grown_logdir(s3, tmp_path, bucket: str):
    """A run on the store holding the first 40 % of an event file, the whole file on disk, and its key."""
    run = write_pytorch_run(tmp_path / "src" / "live", n=400)
    key = f"runs/live/{os.path.basename(event_files(run)[0])}"
    data = open(event_files(run)[0], "rb").read()
    s3.put(bucket, key, _cut_at_record(data, 0.4))
    return key, data


def test_a_grown_object_resumes_from_the_cache_and_reads_only_its_new_bytes(s3, tmp_path, monkeypatch):
    key, data = _grown_logdir(s3, tmp_path, "cgrow")
    first = load("s3://cgrow/runs", storage_options=s3.options)
    assert _states(first) == {"live": "miss"}
    read_first = first.runs["live"].bytes_read
    s3.put("cgrow", key, data)  # a new object under the same key: a new ETag and size, the old bytes first
    warm = load("s3://cgrow/runs", storage_options=s3.options)
    assert _states(warm) == {"live": "extended"}
    assert warm.runs["live"].bytes_read == len(data) and 0 < read_first < len(data)
    assert not [n for n in warm.runs["live"].notes if "read again" in n.message]
    _same_runs(_cold("s3://cgrow/runs", s3, monkeypatch), warm)
    assert len(warm.runs["live"].scalars["train/loss"]) == 400
    # The extended entry was written back: the next morning is a plain hit.
    assert _states(load("s3://cgrow/runs", storage_options=s3.options)) == {"live": "hit"}


def test_an_object_rewritten_with_another_head_is_stale_and_read_cold(s3, tmp_path, monkeypatch):
    first = write_pytorch_run(tmp_path / "a" / "run", n=100, seed=1)
    second = write_pytorch_run(tmp_path / "b" / "run", n=300, seed=2)
    key = "runs/run/events.out.tfevents.1.host"
    s3.put("cstale", key, open(event_files(first)[0], "rb").read())
    assert _states(load("s3://cstale/runs", storage_options=s3.options)) == {"run": "miss"}
    s3.put("cstale", key, open(event_files(second)[0], "rb").read())  # longer, other bytes from the first
    again = load("s3://cstale/runs", storage_options=s3.options)
    assert _states(again) == {"run": "stale"}
    assert not [n for n in again.runs["run"].notes if "read again" in n.message]  # a cold read, not a restart
    _same_runs(_cold("s3://cstale/runs", s3, monkeypatch), again)
    expected = load(tmp_path / "b").runs["run"].scalars["train/loss"]
    assert np.array_equal(again.runs["run"].scalars["train/loss"].values, expected.values)


def test_an_object_rewritten_at_the_same_size_or_cut_shorter_is_stale(s3, tmp_path):
    key, data = _grown_logdir(s3, tmp_path, "cshort")
    cut = _cut_at_record(data, 0.4)
    assert _states(load("s3://cshort/runs", storage_options=s3.options)) == {"live": "miss"}
    flipped = bytearray(cut)
    flipped[-20] ^= 0xFF  # the same length under a new ETag: nothing short of reading it says what changed
    s3.put("cshort", key, bytes(flipped))
    assert _states(load("s3://cshort/runs", storage_options=s3.options)) == {"live": "stale"}
    s3.put("cshort", key, cut + data[len(cut) :])  # longer, the same head, other bytes just before the offset read
    longer = load("s3://cshort/runs", storage_options=s3.options)
    assert _states(longer) == {"live": "stale"}
    assert len(longer.runs["live"].scalars["train/loss"]) == 400
    half = cut[: len(cut) // 2]
    s3.put("cshort", key, half)
    again = load("s3://cshort/runs", storage_options=s3.options)
    assert _states(again) == {"live": "stale"}
    on_disk = tmp_path / "disk" / "live"
    on_disk.mkdir(parents=True)
    (on_disk / os.path.basename(key)).write_bytes(half)
    _same_runs(load(tmp_path / "disk"), again)


def test_no_cache_reads_a_store_cold_and_writes_no_entry(s3, url, local_logdir, tmp_path):
    outs = {}
    for name, extra in (("off", ["--no-cache"]), ("cold", []), ("warm", [])):
        out = tmp_path / f"{name}.json"
        assert main(["report", url, "--format", "json", "--out", str(out), *s3.cli_options, *extra]) == 0
        outs[name] = json.loads(out.read_text())
        if name == "off":
            assert not _entries() and "TBTRIAGE_NO_CACHE" not in os.environ
    assert len(_entries()) == 4
    assert outs["off"] == outs["cold"] == outs["warm"]


def test_the_report_from_s3_is_the_local_report(s3, url, local_logdir):
    now = time.time()
    local = json.loads(diagnose(str(local_logdir), now=now).to_json())
    remote = json.loads(diagnose(url, now=now, storage_options=s3.options).to_json())
    assert remote["logdir"] == url
    assert remote["runs"] == local["runs"]
    # The config file beside the events was read from the store too (it names the run's settings).
    from tbtriage.analysis.run_config import run_hparams

    run = load(url, storage_options=s3.options).runs["torch_a"]
    assert run_hparams(run)[0]["lr"] == 0.1 and "hparams.yaml" in run_hparams(run)[1]


def test_chained_cache_and_file_urls_read_the_same(s3, url, local_logdir, tmp_path):
    cached = load(f"simplecache::{url}", storage_options={"s3": s3.options, "cache_storage": str(tmp_path)})
    _same_runs(load(local_logdir), cached)
    _same_runs(load(local_logdir), load(f"file://{local_logdir}"))


def test_a_truncated_tail_on_s3_is_kept_up_to_the_last_whole_record(s3, tmp_path):
    run = write_pytorch_run(tmp_path / "src" / "cut", n=200)
    path = event_files(run)[0]
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[:-7])  # the writer stopped mid-record
    url = s3.upload(tmp_path / "src", "trunc", "runs")
    remote, local = load(url, storage_options=s3.options), load(tmp_path / "src")
    _same_runs(local, remote)
    assert remote.runs["cut"].partial_tail is not None


def _cut_at_record(data: bytes, keep: float) -> bytes:
    """The first whole records of an event file, about `keep` of it."""
    import struct

    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        if pos + 16 + length > keep * len(data):
            break
        pos += 16 + length
    return data[:pos]


def test_a_grown_object_is_followed_by_reading_only_its_new_bytes(s3, tmp_path):
    run = write_pytorch_run(tmp_path / "src" / "live", n=400)
    name = os.path.basename(event_files(run)[0])
    data = open(event_files(run)[0], "rb").read()
    s3.put("grow", f"runs/live/{name}", _cut_at_record(data, 0.4))
    logdir = load("s3://grow/runs", storage_options=s3.options)
    first = len(logdir.runs["live"].scalars["train/loss"])
    assert 0 < first < 400
    # An object store rewrites the whole object: a new size and ETag, the old bytes first.
    s3.put("grow", f"runs/live/{name}", data)
    assert logdir.refresh() == ["live"]
    live = logdir.runs["live"]
    assert len(live.scalars["train/loss"]) == 400
    assert live.bytes_read == len(data)  # the first 40 % were not read again
    assert not [n for n in live.notes if "read again" in n.message]
    _same_runs(load(tmp_path / "src"), logdir)
    assert logdir.refresh() == []  # an unchanged object: nothing read


def test_an_object_rewritten_with_other_bytes_and_longer_is_read_again_from_the_start(s3, tmp_path):
    first = write_pytorch_run(tmp_path / "a" / "run", n=100, seed=1)
    second = write_pytorch_run(tmp_path / "b" / "run", n=300, seed=2)
    key = "runs/run/events.out.tfevents.1.host"
    s3.put("rewrite", key, open(event_files(first)[0], "rb").read())
    logdir = load("s3://rewrite/runs", storage_options=s3.options)
    s3.put("rewrite", key, open(event_files(second)[0], "rb").read())
    assert logdir.refresh() == ["run"]
    run = logdir.runs["run"]
    assert [n.message for n in run.notes if "read again" in n.message] == [
        "events.out.tfevents.1.host was rewritten (the bytes already read changed) after it was read; "
        "the run was read again from its files as they are now"
    ]
    expected = load(tmp_path / "b").runs["run"].scalars["train/loss"]
    assert np.array_equal(run.scalars["train/loss"].values, expected.values)


def test_an_object_that_got_shorter_is_reported_once_and_what_was_read_is_kept(s3, tmp_path):
    run = write_pytorch_run(tmp_path / "src" / "shrink", n=300)
    name = os.path.basename(event_files(run)[0])
    data = open(event_files(run)[0], "rb").read()
    s3.put("shrink", f"runs/shrink/{name}", data)
    logdir = load("s3://shrink/runs", storage_options=s3.options)
    before = logdir.runs["shrink"].scalars["train/loss"]
    s3.put("shrink", f"runs/shrink/{name}", data[: len(data) // 2])
    logdir.refresh()
    logdir.refresh()
    run = logdir.runs["shrink"]
    shrunk = [n for n in run.notes if "shrank" in n.message]
    assert len(shrunk) == 1
    assert f"shrank from {len(data)} to {len(data) // 2} bytes" in shrunk[0].message
    assert np.array_equal(run.scalars["train/loss"].values, before.values, equal_nan=True)


def test_a_corrupt_object_is_a_note_like_on_disk_and_the_other_runs_are_read(s3, tmp_path):
    src = tmp_path / "src"
    write_pytorch_run(src / "good", n=100)
    run = write_pytorch_run(src / "flipped", n=300)
    path = event_files(run)[0]
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(path, "wb").write(bytes(data))
    (src / "garbage").mkdir()
    (src / "garbage" / "events.out.tfevents.1.host").write_bytes(os.urandom(3000))
    url = s3.upload(src, "corrupt", "runs")
    remote = load(url, storage_options=s3.options)
    _same_runs(load(src), remote)
    assert "not a TensorBoard event file" in remote.runs["garbage"].notes[0].message
    assert any("bad data checksum" in n.message or "bad length" in n.message for n in remote.runs["flipped"].notes)
    assert len(remote.runs["good"].scalars["train/loss"]) == 100


def test_a_missing_bucket_or_prefix_is_one_line(s3):
    with pytest.raises(LogdirError, match=r"^s3://no-such-bucket/runs: no such bucket 'no-such-bucket'$"):
        load("s3://no-such-bucket/runs", storage_options=s3.options)
    s3.bucket("empty")
    with pytest.raises(LogdirError, match=r"^s3://empty/nothing: no such object or prefix$"):
        load("s3://empty/nothing", storage_options=s3.options)


def test_bad_credentials_are_access_denied_in_one_line(s3, url):
    from moto.core.authorization import enable_iam_authentication

    with enable_iam_authentication(), pytest.raises(LogdirError) as caught:
        load(url, storage_options={**s3.options, "key": "AKIAWRONG", "secret": "wrong"})
    # A HEAD answer has no body to name the code (InvalidAccessKeyId): "access denied" and what to check.
    assert str(caught.value).startswith(f"{url}: access denied")
    assert str(caught.value).endswith("check the credentials and the bucket's policy")


def test_no_credentials_at_all_says_how_to_give_them(s3, url, monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(LogdirError, match="no credentials found .*--storage-option key=") as caught:
        load(url, storage_options={"endpoint_url": s3.endpoint, "skip_instance_cache": True})
    assert "\n" not in str(caught.value)


def test_a_url_whose_backend_is_missing_names_what_to_install():
    pytest.importorskip("fsspec")
    with pytest.raises(LogdirError, match=r"^az://container/runs: reading az:// URLs needs adlfs: pip install adlfs$"):
        load("az://container/runs")


def test_a_store_that_goes_down_mid_read_keeps_what_was_read_and_never_hangs(tmp_path):
    from tests._s3 import S3

    src = tmp_path / "src"
    for i in range(3):
        write_pytorch_run(src / f"run{i}", n=100, seed=i)
    server = S3()
    try:
        url = server.upload(src, "down", "runs")
        warnings: list[str] = []
        items = iter_series(url, warnings=warnings, storage_options=server.options)  # listed here
        first = next(items)  # run0 read
    finally:
        server.stop()
    started = time.monotonic()
    rest = list(items)  # run0's other tag; run1 and run2 cannot be read: the store is gone
    assert time.monotonic() - started < 120  # the stated timeouts, not a hang
    assert first[0] == "run0" and len(first[2]) == 100 and {run for run, _, _ in rest} == {"run0"}
    assert len(warnings) == 2 and all("cannot read" in w and "cannot reach the store" in w for w in warnings)


def test_cli_report_on_s3_with_storage_options_matches_the_local_report(s3, url, local_logdir, capsys):
    assert main(["report", str(local_logdir), "--format", "json"]) == 0
    local = json.loads(capsys.readouterr().out)
    assert main(["report", url, "--format", "json", *s3.cli_options]) == 0
    remote = json.loads(capsys.readouterr().out)
    assert remote["runs"] == local["runs"] and remote["groups"] == local["groups"]


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["report", "s3://no-such-bucket/x"], "no such bucket 'no-such-bucket'"),
        (["export", "s3://no-such-bucket/x"], "no such bucket 'no-such-bucket'"),
        (["report", ".", "--storage-option", "anon=true"], "--storage-option applies to a URL LOGDIR"),
        (["report", "s3://parity/runs", "--storage-option", "anon"], "--storage-option 'anon': expected KEY=VALUE"),
        (["watch", "s3://no-such-bucket/x", "--once"], "no such bucket"),
    ],
)
def test_cli_store_problems_are_one_line_and_exit_2(s3, url, argv, needle, capsys):
    assert main([*argv, *s3.cli_options]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


def test_cli_a_store_nobody_answers_is_one_line_and_exit_2(capsys):
    import socket

    with socket.socket() as s:  # a port with nobody listening: connection refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = ["report", "s3://b/runs", "--storage-option", f"endpoint_url=http://127.0.0.1:{port}"]
    assert main([*argv, "--storage-option", "key=k", "--storage-option", "secret=s"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tbtriage report: s3://b/runs: cannot reach the store") and "\n" not in err


def test_the_app_on_an_s3_url_follows_an_object_as_it_grows(s3, tmp_path):
    from tbtriage.tui.app import make_app
    from tests._app_data import HandAnalyzer, decaying_loss, drive, fixed_clock, write_run

    src = tmp_path / "src"
    run = write_run(src, "live", {"train/loss": decaying_loss(50)})
    path = event_files(run)[0]
    key = f"runs/live/{os.path.basename(path)}"
    s3.put("app", key, open(path, "rb").read())
    app = make_app(
        "s3://app/runs", storage_options=s3.options, follow_seconds=0.05, clock=fixed_clock, analyzer=HandAnalyzer()
    )

    async def scenario(app, pilot):
        assert len(app.runs["live"].scalars["train/loss"]) == 50
        write_run(src, "live", {"train/loss": decaying_loss(30)}, first_step=50)
        s3.put("app", key, open(path, "rb").read())  # the store gets the whole object again
        deadline = time.monotonic() + 20
        while app.runs["live"].last_step != 79:
            assert time.monotonic() < deadline, "the app did not pick up the grown object"
            await pilot.pause(0.05)
        assert len(app.runs["live"].scalars["train/loss"]) == 80
        assert app.logdir_path == "s3://app/runs"

    drive(app, scenario)


def test_cli_export_and_watch_read_s3_like_the_disk(s3, url, local_logdir, capsys):
    assert main(["export", str(local_logdir), "--tags", "loss"]) == 0
    local = capsys.readouterr().out
    assert main(["export", url, "--tags", "loss", *s3.cli_options]) == 0
    assert capsys.readouterr().out == local
    assert main(["watch", url, "--once", *s3.cli_options]) == 0
    out = capsys.readouterr().out
    assert "torch_nan" in out and "divergence" in out


def test_a_url_naming_one_event_file_or_ending_in_a_slash_reads_that_run(s3, tmp_path):
    run = write_pytorch_run(tmp_path / "solo", n=50)
    url = s3.upload(run, "solo", "run")
    name = os.path.basename(event_files(run)[0])
    for target in (url, f"{url}/", f"{url}/{name}"):
        logdir = load(target, storage_options=s3.options)
        assert list(logdir.runs) == ["."] and len(logdir.runs["."].scalars["train/loss"]) == 50, target
    s3.put("solo", "run/readme.txt", b"not events")
    with pytest.raises(LogdirError, match=r"readme.txt: not an event file \(the name has no 'tfevents'\)$"):
        load(f"{url}/readme.txt", storage_options=s3.options)


def test_a_store_that_accepts_and_never_answers_times_out_in_one_line():
    import socket

    with socket.socket() as silent:  # connections complete (the kernel's backlog) and then hear nothing
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        options = {
            "endpoint_url": f"http://127.0.0.1:{silent.getsockname()[1]}",
            "key": "k",
            "secret": "s",
            "config_kwargs": {"connect_timeout": 1, "read_timeout": 1},
        }
        started = time.monotonic()
        with pytest.raises(LogdirError) as caught:
            load("s3://bucket/runs", storage_options=options)
    assert time.monotonic() - started < 30
    assert str(caught.value).startswith("s3://bucket/runs: the store did not answer in time (")
    assert str(caught.value).endswith("; connect timeout 1 s, read timeout 1 s, 2 attempts)")  # the ones in force
    assert "\n" not in str(caught.value)


def test_cli_diagnose_finds_runs_on_s3_and_names_them_when_the_run_is_not_there(s3, url, capsys):
    assert main(["diagnose", url, "--run", "nope", *s3.cli_options]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"tbtriage diagnose: no run named 'nope' under {url} (runs: tf2/train, tf2/validation, torch_a, torch_nan)"
    )
