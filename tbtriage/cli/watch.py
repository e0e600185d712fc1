"""`tbtriage watch LOGDIR`: follow live runs and print each new finding once; optionally run a hook per finding.

    tbtriage watch runs/ --interval 30 --on-alert 'curl -s -d @- https://chat.example/hook'

Reads only appended bytes each poll. Ctrl-C stops it cleanly (exit 0). `--once` does one pass and exits,
for scripts and tests.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from datetime import datetime

EXIT_OK, EXIT_USAGE = 0, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tbtriage.analysis.watch import DEFAULT_INTERVAL_S, ON_ALERT_TIMEOUT_S

    from .storage_args import LOGDIR_HELP, add_storage_arguments

    parser.add_argument("logdir", metavar="LOGDIR", help="directory of runs to follow" + LOGDIR_HELP)
    add_storage_arguments(parser)
    parser.add_argument(
        "--interval",
        metavar="S",
        type=float,
        default=DEFAULT_INTERVAL_S,
        help=f"seconds between polls (default {DEFAULT_INTERVAL_S:g})",
    )
    parser.add_argument(
        "--on-alert",
        metavar="CMD",
        help="shell command run for each new finding, with the finding as one line of JSON on stdin",
    )
    parser.add_argument(
        "--alert-timeout",
        metavar="S",
        type=float,
        default=ON_ALERT_TIMEOUT_S,
        help=f"kill an --on-alert command still running after S seconds (default {ON_ALERT_TIMEOUT_S:g})",
    )
    parser.add_argument("--once", action="store_true", help="one pass, print what is found, exit")
    parser.add_argument("--config", metavar="FILE", help="config file (default ~/.config/tbtriage/config.toml)")
    parser.add_argument("--runs", metavar="REGEX", help="only runs whose name matches REGEX")


def _fail(message: str) -> int:
    print(f"tbtriage watch: {message}", file=sys.stderr)
    return EXIT_USAGE


def format_finding(finding) -> str:
    """One terminal line per finding; names and messages from event files have unsafe characters escaped."""
    from tbtriage.analysis.text import clean, step

    stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    at = f" @ {step(finding.step)}" if finding.step is not None else ""
    tags = f" [{', '.join(clean(t) for t in finding.tags)}]" if finding.tags else ""
    return f"{stamp}  {finding.severity.upper():8} {finding.kind:20} {clean(finding.run)}{at}{tags}: {clean(finding.message)}"


def run(args: argparse.Namespace) -> int:
    from tbtriage.analysis.config import ConfigError, load_config
    from tbtriage.analysis.logdir import LogdirError, load
    from tbtriage.analysis.watch import Watcher, alert_payload, engine_analyzer, run_on_alert

    # `not x > 0` and not `x <= 0`: float("nan") compares false both ways and must be refused too.
    if not 0 < args.interval < math.inf:
        return _fail(f"--interval {args.interval:g}: must be a positive number of seconds")
    if not 0 < args.alert_timeout < math.inf:
        return _fail(f"--alert-timeout {args.alert_timeout:g}: must be a positive number of seconds")
    from .storage_args import check_logdir_arg, is_url, storage_options

    try:
        options = storage_options(args)
    except ValueError as exc:
        return _fail(str(exc))
    problem = check_logdir_arg(args.logdir, options) if options else None
    if problem:
        return _fail(problem)
    try:
        config = load_config(args.config)
        logdir = load(args.logdir, runs=args.runs, storage_options=options)
    except (ConfigError, LogdirError) as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"{exc.filename or args.logdir}: {exc.strerror or exc}")

    for warning in logdir.warnings:  # skipped folders: said once, as report does
        print(f"tbtriage watch: warning: {warning}", file=sys.stderr)
    watcher = Watcher(logdir, engine_analyzer(config))
    try:
        while True:
            try:
                new = watcher.poll()
            except LogdirError as exc:
                if not is_url(args.logdir):  # the directory went away between polls
                    return _fail(str(exc))
                # A store that is unreachable for a while (network, throttling): said, and tried again next poll,
                # with everything read so far kept.
                print(f"tbtriage watch: warning: {exc}; trying again in {args.interval:g} s", file=sys.stderr)
                new = []
            for finding in new:
                print(format_finding(finding), flush=True)
                if args.on_alert:
                    result = run_on_alert(args.on_alert, alert_payload(finding, str(args.logdir)), args.alert_timeout)
                    if result.timed_out:
                        print(f"tbtriage watch: --on-alert killed after {args.alert_timeout:g} s", file=sys.stderr)
                    elif result.error or result.returncode:
                        why = result.error or f"exit status {result.returncode}"
                        print(f"tbtriage watch: --on-alert failed ({why})", file=sys.stderr)
            if args.once:
                return EXIT_OK
            if watcher.polls == 1:  # said after the first pass, so what follows is news
                print(
                    f"watching {args.logdir}: {len(logdir.runs)} runs, every {args.interval:g} s (Ctrl-C to stop)",
                    file=sys.stderr,
                    flush=True,
                )
            time.sleep(args.interval)
    except KeyboardInterrupt:
        print("tbtriage watch: stopped", file=sys.stderr)
        return EXIT_OK
