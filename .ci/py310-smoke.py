"""Run by .ci/run under Python 3.10, the oldest Python tbtriage claims: the app opens the demo logdir and quits.

Importing the app loads the themes and the config (the `tomli` fallback for 3.10's missing tomllib).
"""

import asyncio
import sys

from tbtriage.tui.app import make_app


async def main() -> None:
    app = make_app("tbtriage-demo", follow=False)
    async with app.run_test() as pilot:
        await pilot.pause(1.0)
        await pilot.press("q")
    assert app.return_code == 0, app.return_code


asyncio.run(main())
print("ci: the app opens the demo and quits on Python", sys.version.split()[0])
