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
    # (directory, its real path, its path relative to the logdir): a directory that is not a symlink is its parent's
    # real path and its own name, so only the logdir and symlinks are resolved (`realpath` is a system call a path
    # component, and the health index lists every run before a warm reopen's first frame).
    stack: list[tuple[str, str | None, str]] = [(os.fspath(logdir), None, ".")]
    while stack:
        d, real, rel = stack.pop()
        if real is None:
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
                    child_real = None if e.is_symlink() else os.path.join(real, e.name)
                    subdirs.append((e.path, child_real, e.name if rel == "." else f"{rel}/{e.name}"))
                elif is_event_file(e.name) and e.is_file():
                    has_events = True
            except OSError:
                continue
        if has_events:
            name = escape_name(rel)
            if name != rel:
                warnings.append(f"{name}: the directory name is not valid UTF-8; its other bytes are shown as \\xNN")
            runs[name] = Path(d)
        # Siblings differ in their last name only: sorted by their relative paths, they come in their paths' order.
        stack.extend(sorted(subdirs, key=lambda sub: sub[2], reverse=True))
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
