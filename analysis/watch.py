"""Follow live runs: re-read only appended bytes, re-analyse only runs that changed, report each finding once.

A finding's identity is `findings.finding_key` (run, kind, tags, onset step): the same divergence seen
again on the next poll is not news, a second spike at a later step is. `run_on_alert` hands one finding, as a line of JSON on
stdin, to the user's command (a chat webhook, `notify-send`, a pager), run through the shell with a
timeout so a hung hook cannot stop the watch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .datamodel import Finding, RunReport
from .findings import FindingKey, finding_key, finding_order
from .json_safe import json_safe

#: An alert hook that has not finished in this many seconds is killed (with its children); the watch goes on.
ON_ALERT_TIMEOUT_S = 30.0
#: Default seconds between polls: a training loop flushes its event file every ~10–120 s anyway.
DEFAULT_INTERVAL_S = 10.0
#: A run that wrote nothing is re-judged once the logdir's newest event has moved this far past the last
#: time it was analysed: `stalled` is about others writing on while it stays silent, and its shortest
#: threshold is 10 minutes, so re-judging more often would only repeat the same verdict.
RECHECK_SILENT_S = 600.0


def alert_payload(finding: Finding, logdir: str, detected_at: datetime | None = None) -> dict[str, Any]:
    """The JSON object an alert hook receives: the report contract's finding plus its run and logdir."""
    when = (detected_at or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    return json_safe(
        {"tool": "tbtriage", "logdir": logdir, "run": finding.run, "detected_at": when, **finding.to_dict()}
    )


@dataclass(frozen=True)
class HookResult:
    returncode: int | None  # None when it timed out or could not start
    timed_out: bool
    error: str | None = None  # why it could not start


def run_on_alert(command: str, payload: dict[str, Any], timeout: float = ON_ALERT_TIMEOUT_S) -> HookResult:
    """Run `command` through the shell with `payload` as one line of JSON on stdin.

    The hook gets its own process group, so a timeout kills whatever it started too, and Ctrl-C in the
    terminal reaches us rather than interrupting a webhook half-sent. TBTRIAGE_RUN, TBTRIAGE_KIND and
    TBTRIAGE_SEVERITY are set for hooks that only need those.
    """
    env = dict(os.environ)
    env.update(
        TBTRIAGE_RUN=str(payload.get("run", "")),
        TBTRIAGE_KIND=str(payload.get("kind", "")),
        TBTRIAGE_SEVERITY=str(payload.get("severity", "")),
    )
    data = json.dumps(payload, allow_nan=False) + "\n"
    try:
        proc = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, text=True, env=env, start_new_session=True)
    except OSError as exc:
        return HookResult(None, False, str(exc))
    try:
        proc.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return HookResult(None, True)
    except BaseException:
        _kill_group(proc)
        raise
    return HookResult(proc.returncode, False)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


@dataclass
class Watcher:
    """Holds a live `Logdir` and the findings already reported; `poll()` returns only what is new.

    `analyze` turns the logdir's runs that changed into fresh `RunReport`s (given the logdir, the
    changed names and the previous reports); by default the engine's cross-run analysis.
    """

    logdir: Any  # analysis.logdir.Logdir
    analyze: Callable[[Any, list[str], dict[str, RunReport]], dict[str, RunReport]]
    reports: dict[str, RunReport] = field(default_factory=dict)
    seen: set[FindingKey] = field(default_factory=set)
    polls: int = 0

    def poll(self) -> list[Finding]:
        """Read what was appended, re-analyse changed runs, and return findings not reported before."""
        changed = list(self.logdir.runs) if self.polls == 0 else self.logdir.refresh()
        self.polls += 1
        if not changed:
            return []
        self.reports.update(self.analyze(self.logdir, changed, self.reports))
        new: list[Finding] = []
        for report in self.reports.values():
            for finding in report.findings:
                key = finding_key(finding)
                if key not in self.seen:
                    self.seen.add(key)
                    new.append(finding)
        return sorted(new, key=finding_order)


def _siblings(names: set[str], all_runs) -> set[str]:
    """Runs sharing a parent directory with one of `names`: Keras's `X/train` reads `X/validation`."""
    parents = {name.rsplit("/", 1)[0] for name in names if "/" in name}
    return {n for n in all_runs if "/" in n and n.rsplit("/", 1)[0] in parents}


def engine_analyzer(config=None, clock: Callable[[], float] = time.time):
    """The default `Watcher.analyze`: the engine on changed runs, their sibling runs, and silent runs due a re-check.

    Each pass builds the logdir context afresh (newest wall time, `now`), so a run that changed is judged
    against the others as they are now.
    """
    from .engine import analyze_run, logdir_context

    judged_at: dict[str, float] = {}  # run -> the logdir's newest wall time when it was last analysed

    def analyze(logdir, changed: list[str], previous: dict[str, RunReport]) -> dict[str, RunReport]:
        context = logdir_context(logdir, now=clock())
        newest = context.latest_wall_time if context.latest_wall_time is not None else 0.0
        names = set(changed) | _siblings(set(changed), logdir.runs)
        names |= {n for n in logdir.runs if newest - judged_at.get(n, float("-inf")) >= RECHECK_SILENT_S}
        out = {}
        for name in sorted(names):
            if name in logdir.runs:
                out[name] = analyze_run(logdir.runs[name], config, context)
                judged_at[name] = newest
        return out

    return analyze
