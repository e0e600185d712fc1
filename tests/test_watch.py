"""`tbtriage watch`: follow a live run, print each new finding once, hand it to a hook as JSON."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from tensorboardX import SummaryWriter

import tbtriage
from tbtriage.analysis.datamodel import Finding
from tbtriage.analysis.findings import finding_key
from tbtriage.analysis.json_safe import json_safe as jsonable
from tbtriage.analysis.watch import Watcher, alert_payload, engine_analyzer, run_on_alert
from tbtriage.cli.main import main
from tests._app_data import NOW, decaying_loss, write_run
from tests._report_contract import ALERT, assert_follows

ROOT = Path(__file__).resolve().parent.parent


def _healthy(steps: np.ndarray, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return 0.5 + 2.0 * np.exp(-steps / 600) * np.exp(rng.normal(0, 0.03, steps.size))


class LiveRun:
    """A training loop writing with tensorboardX, one flush per call, into one growing event file."""

    def __init__(self, directory: Path):
        self.writer = SummaryWriter(str(directory), flush_secs=3600)
        self.step = 0

    def train(self, losses) -> None:
        for loss in losses:
            self.step += 10
            self.writer.add_scalar("train/loss", float(loss), self.step)
            self.writer.add_scalar("train/lr", 1e-3, self.step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def test_only_new_findings_are_reported_as_a_live_run_goes_nan(tmp_path):
    live = LiveRun(tmp_path / "run")
    live.train(_healthy(np.arange(1, 201) * 10))
    watcher = Watcher(tbtriage.load(tmp_path), engine_analyzer(None))
    first = watcher.poll()
    assert not [f for f in first if f.severity == "critical"]
    size_before = watcher.logdir.runs["run"].bytes_read

    live.train([np.nan] * 20)  # the loss blows up at step 2010 and stays NaN
    second = watcher.poll()
    divergence = [f for f in second if f.kind == "divergence"]
    assert len(divergence) == 1 and divergence[0].step == 2010
    assert watcher.logdir.runs["run"].bytes_read > size_before

    assert watcher.poll() == []  # nothing appended: nothing new
    live.train([np.nan] * 5)  # more of the same NaN: the same finding, not news
    assert [f for f in watcher.poll() if f.kind == "divergence"] == []
    live.close()


def test_watch_once_prints_findings_and_feeds_the_hook_valid_json(tmp_path, capsys):
    live = LiveRun(tmp_path / "logs" / "exp_a")
    losses = _healthy(np.arange(1, 201) * 10)
    losses[150:] = np.nan
    live.train(losses)
    live.close()
    alerts = tmp_path / "alerts.jsonl"
    hook = f'cat >> {alerts}; echo "$TBTRIAGE_KIND" >> {tmp_path / "kinds.txt"}'
    assert main(["watch", str(tmp_path / "logs"), "--once", "--on-alert", hook]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert any("CRITICAL" in line and "divergence" in line and "exp_a @ 1510" in line for line in printed)

    def refuse(name):
        raise ValueError(name)

    payloads = [
        assert_follows(json.loads(line, parse_constant=refuse), ALERT) for line in alerts.read_text().splitlines()
    ]
    assert len(payloads) == len(printed)
    divergence = next(p for p in payloads if p["kind"] == "divergence")
    assert divergence["run"] == "exp_a" and divergence["step"] == 1510 and divergence["tool"] == "tbtriage"
    assert "divergence" in (tmp_path / "kinds.txt").read_text().split()


def test_watch_follows_appends_and_stops_cleanly_on_ctrl_c(tmp_path):
    live = LiveRun(tmp_path / "run")
    live.train(_healthy(np.arange(1, 201) * 10))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tbtriage", "watch", str(tmp_path), "--interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 60
        started = proc.stderr.readline()  # "watching ...": the first pass is done after it
        assert "watching" in started
        live.train([np.nan] * 20)
        line = ""
        while "divergence" not in line and time.monotonic() < deadline:
            line = proc.stdout.readline()
        assert "divergence" in line and "@ 2010" in line
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        live.close()
    assert proc.returncode in (0, 130)
    assert "Traceback" not in err
    assert "divergence" not in out  # printed once, not again on later polls


def test_a_hung_hook_is_killed_at_its_timeout(tmp_path):
    marker = tmp_path / "still-running"
    start = time.monotonic()
    result = run_on_alert(f"sleep 1.5 && touch {marker}", {"kind": "divergence"}, timeout=0.3)
    assert result.timed_out and time.monotonic() - start < 1.4
    time.sleep(2.0)
    assert not marker.exists()  # its children went with it


def test_a_failing_hook_reports_its_status():
    assert run_on_alert("exit 3", {"kind": "x"}).returncode == 3


def test_finding_identity_and_strict_json_payload():
    finding = Finding(
        "divergence",
        "critical",
        "run",
        ("train/loss",),
        2010,
        None,
        {"last_finite": np.float64(4.5), "values": np.array([1.0, np.nan, np.inf])},
        "m",
        "s",
    )
    assert finding_key(finding) == ("run", "divergence", ("train/loss",), 2010)
    payload = alert_payload(finding, "logs/")
    text = json.dumps(payload, allow_nan=False)  # would raise on a bare NaN
    assert assert_follows(json.loads(text), ALERT)["evidence"] == {
        "last_finite": 4.5,
        "values": [1.0, "NaN", "Infinity"],
    }
    assert jsonable({"x": (np.int64(3), float("-inf"))}) == {"x": [3, "-Infinity"]}


def test_watch_on_a_missing_logdir_says_so_in_one_line(tmp_path, capsys):
    assert main(["watch", str(tmp_path / "nope"), "--once"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such" in err[0]


def test_a_run_that_goes_silent_is_rejudged_and_reported_stalled_once_the_others_write_on(tmp_path):
    start = NOW - 2000.0
    write_run(tmp_path, "hung", {"train/loss": decaying_loss(50)}, wall0=start)
    write_run(tmp_path, "steady", {"train/loss": decaying_loss(50, seed=1)}, wall0=start)
    watcher = Watcher(tbtriage.load(tmp_path), engine_analyzer(None), clock=lambda: NOW)
    assert not [f for f in watcher.poll() if f.kind == "stalled"]

    # Only `steady` writes, 14 minutes on: `hung` changed nothing, yet it must be judged again.
    write_run(tmp_path, "steady", {"train/loss": decaying_loss(30, seed=2)}, first_step=50, wall0=start + 850.0)
    (stalled,) = [f for f in watcher.poll() if f.kind == "stalled"]
    assert stalled.run == "hung" and stalled.evidence["still_writing"] == ["steady"]
    assert [f for f in watcher.poll() if f.kind == "stalled"] == []  # reported once
