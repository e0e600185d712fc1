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
    "compare": ("tbtriage.cli.compare", "two or more runs side by side: differing settings, metrics, where they part"),
}

#: The commands that read a logdir (and the app): each takes --no-cache.
READING = ("report", "diagnose", "watch", "export", "demo")

#: 1 is reserved for "findings at or above --fail-on": a cron job must tell a failing run from a failing tool.
EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


def _version() -> str:
    from tbtriage.analysis import __version__

    return __version__


class _VersionAction(argparse.Action):
    """argparse's `version` action, with the version read only when asked for (not on every command line)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show program's version number and exit"
        )

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"tbtriage {_version()}")
        parser.exit()


def build_parser(argv: list[str]) -> tuple[argparse.ArgumentParser, str | None]:
    """The parser for `argv`; only the chosen subcommand's module is imported."""
    parser = argparse.ArgumentParser(
        prog="tbtriage",
        description="Triage TensorBoard training runs in the terminal: which are healthy, which are not, and why.",
    )
    parser.add_argument("--version", action=_VersionAction)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    if chosen in COMMANDS:
        sub = parser.add_subparsers(dest="command", metavar="COMMAND")
        for name, (module, help_) in COMMANDS.items():
            p = sub.add_parser(name, help=help_, description=help_)
            if name == chosen:
                importlib.import_module(module).add_arguments(p)
                if name in READING:
                    add_cache_option(p)
        return parser, chosen
    # No subcommand: `tbtriage [LOGDIR]` opens the app.
    parser.epilog = "commands: " + ", ".join(COMMANDS) + " (tbtriage COMMAND --help)"
    importlib.import_module("tbtriage.cli.app").add_arguments(parser)
    add_cache_option(parser)
    return parser, None


def add_cache_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="decode every event file afresh, neither using nor writing the decoded-column cache "
        "(also TBTRIAGE_NO_CACHE=1)",
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, chosen = build_parser(argv)
    args = parser.parse_args(argv)
    module = COMMANDS[chosen][0] if chosen else "tbtriage.cli.app"
    no_cache, before = getattr(args, "no_cache", False), os.environ.get("TBTRIAGE_NO_CACHE")
    if no_cache:  # the reader reads it, in this process and in any worker process it starts
        os.environ["TBTRIAGE_NO_CACHE"] = "1"
    try:
        return int(importlib.import_module(module).run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `tbtriage export ... | head`: the reader has all it wanted
        # Point stdout at /dev/null so the interpreter's final flush does not complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line and exit 3, never a traceback
        where = write_crash_report(argv)
        print(
            f"tbtriage: internal error ({type(exc).__name__}: {str(exc)[:200]}); this is a bug in tbtriage, "
            f"not in your data: the details are in {where}",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    finally:
        if no_cache and before is None:
            os.environ.pop("TBTRIAGE_NO_CACHE", None)
        elif no_cache and before is not None:
            os.environ["TBTRIAGE_NO_CACHE"] = before


def write_crash_report(argv: list[str]) -> str:
    """Write the current exception's traceback under the cache directory; where it went (or why not)."""
    import time
    import traceback

    text = f"tbtriage {_version()} {' '.join(argv)!r}\n\n{traceback.format_exc()}"
    from tbtriage.analysis.decode import cache_dir

    for directory in (cache_dir() / "crashes", __import__("tempfile").gettempdir()):
        try:
            path = os.path.join(str(directory), f"tbtriage-crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt")
            os.makedirs(directory, exist_ok=True)
            with open(path, "w", encoding="utf-8", errors="backslashreplace") as f:
                f.write(text)
            return path
        except OSError:
            continue
    return "nowhere (the cache and temporary directories are not writable)"


if __name__ == "__main__":
    sys.exit(main())
