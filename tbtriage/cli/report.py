"""`tbtriage report LOGDIR`: the morning report (health and findings for every run) as Markdown, JSON or HTML.

Thin over `analysis`: diagnose, compare, render. For cron and CI, `--fail-on critical|warning` exits 1
when any finding is at or above that severity. The logdir is read only: `--out` may not point into it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
FORMATS = ("md", "json", "html")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .storage_args import LOGDIR_HELP, add_storage_arguments

    parser.add_argument(
        "logdir", metavar="LOGDIR", help="directory of runs (or one run, or one event file)" + LOGDIR_HELP
    )
    parser.add_argument("--format", choices=FORMATS, default="md", help="md (default), json or html")
    parser.add_argument("--out", metavar="FILE", help="write the report to FILE instead of stdout")
    parser.add_argument(
        "--fail-on", choices=("critical", "warning"), help="exit 1 when a finding is at or above this severity"
    )
    parser.add_argument("--config", metavar="FILE", help="config file (default ~/.config/tbtriage/config.toml)")
    parser.add_argument("--runs", metavar="REGEX", help="only runs whose name matches REGEX")
    parser.add_argument(
        "--filter",
        metavar="EXPR",
        help="only runs whose values pass EXPR, as the app's / filter reads it: 'val/acc>0.9', "
        "'best:eval/accuracy>=0.8 resnet', 'top 10 by train/loss' (ranked best first)",
    )
    parser.add_argument(
        "--workers",
        metavar="N",
        type=_positive,
        help="processes for the analysis (default: every core once there are many runs; 1: this process only)",
    )
    parser.add_argument(
        "--group", metavar="REGEX", help="group runs by this regex (named group 'group', else the first group)"
    )
    add_storage_arguments(parser)
    parser.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="read and analyse the runs on a Dask cluster: a scheduler (tcp://host:8786) or 'local' "
        "(worker processes on this machine); the report is the same",
    )
    parser.add_argument(
        "--dask-workers", metavar="N", type=int, help="worker processes for --dask local (default: one per core)"
    )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of processes (1 or more)")
    return value


def _fail(message: str) -> int:
    print(f"tbtriage report: {message}", file=sys.stderr)
    return EXIT_USAGE


def unreadable(path: Path) -> str | None:
    """Why `path` cannot be read at all (None when it can): the one line a cron mail should carry."""
    try:
        if path.is_dir():
            with os.scandir(path) as entries:
                next(entries, None)
        elif not path.is_file():
            # A FIFO (or a device) would block the read forever: only regular files are opened.
            return "not a directory or a regular file"
        else:
            with open(path, "rb") as f:
                f.read(1)
    except PermissionError:
        return "permission denied"
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _on_dask(args: argparse.Namespace, config, options: dict):
    """The report computed on a Dask cluster (progress on stderr as tasks finish), or the one line why not."""
    import time

    from tbtriage.analysis.fleet import FleetError, connect, fleet_diagnose

    said = [0.0]

    def progress(stage: str, done: int, tasks: int, runs: int) -> None:
        # At most one line a second (and each stage's last): a thousand tasks are not a thousand lines.
        if done == tasks or time.monotonic() - said[0] >= 1.0:
            said[0] = time.monotonic()
            print(f"tbtriage report: {stage} {done}/{tasks} tasks, {runs} runs", file=sys.stderr, flush=True)

    try:
        client, cluster = connect(args.dask, args.dask_workers)
    except FleetError as exc:
        return str(exc)
    try:
        return fleet_diagnose(
            str(args.logdir), client, config=config, runs=args.runs, storage_options=options, progress=progress
        )
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def fails(reports, threshold: str | None) -> bool:
    """Whether any finding is at or above `threshold` (None never fails): --fail-on X fails on X and worse."""
    from tbtriage.analysis.findings import severity_rank

    if threshold is None:
        return False
    return any(severity_rank(f.severity) <= severity_rank(threshold) for r in reports for f in r.findings)


def report_dict(report, comparison, pairs=()) -> dict:
    """The engine's JSON contract plus, per run, its best metric, the groups, and each sick run beside its
    healthy twin (fields added, none renamed)."""
    data = report.to_dict()
    for run in data.get("runs", []):
        best = comparison.best.get(run.get("run"))
        run["best_metric"] = (
            {"tag": best.tag, "value": best.value, "step": best.step, "direction": best.direction} if best else None
        )
    data["groups"] = [
        {
            "group": g.name,
            "runs": list(g.runs),
            "metric_tag": g.metric_tag,
            "best_metric": {"mean": g.best_metric.mean, "std": g.best_metric.std, "finite": g.best_metric.finite},
            "final_loss": {"mean": g.final_loss.mean, "std": g.final_loss.std, "finite": g.final_loss.finite},
            "worst_health": g.worst_health,
            "worst_run": g.worst_run,
            "findings": g.severity_counts,
        }
        for g in comparison.groups
    ]
    if comparison.hparams is not None:
        data["hparams"] = comparison.hparams.rows
    data["comparisons"] = [pair.to_dict() for pair in pairs]
    return data


def run(args: argparse.Namespace) -> int:
    from tbtriage.analysis.pipeline import full_collections_held

    with full_collections_held():  # the verdicts live to the end: no full collection walks them over and over
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from tbtriage.analysis.compare import compare, compile_group_pattern
    from tbtriage.analysis.config import ConfigError, load_config
    from tbtriage.analysis.engine import diagnose
    from tbtriage.analysis.json_safe import dumps
    from tbtriage.analysis.logdir import LogdirError
    from tbtriage.analysis.output_guard import refuse_output
    from tbtriage.analysis.run_filter import FilterError, RunScalars, apply_filter, parse_filter
    from tbtriage.analysis.side_by_side import twin_pairs

    from .storage_args import check_logdir_arg, is_url, storage_options

    try:
        options = storage_options(args)
    except ValueError as exc:
        return _fail(str(exc))
    problem = check_logdir_arg(args.logdir, options)
    if problem:
        return _fail(problem)
    refused = refuse_output(args.out, Path(args.logdir).expanduser()) if args.out and not is_url(args.logdir) else None
    if refused:
        return _fail(f"--out {refused}")
    try:
        group_pattern = compile_group_pattern(args.group)
    except re.error as exc:
        return _fail(f"--group {args.group!r}: not a valid regular expression ({exc})")
    try:
        config = load_config(args.config)
        if args.dask:
            report = _on_dask(args, config, options)
            if isinstance(report, str):
                return _fail(report)
        else:
            # The report reads of each run only what `fleet.slim_run` keeps, unless a filter reads other values.
            slim = not (args.filter and parse_filter(args.filter).by_value)
            report = diagnose(
                str(args.logdir),
                config=config,
                runs=args.runs,
                storage_options=options,
                workers=args.workers,
                slim=slim,
            )
    except (ConfigError, LogdirError) as exc:
        return _fail(str(exc))
    except FilterError as exc:
        return _fail(f"--filter {args.filter!r}: {exc}")
    except PermissionError as exc:
        return _fail(f"{exc.filename or args.logdir}: permission denied")
    except OSError as exc:
        return _fail(f"{exc.filename or args.logdir}: {exc.strerror or exc}")

    if args.filter:
        try:
            flt = parse_filter(args.filter)
            by_name = {r.name: r for r in report.runs}
            report.runs = [by_name[n] for n in apply_filter(flt, [RunScalars.of(r) for r in report.runs])]
        except FilterError as exc:
            return _fail(f"--filter {args.filter!r}: {exc}")
    # The hparams the engine read for twins (`twins.RunSettings`): each run's config files are not read twice.
    comparison = compare(report.runs, group_pattern, getattr(report.settings, "hparams", None))
    pairs = twin_pairs(report.runs, report.settings)
    warnings = list(getattr(report.logdir, "warnings", []))
    if args.format == "json":
        data = report_dict(report, comparison, pairs)
        data["warnings"] = warnings  # folders skipped (unreadable, not UTF-8...): md and html say it too
        text = dumps(data, indent=1) + "\n"
    elif args.format == "html":
        from tbtriage.analysis.render_html import render_html

        text = render_html(report.runs, logdir=str(args.logdir), comparison=comparison, warnings=warnings, pairs=pairs)
    else:
        from tbtriage.analysis.render_markdown import render_markdown

        text = render_markdown(
            report.runs, logdir=str(args.logdir), comparison=comparison, warnings=warnings, pairs=pairs
        )

    if args.out:
        try:
            Path(args.out).expanduser().write_text(text, encoding="utf-8", errors="surrogateescape")
        except OSError as exc:
            return _fail(f"--out {args.out}: cannot write ({exc.strerror or exc})")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return EXIT_FINDINGS if fails(report.runs, args.fail_on) else EXIT_OK
