"""`tbtriage [LOGDIR]`: open the terminal app on a logdir (the current directory by default)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tbtriage.themes import THEME_ORDER

EXIT_USAGE, EXIT_INTERNAL = 2, 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .storage_args import LOGDIR_HELP, add_storage_arguments

    parser.add_argument(
        "logdir", metavar="LOGDIR", nargs="?", default=".", help="directory of runs (default: .)" + LOGDIR_HELP
    )
    add_storage_arguments(parser)
    parser.add_argument("--theme", metavar="NAME", help=f"colour theme: {', '.join(THEME_ORDER)} (t cycles them)")
    parser.add_argument("--ascii", action="store_true", help="no braille or box-drawing glyphs (old terminals)")
    parser.add_argument("--config", metavar="FILE", help="config file (default: $XDG_CONFIG_HOME/tbtriage/config.toml)")
    parser.add_argument(
        "--no-follow", dest="follow", action="store_false", help="start with live follow paused (f toggles)"
    )


def run(args: argparse.Namespace) -> int:
    from tbtriage.analysis.config import ConfigError

    from .storage_args import check_logdir_arg, is_url, storage_options

    try:
        options = storage_options(args)
    except ValueError as exc:
        print(f"tbtriage: {exc}", file=sys.stderr)
        return EXIT_USAGE
    # A URL is listed and read by the app's loader: a store problem is one line in its status bar.
    logdir: Path | str = args.logdir
    if options and not is_url(args.logdir):
        print(f"tbtriage: {check_logdir_arg(args.logdir, options)}", file=sys.stderr)
        return EXIT_USAGE
    if not is_url(args.logdir):
        logdir = Path(args.logdir).expanduser()
        if not logdir.exists():
            print(f"tbtriage: {args.logdir}: no such directory", file=sys.stderr)
            return EXIT_USAGE
        if not logdir.is_dir() and not logdir.is_file():  # a FIFO would block the first read forever
            print(f"tbtriage: {args.logdir}: not a directory or a regular file", file=sys.stderr)
            return EXIT_USAGE
    from tbtriage.tui.app import make_app

    try:
        app = make_app(
            logdir,
            theme=args.theme,
            ascii=args.ascii,
            config=args.config,
            follow=args.follow,
            storage_options=options,
        )
    except (ConfigError, ValueError) as exc:
        print(f"tbtriage: {exc}", file=sys.stderr)
        return EXIT_USAGE
    app.run()
    # Textual ends the app on an unhandled error and has shown it; the shell must not see success.
    return EXIT_INTERNAL if app.return_code else 0
