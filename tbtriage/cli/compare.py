"""`tbtriage compare LOGDIR RUN_A RUN_B [RUN...]`: why is one run worse than another.

The settings that differ, best and final metrics side by side, where the headline curves part, and the
engine's explanation when one run is sick and the other its healthy twin (`analysis.side_by_side`).
Markdown by default, `--format json` one object (docs/compare.schema.json). Only the named runs are read.

Exit codes: 0 compared; 2 bad usage, an unreadable logdir or an unknown run (one line on stderr).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

EXIT_OK, EXIT_USAGE = 0, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logdir", metavar="LOGDIR", help="directory of runs")
    parser.add_argument("runs", metavar="RUN", nargs="+", help="two or more runs (their paths under LOGDIR)")
    parser.add_argument("--format", choices=("md", "json"), default="md", help="md (default) or json")
    parser.add_argument("--config", metavar="FILE", help="config file (default ~/.config/tbtriage/config.toml)")


def _fail(message: str) -> int:
    print(f"tbtriage compare: {message}", file=sys.stderr)
    return EXIT_USAGE


def run(args: argparse.Namespace) -> int:
    from tbtriage.analysis import __version__
    from tbtriage.analysis.config import ConfigError, load_config
    from tbtriage.analysis.discover import find_runs
    from tbtriage.analysis.engine import diagnose
    from tbtriage.analysis.json_safe import dumps
    from tbtriage.analysis.logdir import LogdirError
    from tbtriage.analysis.render_markdown import code, side_by_side_markdown
    from tbtriage.analysis.side_by_side import side_by_side

    from .report import unreadable

    names = list(dict.fromkeys(args.runs))
    if len(names) < 2:
        return _fail("name two or more different runs to compare")
    logdir = Path(args.logdir).expanduser()
    if not logdir.exists():
        return _fail(f"{args.logdir}: no such file or directory")
    problem = unreadable(logdir)
    if problem:
        return _fail(f"{args.logdir}: {problem}")
    only = "^(?:" + "|".join(re.escape(n) for n in names) + ")$"
    try:
        result = diagnose(str(args.logdir), config=load_config(args.config), runs=only)
    except (ConfigError, LogdirError) as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"{exc.filename or args.logdir}: {exc.strerror or exc}")
    reports = {r.name: r for r in result.runs}
    missing = [n for n in names if n not in reports]
    if missing:
        known = sorted(find_runs(logdir)) if logdir.is_dir() else []
        listed = ", ".join(known[:8]) + (", …" if len(known) > 8 else "")
        return _fail(f"no run named {missing[0]!r} under {args.logdir}" + (f" (runs: {listed})" if known else ""))
    pair = side_by_side([reports[n] for n in names])
    if args.format == "json":
        text = dumps({"tool": "tbtriage", "version": __version__, "logdir": str(args.logdir), **pair.to_dict()}, 1)
    else:
        lines = [f"# tbtriage compare: {code(args.logdir)}", "", *side_by_side_markdown(pair, heading="##")]
        text = "\n".join(lines).rstrip()
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return EXIT_OK
