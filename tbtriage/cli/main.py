"""The `tbtriage` command line: a thin dispatcher over `analysis/` and the app.

Each subcommand lives in its own module exposing `add_arguments(parser)` and `run(args) -> int`,
imported only when that subcommand is used, so `tbtriage report` never pays for Textual and
`tbtriage` (the app) never pays for the LLM.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

#: subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("tbtriage.cli.demo", "write a demo logdir with known pathologies, then open the app on it"),
    "report": ("tbtriage.cli.report", "the morning report: health and findings for every run"),
    "diagnose": ("tbtriage.cli.diagnose", "explain one run's findings with an offline llama.cpp model"),
    "watch": ("tbtriage.cli.watch", "follow live runs and alert on each new finding"),
    "export": ("tbtriage.cli.export", "stream scalars as CSV or JSON lines"),
}

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def _version() -> str:
    from tbtriage.analysis import __version__

    return __version__


def build_parser(argv: list[str]) -> tuple[argparse.ArgumentParser, str | None]:
    """The parser for `argv`; only the chosen subcommand's module is imported."""
    parser = argparse.ArgumentParser(
        prog="tbtriage",
        description="Triage TensorBoard training runs in the terminal: which are healthy, which are not, and why.",
    )
    parser.add_argument("--version", action="version", version=f"tbtriage {_version()}")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    if chosen in COMMANDS:
        sub = parser.add_subparsers(dest="command", metavar="COMMAND")
        for name, (module, help_) in COMMANDS.items():
            p = sub.add_parser(name, help=help_, description=help_)
            if name == chosen:
                importlib.import_module(module).add_arguments(p)
        return parser, chosen
    # No subcommand: `tbtriage [LOGDIR]` opens the app.
    parser.epilog = "commands: " + ", ".join(COMMANDS) + " (tbtriage COMMAND --help)"
    importlib.import_module("tbtriage.cli.app").add_arguments(parser)
    return parser, None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, chosen = build_parser(argv)
    args = parser.parse_args(argv)
    module = COMMANDS[chosen][0] if chosen else "tbtriage.cli.app"
    try:
        return int(importlib.import_module(module).run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `tbtriage export ... | head`: the reader has all it wanted
        # Point stdout at /dev/null so the interpreter's final flush does not complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
