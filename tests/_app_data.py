"""Runs, reports and logdirs for the app's tests: small, fixed and fast.

Reports are built by hand (the engine is tested on its own): each test says which findings a
run has, so what the app shows is checked against what it was given. Event files are real,
written with the project's event writer at fixed wall times, and read by `analysis.load`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from textual.worker import WorkerState

from tbtriage.analysis.datamodel import Finding, Health, Run, RunReport
from tbtriage.analysis.event_writer import encode_scalar_block, event_file_name, file_version_event, frame_records
from tbtriage.analysis.roles import assign_roles, primary_tags

#: Every test's clock: 2024-06-04 06:00 UTC. Runs written by `write_run` end a few minutes before it.
NOW = 1_717_480_800.0


def fixed_clock() -> float:
    return NOW


def report_for(run: Run, findings: Iterable[Finding] = (), score: int = 90) -> RunReport:
    roles = assign_roles(list(run.scalars), run_name=run.name)
    return RunReport(
        name=run.name,
        run=run,
        roles={tag: role for tag, (role, _) in roles.items()},
        directions={tag: direction for tag, (_, direction) in roles.items()},
        features={},
        findings=list(findings),
        health=Health(score, {"convergence": score, "stability": score}),
        primary_tags=primary_tags(roles, {tag: len(s) for tag, s in run.scalars.items()}, run_name=run.name),
    )


class HandAnalyzer:
    """Stands in for the engine: each run gets the findings and score the test planted for it."""

    def __init__(self, plan: dict[str, tuple[int, list[Finding]]] | None = None) -> None:
        self.plan = plan or {}
        self.calls: list[str] = []

    def __call__(self, run: Run, context=None) -> RunReport:
        self.calls.append(run.name)
        score, findings = self.plan.get(run.name, (95, []))
        return report_for(run, findings, score)


def write_run(
    logdir: Path, name: str, tags: dict[str, np.ndarray], first_step: int = 0, wall0: float = NOW - 600.0
) -> Path:
    """An event file for run `name` holding `tags` (raw names, written as-is), one point per step, 1 s apart.

    Calling it again for the same run appends the next points to the same file, as a live run does.
    """
    directory = logdir / name
    directory.mkdir(parents=True, exist_ok=True)
    existing = sorted(directory.glob("events.out.tfevents.*"))
    path = existing[0] if existing else directory / event_file_name(wall0)
    points = len(next(iter(tags.values())))
    steps = np.arange(first_step, first_step + points, dtype=np.int64)
    block = encode_scalar_block(list(tags), steps, wall0 + steps.astype(np.float64), np.vstack(list(tags.values())))
    with open(path, "ab") as out:
        if not existing:
            out.write(frame_records([file_version_event(wall0)]))
        out.write(block)
    return directory


def decaying_loss(points: int, start: float = 2.0, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return start * np.exp(-np.arange(points) / (points / 3)) + 0.05 * rng.random(points) + 0.1


def drive(app, scenario, size: tuple[int, int] = (160, 48), wait: bool = True) -> None:
    """Run `scenario(app, pilot)` against `app` in a headless terminal of `size`, after loading settles.

    Plain `asyncio.run`, so the app tests need no async pytest plugin.
    """

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            if wait:
                await settle(app, pilot)
            await scenario(app, pilot)

    asyncio.run(main())


async def until(pilot, condition, what: str = "timed out waiting", timeout: float = 20.0) -> None:
    """Let the app run until `condition()` holds; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        await pilot.pause(0.02)


async def settle(app, pilot, timeout: float = 30.0) -> None:
    """Wait until no worker is pending or running, after the messages they posted are handled too, and the app's
    warm-up (`tui.warm_up`: the chart among its steps) is done.

    (Not `workers.wait_for_complete()`: an exclusive worker cancelled before it started makes that raise.)
    """
    deadline = time.monotonic() + timeout
    quiet_passes = 0
    while quiet_passes < 2:  # handled messages may start new workers (a chart redraw after an analysis)
        await pilot.pause()
        busy = any(w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in app.workers)
        busy = busy or not getattr(getattr(app, "warm_up", None), "done", True)  # the chart is mounted by its step
        quiet_passes = 0 if busy else quiet_passes + 1
        if busy:
            assert time.monotonic() < deadline, "workers still busy"
            await asyncio.sleep(0.01)
