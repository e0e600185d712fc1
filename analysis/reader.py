"""Read one run (a directory of event files) into a `Run`, and keep reading it as it grows.

A `RunReader` remembers, per file, the offset after the last complete record, so `read()` only
ever reads appended bytes and new files. Several files are merged in name order (TensorBoard's
order: the names start with the creation time). When a tag's steps go backwards (a restart from a
checkpoint), the newer points win: every older point at or after the new step is dropped, which is
what TensorBoard shows, and the restart is recorded as a `run_restart` note.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import _kernel
from .datamodel import HistogramSeries, Note, Run, Series, TextEntry
from .decode import Batch, ScanResult, TagTable, choose_kernel, scan_file
from .events import decode_record
from .names import decode_name, escape_name, is_event_file  # noqa: F401 - their home before `names`

#: Bytes kept at each end of what was read from a file (its first records, and the last one read with
#: its checksum), re-read each poll: a file rewritten in place differs there, even when it has the same
#: file_version record and first steps, or grew longer. Two small reads a file a poll.
FINGERPRINT_BYTES = 64
#: Wall times past this (2**32 s: year 2106) are no clock a writer has: a corrupt or hostile value.
#: They are kept in the series (data is never altered) but never set the run's last activity, which
#: would make every other run look "stalled" for billions of minutes.
MAX_PLAUSIBLE_WALL_TIME = float(1 << 32)


@dataclass
class _Tally:
    """One recurring problem in one file: a note whose count and byte range grow in place."""

    count: int
    first: int | None
    last: int | None
    message: str  # the first occurrence's own line
    note_index: int


@dataclass
class _FileState:
    name: str
    index: int
    offset: int = 0
    records: int = 0
    problems_seen: set = field(default_factory=set)
    tallies: dict = field(default_factory=dict)  # problem class -> _Tally
    noted_empty: bool = False
    noted_unreadable: bool = False
    noted_shrunk: bool = False
    identity: tuple | None = None  # (storage identity, version, fingerprint) of what was read (see FileStat)
    restarts: list | None = None  # [times, first from, first resume, points dropped, note index]


class _Column:
    """One tag's points: resolved arrays plus chunks appended since the last resolution.

    Which file each point came from (for restart notes) is kept as segments, (first index, file
    index), not per point: 24 bytes a point is the budget.
    """

    __slots__ = ("steps", "walls", "values", "seg_starts", "seg_files", "new", "from_tensor_only")

    def __init__(self) -> None:
        self.steps = np.empty(0, np.int64)
        self.walls = np.empty(0, np.float64)
        self.values = np.empty(0, np.float64)
        self.seg_starts = np.empty(0, np.int64)
        self.seg_files = np.empty(0, np.int32)
        self.new: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = []
        self.from_tensor_only = True

    def file_of(self, index: int) -> int:
        """Index of the file the point at `index` was read from."""
        return int(self.seg_files[np.searchsorted(self.seg_starts, index, side="right") - 1])

    def keep(self, mask: np.ndarray) -> None:
        """Keep only the points where `mask` is True (segments follow their points)."""
        kept_before = np.concatenate(([0], np.cumsum(mask)))
        starts = kept_before[self.seg_starts]
        # A segment left empty starts where the next one does: keep the last of equal starts.
        live = np.append(starts[1:] != starts[:-1], True) if starts.size else starts.astype(bool)
        self.seg_starts, self.seg_files = starts[live], self.seg_files[live]
        self.steps, self.walls, self.values = self.steps[mask], self.walls[mask], self.values[mask]

    def purge(self, step: int) -> int:
        """Drop points at or after `step` (a SessionLog START); returns how many went."""
        self.flush_new()
        mask = self.steps < step
        dropped = int(mask.size - mask.sum())
        if dropped:
            self.keep(mask)
        return dropped

    def flush_new(self) -> None:
        if not self.new:
            return
        starts, files = [self.seg_starts], [self.seg_files]
        at = self.steps.shape[0]
        for s, _, _, fi in self.new:
            starts.append(np.array([at], np.int64))
            files.append(np.array([fi], np.int32))
            at += s.shape[0]
        self.seg_starts, self.seg_files = np.concatenate(starts), np.concatenate(files)
        self.steps = np.concatenate([self.steps] + [c[0] for c in self.new])
        self.walls = np.concatenate([self.walls] + [c[1] for c in self.new])
        self.values = np.concatenate([self.values] + [c[2] for c in self.new])
        self.new = []


def resolve_overlaps(steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mask of points to keep, indices where steps went backwards).

    A point survives when every later point has a larger step: a later point at the same or an
    earlier step supersedes it (TensorBoard's preemption rule, applied to the whole column at once).
    """
    n = steps.shape[0]
    if n < 2 or bool(np.all(steps[1:] > steps[:-1])):
        return np.ones(n, bool), np.empty(0, np.int64)
    suffix_min = np.minimum.accumulate(steps[::-1])[::-1]
    keep = np.ones(n, bool)
    keep[:-1] = steps[:-1] < suffix_min[1:]
    back = np.nonzero(steps[1:] < steps[:-1])[0] + 1
    return keep, back


