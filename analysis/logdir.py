"""`analysis.load`: a logdir of runs, read fast, and refreshed by reading only what was appended."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .datamodel import Run
from .decode import choose_kernel
from .discover import find_runs
from .reader import RunReader, is_event_file
from .storage import LOCAL, LocalStorage, RemoteStorage, StorageError, is_url

if TYPE_CHECKING:
    from .spill import Spill

#: Most threads reading runs at once: beyond a few, the disk and the GIL-bound numpy parts limit.
MAX_READ_THREADS = 4
#: Runs read at once from an object store, whatever the kernel: each read waits on a request (a store's latency
#: per request, where a disk answers at once), and waiting threads release the GIL. s3fs allows 10 at once.
STORE_READ_THREADS = 8


def read_threads(kernel, runs: int) -> int:
    """How many runs to read at once: one per core with the compiled (GIL-free) kernel, else one."""
    from . import _kernel

    if kernel is _kernel or runs < 2:
        return 1  # the pure path holds the GIL: threads would only take turns
    return max(
        1,
        min(
            len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
            MAX_READ_THREADS,
            runs,
        ),
    )


class LogdirError(Exception):
    """The logdir cannot be read at all (missing, not a directory or event file)."""


@dataclass
class Logdir:
    """Every run under `path`, keyed by its path relative to `path`.

    `path` is a local Path, or the URL as given for a logdir on a store (then `storage` reads it).
    """

    path: Path | str
    runs: dict[str, Run] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # runs that vanished (renamed or deleted), in order
    run_filter: str | None = None
    kernel: str | None = None
    _readers: dict[str, RunReader] = field(default_factory=dict, repr=False)
    _single_file: Path | None = field(default=None, repr=False)
    storage: LocalStorage | RemoteStorage = field(default=LOCAL, repr=False)
    #: Where the columns of runs read into memory go (mapped back from a private temporary file) once read: the
    #: app's, so that a logdir larger than memory opens without the decoded-column cache (`--no-cache`).
    spill: Spill | None = field(default=None, repr=False)

    def refresh(
        self,
        cancel: Callable[[], bool] | None = None,
        on_run: Callable[[str, Run], None] | None = None,
    ) -> list[str]:
        """Read appended bytes, new files and new runs; the names of the runs that changed.

        `on_run(name, run)` is called as each changed run is read (a UI can show it at once);
        `cancel()` is polled between runs and between chunks of a file: once it returns True
        reading stops at a record boundary, and the next refresh continues from there.
        """
        found = self.find()
        # One decision for the whole refresh: 50 runs of 10 MB are a 500 MB read, worth compiling for.
        kernel = choose_kernel(self.pending_bytes(), self.kernel)
        try:
            return self._read_runs(found, kernel, cancel, on_run)
        finally:
            if self.spill is not None:
                self.spill.flush()

    def _read_runs(
        self,
        found: dict[str, Any],
        kernel,
        cancel: Callable[[], bool] | None,
        on_run: Callable[[str, Run], None] | None,
    ) -> list[str]:
        changed = []

        def read(name: str) -> bool:
            if cancel is not None and cancel():
                return False
            reader = self._readers[name]
            if not reader.read(kernel, cancel):
                return False
            if self.spill is not None:
                self.spill.add(reader)
            return True

        threads = read_threads(kernel, len(found))
        if self.storage.objects:
            threads = min(STORE_READ_THREADS, len(found))
        if threads > 1:
            # The compiled kernel releases the GIL: runs decode side by side, one per core.
            with ThreadPoolExecutor(threads, thread_name_prefix="tbtriage-read") as pool:
                results = {name: pool.submit(read, name) for name in found}
                for name, result in results.items():
                    if result.result():
                        changed.append(name)
                        if on_run is not None:
                            on_run(name, self.runs[name])
            return changed
        for name in found:
            if cancel is not None and cancel():
                break
            if read(name):
                changed.append(name)
                if on_run is not None:
                    on_run(name, self.runs[name])
        return changed

    def find(self, listed: tuple[dict[str, Any], str | None] | None = None) -> dict[str, Any]:
        """Discover the runs (the run filter applied) and give each new one its reader, reading nothing; run name
        -> run directory. A run gone since the last look is dropped (noted in `removed`). `listed`: what the
        caller's `discover` just gave (the logdir is not walked, nor its warnings noted, a second time)."""
        found, only = self.discover() if listed is None else listed
        if self.run_filter:
            pattern = re.compile(self.run_filter)
            found = {k: v for k, v in found.items() if pattern.search(k)}
        # A run renamed or deleted since the last refresh is gone: listing it (the old name still
        # holding the data) would show one run twice, or a run that no longer exists.
        for name in [n for n in self._readers if n not in found]:
            del self._readers[name]
            self.runs.pop(name, None)
            self.removed.append(name)
        for name, path in found.items():
            if name not in self._readers:
                self._readers[name] = RunReader(
                    self.path, path, name, kernel=self.kernel, only_file=only, storage=self.storage
                )
                self.runs[name] = self._readers[name].run
        return found

    def discover(self) -> tuple[dict[str, Any], str | None]:
        """(run name -> run directory, the one file to read when the logdir is a single event file).

        A local logdir is walked (`find_runs`); a store is listed in one call. LogdirError (one line)
        when it cannot be listed.
        """
        found: dict[str, Any]
        only: str | None = None
        if isinstance(self.storage, RemoteStorage):
            try:
                if self._single_file is not None:
                    directory, only = self.storage.list_single()
                    found = {".": directory}
                else:
                    found = self.storage.find_runs(self.warnings)
            except StorageError as exc:
                raise LogdirError(str(exc)) from None
        elif self._single_file is not None:
            found = {".": self._single_file.parent}
            only = self._single_file.name
        else:
            if not Path(self.path).is_dir():
                raise LogdirError(f"{self.path}: no such directory")
            found = find_runs(Path(self.path), self.warnings)
        return found, only

    def pending_bytes(self) -> int:
        """Bytes not read yet across the known runs."""
        return sum(r.pending_bytes() for r in self._readers.values())


