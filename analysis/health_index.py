"""What the runs table shows of every run of a logdir, kept beside the caches: a warm reopen draws every run's health
before it imports the engine, unpickles a verdict or reads a column.

One file per logdir (`<digest of its path>.tbh` under the column cache's directory, counted against the same cap):
for each run, its health as the table shows it (`RunHealth`: status, score, worst finding, counts, last step and
time) and what its cached verdict was judged from, recorded as the verdict cache records it (`verdict_cache`:
each event file's size, mtime, device and inode, the bytes around the offset read and the first 4 KiB; each config
file's identity and hash), plus the engine's and the config's fingerprints. It is written (`write`) only when every
run of the logdir has a cached verdict that holds in the logdir's context at that moment, from the verdicts as
shown (twins attached over all of them): so the index stands for exactly what a first pass over the same files
would show.

On open (`read`) it is used only when all of this still holds: the logdir lists the same runs (`find_runs`), each
run's event and config files are the files and bytes recorded, the engine (tbtriage's, numpy's and Python's
versions and the analysis package's source) and the config are the same, and the one part of a verdict the clock
can change (`stalled`'s "live": the logdir's newest event within `LIVE_WINDOW_S` of now) is on the same side of
its bound. Every run unchanged means the logdir context (`stalled`'s spans) and every sibling a run reads are
unchanged too, so each verdict, and the twins drawn from all of them, would come out the same. Anything else (no
index, another logdir or format, a corrupt or truncated file: checked against a BLAKE2 digest) is a miss, and the
app takes the slower road (`verdict_cache.before_reading`, then reading and judging). Reading imports neither the
engine, numpy nor pickle (`cache_base`, not the column cache): it costs a listing, a few stats and small reads a file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from .cache_base import HEAD_BYTES, enabled, head_hash, root
from .config import Config
from .datamodel import Finding, Run, RunReport
from .discover import find_runs
from .findings import worst
from .fingerprints import config_fingerprint, engine_fingerprint
from .run_config import config_file_stats
from .storage import LOCAL

if TYPE_CHECKING:  # pragma: no cover
    from .logdir import Logdir

#: Bumped whenever what the index holds, or what makes it valid, changes: older indexes are ignored.
FORMAT = 1
SUFFIX = ".tbh"
_MAGIC = b"TBTHIDX1"


class RunHealth(NamedTuple):
    """A judged run as the runs table shows it, without its full verdict (a tuple: one per run, built by the
    thousand)."""

    status: str  # the worst finding's severity, or "ok"
    score: int | None  # Health.score (None: no data)
    worst: str  # the worst finding as "kind@step" (`finding_label`), "" when there is none
    last_step: int | None
    last_wall_time: float | None
    counts: tuple[int, int, int]  # critical, warning and info findings


def finding_label(finding: Finding) -> str:
    return finding.kind if finding.step is None else f"{finding.kind}@{finding.step}"


def verdict_status(findings: Sequence[Finding]) -> tuple[str, str]:
    """A verdict's status (its worst finding's severity, or "ok") and its worst finding's label ("" when none)."""
    found = worst(findings)
    return ("ok", "") if found is None else (found.severity, finding_label(found))


def run_health(report: RunReport) -> RunHealth:
    """What the runs table shows of `report` (as shown: with its twins)."""
    status, label = verdict_status(report.findings)
    severities = [f.severity for f in report.findings]
    return RunHealth(
        status=status,
        score=report.health.score,
        worst=label,
        last_step=report.run.last_step,
        last_wall_time=report.run.last_wall_time,
        counts=(severities.count("critical"), severities.count("warning"), severities.count("info")),
    )


# ---- what a verdict was judged from, as `verdict_cache` records it ------------------------------------------


