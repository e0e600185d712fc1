"""run_restart and data_integrity: what the reader noticed about the files themselves.

The reader records a `Note` when steps go backwards (a run resumed from a checkpoint: TensorBoard keeps
the newer points) or when a file is truncated, fails its CRC, is empty or unreadable (the intact data
before the bad record is kept). Each note becomes one finding with the reader's own line as the message.
"""

from __future__ import annotations

from ..findings import SEVERITIES
from .base import RunData, finding

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


def detect(data: RunData) -> list:
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
    return out