#: The longest cycle of tags `_periodic_groups` looks for (a run logging more tags each step is sorted by tag).
MAX_PERIOD = 256


def _periodic_groups(tags: np.ndarray) -> list[tuple[int, slice]] | None:
    """(tag id, strided slice) of each tag, in tag id order, when `tags` repeats one cycle of distinct tags (a loop
    that logs the same tags in the same order every step, the usual shape): the tag's points in record order, as
    the stable sort by tag gives them, without sorting or gathering. None when `tags` is not one such cycle over and
    over (at least twice; a cut-off last cycle is fine)."""
    n = tags.size
    again = np.flatnonzero(tags[1 : min(n, MAX_PERIOD + 1)] == tags[0])
    if not again.size:
        return None
    period = int(again[0]) + 1
    head = tags[:period]
    whole = n - n % period
    if n < 2 * period or np.unique(head).size != period:
        return None
    if not (bool(np.all(tags[:whole].reshape(-1, period) == head)) and bool(np.all(tags[whole:] == head[: n - whole]))):
        return None
    return [(int(head[j]), slice(j, None, period)) for j in np.argsort(head, kind="stable").tolist()]


class RunReader:
    """Incremental reader of one run directory."""

    def __init__(
        self,
        logdir: Path | str,
        path: Path | str,
        name: str,
        kernel: str | None = None,
        verify: bool = True,
        only_file: str | None = None,
        storage=None,
    ):
        from .storage import LOCAL

        self.storage = LOCAL if storage is None else storage  # where the files live: local disk or a store URL
        self.logdir = logdir
        self.only_file = only_file  # read just this file of the directory (a single-file "logdir")
        self.path = path
        self.name = name
        self.kernel_pref = kernel
        self.verify = verify
        # A run on a store is named by its URL (what a person would type to find it).
        self.run = Run(name=name, path=self.storage.url(path) if self.storage.objects else path)
        self._files: dict[str, _FileState] = {}
        self._cols: dict[str, _Column] = {}
        self._hists: dict[str, list] = {}
        self._plugins: dict[str, str] = {}
        self._tags: TagTable | None = None
        self._kernel = None
        self._restart_keys: set = set()
        self._escaped_noted = 0
        #: What the decoded-column cache did for this run's first read: None until then; "off", "miss",
        #: "stale", "corrupt" (read cold, then cached), "hit" (mapped, nothing decoded) or "extended"
        #: (mapped, then the appended bytes decoded). See `cache.py`.
        self.cache_state: str | None = None
        self._opened = False  # whether read() has run once (the read that caches)
        #: Whether the columns the first read caches are then viewed from the cache entry (memory bounded by the
        #: page cache) rather than kept in the heap (`cache.store`'s `map_back`).
        self.map_cached = True
        #: Whether the first read writes the run's cache entry at once; False leaves it to `store_cache` (a pool's
        #: worker, which writes it once it has judged the run, with the verdict in it: one file a run, not two).
        self.store_after_read = True
        self._store_due = False

    # -- discovery of files -------------------------------------------------------------------
    def list_files(self) -> list[str]:
        """The run's event files as they are now, sorted (OSError when its directory cannot be listed)."""
        if self.only_file is not None:
            return [self.only_file] if self.storage.is_file(self._file(self.only_file)) else []
        return self.storage.list_files(self.path)

    def _list_files(self) -> list[str]:
        try:
            return self.list_files()
        except OSError as exc:
            self._note("data_integrity", self.name, f"cannot list run directory: {exc.strerror or exc}")
            return []

    def _file(self, fname: str):
        """The path of one of this run's files, as its storage names it."""
        return self.storage.join(self.path, fname)

    def _rel(self, fname: str) -> str:
        fname = escape_name(fname)
        return fname if self.name == "." else f"{self.name}/{fname}"

    def _note(self, kind: str, file: str, message: str, offset=None, step=None, severity="warning") -> None:
        self.run.notes.append(Note(kind, file, message, offset, step, severity))

    def _tally(self, st: _FileState, what: str, offset: int | None, message: str, severity="warning") -> None:
        """Note a problem once per file and class (`what`, a plural noun): a flood of 90 damaged records
        is one line with the count and the byte range, not 90 findings."""
        t = st.tallies.get(what)
        if t is None:
            st.tallies[what] = _Tally(1, offset, offset, message, len(self.run.notes))
            self._note("data_integrity", self._rel(st.name), message, offset, severity=severity)
            return
        t.count += 1
        if offset is not None:
            t.first = offset if t.first is None else min(t.first, offset)
            t.last = offset if t.last is None else max(t.last, offset)
        span = f" between bytes {t.first} and {t.last}" if t.first is not None else ""
        self.run.notes[t.note_index] = Note(
            "data_integrity",
            self._rel(st.name),
            f"{t.count} {what}{span}; the first: {t.message}",
            t.first,
            None,
            severity,
        )

    # -- reading ------------------------------------------------------------------------------
    def _resume_from_cache(self) -> None:
        """Before the first read: take this run's state from the cache when its entry still matches the files."""
        if self.cache_state is None:
            from . import cache

            self.cache_state = cache.restore(self)

    def pending_bytes(self, resume: bool = True) -> int:
        """Bytes of the run's files not read yet; `resume=False` leaves the column cache alone (all of a file
        not read in this process counts), for a caller whose runs another process reads and caches first."""
        if resume:
            self._resume_from_cache()
        total = 0
        for fname in self._list_files():
            st = self._files.get(fname)
            try:
                size = self.storage.stat(self._file(fname)).size
            except OSError:
                continue
            total += max(0, size - (st.offset if st else 0))
        return total

    def read(self, kernel=None, cancel: Callable[[], bool] | None = None) -> bool:
        """Read what was appended since the last call; True if anything new was read (or came from the cache).

        The first call resumes from the decoded-column cache where it can, and caches what it read.
        """
        first, self._opened = not self._opened, True
        self._resume_from_cache()
        changed = self._read_appended(kernel, cancel)
        if first and self.cache_state != "off" and (changed or self.cache_state != "hit"):
            if self.cache_state == "hit":
                self.cache_state = "extended"
            if cancel is None or not cancel():
                self._store_due = True
                if self.store_after_read:
                    self.store_cache()
        return changed or (first and self.cache_state == "hit")

    def store_cache(self, verdict: bytes = b"") -> bool:
        """Write the cache entry the first read made due (`cache.store`), with the run's cached `verdict`
        (`verdict_cache.entry_bytes`) in it when given; False when none was due or it was not written."""
        if not self._store_due:
            return False
        self._store_due = False
        from . import cache

        return cache.store(self, self.map_cached, verdict)

    def _read_appended(self, kernel=None, cancel: Callable[[], bool] | None = None) -> bool:
        """Read what was appended since the last call; True if anything new was read.

        `kernel` is the decoding module to use (see `decode.choose_kernel`); by default it is
        chosen from this run's own unread bytes. `cancel` is polled as reading goes: once it
        returns True the read stops at a record boundary, keeping what was read, and the next
        call continues from there.
        """
        names = self._list_files()
        if self.storage.objects:  # config files on a store are read here, with the events (run_config)
            self.run.config_texts = self.storage.config_texts(self.path)
        stats = {}
        for fname in names:
            try:
                stats[fname] = self.storage.stat(self._file(fname))
            except OSError:
                continue
        replaced = self._replaced(names, stats)
        if replaced:
            self._restart_from_scratch(*replaced)
        todo = []
        for fname in names:
            st = self._files.get(fname)
            if st is None:
                st = self._files[fname] = _FileState(fname, len(self._files))
                self.run.files.append(escape_name(fname))
            if fname not in stats:
                continue
            size = stats[fname].size
            if size > st.offset:
                todo.append((st, size))
            elif size == 0 and not st.noted_empty and fname != names[-1]:
                st.noted_empty = True
                self._note("data_integrity", self._rel(fname), "empty file (0 bytes): no events in it", severity="info")
        if not todo:
            return bool(replaced)
        if kernel is None:
            kernel = choose_kernel(sum(size - st.offset for st, size in todo), self.kernel_pref)
        if self._kernel is not kernel:
            # The intern table lives in the kernel's own containers: rebuild it for the new one.
            old = self._tags.raw_names() if self._tags else []
            self._tags = TagTable(jit=kernel is not _kernel)
            for raw in old:
                self._tags.intern_bytes(kernel, raw)
            self._kernel = kernel
        changed = False
        last_name = names[-1] if names else None
        for st, size in todo:
            if cancel is not None and cancel():
                break
            changed |= self._read_file(st, size, is_last=st.name == last_name, cancel=cancel)
        if changed:
            self._finish()
        return changed

    def _replaced(self, names: list[str], stats: dict) -> tuple[str, str] | None:
        """(file, what happened) when a file already read is no longer what was read, else None.

        Event files only ever grow. A file that was removed or renamed away, replaced by another one
        (a new inode: write-then-rename), cut shorter, or whose first bytes changed (rewritten in
        place) would otherwise leave stale points mixed with new ones.

        On an object store an object that grew is a new object (a new ETag): its first bytes are
        checked only then, and one that got shorter is reported once and keeps what was read, never
        re-read blindly (a store mid-rewrite can show a short object for a moment).
        """
        for fname, st in self._files.items():
            if st.offset == 0 or st.identity is None:
                continue
            stat = stats.get(fname)
            if stat is None:
                return fname, "was removed or renamed"
            identity, version, fingerprint = st.identity
            if stat.identity != identity:
                return fname, "was replaced by another file"
            if stat.size < st.offset and self.storage.objects:
                if not st.noted_shrunk:
                    st.noted_shrunk = True
                    self._note(
                        "data_integrity",
                        self._rel(fname),
                        f"object shrank from {st.offset} to {stat.size} bytes after it was read (rewritten or "
                        "truncated on the store); what was read is kept, and reading goes on once it is longer than that",
                    )
                continue
            if stat.size < st.offset:
                return fname, f"shrank from {st.offset} to {stat.size} bytes (truncated or rewritten)"
            if self.storage.objects and stat.version == version:
                continue  # the very object that was read: its bytes cannot have changed
            if self._fingerprint(fname, st.offset) != fingerprint:
                return fname, "was rewritten (the bytes already read changed)"
        return None

    def _fingerprint(self, fname: str, offset: int) -> bytes | None:
        """The first and the last FINGERPRINT_BYTES of the file's first `offset` bytes."""
        return self.storage.fingerprint(self._file(fname), offset, FINGERPRINT_BYTES)

    def _restart_from_scratch(self, fname: str, what: str) -> None:
        """Forget everything read from this run and read it again from the start, saying why."""
        run = self.run
        for part in (run.files, run.notes):
            part.clear()
        for table in (run.scalars, run.histograms, run.texts, run.hparams, run.skipped):
            table.clear()
        run.last_step = run.last_wall_time = None
        run.bytes_read = 0
        self._files.clear()
        self._cols.clear()
        self._hists.clear()
        self._plugins.clear()
        self._restart_keys.clear()
        self._escaped_noted = 0
        self._note(
            "data_integrity",
            self._rel(fname),
            f"{fname} {what} after it was read; the run was read again from its files as they are now",
        )

    def _read_file(self, st: _FileState, size: int, is_last: bool, cancel=None) -> bool:
        result = ScanResult(offset=st.offset, records=st.records)
        assert self._tags is not None, "the intern table is made with the kernel choice, before any file is read"
        got = False
        try:
            path = self._file(st.name)
            for batch in scan_file(
                path, st.offset, self._kernel, self._tags, result, self.verify, size, cancel, self.storage.open
            ):
                self._take(batch, st)
                got = True
        except OSError as exc:
            if not st.noted_unreadable:
                st.noted_unreadable = True
                self._note("data_integrity", self._rel(st.name), f"cannot read: {exc.strerror or exc}")
            return got
        self.run.bytes_read += max(0, result.offset - st.offset)
        for offset, problem in result.problems:
            if offset not in st.problems_seen:
                st.problems_seen.add(offset)
                if offset == 0 and result.records == 0 and "no intact record" in problem:
                    problem = "not a TensorBoard event file (no valid record from byte 0); skipped"
                elif offset > 0:
                    problem += "; intact records before it kept"
                self._tally(st, "damaged stretches", offset, problem)
        if (
            result.truncated
            and not result.cancelled
            and not is_last
            and result.offset < size
            and (st.name, "tail") not in st.problems_seen
        ):
            st.problems_seen.add((st.name, "tail"))
            self._note(
                "data_integrity",
                self._rel(st.name),
                f"file ends in an incomplete record at byte {result.offset} (the writer stopped mid-write); "
                f"{result.records} intact records kept",
                result.offset,
                severity="info",
            )
        if is_last:
            partial = result.truncated and not result.cancelled and result.offset < size
            self.run.partial_tail = (self._rel(st.name), result.offset) if partial else None
        st.offset = result.offset
        st.records = result.records
        try:
            stat = self.storage.stat(path)
            st.identity = (stat.identity, stat.version, self._fingerprint(st.name, st.offset))
        except OSError:
            st.identity = None
        return got

    def _take(self, batch: Batch, st: _FileState) -> None:
        """Fold one batch into the columns, in record order."""
        run = self.run
        steps, walls, values, tags, srcs, recs = (
            batch.steps,
            batch.walls,
            batch.values,
            batch.tags,
            batch.srcs,
            batch.recs,
        )
        purges: list[tuple[int, int]] = []
        if batch.others:
            extra = []
            for rec, offset, payload, malformed in batch.others:
                try:
                    dec = None if malformed else decode_record(payload, self._plugins)
                except Exception as exc:  # noqa: BLE001 - one record the decoder cannot take is one note, never the run
                    self._tally(
                        st,
                        "records that could not be decoded",
                        offset,
                        f"record at byte {offset} could not be decoded ({type(exc).__name__}: {exc}); skipped",
                    )
                    continue
                if dec is None:
                    self._tally(
                        st,
                        "records that are not Events",
                        offset,
                        f"record at byte {offset} has a valid checksum but is not an Event; skipped",
                    )
                    continue
                for problem in dec.problems:
                    self._tally(
                        st, "values that could not be decoded", offset, f"record at byte {offset}: {problem}; skipped"
                    )
                self._saw_wall_time(np.array([dec.wall_time]))
                for tag, value, from_tensor in dec.scalars:
                    assert self._tags is not None  # batches come only from _read_file
                    tid = self._tags.intern(self._kernel, tag)
                    extra.append((rec, tid, dec.step, dec.wall_time, value, int(from_tensor)))
                for tag, limits, counts, lo, hi, num, total in dec.histograms:
                    self._hists.setdefault(tag, []).append(
                        (rec, dec.step, dec.wall_time, limits, counts, lo, hi, num, total)
                    )
                for tag, text in dec.texts:
                    run.texts.setdefault(tag, []).append(TextEntry(dec.step, dec.wall_time, text))
                run.hparams.update(dec.hparams)
                for kind, n in dec.skipped.items():
                    run.skipped[kind] = run.skipped.get(kind, 0) + n
                if dec.purge:
                    purges.append((rec, dec.step))
            if extra:
                e = np.array([x[:3] for x in extra], np.int64).reshape(-1, 3)
                f = np.array([x[3:5] for x in extra], np.float64).reshape(-1, 2)
                recs = np.concatenate([recs, e[:, 0]])
                order = np.argsort(recs, kind="stable")
                recs = recs[order]
                tags = np.concatenate([tags, e[:, 1]])[order]
                steps = np.concatenate([steps, e[:, 2]])[order]
                walls = np.concatenate([walls, f[:, 0]])[order]
                values = np.concatenate([values, f[:, 1]])[order]
                srcs = np.concatenate([srcs, np.array([x[5] for x in extra], np.int8)])[order]
        self._saw_wall_time(walls)
        if not purges:
            self._append(steps, walls, values, tags, srcs, st.index)
            return
        start = 0
        for rec, step in purges:
            cut = int(np.searchsorted(recs, rec))
            self._append(
                steps[start:cut], walls[start:cut], values[start:cut], tags[start:cut], srcs[start:cut], st.index
            )
            start = cut
            self._purge(step, st)
        self._append(steps[start:], walls[start:], values[start:], tags[start:], srcs[start:], st.index)

    def _saw_wall_time(self, walls: np.ndarray) -> None:
        """Advance the run's last activity to the newest plausible wall time in `walls`.

        NaN, infinite, zero and absurd times (past MAX_PLAUSIBLE_WALL_TIME) say nothing about when
        the run last wrote: one of them must neither hide later times nor freeze the clock.
        """
        if not walls.size:
            return
        lo, hi = float(walls.min()), float(walls.max())  # NaN in either when any is NaN: the comparison fails
        if 0 < lo and hi < MAX_PLAUSIBLE_WALL_TIME:
            w = hi  # every time plausible (the usual case): no mask, no copy
        else:
            ok = plausible_wall_times(walls)
            if not ok.size:
                return
            w = float(ok.max())
        if self.run.last_wall_time is None or w > self.run.last_wall_time:
            self.run.last_wall_time = w

    def _append(self, steps, walls, values, tags, srcs, file_index: int) -> None:
        if steps.size == 0:
            return
        assert self._tags is not None  # columns come only from _read_file's batches
        names = self._tags.names
        if tags.size and bool(np.all(tags == tags[0])):
            groups = [(int(tags[0]), slice(None))]
        elif (periodic := _periodic_groups(tags)) is not None:
            groups = periodic  # each tag's points a strided view: no sort and no gather (`flush_new` copies them)
        else:
            # Few distinct tags: a stable sort of 16-bit keys is numpy's radix sort, O(n).
            keys = tags.astype(np.int16) if len(names) < 32768 else tags
            order = np.argsort(keys, kind="stable")
            sorted_tags = tags[order]
            # The sorted tags' boundaries (np.unique would sort them again), and each column gathered once into
            # tag order: each tag's points are then a slice of it, not a gather of its own per tag and column.
            first = [0, *(np.flatnonzero(sorted_tags[1:] != sorted_tags[:-1]) + 1).tolist(), sorted_tags.size]
            groups = [(int(sorted_tags[a]), slice(a, b)) for a, b in zip(first, first[1:])]
            steps, walls, values, srcs = steps[order], walls[order], values[order], srcs[order]
        for tid, sl in groups:
            col = self._cols.get(names[tid])
            if col is None:
                col = self._cols[names[tid]] = _Column()
            col.new.append((steps[sl], walls[sl], values[sl], file_index))
            if col.from_tensor_only and bool(np.any(srcs[sl] == _kernel.SRC_SIMPLE)):
                col.from_tensor_only = False

    def _purge(self, step: int, st: _FileState) -> None:
        dropped = sum(col.purge(step) for col in self._cols.values())
        for items in self._hists.values():
            before = len(items)
            items[:] = [it for it in items if it[1] < step]
            dropped += before - len(items)
        key = ("purge", st.name, step)
        if key not in self._restart_keys:
            self._restart_keys.add(key)
            self._note(
                "run_restart",
                self._rel(st.name),
                f"the run restarted at step {step} (session START): {dropped} earlier points at or after it dropped, as TensorBoard does",
                step=step,
                severity="info",
            )

    def _note_restarts(self, st: _FileState, times: int, frm: int, resume: int, dropped: int) -> None:
        """One run_restart note per file, however many times its steps go back (199 backward steps
        are one line with the count, not 199 findings)."""
        if st.restarts is None:
            st.restarts = [0, frm, resume, 0, len(self.run.notes)]
            self.run.notes.append(Note("run_restart", self._rel(st.name), "", None, resume, "info"))
        r = st.restarts
        r[0] += times
        r[3] += dropped
        if r[0] == 1:
            message = (
                f"steps go back from {r[1]} to {r[2]} (a restart from a checkpoint): {r[3]} older points at or "
                f"after step {r[2]} replaced by the newer ones, as TensorBoard does"
            )
        else:
            message = (
                f"steps go back {r[0]} times (restarts from checkpoints), the first from {r[1]} to {r[2]}: "
                f"{r[3]} older points replaced by the newer ones, as TensorBoard does"
            )
        self.run.notes[r[4]] = Note("run_restart", self._rel(st.name), message, None, r[2], "info")

    def _finish(self) -> None:
        """Resolve overlaps on the columns that grew and publish them on the Run."""
        run = self.run
        escaped = self._tags.escaped if self._tags else []
        if len(escaped) > self._escaped_noted:
            self._escaped_noted = len(escaped)
            self._note(
                "data_integrity",
                run.name,
                f"{len(escaped)} tag name(s) are not valid UTF-8 (the first: '{escaped[0]}'); "
                "their other bytes are shown as \\xNN, and each stays a tag of its own",
                severity="info",
            )
        restarts: dict[int, list[int]] = {}  # file index -> [times, from, resume, dropped], over every tag
        for tag, col in self._cols.items():
            if not col.new:
                continue
            col.flush_new()
            keep, back = resolve_overlaps(col.steps)
            if back.size:
                files = col.seg_files[np.searchsorted(col.seg_starts, back, side="right") - 1]
                # A dropped point belongs to the restart that superseded it: the next step backwards after it.
                # (A point superseded by a repeat of its own step has no step backwards after it: no restart.)
                nxt = np.searchsorted(back, np.flatnonzero(~keep), side="right")
                by = files[nxt[nxt < back.size]]
                for fi in np.unique(files).tolist():
                    jumps = back[files == fi]
                    entry = restarts.setdefault(fi, [0, int(col.steps[jumps[0] - 1]), int(col.steps[jumps[0]]), 0])
                    # The same restart shows in every tag (at slightly different steps): count it once.
                    entry[0] = max(entry[0], int(jumps.size))
                    entry[1] = max(entry[1], int(col.steps[jumps[0] - 1]))
                    entry[2] = min(entry[2], int(col.steps[jumps[0]]))
                    entry[3] += int(np.count_nonzero(by == fi))
            if not keep.all():
                col.keep(keep)
            plugin = self._plugins.get(tag, "")
            if col.from_tensor_only and plugin not in ("", "scalars"):
                continue  # rank-0 tensors of another plugin: not scalars
            run.scalars[tag] = Series(col.steps, col.walls, col.values)
        states = {st.index: st for st in self._files.values()}
        for fi, (times, frm, resume, dropped) in sorted(restarts.items()):
            st = states.get(fi)
            if st is not None:
                self._note_restarts(st, times, frm, resume, dropped)
        for tag, items in self._hists.items():
            run.histograms[tag] = _histogram_series(items)
        last = [int(s.steps[-1]) for s in run.scalars.values() if len(s)]
        last += [int(h.steps[-1]) for h in run.histograms.values() if len(h)]
        run.last_step = max(last) if last else run.last_step


