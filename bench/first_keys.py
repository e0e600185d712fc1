"""A reopen's first keys, from its first frame on: what a user who presses a key at once waits for.

    python bench/first_keys.py --logdir /tmp/warm-1g                      # the cache under ~/.cache (warm if filled)
    python bench/first_keys.py --logdir /tmp/app-2000 --cache-home DIR --rounds 3 --every 0.1 --keys 12

`bench/many_runs.py` presses its first key half a second after Pilot hands the app over, which it does only once the
app is idle: it cannot see a key pressed while the first screen's follow-ups run (the chart and the Diagnosis pane's
Markdown made ready, the worst run's panes). Here, in a fresh process per round, a cursor key is due every `--every`
seconds from the first frame the terminal is handed (Textual's headless driver, 160×48), each timed from when it was due
to the first frame after the cursor moved: the keys are sent from the UI thread's own event loop, which cannot send one
while that thread is busy, and a user's key does not wait for it (timed from the sending, a stall before it went
unseen). With it, the UI thread's CPU seconds from the sending to that frame (the wall time on a shared machine
includes the other threads' turns). Prints every latency in order; asserts nothing. Run it on the base and on a change
in turn, in the same minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def child(logdir: str, every: float, keys: int) -> dict:
    from many_runs import press_key

    from tbtriage.tui.app import make_app
    from tbtriage.tui.widgets.run_table import RunTable

    start = time.perf_counter()
    frames: list[float] = []
    first = asyncio.Event()
    out: dict = {"keys_ms": [], "cpu_ms": [], "sent_s": []}

    async def press(app, key: str, due: float) -> None:
        sent, cpu = time.perf_counter(), time.thread_time()
        drawn = await press_key(app, key, frames)
        if drawn is not None:
            out["keys_ms"].append(round(1000 * (drawn - min(due, sent)), 1))
            out["cpu_ms"].append(round(1000 * (time.thread_time() - cpu), 1))
            out["sent_s"].append(round(sent - start, 3))

    async def main() -> None:
        app = make_app(logdir, follow=False)
        display = app._display

        def displayed(screen, update) -> None:
            display(screen, update)
            if update is not None:
                frames.append(time.perf_counter())
                if not first.is_set():
                    out["first_frame_s"] = round(frames[-1] - start, 3)
                    first.set()

        app._display = displayed  # type: ignore[method-assign]
        async with app.run_test(size=(160, 48)):
            await first.wait()
            due = frames[0]
            for _ in range(keys):
                due = max(due + every, time.perf_counter())  # after the last key's frame, if that came later
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                tables = app.screen.query(RunTable)
                if app.view.current_run is None or not tables or tables.first().row_count < 2:
                    continue  # no runs listed yet: nothing a key could move
                # Down from the top row, else up (as bench/many_runs.py): the cursor must move.
                await press(app, "down" if tables.first().cursor_row == 0 else "up", due)
            out["warmed_up"] = getattr(getattr(app, "warm_up", None), "done", None)

    asyncio.run(main())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--every", type=float, default=0.1, help="seconds between keys, from the first frame")
    parser.add_argument("--keys", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--cache-home", help="XDG_CACHE_HOME for the rounds (default: as set)")
    args = parser.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(args.logdir, args.every, args.keys)))
        return 0
    env = dict(os.environ, **({"XDG_CACHE_HOME": args.cache_home} if args.cache_home else {}))
    for _ in range(args.rounds):
        argv_ = ["--child", "--logdir", args.logdir, "--every", str(args.every), "--keys", str(args.keys)]
        proc = subprocess.run([sys.executable, __file__, *argv_], capture_output=True, text=True, env=env, cwd=ROOT)
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            sys.exit(f"the round failed ({proc.returncode}): {proc.stderr[-2000:]}")
        r = json.loads(line[len("RESULT ") :])
        print(
            f"first frame {r['first_frame_s']:.2f} s; keys (ms from due, in order): "
            f"{', '.join(f'{x:.0f}' for x in r['keys_ms'])}"
            f"; worst {max(r['keys_ms'], default=float('nan')):.0f} ms; UI CPU per key (ms): "
            f"{', '.join(f'{x:.0f}' for x in r['cpu_ms'])}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
