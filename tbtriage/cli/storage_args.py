"""`--storage-option KEY=VALUE` for every command that takes a LOGDIR, which may be an fsspec URL.

tbtriage report s3://bucket/runs --storage-option endpoint_url=http://127.0.0.1:9000 --storage-option anon=true
"""

from __future__ import annotations

import argparse
from typing import Any

LOGDIR_HELP = "; or a URL: s3://bucket/prefix, gs://..., az://..., hdfs://..., simplecache::s3://... (the remote extra)"


def add_storage_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage-option",
        action="append",
        metavar="KEY=VALUE",
        dest="storage_option",
        help="fsspec option for a URL LOGDIR (repeatable): endpoint_url=..., key=..., secret=..., anon=true, "
        "profile=...; a VALUE that is JSON is read as JSON",
    )


def storage_options(args: argparse.Namespace) -> dict[str, Any]:
    """The parsed `--storage-option`s; ValueError (one line) on a malformed one."""
    from tbtriage.analysis.storage import parse_storage_options

    return parse_storage_options(getattr(args, "storage_option", None))


def is_url(text: str) -> bool:
    from tbtriage.analysis.storage import is_url as _is_url

    return _is_url(text)


def check_logdir_arg(logdir: str, options: dict[str, Any]) -> str | None:
    """Why a LOGDIR argument cannot be used (the line after `tbtriage CMD: `), or None.

    A URL is checked when it is listed (one request); a local path here, before anything is read.
    """
    if is_url(logdir):
        return None
    if options:
        return f"--storage-option applies to a URL LOGDIR (s3://..., gs://...), not to the local path {logdir}"
    from pathlib import Path

    from .report import unreadable

    path = Path(logdir).expanduser()
    if not path.exists():
        return f"{logdir}: no such file or directory"
    problem = unreadable(path)
    return f"{logdir}: {problem}" if problem else None