def load(
    path,
    runs: str | None = None,
    kernel: str | None = None,
    cancel: Callable[[], bool] | None = None,
    on_run: Callable[[str, Run], None] | None = None,
    storage_options: dict[str, Any] | None = None,
    spill: Spill | None = None,
) -> Logdir:
    """Read every run under `path` (a logdir, a run directory or a single event file; or an fsspec URL).

    `runs` keeps only runs whose name matches the regex; `kernel` forces "pure" or "jit";
    `cancel` and `on_run` are passed to `Logdir.refresh`; `storage_options` go to fsspec for a URL
    (credentials, endpoint_url, ...); `spill` takes the columns the decoded-column cache does not map
    (`Logdir.spill`).
    Raises LogdirError (one clear line) when `path` does not exist or holds nothing readable.
    """
    compile_filter("--runs", runs)
    logdir = open_logdir(path, runs=runs, kernel=kernel, storage_options=storage_options)
    logdir.spill = spill
    logdir.refresh(cancel=cancel, on_run=on_run)
    return logdir


def open_logdir(
    path, runs: str | None = None, kernel: str | None = None, storage_options: dict[str, Any] | None = None
) -> Logdir:
    """A Logdir for `path` (a local path or an fsspec URL), checked but not read yet; LogdirError (one line)."""
    if is_url(str(path)):
        try:
            storage = RemoteStorage(str(path), storage_options)
            kind = storage.kind()
            if kind == "missing":
                raise LogdirError(f"{path}: {storage.missing()}")
        except StorageError as exc:
            raise LogdirError(str(exc)) from None
        logdir = Logdir(path=str(path), run_filter=runs, kernel=kernel, storage=storage)
        if kind == "file":
            if not is_event_file(str(path).rstrip("/").rsplit("/", 1)[-1]):
                raise LogdirError(f"{path}: not an event file (the name has no 'tfevents')")
            logdir._single_file = Path(storage.root)
        return logdir
    p, single = check_logdir(path)
    logdir = Logdir(path=p, run_filter=runs, kernel=kernel)
    if single:
        logdir._single_file = p
    return logdir


def check_logdir(path) -> tuple[Path, bool]:
    """`path` as a Path, and whether it is a single event file; LogdirError (one line) when it cannot be read.

    The one check of a local LOGDIR argument: `load`, `export` and every command word its problems the same way.
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise LogdirError(f"{path}: no such file or directory")
    if p.is_file():
        if not is_event_file(p.name):
            raise LogdirError(f"{path}: not an event file (the name has no 'tfevents')")
        return p, True
    if not p.is_dir():
        raise LogdirError(f"{path}: not a directory")
    try:
        with os.scandir(p) as entries:
            next(entries, None)
    except OSError as exc:  # an unreadable logdir is bad input, not an empty one
        raise LogdirError(f"{path}: cannot list ({exc.strerror or exc})") from None
    return p, False


def compile_filter(option: str, pattern: str | None) -> re.Pattern[str] | None:
    """A `--runs`/`--tags` regex compiled, or LogdirError naming the option and the problem."""
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise LogdirError(f"{option} {pattern!r}: not a valid regular expression ({exc})") from None
