"""Find the runs under a logdir: every directory that directly holds an event file (TensorBoard's rule).

Runs are named by their path relative to the logdir ("." when the logdir itself holds event files).
Symlinked directories are followed once (loops are cut by real path); unreadable directories are
reported and skipped, never fatal.
"""

from __future__ import annotations

import os
from pathlib import Path

from .names import escape_name, is_event_file


def find_runs(logdir: Path, warnings: list[str] | None = None) -> dict[str, Path]:
    """Map run name -> directory for every run under `logdir`, sorted by name."""
    warnings = warnings if warnings is not None else []
    runs: dict[str, Path] = {}
    seen: set[str] = set()
    stack = [logdir]
    while stack:
        d = stack.pop()
        try:
            real = os.path.realpath(d)
        except OSError:
            continue
        if real in seen:
            continue  # a symlink loop, or a directory reached twice
        seen.add(real)
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except PermissionError:
            warnings.append(f"{d}: permission denied, skipped")
            continue
        except OSError as exc:
            warnings.append(f"{d}: cannot list ({exc.strerror or exc}), skipped")
            continue
        has_events = False
        subdirs = []
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=True):
                    subdirs.append(Path(e.path))
                elif is_event_file(e.name) and e.is_file():
                    has_events = True
            except OSError:
                continue
        if has_events:
            rel = os.path.relpath(d, logdir).replace(os.sep, "/")
            name = escape_name(rel)
            if name != rel:
                warnings.append(f"{name}: the directory name is not valid UTF-8; its other bytes are shown as \\xNN")
            runs[name] = Path(d)
        stack.extend(sorted(subdirs, reverse=True))
    return dict(sorted(runs.items()))


def runs_from_listing(root: str, directories) -> dict[str, str]:
    """`find_runs` for a store listed in one call: map run name -> directory for every directory (of
    `directories`, store paths) that directly holds an event file, named by its path relative to `root`."""
    runs: dict[str, str] = {}
    prefix = root.rstrip("/") + "/"
    for d in directories:
        if d == root.rstrip("/"):
            runs["."] = d
        elif d.startswith(prefix):
            runs[d[len(prefix) :]] = d
    return dict(sorted(runs.items()))
