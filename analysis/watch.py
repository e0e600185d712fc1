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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .cache import release
from .config import Config
from .datamodel import Finding, Run, RunReport
from .engine import AnalysisContext, LogdirContext, context_from_spans, scalar_span
from .findings import FindingKey, finding_key, finding_order
from .fleet import without_curves
from .json_safe import json_safe
from .pipeline import EngineAnalyzer, analyze_runs
from .twins import run_settings, with_twins

if TYPE_CHECKING:
    from .logdir import Logdir

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


#: Turns one run into its report, given the logdir's context (other runs' wall times, for `stalled`;
#: sibling runs, for Keras' train/validation pairs): `engine.analyze_run` with a config, or a test's stand-in.
RunAnalyzer = Callable[[Run, LogdirContext], RunReport]


@dataclass
class Watcher:
    """The one live follower, for `tbtriage watch` and the app alike: holds a live `Logdir` and what it judged.

    Each `poll()` reads what was appended, re-analyses the runs that changed, their sibling runs and
    the silent runs due a re-check (a run that stops writing is only `stalled` once the others write on,
    so it must be judged again although nothing of its own changed), attaches twins over every run (as
    `report` does), and returns the findings not reported before. The first poll judges every run (from
    the verdict cache where a run's verdict still holds).
    """

    logdir: Logdir
    analyze: RunAnalyzer
    clock: Callable[[], float] = time.time
    recheck_silent_s: float = RECHECK_SILENT_S
    reports: dict[str, RunReport] = field(default_factory=dict)  # the engine's verdict on each run, as judged
    shown: dict[str, RunReport] = field(default_factory=dict)  # the same with twins attached (`twinned`)
    _settings: dict[str, tuple[RunReport, dict[str, Any]]] = field(default_factory=dict, repr=False)
    seen: set[FindingKey] = field(default_factory=set)
    polls: int = 0
    judged_at: dict[str, float] = field(default_factory=dict)  # run -> the logdir's newest wall time then
    workers: int | None = None  # processes for a pass (`pipeline.analyze_runs`); None: every core when worth it
    niceness: int = 0  # the pool's workers lower their priority by this much (the app's, to keep keys quick)
    #: Keep each verdict's features whole; False: without the detectors' curves (`fleet.without_curves`), what an
    #: app holding thousands of verdicts keeps (~30 KB a run less; only the detectors read them).
    keep_curves: bool = True
    _spans: dict[str, tuple[float, float] | None] = field(default_factory=dict, repr=False)  # `_context`

    def poll(
        self,
        cancel: Callable[[], bool] = lambda: False,
        on_report: Callable[[RunReport, int, int], None] | None = None,
    ) -> list[Finding]:
        """Read what was appended, re-analyse what is due, and return findings not reported before.

        `on_report(report, done, total)` is called as each run is judged (a UI shows it at once);
        `cancel()` is polled while reading and between runs: a cancelled poll stops early, and what it
        did not judge is judged on the next one.
        """
        changed = list(self.logdir.runs) if self.polls == 0 else self.logdir.refresh(cancel=cancel)
        self.polls += 1
        context = self._context(changed)
        newest = context.latest_wall_time if context.latest_wall_time is not None else 0.0
        due = sorted(self._due(changed, newest))

        def judged(report: RunReport, done: int, total: int) -> None:
            # Its pages go once it is judged: caching the verdict (`verdict_cache.store`) reads the run again after
            # the analysis let go of it, and a first open with the cache kept most of a 10 GB logdir resident.
            release(self.logdir.runs.get(report.name, report.run))
            if not self.keep_curves:
                report = without_curves(report)
            self.reports[report.name] = report
            self.judged_at[report.name] = newest
            if on_report is not None:
                on_report(report, done, total)

        runs = [self.logdir.runs[name] for name in due]
        analyze_runs(
            runs,
            context,
            self.analyze,
            workers=self.workers,
            on_report=judged,
            cancel=cancel,
            niceness=self.niceness,
            logdir=self.logdir,
            curves=self.keep_curves,
        )
        self.twinned()
        return self._news()

    def adopt(self, reports: Mapping[str, RunReport], context: LogdirContext) -> list[Finding]:
        """Take the verdict of every run of the logdir, each checked in `context` (the logdir's now) by the verdict
        cache (`verdict_cache.lookup`) rather than judged here, as this follower's first pass (what `poll` would
        have made of them); the next `poll` reads what was appended. Returns the findings, all new."""
        newest = context.latest_wall_time if context.latest_wall_time is not None else 0.0
        for name in self.logdir.runs:
            self.reports[name] = reports[name]
            self.judged_at[name] = newest
        self.polls = max(self.polls, 1)
        self.twinned()
        return self._news()

    def _news(self) -> list[Finding]:
        """The shown findings not reported before, now marked as reported."""
        new: list[Finding] = []
        for report in self.shown.values():
            for finding in report.findings:
                key = finding_key(finding)
                if key not in self.seen:
                    self.seen.add(key)
                    new.append(finding)
        return sorted(new, key=finding_order)

    def twinned(self) -> list[RunReport]:
        """Derive the reports as shown (`shown`: each verdict with its healthy twin's evidence, `twins.with_twins`,
        over every run judged so far) from the engine's verdicts (`reports`); the shown reports that changed
        since the last call. It compares sick runs with healthy ones over the whole logdir: once per pass (the app
        calls it when a pass has judged every run), not per batch of verdicts."""
        reports = [self.reports[name] for name in self.reports if name in self.logdir.runs]
        for report in reports:  # each run's settings read once per verdict, not once per batch
            known = self._settings.get(report.name)
            if known is None or known[0] is not report:
                self._settings[report.name] = (report, run_settings([report])[report.name])
        fresh = with_twins(reports, {r.name: self._settings[r.name][1] for r in reports})
        release(*self.logdir.runs.values())  # the losses twins compared: 180 MB of 10,000 runs' columns
        changed = [r for r in fresh if self.shown.get(r.name) is not r]
        self.shown = {r.name: r for r in fresh}
        return changed

    def _context(self, changed: list[str]) -> AnalysisContext:
        """The logdir's context (`engine.logdir_context`), each run's activity span worked out again only when the run
        changed, its pages let go of at once (`cache.release`): a span reads every wall time of the run, and reading
        them all on each poll kept a third of a logdir's columns in memory (1.5 GB of a 10 GB logdir)."""
        for name in changed:
            self._spans.pop(name, None)
        spans = {}
        for name, run in self.logdir.runs.items():
            if name not in self._spans:
                self._spans[name] = scalar_span(run)
                release(run)
            spans[name] = self._spans[name]
        self._spans = spans
        return context_from_spans(spans, self.logdir.runs, self.clock())

    def _due(self, changed: list[str], newest: float) -> set[str]:
        """Changed runs, their siblings, and runs not judged since the logdir's newest event moved on."""
        names = set(changed) | _siblings(set(changed), self.logdir.runs)
        names |= {n for n in self.logdir.runs if newest - self.judged_at.get(n, float("-inf")) >= self.recheck_silent_s}
        return {n for n in names if n in self.logdir.runs}


def _siblings(names: set[str], all_runs) -> set[str]:
    """Runs sharing a parent directory with one of `names`: Keras's `X/train` reads `X/validation`."""
    parents = {name.rsplit("/", 1)[0] for name in names if "/" in name}
    return {n for n in all_runs if "/" in n and n.rsplit("/", 1)[0] in parents}


def engine_analyzer(config: Config | None = None) -> RunAnalyzer:
    """The default `Watcher.analyze`: the engine's verdict on one run, against the logdir as it is now (in a
    process pool when a pass has many runs to judge)."""
    return EngineAnalyzer(config)
