"""`tbtriage demo [DIR]`: write a demo logdir with known pathologies, then open the app on it.

Without the app (`--no-app`, no terminal, or no Textual) it prints what it wrote and the morning report.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

EXIT_OK, EXIT_USAGE = 0, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dir",
        metavar="DIR",
        nargs="?",
        help="where to write it (default ./tbtriage-demo, or a temporary directory when . is not writable); "
        "an existing DIR must be empty or a previous demo",
    )
    parser.add_argument(
        "--no-app", action="store_true", help="print a summary and the report instead of opening the app"
    )


def _app_module():
    """The app's command module, or None when the TUI is not available (not installed, or no Textual)."""
    try:
        return importlib.import_module("tbtriage.cli.app")
    except ImportError:
        return None


def open_app(logdir: Path) -> int | None:
    """Open the app on `logdir` exactly as `tbtriage LOGDIR` would; None when there is no app to open."""
    app = _app_module()
    if app is None:
        return None
    parser = argparse.ArgumentParser(prog="tbtriage")
    app.add_arguments(parser)
    return int(app.run(parser.parse_args([str(logdir)])) or 0)


def print_summary(logdir: Path, seconds: float, out=None) -> None:
    """What was written and read, what was planted, then the ranked report in Markdown."""
    import tbtriage
    from tbtriage.analysis.compare import compare
    from tbtriage.analysis.demo import PLANTED
    from tbtriage.analysis.render_markdown import render_markdown
    from tbtriage.analysis.text import clean

    out = out or sys.stdout
    loaded = tbtriage.load(logdir)
    points = sum(len(s) for run in loaded.runs.values() for s in run.scalars.values())
    print(
        f"Wrote a demo logdir to {clean(logdir)} in {seconds:.2f} s: {len(loaded.runs)} runs, {points} scalar points.",
        file=out,
    )
    print("Planted (the report below should find each):", file=out)
    for planted in PLANTED:
        at = f" at step {planted.step}" if planted.step is not None else ""
        print(f"  - {planted.run}: {planted.kind}{at} ({planted.note})", file=out)
    print(file=out)
    report = tbtriage.diagnose(loaded)
    print(render_markdown(report.runs, logdir=str(logdir), comparison=compare(report.runs)), file=out, end="")
    print(f"\nOpen it: tbtriage {clean(logdir)}", file=out)


def has_terminal() -> bool:
    """Whether there is a terminal to draw on: in CI, a pipe or cron an app would hang or draw into a file."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def run(args: argparse.Namespace) -> int:
    from tbtriage.analysis.demo import DemoDirError, default_demo_dir, write_demo

    target = Path(args.dir).expanduser() if args.dir else default_demo_dir()
    started = time.perf_counter()
    try:
        written = write_demo(target)
    except DemoDirError as exc:
        print(f"tbtriage demo: {exc}", file=sys.stderr)
        return EXIT_USAGE
    seconds = time.perf_counter() - started
    if not args.no_app and not has_terminal():
        print("tbtriage demo: no terminal; printing the report instead of opening the app", file=sys.stderr)
    elif not args.no_app:
        status = open_app(written.path)
        if status is not None:
            return status
        print("tbtriage demo: the app is not available here; printing a summary instead", file=sys.stderr)
    print_summary(written.path, seconds)
    return EXIT_OK
