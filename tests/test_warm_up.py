"""The app's warm-up (`tui.warm_up`): what the first screen left out is imported and mounted a step at a time, each
step on a tick of its own, so a key that comes meanwhile is answered before the next step rather than after them all."""

from __future__ import annotations

import sys
import threading

from textual import events
from textual.app import App

from tbtriage.tui.warm_up import WarmUp, import_step, importing_elsewhere
from tests._app_data import drive, until

#: Set by the module `test_a_module_another_thread_is_importing_is_left_to_it` imports, while it is being imported.
ENTERED = threading.Event()
#: That module's import finishes once this is set.
GATE = threading.Event()


class _Log(App):
    """Logs each key it gets, beside the warm-up's steps."""

    def __init__(self) -> None:
        super().__init__()
        self.log_: list[str] = []

    def on_key(self, event: events.Key) -> None:
        self.log_.append(f"key {event.key}")


def test_a_key_that_comes_during_a_step_is_answered_before_the_next_step():
    app = _Log()

    def first() -> None:
        app.log_.append("step 1")
        app.post_message(events.Key("x", "x"))  # the user presses a key while this step runs

    def second() -> None:
        app.log_.append("step 2")

    warm_up = WarmUp(app, [first, second])

    async def scenario(app, pilot):
        warm_up.start()
        await until(pilot, lambda: warm_up.done, "the warm-up never finished")
        assert app.log_ == ["step 1", "key x", "step 2"]
        assert warm_up.ran == [first.__qualname__, second.__qualname__]

    drive(app, scenario)


def test_a_step_that_cannot_run_yet_is_tried_again_and_the_steps_after_it_wait():
    app = _Log()
    tries: list[str] = []

    def health_shown() -> bool:
        tries.append("health?")
        return len(tries) >= 3  # the frame with health comes on the third look

    async def mount() -> None:  # a coroutine step (a mount) is awaited before the next one
        tries.append("mount")

    warm_up = WarmUp(app, [health_shown, mount])

    async def scenario(app, pilot):
        warm_up.start()
        warm_up.start()  # once only
        await until(pilot, lambda: warm_up.done, "the warm-up never finished")
        assert tries == ["health?", "health?", "health?", "mount"]

    drive(app, scenario)


def test_a_module_another_thread_is_importing_is_left_to_it(tmp_path, monkeypatch):
    (tmp_path / "tbtriage_slow_module.py").write_text(
        "from tests.test_warm_up import ENTERED, GATE\nENTERED.set()\nGATE.wait(30)\nDONE = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    step = import_step("json", "tbtriage_slow_module")
    assert not importing_elsewhere("tbtriage_slow_module")  # not imported at all yet
    importer = threading.Thread(target=__import__, args=("tbtriage_slow_module",))
    importer.start()
    try:
        assert ENTERED.wait(30)
        assert importing_elsewhere("tbtriage_slow_module")
        assert step() is False  # importing it here would wait for the other thread: tried again later
    finally:
        GATE.set()
        importer.join(30)
    assert not importing_elsewhere("tbtriage_slow_module") and not importing_elsewhere("json")
    assert step() is True and sys.modules["tbtriage_slow_module"].DONE
    sys.modules.pop("tbtriage_slow_module", None)
