"""Fleet reports on Dask: a LocalCluster of two worker processes reads and analyses the runs, and the report
is the local one, byte for byte, on a local logdir and on S3 (moto's server on 127.0.0.1); a worker killed
mid-report costs a retry, not the report."""

from __future__ import annotations

import json
import os
import time

import pytest

from tbtriage.analysis.demo import write_demo
from tbtriage.analysis.engine import diagnose
from tbtriage.analysis.fleet import family, fleet_diagnose, pack
from tbtriage.cli.main import main

distributed = pytest.importorskip("distributed")
from distributed.diagnostics.plugin import WorkerPlugin  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two worker processes, one thread each, started once for the module (what `--dask local` starts).

    The workers take their environment when they start: they cache under a directory of the module's own,
    never under the real ~/.cache."""
    from tbtriage.analysis.fleet import connect

    with pytest.MonkeyPatch.context() as env:
        env.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("dask-xdg-cache")))
        client, local = connect("local", workers=2)
    yield client
    client.close()
    local.close()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo logdir: twelve runs, Keras train/validation siblings, twins, config files, a resumed run."""
    return write_demo(tmp_path_factory.mktemp("fleet") / "logdir").path


def test_a_run_and_its_validation_sibling_share_a_task():
    assert family("keras/train") == family("keras/validation") == "keras"
    assert family("model/eval") == family("model") == "model"
    assert family("train") == family("validation") == family(".") == "."
    tasks = pack({"a/train": 5, "a/validation": 5, "b": 5, "c": 5}, target=6)
    assert tasks == [["a/train", "a/validation"], ["b"], ["c"]]


def test_the_dask_report_on_a_local_logdir_is_the_local_report(cluster, demo):
    now = time.time()
    done = []
    fleet = fleet_diagnose(str(demo), cluster, now=now, progress=lambda *p: done.append(p))
    assert fleet.to_json() == diagnose(str(demo), now=now).to_json()
    stages = [p[0] for p in done]
    assert stages == sorted(stages, key=["read", "analysed"].index)  # every task read, then verdicts as they come
    assert done[-1][1] == done[-1][2] > 1 and len(done) == 2 * done[-1][2]  # several tasks, each reported
    assert done[-1][3] == 12 and ("read", done[-1][2], done[-1][2], 12) in done


def test_the_dask_report_on_s3_is_the_local_report(cluster, demo, s3):
    url = s3.upload(demo, "fleet", "logdir")
    now = time.time()
    fleet = json.loads(fleet_diagnose(url, cluster, now=now, storage_options=s3.options).to_json())
    local = json.loads(diagnose(str(demo), now=now).to_json())
    assert fleet["logdir"] == url
    assert fleet["runs"] == local["runs"]


def test_cli_report_dask_prints_progress_and_the_same_json(cluster, demo, capsys):
    assert main(["report", str(demo), "--format", "json"]) == 0
    local = capsys.readouterr().out
    assert main(["report", str(demo), "--format", "json", "--dask", cluster.scheduler.address]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == json.loads(local)
    assert "tbtriage report: analysed" in captured.err and "12 runs" in captured.err


def test_cli_a_scheduler_nobody_runs_is_one_line_and_exit_2(demo, capsys, monkeypatch):
    import socket

    from tbtriage.analysis import fleet

    monkeypatch.setattr(fleet, "CONNECT_TIMEOUT_S", 2)  # the same path, a shorter wait

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["report", str(demo), "--dask", f"tcp://127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"tbtriage report: --dask tcp://127.0.0.1:{port}: no scheduler answered within 2 s (OSError)"


class KillFirstReader(WorkerPlugin):
    """A worker plugin that ends its worker's process the first time any worker starts reading runs."""

    name = "tbtriage-kill-first-reader"

    def __init__(self, marker: str):
        self.marker = marker

    def setup(self, worker):
        self.worker = worker

    def teardown(self, worker):
        pass

    def transition(self, key, start, finish, **kwargs):
        if finish == "executing" and str(key).startswith("read_task"):
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return  # already killed one: the retry must run
            os._exit(1)


def test_a_worker_killed_mid_report_still_yields_the_whole_report(cluster, demo, tmp_path):
    marker = tmp_path / "killed"
    cluster.register_plugin(KillFirstReader(str(marker)))
    try:
        now = time.time()
        fleet = fleet_diagnose(str(demo), cluster, now=now)
    finally:
        cluster.unregister_worker_plugin(KillFirstReader.name)
    assert marker.exists()  # a worker did die while reading
    assert fleet.to_json() == diagnose(str(demo), now=now).to_json()
    assert not fleet.logdir.warnings


def test_a_task_lost_for_good_makes_its_runs_warnings_and_the_report_keeps_the_rest(cluster, demo, tmp_path):
    def set_allowed_failures(dask_scheduler, n):
        old = dask_scheduler.allowed_failures
        dask_scheduler.allowed_failures = n
        return old

    # One worker death is enough to give a task up (the default is 3): the first task to start reading is lost.
    old = cluster.run_on_scheduler(set_allowed_failures, n=0)
    cluster.register_plugin(KillFirstReader(str(tmp_path / "killed")))
    try:
        now = time.time()
        fleet = fleet_diagnose(str(demo), cluster, now=now)
    finally:
        cluster.unregister_worker_plugin(KillFirstReader.name)
        cluster.run_on_scheduler(set_allowed_failures, n=old)
    lost = [w for w in fleet.logdir.warnings if "lost on the cluster" in w]
    assert lost, "the killed task's runs are said"
    lost_runs = {w.split(":", 1)[0] for w in lost}
    local = diagnose(str(demo), now=now)
    assert {r.name for r in fleet.runs} == {r.name for r in local.runs} - lost_runs
    assert len(fleet.runs) > 0


def test_cli_report_dask_local_starts_and_stops_its_own_cluster(demo, capsys):
    assert main(["report", str(demo), "--format", "json", "--runs", "keras"]) == 0
    local = json.loads(capsys.readouterr().out)
    assert (
        main(["report", str(demo), "--format", "json", "--runs", "keras", "--dask", "local", "--dask-workers", "1"])
        == 0
    )
    assert json.loads(capsys.readouterr().out) == local


def test_the_dask_report_carries_the_oscillation_only_an_lr_twin_shows(cluster, tmp_path):
    """The twins are attached on the client from the slimmed reports: the training losses they compare came back."""
    from tests.test_lr_twins import BOUNCING, HEALTHY, _copy

    _copy(BOUNCING, tmp_path / "mlp_lr0.45")
    _copy(HEALTHY, tmp_path / "mlp_lr0.02")
    now = time.time()
    fleet = fleet_diagnose(str(tmp_path), cluster, now=now)
    assert fleet.to_json() == diagnose(str(tmp_path), now=now).to_json()
    assert [f.severity for f in fleet.runs[0].findings if f.kind == "oscillation"] == ["warning"]
