"""`tbtriage export LOGDIR`: scalars as CSV or JSON lines, streamed one run at a time.

A file (`--out`, or a pipe) gets every name exactly as the event files hold it; a terminal gets run and tag
names with control, bidi and invisible characters shown as escapes (`text.clean`), so a hostile tag cannot
retitle the pane or clear the screen.
"""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_USAGE = 0, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .storage_args import LOGDIR_HELP, add_storage_arguments

    parser.add_argument("logdir", metavar="LOGDIR", help="a logdir, a run directory or one event file" + LOGDIR_HELP)
    add_storage_arguments(parser)
    parser.add_argument("--runs", metavar="REGEX", help="only runs whose name (path relative to LOGDIR) matches")
    parser.add_argument("--tags", metavar="REGEX", help="only tags that match")
    parser.add_argument("--format", choices=("csv", "jsonl"), default="csv", help="output format (default csv)")
    parser.add_argument(
        "--smoothing",
        metavar="W",
        type=float,
        help="add a `smoothed` column: TensorBoard's debiased EMA with weight W in [0, 0.999]",
    )
    parser.add_argument("--out", metavar="FILE", help="write here instead of standard output")


def _for_terminal(items):
    from tbtriage.analysis.text import clean

    for run, tag, series in items:
        yield clean(run), clean(tag), series


def run(args: argparse.Namespace) -> int:
    from tbtriage.analysis.export import iter_series, write_csv, write_jsonl
    from tbtriage.analysis.logdir import LogdirError
    from tbtriage.analysis.output_guard import refuse_output
    from tbtriage.analysis.text import clean

    if args.smoothing is not None and not 0 <= args.smoothing <= 0.999:  # also refuses nan
        return _fail(f"--smoothing {args.smoothing}: must be between 0 and 0.999")
    from .storage_args import is_url, storage_options

    try:
        options = storage_options(args)
    except ValueError as exc:
        return _fail(str(exc))
    if options and not is_url(args.logdir):
        return _fail(
            f"--storage-option applies to a URL LOGDIR (s3://..., gs://...), not to the local path {args.logdir}"
        )
    if args.out and not is_url(args.logdir):
        refused = refuse_output(args.out, args.logdir)
        if refused:
            return _fail(f"--out {refused}")
    warnings: list[str] = []
    try:
        items = iter_series(args.logdir, runs=args.runs, tags=args.tags, warnings=warnings, storage_options=options)
    except LogdirError as exc:
        return _fail(str(exc))
    write = write_csv if args.format == "csv" else write_jsonl
    try:
        if args.out:
            # surrogateescape: a name that is not UTF-8 reaches the file as its own bytes, never a crash.
            with open(args.out, "w", encoding="utf-8", errors="surrogateescape", newline="") as out:
                rows = write(out, items, args.smoothing)
        else:
            rows = write(sys.stdout, _for_terminal(items) if sys.stdout.isatty() else items, args.smoothing)
            sys.stdout.flush()
    except LogdirError as exc:
        return _fail(str(exc))
    except BrokenPipeError:
        raise  # `| head` closed the pipe: the CLI ends quietly
    except OSError as exc:
        return _fail(f"{args.out}: {exc.strerror or exc}")
    for w in warnings:
        print(f"tbtriage export: warning: {clean(w)}", file=sys.stderr)
    if args.out:
        print(f"wrote {rows:,} rows to {args.out}", file=sys.stderr)
    return EXIT_OK


def _fail(message: str) -> int:
    print(f"tbtriage export: {message}", file=sys.stderr)
    return EXIT_USAGE
