"""Each run's verdict, cached beside its decoded columns: a warm reopen shows every run's health without judging it.

The engine's `RunReport` for one run (before any cross-run step: twins are attached after, over all runs, every
time) is written under the column cache's directory (`cache.root()`, one `.tbv` file per run, counted against
the same size cap and evicted by the same LRU); a pool's worker, which writes the run's decoded columns in the
same moment, keeps the same bytes inside the run's column entry instead (`cache.embedded_verdict`): one file created
a run, not two. A lookup takes the run's own file first, then the one in its column entry. A cached verdict is used
only when everything it was judged from is still what it was:

- **the run's event files**: the same names, and each file exactly the bytes that were read: its size is the
  offset the reader read to, with the same mtime, device and inode, the same first 4 KiB (`cache.head_hash`)
  and the same bytes around that offset (the reader's fingerprint, taken when it read them). A file that grew,
  shrank, was rewritten or ends in a record not read yet, and a new or vanished file, all mean: judge again.
  A verdict is not even written when a file is not read to its end (a partial last record, an unreadable file)
  or has changed since it was read: it could not be vouched for;
- **the run's config files** (`run_config.config_paths`: `hparams.yaml`, `config.json`, ...): each present or
  absent as it was, with the same size, mtime, inode and content hash (causes read the hyperparameters);
- **the sibling runs it read** (`engine.related_runs`: Keras's `X/train` and `X/validation`): the same siblings
  present, each with its event files unchanged as above;
- **the engine and its configuration**: tbtriage's version, a hash of the source of every module of the
  analysis package (any change to a detector or a threshold), numpy's and Python's versions, and the `Config`;
- **the logdir context**: only `stalled` reads it (the newest wall time of the logdir, the clock, the other runs'
  spans). The run's own part of that detector (`stalled.StallFacts`: its span, silence threshold, whether it
  finished) is kept with the verdict; on reuse, what the new context makes of it (`stalled.stall`) must be what
  the old one made of it (both "not stalled", or the same silence, the same runs writing on, the same
  liveness), else the run is judged again. The crash-tail note also reads the clock, but only for a run whose
  last record is partial, which is never cached (above).

Anything else (no entry, another tbtriage, a corrupt or truncated entry: checked against a BLAKE2 digest before
anything in it is read, and unpickled by an unpickler that only builds the analysis package's and numpy's
types) is a miss: the run is judged as if there were no cache. `--no-cache` (`TBTRIAGE_NO_CACHE`) turns this
cache off with the column cache. Runs on an object store are not cached here yet. Nothing is written to the logdir.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import pickle
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import cache
from .config import Config
from .datamodel import Run, RunReport
from .detectors.base import LogdirContext
from .detectors.stalled import StallFacts, stall, stall_facts
from .engine import context_from_spans, related_runs
from .fingerprints import config_fingerprint, engine_fingerprint
from .run_config import HPARAM_TEXT_TAG, config_file_stats
from .twins import twin_candidates

#: Bumped whenever what an entry holds, or what makes it valid, changes: older entries are ignored.
FORMAT = 1
MAGIC = b"TBTVRD\x00\x01"
SUFFIX = ".tbv"
_PREFIX = struct.Struct("<8sQQ16s")  # magic, length of the checks, length of the report, digest of both

OnReport = Callable[[RunReport, int, int], None]


def enabled() -> bool:
    """The verdict cache is on exactly when the column cache is (`--no-cache`, `TBTRIAGE_NO_CACHE`)."""
    return cache.enabled()


# ---- identities ------------------------------------------------------------------------------------------


def _key(reader) -> dict:
    """What tells one run's entry from another's (the files it holds are checked, not keyed)."""
    return {
        "path": os.path.abspath(reader.path),
        "name": reader.name,
        "only_file": reader.only_file,
        "verify": bool(reader.verify),
    }


def entry_path(reader) -> Path:
    digest = hashlib.sha256(json.dumps(_key(reader), sort_keys=True).encode()).hexdigest()[:40]
    return cache.root() / (digest + SUFFIX)


def _reader(logdir, name: str):
    """The reader of run `name` in `logdir` (None: not a run of it, or a logdir without readers)."""
    return getattr(logdir, "_readers", {}).get(name)


def _local(reader) -> bool:
    return not reader.storage.objects


def _listing(reader, listed: set[str] | None) -> list[str]:
    """The run's event file names, sorted (both listings sort); `listed`, when given, also gets every name in the run's directory from the
    same listing (for `_config_stats`; left empty for a single-file run). OSError when it cannot be listed."""
    if listed is not None and reader.only_file is None:
        return reader.storage.list_files(reader.path, listed)
    return reader.list_files()


def _config_stats(reader, listed: set[str]) -> dict[str, list | None]:
    """`config_file_stats` of the run, from the names `_listing` put in `listed` (a single-file run's configs are
    looked up on their own)."""
    return config_file_stats(reader.run, listed if reader.only_file is None else None)


def _event_files(reader, listed: set[str] | None = None) -> list[dict] | None:
    """Every event file of the run as its reader read it, or None when the reader cannot vouch for one: not read
    to its end (a partial last record, an unreadable stretch), or changed since it was read. `listed`: as
    `_listing`'s."""
    try:
        names = _listing(reader, listed)
    except OSError:
        return None
    if sorted(names) != sorted(reader._files):
        return None  # a file appeared or vanished since the read
    records = []
    for name in sorted(names):
        st = reader._files[name]
        path = reader.path / name
        now = cache._stat_or_none(path)
        if (
            now is None
            or st.identity is None
            or now.st_size != st.offset
            or tuple(st.identity[0]) != (now.st_dev, now.st_ino)
        ):
            return None
        fingerprint = st.identity[2]
        records.append(
            {
                "name": name,
                "size": st.offset,
                "mtime_ns": now.st_mtime_ns,
                "dev_ino": [now.st_dev, now.st_ino],
                "fingerprint": None if fingerprint is None else fingerprint.hex(),
                "head": cache.recorded_head_hash(path, min(cache.HEAD_BYTES, st.offset), now),
            }
        )
    return records


