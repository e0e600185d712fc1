"""run_restart and data_integrity: what the reader noticed about the files themselves, and runs without data.

The reader records a `Note` when steps go backwards (a run resumed from a checkpoint: TensorBoard keeps
the newer points) or when a file is truncated, fails its CRC, is empty or unreadable (the intact data
before the bad record is kept). Each note becomes one finding with the reader's own line as the message.

Two facts only the engine can judge:
- a run without a single scalar point (empty files, a header-only file, hparams, histograms or images only)
  gets one data_integrity note saying what its files hold (its health is "no data"); the reader's own notes
  about those files are folded into it;
- the newest file ending in an incomplete record is a writer caught mid-record while the run is live, but a
  crash artefact once the run has been silent for CRASH_SILENCE_S and CRASH_SILENCE_GAPS of its own gaps
  between writes: then it is said (info), never before.
"""

from __future__ import annotations

import numpy as np

from ..findings import SEVERITIES
from ..smoothing import median
from ..text import duration
from .base import RunData, finding

#: A run silent this long is not mid-write: an incomplete last record is what a crash or kill left. Writers
#: flush at least every two minutes (tensorboardX/torch default 120 s), so ten minutes is past any flush...
CRASH_SILENCE_S = 600.0
#: ...and past this many of the run's own typical gaps between writes (a run logging once per 20-minute
#: evaluation can leave half a record in its buffer that long while alive).
CRASH_SILENCE_GAPS = 10.0


def _typical_gap(data: RunData) -> float:
    """Median seconds between the writes of the run's busiest series (0 when it cannot tell)."""
    busiest = max(data.run.scalars.values(), key=len, default=None)
    if busiest is None or len(busiest) < 3:
        return 0.0
    gaps = np.diff(busiest.wall_times)
    gaps = gaps[gaps > 0]
    return median(gaps, repeats=True) if gaps.size else 0.0  # a logger's gaps repeat


#: The finding kinds this module reports (each a row of `findings.KINDS`).
KINDS = ("run_restart", "data_integrity")

_SUGGESTIONS = {
    "run_restart": (
        "The run was resumed from a checkpoint and repeated steps; the newer points were kept, as "
        "TensorBoard does. If that was not intended, check the resume logic (global step restored, "
        "a fresh log dir per attempt) and why the first attempt stopped"
    ),
    "data_integrity": (
        "The intact records before the damage were kept. A truncated last record is normal while "
        "a run is still writing; otherwise the file was cut by a crash, a full disk or a copy: "
        "re-copy it from the source if you have it"
    ),
}
_NO_DATA_SUGGESTION = (
    "Nothing to judge until the run logs scalars: if it should have, check that the training loop calls "
    "add_scalar/tf.summary.scalar (and flushes or closes the writer), or whether the process died before its "
    "first log step"
)
_CRASH_SUGGESTION = (
    "The records before the cut are intact and were all read. If the run was meant to finish, look for why "
    "the process died (out of memory, pre-emption, a killed job) and resume it from its last checkpoint"
)


def _contents(data: RunData) -> str:
    """What the run's files hold, in words, for a run without scalar points."""
    run = data.run
    files = f"{len(run.files)} event file{'s' if len(run.files) != 1 else ''}"
    held = []
    if run.hparams:
        held.append(f"hparams ({len(run.hparams)} values)")
    if run.histograms:
        held.append(f"{len(run.histograms)} histogram tag{'s' if len(run.histograms) != 1 else ''}")
    if run.texts:
        held.append(f"{len(run.texts)} text tag{'s' if len(run.texts) != 1 else ''}")
    held += [f"{count} {kind} record{'s' if count != 1 else ''}" for kind, count in sorted(run.skipped.items())]
    if held:
        return f"{files} holding only {', '.join(held)}"
    if run.bytes_read == 0:
        return f"{files}, empty (0 bytes)"
    return f"{files} with only the file header (no event after it)"


def _no_data(data: RunData) -> list:
    contents = _contents(data)
    evidence = {"summary": f"no scalar data: {contents}", "files": list(data.run.files)}
    notes = [n.message for n in data.run.notes if n.kind == "data_integrity"]
    if notes:
        evidence["reader_notes"] = notes
    message = f"no scalar data in this run: {contents}"
    return [finding(data, "data_integrity", "info", [], None, None, evidence, message, _NO_DATA_SUGGESTION)]


def _crash_tail(data: RunData) -> list:
    tail, now, last = data.run.partial_tail, data.context.now, data.run.last_wall_time
    if tail is None or now is None or last is None:
        return []
    if now - last < max(CRASH_SILENCE_S, CRASH_SILENCE_GAPS * _typical_gap(data)):
        return []
    file, offset = tail
    hours = (now - last) / 3600.0
    ago = duration(now - last)
    message = (
        f"{file.rsplit('/', 1)[-1]} ends in an incomplete record at byte {offset}, and the run last wrote {ago} ago: "
        "a crash or kill cut its last write"
    )
    evidence = {"summary": message, "file": file, "offset": offset, "silent_hours": round(hours, 1)}
    return [finding(data, "data_integrity", "info", [], data.last_step, None, evidence, message, _CRASH_SUGGESTION)]


def detect(data: RunData) -> list:
    if not any(len(s) for s in data.run.scalars.values()):
        return _no_data(data) + [
            finding(
                data,
                n.kind,
                n.severity,
                [],
                n.step,
                None,
                {"summary": n.message, "file": n.file},
                n.message,
                _SUGGESTIONS[n.kind],
            )
            for n in data.run.notes
            if n.kind == "run_restart"
        ]
    out = []
    for note in data.run.notes:
        if note.kind not in _SUGGESTIONS:
            continue
        severity = note.severity if note.severity in SEVERITIES else "warning"
        evidence: dict[str, str | int] = {"summary": note.message, "file": note.file}
        if note.offset is not None:
            evidence["offset"] = note.offset
        out.append(
            finding(data, note.kind, severity, [], note.step, None, evidence, note.message, _SUGGESTIONS[note.kind])
        )
    return out + _crash_tail(data)