def plausible_wall_times(wall_times: np.ndarray) -> np.ndarray:
    """The wall times a real clock could have written: finite, after 1970, before MAX_PLAUSIBLE_WALL_TIME."""
    return wall_times[(wall_times > 0) & (wall_times < MAX_PLAUSIBLE_WALL_TIME)]


#: Each series' (first, last) plausible wall time, kept while the series lives: the logdir context, `stalled`
#: and a pool's worker each ask for a run's span, and a series never changes once read (a re-read makes new ones).
_SERIES_SPANS: weakref.WeakKeyDictionary[Series, tuple[float, float] | None] = weakref.WeakKeyDictionary()


def _series_span(series: Series) -> tuple[float, float] | None:
    """(first, last) plausible wall time of one series' points; None when it has none."""
    try:
        return _SERIES_SPANS[series]
    except KeyError:
        pass
    walls = series.wall_times
    span = None
    if walls.size:
        lo, hi = float(walls.min()), float(walls.max())
        if not (lo > 0 and hi < MAX_PLAUSIBLE_WALL_TIME):  # a NaN, or an implausible time: keep the others
            walls = plausible_wall_times(walls)
            lo, hi = (float(walls.min()), float(walls.max())) if walls.size else (math.nan, math.nan)
        span = None if math.isnan(lo) else (lo, hi)
    _SERIES_SPANS[series] = span
    return span


def activity_span(run: Run) -> tuple[float, float] | None:
    """(first, last) plausible wall time of the run's scalar points: when it trained, not when its files
    were opened; a NaN or year-292-billion time in one point must not make every other run look stalled."""
    spans = [span for span in map(_series_span, run.scalars.values()) if span is not None]
    return (min(first for first, _ in spans), max(last for _, last in spans)) if spans else None


def _histogram_series(items: list) -> HistogramSeries:
    steps = np.array([it[1] for it in items], np.int64)
    keep, _ = resolve_overlaps(steps)
    items = [it for it, k in zip(items, keep) if k]
    return HistogramSeries(
        steps=np.array([it[1] for it in items], np.int64),
        wall_times=np.array([it[2] for it in items], np.float64),
        limits=tuple(it[3] for it in items),
        counts=tuple(it[4] for it in items),
        mins=np.array([it[5] for it in items], np.float64),
        maxs=np.array([it[6] for it in items], np.float64),
        nums=np.array([it[7] for it in items], np.float64),
        sums=np.array([it[8] for it in items], np.float64),
    )
