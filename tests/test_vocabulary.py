"""One vocabulary of findings: every kind a detector reports has a registry row, every row has a detector,
and every view orders, identifies and headlines findings and runs the same way.

The detectors run one by one over every labelled scenario of `_engine_data` and over the demo logdir (its
own writer, read back from disk), so a kind that one detector starts to emit without a registry row, or a
row whose detector went away, fails here.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import tbtriage
from tbtriage.analysis.datamodel import Finding, Run, Series
from tbtriage.analysis.demo import write_demo
from tbtriage.analysis.detectors import DETECTORS, run_detectors
from tbtriage.analysis.engine import logdir_context, run_data
from tbtriage.analysis.features import series_features
from tbtriage.analysis.findings import (
    BY_NAME,
    COMPONENTS,
    FINDING_KINDS,
    KINDS,
    SEVERITIES,
    finding_key,
    finding_order,
    timeline_order,
    worst,
)
from tbtriage.analysis.health import WEIGHTS, health
from tbtriage.analysis.render_html import render_html
from tbtriage.analysis.render_markdown import finding_markdown
from tbtriage.analysis.watch import Watcher
from tbtriage.tui.app import make_app
from tbtriage.tui.widgets.findings_list import order_findings
from tests._app_data import drive, fixed_clock, report_for
from tests._engine_data import SCENARIOS, runs_in_memory


def _labelled_run_data():
    for scenario in SCENARIOS:
        runs = runs_in_memory(scenario)
        context = logdir_context(SimpleNamespace(runs=runs))
        if scenario.now_offset is not None:
            context = logdir_context(SimpleNamespace(runs=runs), now=context.latest_wall_time + scenario.now_offset)
        for run in runs.values():
            yield run_data(run, None, context)


@pytest.fixture(scope="module")
def emitted(tmp_path_factory) -> dict[str, set[str]]:
    """detector module name -> every kind it reported on the labelled scenarios and the demo."""
    demo = tbtriage.load(write_demo(tmp_path_factory.mktemp("demo") / "demo").path)
    demo_context = logdir_context(demo)
    everything = list(_labelled_run_data()) + [run_data(run, None, demo_context) for run in demo.runs.values()]
    out: dict[str, set[str]] = {module.__name__: set() for module in DETECTORS}
    for data in everything:
        for module in DETECTORS:
            out[module.__name__] |= {f.kind for f in module.detect(data)}
    return out


def test_every_kind_a_detector_reports_is_in_the_registry_and_declared_by_it(emitted):
    for module in DETECTORS:
        unknown = emitted[module.__name__] - set(FINDING_KINDS)
        assert not unknown, f"{module.__name__} reports {unknown}, which have no row in findings.KINDS"
        undeclared = emitted[module.__name__] - set(module.KINDS)
        assert not undeclared, f"{module.__name__} reports {undeclared} without declaring them in its KINDS"


def test_every_registry_row_has_one_detector_that_reports_it(emitted):
    declared = [kind for module in DETECTORS for kind in module.KINDS]
    assert sorted(declared) == sorted(FINDING_KINDS), "each kind declared by exactly one detector module"
    reported = set().union(*emitted.values())
    assert set(FINDING_KINDS) - reported == set(), "rows no detector reported on the labelled runs or the demo"
    for module in DETECTORS:
        assert set(module.KINDS) <= emitted[module.__name__], f"{module.__name__} declares kinds it never reports"


def test_each_row_is_a_complete_line_of_the_vocabulary():
    assert len(BY_NAME) == len(KINDS)
    assert set(COMPONENTS) == set(WEIGHTS)
    for row in KINDS:
        assert re.fullmatch(r"[a-z_]+", row.name)
        assert row.meaning and "\n" not in row.meaning
        assert row.component is None or row.component in COMPONENTS
        assert isinstance(row.causes, tuple)


def _finding(kind: str, severity: str = "warning", step: int | None = 100, run: str = "r", tags=("train/loss",)):
    return Finding(kind, severity, run, tuple(tags), step, None, {}, f"{kind} here", "")


@pytest.mark.parametrize("row", KINDS, ids=lambda r: r.name)
def test_a_finding_counts_against_the_health_component_its_row_names(row):
    # One series with no role: the run has data (a run without any has no score at all), but no component
    # is judged from it, so only what the finding counts against shows.
    steps = np.arange(10, dtype=np.int64)
    other = {"x": series_features("x", Series(steps, steps.astype(float), np.ones(10)), None, 0)}
    components = health([_finding(row.name)], other, {"x": (None, 0)}).components
    if row.component is None:
        assert all(score is None for score in components.values())  # nothing judged, nothing counted
    else:
        assert components[row.component] == 70  # one warning: 100 - 30
        assert all(score is None for name, score in components.items() if name != row.component)


@pytest.mark.parametrize("row", KINDS, ids=lambda r: r.name)
def test_markdown_and_html_explain_a_kind_with_its_registry_meaning(row):
    assert f"what it means: {row.meaning}" in finding_markdown(_finding(row.name), explain=True)


def test_a_finding_without_a_step_sorts_after_those_with_one_in_every_view():
    spike = _finding("loss_spike", "warning", 700, run="a")
    truncated = _finding("data_integrity", "warning", None, run="a", tags=())
    critical = _finding("divergence", "critical", 900, run="a")
    info = _finding("plateau", "info", 10, run="a")
    found = [info, truncated, spike, critical]
    expected = [critical, spike, truncated, info]
    assert sorted(found, key=finding_order) == expected
    assert order_findings(found) == expected  # the app's findings pane
    assert worst([truncated, spike]) is spike  # the run table, Markdown and HTML "worst finding"
    assert sorted(found, key=timeline_order) == [info, spike, critical, truncated]  # the story, in time


def test_run_detectors_and_watch_use_the_same_order_and_identity():
    data = next(d for d in _labelled_run_data() if d.name == ".")
    found = run_detectors(data)
    assert found == sorted(found, key=finding_order)

    run = Run(name="r", path=Path("r"))
    reports = {"r": report_for(run, [_finding("loss_spike", step=700), _finding("plateau", "info", None)])}
    logdir = SimpleNamespace(runs={"r": run})
    watcher = Watcher(logdir, lambda run, context: reports[run.name])
    first = watcher.poll()
    assert first == sorted(first, key=finding_order) and len(first) == 2
    assert watcher.seen == {finding_key(f) for f in first}
    # The same finding with a newer message is not news; a second spike at a later step is.
    newer = replace(first[0], message="loss_spike here, now 3.1x its baseline")
    reports["r"].findings = [newer, _finding("loss_spike", step=900)]
    watcher.logdir.refresh = lambda cancel=None: ["r"]
    assert [f.step for f in watcher.poll()] == [900]


def test_severities_are_worst_first():
    assert SEVERITIES == ("critical", "warning", "info")


# ---- the headline loss, chosen once ------------------------------------------------------------------------


@pytest.fixture
def several_losses(tmp_path):
    """A run logging three loss-like tags: a per-epoch loss (20 points), the step loss (200) and a val loss."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "run"))
    for s in range(200):
        writer.add_scalar("train/loss", 2.0 * np.exp(-s / 80) + 0.1, s, walltime=1.7e9 + s)
        if s % 10 == 9:
            writer.add_scalar("epoch_loss", 2.0 * np.exp(-s / 80) + 0.12, s, walltime=1.7e9 + s)
            writer.add_scalar("val/loss", 2.0 * np.exp(-s / 80) + 0.3, s, walltime=1.7e9 + s)
    writer.close()
    return tmp_path


def _html_loss_tag(html: str) -> str:
    row = html[html.index('<table class="runs">') :]
    return re.search(r'<svg class="spark".*?</svg><code class="muted">(.*?)</code>', row).group(1)


def test_the_html_sparkline_and_the_app_show_the_same_loss(several_losses):
    report = tbtriage.diagnose(str(several_losses))
    (run,) = report.runs
    assert run.primary_tags.loss == "train/loss"  # the most-sampled loss, not the alphabetically first
    html = render_html(report.runs, logdir=str(several_losses))
    assert _html_loss_tag(html) == run.primary_tags.loss

    app = make_app(several_losses, follow=False, clock=fixed_clock)

    async def scenario(app, pilot):
        assert app.store.reports["run"].primary_tags == run.primary_tags
        assert app.view.current_tag == _html_loss_tag(html)
        app.open_dashboard("run")
        await pilot.pause()
        assert app.screen.tags_by_role()["train_loss"] == [run.primary_tags.train_loss]
        assert app.screen.tags_by_role()["val_loss"] == [run.primary_tags.val_loss]

    drive(app, scenario)
