"""tbtriage's terminal side: the Textual app, its widgets, and the command line.

Importing it holds the garbage collector's young collections (`hold_young_collections`) until the app's first frame:
start-up (Textual's import, the app and its first screen) makes ~100,000 objects that live as long as the app and next
to no garbage (~400-1,000 objects, from import-time cycles), and the ~150 young collections that walked them were
~20 ms of CPU of a warm reopen's ~0.3 s to its first frame. At its first frame the app freezes what start-up made
(`gc.freeze`, uncollected: a walk of all of it would cost what the held collections did) and lets young collections
run again. A process that imports this package and never starts the app collects every million new objects instead.
"""

from __future__ import annotations

import gc

#: The collector's thresholds as this process had them before any hold.
GC_THRESHOLDS = gc.get_threshold()
#: While held, a young collection waits for this many new objects: more than a start-up makes.
START_YOUNG_OBJECTS = 1_000_000


def hold_young_collections() -> None:
    """No young collection until `release_young_collections` (or a million objects later)."""
    now = gc.get_threshold()
    gc.set_threshold(START_YOUNG_OBJECTS, now[1], now[2])


def release_young_collections() -> None:
    """Young collections as before the hold (the other thresholds are left as they are now)."""
    now = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLDS[0], now[1], now[2])


def young_collections_held() -> bool:
    return gc.get_threshold()[0] == START_YOUNG_OBJECTS


hold_young_collections()  # released by the app's first frame (`tbtriage.tui.app.TriageApp`)
