"""Did a speed-up change a verdict? Every report field and every series feature, before and after a change.

    git stash; python bench/same_verdicts.py --save /tmp/before.json      # on the code before the change
    git stash pop; python bench/same_verdicts.py --against /tmp/before.json
    python bench/same_verdicts.py --save /tmp/serial.json --workers 1 --logdir big/   # the serial path, then
    python bench/same_verdicts.py --against /tmp/serial.json --slim --logdir big/    # the pool reading the runs

It judges the demo logdir (written to a temp dir), the committed real-run corpus (`bench/corpus/runs`) and
any `--logdir` given, at a fixed `now` (so `stalled` does not drift with the wall clock), with `--workers`
processes, and records the JSON report plus `repr` of every feature (its `extra` in key order) and headline tag. `--against` prints
the first differences and exits 1 when there are any. A speed-up must leave this silent.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The fixed "now" every logdir is judged at (2030-03-17): later than any generated or corpus run.
NOW = 1.9e9


def verdicts(path: Path, workers: int | None, slim: bool = False) -> dict[str, str]:
    """Flat {key: text} of everything the engine says about the logdir at `path`."""
    from tbtriage.analysis.compare import compare
    from tbtriage.analysis.engine import diagnose
    from tbtriage.cli.report import report_dict

    # Without --workers, no such argument: the script also runs on code from before the pool existed.
    report = diagnose(
        path, now=NOW, **({} if workers is None else {"workers": workers}), **({"slim": True} if slim else {})
    )
    data = report_dict(report, compare(report.runs))
    data["logdir"] = path.name  # the demo is written to a new temp dir each time
    out = {"report": json.dumps(data, sort_keys=True, default=str)}
    for run in report.runs:
        out[f"{run.name} | primary"] = repr(run.primary_tags)
        for tag, features in run.features.items():
            out[f"{run.name} | {tag}"] = feature_text(features)
    return out


def feature_text(features) -> str:
    """`repr` of a feature with its `extra` items in key order: features read back from the verdict cache hold
    the same items in the order JSON kept them, which is no difference in what the engine says."""
    return repr(replace(features, extra=dict(sorted(features.extra.items()))))


def collect(logdirs: list[Path], workers: int | None, slim: bool = False) -> dict[str, dict[str, str]]:
    from tbtriage.analysis.demo import write_demo

    found = {}
    with tempfile.TemporaryDirectory(prefix="tbtriage-verdicts-") as temp:
        demo = write_demo(Path(temp) / "demo").path
        for name, path in [
            ("demo", demo),
            ("corpus", ROOT / "bench" / "corpus" / "runs"),
            *[(str(p), p) for p in logdirs],
        ]:
            found[name] = verdicts(Path(path), workers, slim)
            print(f"{name}: {len(found[name]) - 1} series judged", file=sys.stderr)
    return found


def differences(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]) -> list[str]:
    out = []
    for logdir in sorted(set(before) | set(after)):
        old, new = before.get(logdir, {}), after.get(logdir, {})
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                out.append(f"{logdir}: {key}\n  before: {str(old.get(key))[:300]}\n  after:  {str(new.get(key))[:300]}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--save", type=Path, help="write the verdicts to this file")
    action.add_argument("--against", type=Path, help="compare with verdicts saved before")
    parser.add_argument("--logdir", type=Path, action="append", default=[], help="judge this logdir too")
    parser.add_argument("--workers", type=int, help="processes (default: as `report` chooses)")
    parser.add_argument(
        "--slim", action="store_true", help="as `report` judges: the pool's workers read the runs (diagnose slim=True)"
    )
    args = parser.parse_args(argv)
    found = collect(args.logdir, args.workers, args.slim)
    if args.save:
        args.save.write_text(json.dumps(found))
        print(f"saved {sum(map(len, found.values()))} verdicts to {args.save}")
        return 0
    diff = differences(json.loads(args.against.read_text()), found)
    for line in diff[:20]:
        print(line)
    print(f"{len(diff)} difference(s) against {args.against}")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