def _files_unchanged(reader, records: list[dict], listed: set[str] | None = None) -> bool:
    """The run's event files are exactly the files, and the bytes, that `records` describe. `listed`: as
    `_listing`'s."""
    try:
        names = _listing(reader, listed)
    except OSError:
        return False
    if names != [r["name"] for r in records]:
        return False
    for r in records:
        path = reader.path / r["name"]
        now = cache._stat_or_none(path)
        # Exactly the bytes judged (the column cache also takes a file that only grew: its reader resumes it).
        if now is None or (now.st_size, now.st_mtime_ns, [now.st_dev, now.st_ino]) != (
            r["size"],
            r["mtime_ns"],
            r["dev_ino"],
        ):
            return False
        fingerprint = reader._fingerprint(r["name"], r["size"])
        if (None if fingerprint is None else fingerprint.hex()) != r["fingerprint"]:
            return False
        if cache.head_hash(path, min(cache.HEAD_BYTES, r["size"])) != r["head"]:
            return False
    return True


def _siblings(logdir, name: str) -> dict[str, list[dict]] | None:
    """The event files of each sibling run that judging `name` reads (None when one cannot be vouched for)."""
    out = {}
    for other in related_runs(name, logdir.runs):
        records = _event_files(logdir._readers[other])
        if records is None:
            return None
        out[other] = records
    return out


def _siblings_unchanged(logdir, name: str, recorded: dict[str, list[dict]]) -> bool:
    present = related_runs(name, logdir.runs)
    if sorted(present) != sorted(recorded):
        return False
    return all(_files_unchanged(logdir._readers[other], records) for other, records in recorded.items())


# ---- entries ---------------------------------------------------------------------------------------------


_BUILTINS = frozenset(
    {"set", "frozenset", "tuple", "list", "dict", "complex", "float", "int", "bytes", "bytearray", "str", "bool"}
)
#: What numpy pickles an array, a scalar or a dtype as (never `memmap` or any other class that touches files).
_NUMPY = frozenset({"_reconstruct", "scalar", "_frombuffer", "ndarray", "dtype"})


class _Unpickler(pickle.Unpickler):
    """Builds only what a verdict is made of: the analysis package's dataclasses (whose constructors only assign),
    numpy arrays, scalars and dtypes, a few builtins and paths; anything else in an entry is an error."""

    def find_class(self, module: str, name: str) -> Any:
        root = module.split(".", 1)[0]
        allowed = (
            module == "builtins"
            and name in _BUILTINS
            or module == "copyreg"
            and name == "_reconstructor"
            or root == "numpy"
            and (name in _NUMPY or module == "numpy.dtypes")
            or module == "pathlib"
            and name.endswith("Path")
            or module.startswith("tbtriage.analysis.")
        )
        found = super().find_class(module, name) if allowed else None
        if found is None or module.startswith("tbtriage.") and not dataclasses.is_dataclass(found):
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a verdict")
        return found