def _files_hold(directory: str, records: list[dict], configs: dict) -> bool:
    """The run's event files are exactly the files, and the bytes, that `records` (a verdict's `files`) describe
    (`verdict_cache._files_unchanged` for a local run), and its config files are those `configs` describes
    (`run_config.config_file_stats`): one listing of `directory` answers which of them are there."""
    listed: set[str] = set()
    try:
        if LOCAL.list_files(directory, listed) != [r["name"] for r in records]:
            return False
    except OSError:
        return False
    for r in records:
        path = os.path.join(directory, r["name"])
        try:
            now = os.stat(path)
        except OSError:
            return False
        if (now.st_size, now.st_mtime_ns, [now.st_dev, now.st_ino]) != (r["size"], r["mtime_ns"], r["dev_ino"]):
            return False
        if r["fingerprint"] is None:
            return False  # unreadable when it was judged: the verdict cache would judge it again
        # The reader's fingerprint: the first and last n bytes of what was read (n = min(FINGERPRINT_BYTES, size)).
        fingerprint = LOCAL.fingerprint(path, r["size"], len(r["fingerprint"]) // 4)
        if fingerprint is None or fingerprint.hex() != r["fingerprint"]:
            return False
        if head_hash(path, r["head_bytes"]) != r["head"]:
            return False
    return config_file_stats(Run(name="", path=Path(directory)), listed) == configs


# ---- the index file ------------------------------------------------------------------------------------------


def index_path(logdir: Path | str) -> Path:
    digest = hashlib.sha256(os.path.abspath(logdir).encode("utf-8", "surrogateescape")).hexdigest()[:40]
    return root() / (digest + SUFFIX)


@dataclasses.dataclass(frozen=True)
class Index:
    """A logdir's index as read and found to hold: each run's health, directory and span, in the logdir's order."""

    health: dict[str, RunHealth]
    paths: dict[str, Path]  # each run's directory, as `find_runs` lists it
    spans: dict[str, tuple[float, float] | None]  # `stalled`'s facts: each run's (first, last) plausible wall time
    twinned: frozenset[str]  # the runs whose shown verdict twins changed: their engine verdict alone is not it


def read(logdir: Path, config: Config | None, now: float | None) -> Index | None:
    """The index of the local `logdir` when everything it was written from still holds (see the module's
    docstring), else None; reads no event file beyond the few bytes each check compares."""
    if not enabled() or not logdir.is_dir():
        return None
    try:
        with open(index_path(logdir), "rb") as f:
            raw = f.read()
        if raw[:8] != _MAGIC or hashlib.blake2b(raw[24:], digest_size=16).digest() != raw[8:24]:
            return None
        body = json.loads(raw[24:])
        if body.get("format") != FORMAT or body.get("logdir") != os.path.abspath(logdir):
            return None
        if body["config"] != config_fingerprint(config) or body["engine"] != engine_fingerprint():
            return None
        if not _live_holds(body["live"], now):
            return None
        runs = body["runs"]
        found = find_runs(logdir, [])
        if list(found) != [r["name"] for r in runs]:
            return None  # a run appeared, vanished or was renamed
        for r in runs:
            if not _files_hold(os.fspath(found[r["name"]]), r["files"], r["configs"]):
                return None
        return Index(
            {r["name"]: _run_health(r["health"]) for r in runs},
            {r["name"]: found[r["name"]] for r in runs},
            {r["name"]: None if r["span"] is None else tuple(r["span"]) for r in runs},
            frozenset(r["name"] for r in runs if r["twinned"]),
        )
    except (OSError, ValueError, KeyError, TypeError, IndexError):  # missing, corrupt or of another shape: a miss
        return None


def _number(value: Any) -> Any:
    """A numpy scalar (a step, a score) as the Python number JSON writes; anything else is not index data."""
    if hasattr(value, "item") and not hasattr(value, "__len__"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not index data")


def _run_health(row: list) -> RunHealth:
    status, score, label, last_step, last_wall_time, counts = row
    return RunHealth(status, score, label, last_step, last_wall_time, (counts[0], counts[1], counts[2]))


def _live_holds(live: dict | None, now: float | None) -> bool:
    """`stalled`'s verdicts read the clock only through "live" (`stalled.stall`: now − newest ≤ window): the
    index holds while that comparison comes out as it did when it was written."""
    if live is None:
        return True  # no run stalled: the clock changes nothing
    if now is None:
        return live["now"] is None
    return (now - live["latest"] <= live["window"]) == live["live"]


def write(
    logdir: Logdir,
    shown: Mapping[str, RunReport],
    engine: Mapping[str, RunReport],
    config: Config | None,
    now: float | None,
) -> bool:
    """Write the index of `logdir` from the verdicts `shown` of every run (twins attached; `engine`: the same before
    twins, as `watch.Watcher` holds both), judged with `config` at `now`; False (nothing written) unless every run
    has a cached verdict that holds in the logdir's context now (a store's logdir, a run not read to its end, a
    verdict not cached: no index)."""
    from . import cache, verdict_cache
    from .detectors.stalled import LIVE_WINDOW_S, stall
    from .engine import context_from_spans

    if not enabled() or not isinstance(logdir.path, Path) or logdir.storage.objects:
        return False
    if logdir._single_file is not None or logdir.run_filter or set(shown) != set(logdir.runs):
        return False  # `read` lists the whole logdir directory: an index of part of it would never hold
    entries = {}
    for name in logdir.runs:
        entry = verdict_cache.candidate(logdir, name, config)
        if entry is None:
            return False
        entries[name] = entry
    context = context_from_spans({name: e.span for name, e in entries.items()}, logdir.runs, now)
    stalls = []
    for entry in entries.values():
        found = stall(entry.checks["facts"], context)
        if found != entry.checks["stall"]:
            return False  # its verdict does not hold now: the next pass judges it again
        if found is not None:
            stalls.append(found)
    live = None
    if stalls:
        live = {"live": stalls[0].live, "latest": context.latest_wall_time, "window": LIVE_WINDOW_S, "now": now}
    runs = []
    for name, entry in entries.items():
        files = [dict(r, head_bytes=min(HEAD_BYTES, r["size"])) for r in entry.checks["files"]]
        runs.append(
            {
                "name": name,
                "files": files,
                "configs": entry.checks["configs"],
                "span": entry.span,
                "health": run_health(shown[name]),
                "twinned": shown[name] is not engine.get(name),
            }
        )
    body = {
        "format": FORMAT,
        "logdir": os.path.abspath(logdir.path),
        "engine": engine_fingerprint(),
        "config": config_fingerprint(config),
        "live": live,
        "runs": runs,
    }
    try:
        raw = json.dumps(body, allow_nan=True, default=_number).encode()
    except (TypeError, ValueError):
        return False  # something that is not plain data: no index, never a failed load
    digest = hashlib.blake2b(raw, digest_size=16).digest()

    def write_to(f: Any) -> None:
        f.write(_MAGIC + digest + raw)

    return cache.write_entry(index_path(logdir.path), write_to)
