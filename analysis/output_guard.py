"""The one rule every writer obeys: the logdir is read-only to tbtriage, and no event file is ever overwritten.

`report --out`, `export --out` and the app's `e` export all ask `refuse_output` before they open a file.
"""

from __future__ import annotations

import os
from pathlib import Path

from .reader import is_event_file


def _inside(path: Path, directory: Path) -> bool:
    try:
        path.relative_to(directory)
    except ValueError:
        return False
    return True


def refuse_output(out: str | os.PathLike[str], logdir: str | os.PathLike[str] | None) -> str | None:
    """Why writing `out` would touch what tbtriage reads (one line), or None when it is safe.

    Paths are compared after resolving symlinks, so a link pointing into the logdir is caught too.
    `logdir` may be a directory or a single event file (then its directory is what is protected).
    """
    target = Path(out).expanduser()
    try:
        real = target.resolve()
    except (OSError, RuntimeError):  # a symlink loop: nothing sensible to write to
        return f"{out}: cannot resolve the path"
    if is_event_file(real.name) or is_event_file(target.name):
        return f"{out}: is an event file, which tbtriage never overwrites; choose another path"
    if logdir is not None:
        root = Path(logdir).expanduser()
        try:
            root = root.resolve()
        except (OSError, RuntimeError):
            return None
        protected = root if root.is_dir() or not root.exists() else root.parent
        if _inside(real, protected):
            return f"{out}: inside the logdir {logdir}, which tbtriage never writes to; choose another path"
    if real.exists() and not real.is_file() and not real.is_char_device():
        # A FIFO would block the command forever; a directory cannot be written as a file.
        return f"{out}: not a regular file"
    return None