def _loads(raw: bytes | memoryview) -> Any:
    return _Unpickler(io.BytesIO(raw)).load()


@dataclass
class Entry:
    """A run's cached verdict whose files, siblings, engine and config all still hold; `report` checks the
    logdir context last (it needs every run's span, which `span` gives without reading the run)."""

    path: Path
    checks: dict
    raw_report: bytes

    @property
    def span(self) -> tuple[float, float] | None:
        facts: StallFacts | None = self.checks["facts"]
        return None if facts is None else (facts.first, facts.last)

    def report(self, context: LogdirContext, run: Run | None = None) -> RunReport | None:
        """The verdict when it holds in `context` (None: judge again), with `run` as its run when given (else
        the run as it was judged, without its points)."""
        if stall(self.checks["facts"], context) != self.checks["stall"]:
            return None  # stalled then and not now, or the other way, or with other figures: judged again
        try:
            report = _loads(self.raw_report)
        except Exception:  # noqa: BLE001 - a corrupt entry is a miss, whatever it raises
            return None
        if not isinstance(report, RunReport):
            return None
        cache.touch(self.path)
        return report if run is None else replace(report, run=run)


def candidate(logdir, name: str, config: Config | None) -> Entry | None:
    """Run `name`'s cached verdict when its event and config files, its siblings, the engine and `config` are all
    what they were (nothing of the run is read); None otherwise."""
    reader = _reader(logdir, name)
    if not enabled() or reader is None or not _local(reader):
        return None
    path, entry = entry_path(reader), None
    try:
        with open(path, "rb") as f:
            entry = _checked(logdir, name, reader, config, path, f.read())
    except OSError:
        pass
    if entry is None:  # none of its own that holds: the one a pool's worker kept in the run's column entry, if any
        embedded = cache.embedded_verdict(reader)
        if embedded is not None:
            entry = _checked(logdir, name, reader, config, *embedded)
    return entry


def _checked(logdir, name: str, reader, config: Config | None, path: Path, raw: bytes) -> Entry | None:
    """The entry `raw` (read from `path`) when it is sound and everything it was judged from still holds."""
    try:
        magic, checks_len, report_len, digest = _PREFIX.unpack_from(raw)
        body = memoryview(raw)[_PREFIX.size :]
        if magic != MAGIC or len(body) != checks_len + report_len:
            return None
        if hashlib.blake2b(body, digest_size=16).digest() != digest:
            return None
        checks = _loads(body[:checks_len])
        if not isinstance(checks, dict) or checks.get("format") != FORMAT or checks.get("key") != _key(reader):
            return None
        if checks["engine"] != engine_fingerprint() or checks["config"] != config_fingerprint(config):
            return None
        listed: set[str] = set()
        if not _files_unchanged(reader, checks["files"], listed):
            return None
        if _config_stats(reader, listed) != checks["configs"]:
            return None
        if not _siblings_unchanged(logdir, name, checks["related"]):
            return None
        return Entry(path, checks, bytes(body[checks_len:]))
    except Exception:  # noqa: BLE001 - missing, short, corrupt or of another shape: a miss, never trusted
        return None


def lookup(logdir, name: str, context: LogdirContext, config: Config | None) -> RunReport | None:
    """Run `name`'s verdict from the cache when it still holds (the run as read now attached), else None."""
    entry = candidate(logdir, name, config)
    return None if entry is None else entry.report(context, logdir.runs.get(name))


def store(
    logdir, report: RunReport, context: LogdirContext, config: Config | None, facts: StallFacts | None = None
) -> bool:
    """Cache the engine's verdict on one run of `logdir`, judged with `config` in `context` (its columns still in
    hand); False when it is not cached (cache off, a store's run, a file not read to its end or changed since).
    `facts`: the run's `stall_facts` when the caller has them (else worked out here, from its points)."""
    raw = entry_bytes(logdir, report, context, config, facts)
    return raw is not None and write(_reader(logdir, report.name), raw)


def write(reader, raw: bytes) -> bool:
    """Write `raw` (`entry_bytes`) as the run's own verdict entry; False when it cannot be written."""
    return cache.write_entry(entry_path(reader), lambda f: f.write(raw))


