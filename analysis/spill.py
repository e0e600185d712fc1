"""Columns spilled to a private temporary file and memory-mapped back: points a process holds without holding them
in its memory.

One place writes scalar columns (steps int64, wall times and values float64) back to back into a file and maps
them back as read-only arrays: `report`'s pool workers hand their verdicts' series to the parent this way
(`pipeline`), and the app keeps the columns of runs the decoded-column cache does not map (`--no-cache`, a cache
write that failed, points appended while following) in a `Spill`. A file is unlinked as soon as it is mapped (the
mapping keeps its pages until the last view goes), and a `Spill` writes each batch in a private directory of its
own, removed as soon as the batch is mapped: nothing is left on disk once the process ends, even killed, save a
batch being written at that moment. It is made under the system's temporary directory (`$TMPDIR`), never in the
logdir (read only) nor in the cache. Mapped pages count in a process's memory only while touched, and
`cache.release` lets go of them again.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from .datamodel import Series

if TYPE_CHECKING:
    import numpy as np

    from .reader import RunReader

    Columns = tuple[np.ndarray, np.ndarray, np.ndarray]

# numpy is imported where columns are written or mapped: the app makes its spill before its first frame, which has none.
#: The dtypes of a series' three columns, in the order a spill file holds them.
DTYPES = ("int64", "float64", "float64")
#: A `Spill` writes the runs handed to it once this many bytes of columns wait in memory (and on `flush`): one file
#: and one mapping per batch, not per run, for logdirs of thousands of small runs.
BATCH_BYTES = 32 << 20


def write_columns(f, columns: Iterable[Columns]) -> list[int]:
    """Write each (steps, wall times, values) to the binary file `f`, back to back; the length of each."""
    import numpy as np

    lengths = []
    for triple in columns:
        for column, dtype in zip(triple, DTYPES):
            # Through the file's own buffer: numpy's `tofile` duplicates the descriptor, seeks and stats it for each
            # column (a dozen system calls each, ~0.1 ms of a pool worker's time a run).
            f.write(np.ascontiguousarray(column, dtype).data)
        lengths.append(len(triple[0]))
    return lengths


def map_columns(path: str | os.PathLike[str], lengths: Sequence[int]) -> list[Columns]:
    """The columns `write_columns` wrote to `path`, as read-only views of the file mapped; the file is removed (the
    mapping keeps it until its last view goes)."""
    import numpy as np

    from .cache import map_file  # off the app's path to its first frame

    try:
        with open(path, "rb") as f:
            view = map_file(f.fileno()) if os.fstat(f.fileno()).st_size else memoryview(b"")
    finally:
        os.unlink(path)
    at, out = 0, []
    for n in lengths:
        triple = []
        for dtype in DTYPES:
            triple.append(np.frombuffer(view, dtype, n, at))
            at += 8 * n
        out.append((triple[0], triple[1], triple[2]))
    return out


def is_mapped(column: np.ndarray) -> bool:
    """Whether `column` views a mapped file (a spill file or a cache entry) rather than memory of its own."""
    import numpy as np

    base: object = column
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, memoryview)


class Spill:
    """Where the columns of readers (`reader.RunReader`) are moved to, `BATCH_BYTES` at a
    time (each batch through a private temporary directory, removed once mapped): `add` a reader once it has read, `flush` when a read of the logdir is done, `close` at the end. Safe to
    call from the threads that read runs side by side. After `close`, columns stay where they are."""

    def __init__(self, batch_bytes: int = BATCH_BYTES) -> None:
        self.batch_bytes = batch_bytes
        self.directory: str | None = None  # the last batch's directory (removed once its file was mapped)
        self.files = 0  # spill files written (each mapped, then unlinked)
        self._pending: dict[int, RunReader] = {}  # id -> reader, in the order added
        self._pending_bytes = 0
        self._lock = threading.Lock()
        self._closed = False

    def add(self, reader: RunReader) -> None:
        """Move `reader`'s columns held in memory to the spill (with the next batch)."""
        nbytes = sum(24 * len(col.steps) for col in reader._cols.values() if not is_mapped(col.values))
        if not nbytes:
            return
        with self._lock:
            if self._closed:
                return
            if id(reader) not in self._pending:
                self._pending[id(reader)] = reader
                self._pending_bytes += nbytes
            if self._pending_bytes >= self.batch_bytes:
                self._write()

    def flush(self) -> None:
        """Write whatever waits."""
        with self._lock:
            if not self._closed:
                self._write()

    def close(self) -> None:
        """Spill no more: later `add`s keep columns in memory (the columns already mapped stay readable)."""
        with self._lock:
            self._closed = True
            self._pending.clear()

    def _write(self) -> None:
        readers, self._pending, self._pending_bytes = list(self._pending.values()), {}, 0
        cols = [
            (reader, tag, col)
            for reader in readers
            for tag, col in reader._cols.items()
            if len(col.steps) and not col.new and not is_mapped(col.values)
        ]
        if not cols:
            return
        # A temporary directory inside a local logdir ($TMPDIR pointed there): the logdir is never written to.
        from .output_guard import refuse_output  # it imports the reader, whose columns come here anyway

        base = tempfile.gettempdir()
        allowed: dict[str, bool] = {}
        for reader in readers:
            where = str(reader.logdir)
            if where not in allowed:
                inside = refuse_output(os.path.join(base, "tbtriage-spill"), where) is not None
                allowed[where] = reader.storage.objects or not inside
        cols = [c for c in cols if allowed[str(c[0].logdir)]]
        if not cols:
            return
        try:
            directory = self.directory = tempfile.mkdtemp(prefix="tbtriage-spill-", dir=base)
        except OSError:
            return  # no temporary directory: the columns stay in memory
        path = os.path.join(directory, f"{self.files}.cols")
        self.files += 1
        try:
            with open(path, "wb") as f:
                lengths = write_columns(f, ((col.steps, col.walls, col.values) for _, _, col in cols))
            mapped = map_columns(path, lengths)
        except OSError:  # a full or unwritable temporary disk: the columns stay in memory
            return
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        for (reader, tag, col), (steps, walls, values) in zip(cols, mapped):
            col.steps, col.walls, col.values = steps, walls, values
            if tag in reader.run.scalars:  # tensors of another plugin have columns but are no scalars
                reader.run.scalars[tag] = Series(steps, walls, values)
