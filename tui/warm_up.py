"""What the app prepares on its UI thread while the user reads the first screen, one short step at a time.

The first screen is drawn without the chart (numpy, plotext), the Diagnosis pane's Markdown parser and the report's
renderer (the cause library, every detector): importing them before it would delay it (tests/test_first_screen.py holds
the list). Imported all at once just after it, they held the UI thread for ~150 ms on a quiet 2-core machine and ~400 ms
on a busy one, and a large health index's frame (read on a thread, posted as a message) waited behind them; imported
where first needed, a key paid for them. So they are imported and mounted here, once the screen with every run's health
is drawn, one module group or one mount per step, each on a timer of its own: a key that comes during a step is answered
before the next one starts, and waits for one step at most (10-35 ms here; numpy, 40-95 ms, is imported by then by the
load worker, which reads the runs with it, and is left to it).

The load worker importing them instead was tried (last round) and measured worse: an import holds the interpreter
while it runs Python code, and the worker's imports slowed the drawing of the first screen itself.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.app import App

#: Seconds from the frame with every run's health to the first step: that frame's follow-ups (the worst run's panes)
#: are drawn first. Short: on a warm reopen the worst run's columns and verdict arrive ~0.3-0.5 s after that frame,
#: and what the warm-up has not made ready by then is made at once, in one piece.
START_AFTER_S = 0.05
#: Seconds between two steps (then the next waits for the screen to be drawn): a key that came during a step, and the
#: frame that shows it, go first.
STEP_GAP_S = 0.02
#: A step that cannot run yet (health still on its way, a module another thread is importing) looks again this often.
RETRY_S = 0.05

#: A step: True (or None) when it did its work, False when it should be tried again later; it may be a coroutine.
Step = Callable[[], object]


def importing_elsewhere(name: str) -> bool:
    """Whether module `name` is being imported (by another thread) right now: importing it here would wait for that
    import to finish, with the UI thread blocked. A module is in `sys.modules` from the start of its import, with its
    spec marked initializing until its code has run (CPython's import machinery, since 3.4)."""
    module = sys.modules.get(name)
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def import_step(*names: str) -> Step:
    """A step that imports `names` in order (unless another thread is importing one of them: then it waits)."""

    def step() -> bool:
        if any(importing_elsewhere(name) for name in names):
            return False
        for name in names:
            importlib.import_module(name)
        return True

    step.__qualname__ = f"import {', '.join(names)}"
    return step


class WarmUp:
    """Runs `steps` in order on `app`'s timers (`start`), each on a tick of its own; `done` once all have run."""

    def __init__(self, app: App, steps: Sequence[Step]) -> None:
        self._app = app
        self._steps = list(steps)
        self.started = False
        self.done = not self._steps
        #: Each step's name as it ran (`Step.__qualname__`), for tests and benches.
        self.ran: list[str] = []

    def start(self) -> None:
        """Run the steps, from `START_AFTER_S` on (once; later calls do nothing)."""
        if not self.started:
            self.started = True
            self._app.set_timer(START_AFTER_S, self._after_refresh)

    async def _next(self) -> None:
        if not self._steps or not self._app.is_running:
            return
        step = self._steps[0]
        result = step()
        if inspect.isawaitable(result):
            result = await result
        if result is False:
            self._app.set_timer(RETRY_S, self._after_refresh)
            return
        self._steps.pop(0)
        self.ran.append(getattr(step, "__qualname__", repr(step)))
        if self._steps:
            self._app.set_timer(STEP_GAP_S, self._after_refresh)
        else:
            self.done = True

    def _after_refresh(self) -> None:
        """The next step once the screen is drawn: a key handled meanwhile has its frame drawn before that step runs
        (handled first is not enough: its frame waits for the screen's next refresh, and a step would come first)."""
        if self._app.is_running:
            self._app.call_after_refresh(self._next)