def entry_bytes(
    logdir, report: RunReport, context: LogdirContext, config: Config | None, facts: StallFacts | None = None
) -> bytes | None:
    """The entry `store` writes for this verdict (None where `store` caches nothing): written as the run's own file,
    or kept in its column entry (`cache.store`'s `verdict`) by a caller that writes both."""
    reader = _reader(logdir, report.name)
    if not enabled() or reader is None or not _local(reader) or cache._writes_into_logdir(reader):
        return None
    run = reader.run
    if run.partial_tail is not None:
        return None  # its crash-tail note reads the clock: judged every time
    listed: set[str] = set()
    files = _event_files(reader, listed)
    related = _siblings(logdir, report.name)
    if files is None or related is None:
        return None
    if facts is None:
        facts = stall_facts(run, report.primary_tags.lr)
    checks = {
        "format": FORMAT,
        "key": _key(reader),
        "engine": engine_fingerprint(),
        "config": config_fingerprint(config),
        "files": files,
        "configs": _config_stats(reader, listed),
        "related": related,
        "facts": facts,
        "stall": stall(facts, context),
    }
    if report.engine_verdict is not None:  # twins were attached in place: keep the engine's own verdict
        report = replace(report, findings=report.engine_verdict[0], health=report.engine_verdict[1])
    # The run without its points, the features without the detectors' bucketed curves: what a report reads.
    features = report.features
    if any(f.has_curves for f in features.values()):  # a pool's worker dropped them already (`fleet.slim`)
        features = {tag: f.without_curves() for tag, f in features.items()}
    slim = replace(
        report,
        run=replace(run, scalars={}, histograms={}, texts=_setting_texts(run), config_texts={}),
        features=features,
        engine_verdict=None,
    )
    try:
        raw_checks = pickle.dumps(checks, protocol=pickle.HIGHEST_PROTOCOL)
        raw_report = pickle.dumps(slim, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None
    digest = hashlib.blake2b(raw_checks + raw_report, digest_size=16).digest()
    return _PREFIX.pack(MAGIC, len(raw_checks), len(raw_report), digest) + raw_checks + raw_report


def _setting_texts(run: Run) -> dict:
    """The text summaries the run's settings come from (`run_config.run_hparams` reads the last of each): what
    `twins.twin_candidates` needs of a cached run's texts."""
    return {tag: entries[-1:] for tag, entries in run.texts.items() if HPARAM_TEXT_TAG.search(tag)}


# ---- whole passes -------------------------------------------------------------------------------------------


def judge_runs(
    runs: Sequence[Run],
    context: LogdirContext,
    logdir,
    config: Config | None,
    judge: Callable[[Sequence[Run], OnReport], Any],
    on_report: OnReport | None = None,
) -> list[RunReport]:
    """Every run's verdict, in the order of `runs`: from the cache where it still holds, else from
    `judge(runs_to_judge, on_judged)` (which calls `on_judged` as each arrives) and then cached.

    `on_report(report, done, total)` hears the cached verdicts first, then the judged ones as they arrive.
    """
    by_name: dict[str, RunReport] = {}

    def emit(report: RunReport) -> None:
        by_name[report.name] = report
        if on_report is not None:
            on_report(report, len(by_name), len(runs))

    todo = []
    for run in runs:
        hit = lookup(logdir, run.name, context, config)
        if hit is None:
            todo.append(run)
        else:
            emit(hit)

    def judged(report: RunReport, done: int, total: int) -> None:
        store(logdir, report, context, config)
        emit(report)

    if todo:
        judge(todo, judged)
    return [by_name[run.name] for run in runs if run.name in by_name]


def before_reading(logdir, config: Config | None, now: float | None) -> dict[str, RunReport]:
    """Verdicts for the runs of a logdir whose readers exist but have read nothing (`Logdir.find`), each with
    the run as it was judged (its points are not read): for the first screen of a warm reopen.

    Only when every run has a sound entry: the logdir context (`stalled`) needs every run's span, and a run
    without an entry has none yet. Each verdict is then checked against the context those spans make (as
    `engine.logdir_context` would make it after reading); a run whose verdict does not hold is left out, and so
    is a run whose verdict twins may change (`twins.twin_candidates`): every verdict given is the one `report`
    gives.
    """
    entries: dict[str, Entry] = {}
    for name in logdir.runs:
        entry = candidate(logdir, name, config)
        if entry is None:
            return {}
        entries[name] = entry
    context = context_from_spans({name: e.span for name, e in entries.items()}, logdir.runs, now)
    out = {}
    for name, entry in entries.items():
        report = entry.report(context)
        if report is not None:
            out[name] = report
    # Twins are attached over every run once the runs are read: a verdict they may change waits for that.
    for name in twin_candidates(list(out.values()), complete=len(out) == len(entries)):
        del out[name]
    return out
