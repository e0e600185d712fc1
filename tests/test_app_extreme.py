"""The app on values near DBL_MAX: the chart draws (or says why not), every key works, nothing crashes."""

from __future__ import annotations

from tbtriage.tui.app import make_app
from tbtriage.tui.state import choose_run
from tests.test_hostile import extreme_logdir


async def _scenario(app, pilot):
    await pilot.pause(0.5)
    for _ in range(40):
        if len(app.store.reports) == len(app.store.runs) and app.store.runs:
            break
        await pilot.pause(0.1)
    app.view = choose_run(app.view, app.store, "huge")
    await pilot.pause(0.2)
    for key in ("l", "o", "l", "o", "s", "x", "x", "x"):
        await pilot.press(key)
        await pilot.pause(0.05)
    return app.is_running


def test_a_run_whose_values_reach_dbl_max_is_charted_without_a_crash(tmp_path):
    import asyncio

    app = make_app(extreme_logdir(tmp_path), follow=False)

    async def run():
        async with app.run_test(size=(120, 36)) as pilot:
            alive = await _scenario(app, pilot)
            assert alive and app.view.current_run == "huge"
            assert app.store.reports["huge"].health.score is not None

    asyncio.run(run())
    assert app.return_code in (None, 0)
