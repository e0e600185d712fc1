"""Remake the labelled corpus: train every case for real and write it in its conventions, with a label each.

    pip install -e ".[corpus]"                       # torch (CPU) for the training
    python -m bench.corpus.generate                  # every case, every seed -> bench/corpus/runs/
    python -m bench.corpus.generate --quick          # one seed per case (a few seconds per case)
    python -m bench.corpus.generate --only 'lr_.*'   # cases whose name matches
    python -m bench.corpus.generate --missing        # only the runs runs/ does not hold yet
    python -m bench.corpus.generate --out /tmp/c     # somewhere else

A run folder is `<case>__<convention>__s<seed>/` holding its event files (Keras: `train/` and `validation/`)
and `label.json`: the kinds a careful reader would name, each with an onset and a tolerance in the run's own
step axis, the configured cause, the convention, the seed, the healthy twin and the training configuration.
Beside each directory of event files lies `config.json`, the training configuration as a training script
saves its arguments: what the engine reads as the run's settings to find a healthy twin (`twins.py`).

    python -m bench.corpus.generate --configs        # only (re)write config.json from the labels: no training
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):  # `python bench/corpus/generate.py`
    sys.path.insert(0, str(HERE.parent.parent))
    __package__ = "bench.corpus"

from .cases import Case, cases, check_healthy, seeds_of  # noqa: E402
from .conventions import CONVENTIONS, write_run  # noqa: E402
from .trace import Trace  # noqa: E402
from .train import RLSetup, Setup, train, train_rl  # noqa: E402

DEFAULT_OUT = HERE / "runs"
#: Bytes cut from the end of a crashed run's last events file: less than one record, so the record is torn.
TORN_BYTES = 9


def run_name(case: Case, convention: str, seed: int) -> str:
    return f"{case.name}__{convention}__s{seed}"


def _convention_for(case: Case, index: int) -> str:
    return case.conventions[index % len(case.conventions)]


def _to_axis(steps: int, axis: str, steps_per_epoch: int) -> int:
    return steps if axis == "step" else steps // steps_per_epoch


def label_for(case: Case, trace: Trace, convention: str, seed: int) -> dict:
    conv = CONVENTIONS[convention]
    spe = trace.steps_per_epoch
    setup = dataclasses.replace(case.setup, seed=seed)
    expects = []
    for e in case.expect(trace, setup):
        # An onset can only be placed to within the convention's logging interval.
        tolerance = max(e.tolerance, conv.interval + 1) if conv.axis == "step" else max(1, math.ceil(e.tolerance / spe))
        expects.append(
            {
                "kind": e.kind,
                "or": list(e.alternatives),
                "onset": None if e.onset is None else _to_axis(e.onset, conv.axis, spe),
                "tolerance": tolerance,
                "onset_step": e.onset,
            }
        )
    return {
        "case": case.name,
        "cause": case.cause,
        "healthy": case.healthy,
        "no_data": case.no_data,
        "twin": case.twin,
        "convention": convention,
        "writer": conv.writer,
        "seed": seed,
        "axis": conv.axis,
        "steps_per_epoch": spe,
        "last_step": trace.last_step,
        "expect": expects,
        "also_ok": list(case.also_ok),
        "note": case.note,
        "setup": dataclasses.asdict(setup),
    }


#: The file a training script saves its configuration to, beside its event files.
CONFIG_FILE = "config.json"


def write_config(folder: Path, setup: Setup | RLSetup) -> None:
    """`setup` as `config.json` beside each directory of `folder`'s event files (the folder itself if none)."""
    text = json.dumps(dataclasses.asdict(setup), indent=1) + "\n"
    for directory in sorted({p.parent for p in folder.rglob("events.out.tfevents.*")}) or [folder]:
        (directory / CONFIG_FILE).write_text(text)


def write_configs(out: Path) -> int:
    """`config.json` for every labelled run in `out`, from its label's configuration (the defaults of fields
    the label predates filled in, as the generator would write them now); the number of runs."""
    labels = sorted(out.glob("*/label.json"))
    for path in labels:
        stored = json.loads(path.read_text())["setup"]
        kind = RLSetup if set(stored) <= {f.name for f in dataclasses.fields(RLSetup)} else Setup
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in stored.items()}
        write_config(path.parent, kind(**values))
    return len(labels)


def _tear_last_record(folder: Path) -> None:
    """The process died mid-write: the newest events file ends inside its last record."""
    files = sorted(p for p in folder.rglob("*tfevents*") if p.is_file())
    last = files[-1]
    data = last.read_bytes()
    last.write_bytes(data[:-TORN_BYTES])


def generate(
    out: Path, only: str | None = None, quick: bool = False, missing: bool = False, chosen: list[Case] | None = None
) -> list[Path]:
    """Train and write every case of `chosen` (default: the corpus's `cases()`) whose name matches `only`."""
    pattern = re.compile(only) if only else None
    written = []
    for case in cases() if chosen is None else chosen:
        if pattern and not pattern.search(case.name):
            continue
        seeds = seeds_of(case)[:1] if quick else seeds_of(case)
        for index, seed in enumerate(seeds):
            if missing and any(out.glob(f"{case.name}__*__s{seed}/label.json")):
                continue
            started = time.perf_counter()
            setup = dataclasses.replace(case.setup, seed=seed)
            trace = train_rl(setup) if isinstance(setup, RLSetup) else train(setup)
            check = case.check or (check_healthy if case.healthy else None)
            problem = check(trace) if check else None
            if problem:
                # The configuration did not do what the label would claim on this seed: leave it out.
                print(f"{case.name} seed {seed}: left out ({problem})", flush=True)
                continue
            convention = _convention_for(case, index)
            folder = out / run_name(case, convention, seed)
            if folder.exists():
                shutil.rmtree(folder)
            write_run(trace, CONVENTIONS[convention], folder)
            if case.post == "truncate":
                _tear_last_record(folder)
            write_config(folder, setup)
            label = label_for(case, trace, convention, seed)
            (folder / "label.json").write_text(json.dumps(label, indent=1) + "\n")
            written.append(folder)
            kinds = ", ".join(f"{e['kind']}@{e['onset']}±{e['tolerance']}" for e in label["expect"]) or "healthy"
            print(f"{folder.name:60s} {kinds:40s} {time.perf_counter() - started:5.1f}s", flush=True)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", help="regex over case names")
    parser.add_argument("--quick", action="store_true", help="one seed per case")
    parser.add_argument("--missing", action="store_true", help="only runs not in --out yet (keeps the others)")
    parser.add_argument("--configs", action="store_true", help="only write config.json from the labels in --out")
    args = parser.parse_args(argv)
    if args.configs:
        print(f"config.json written for {write_configs(args.out)} runs in {args.out}")
        return 0
    started = time.perf_counter()
    if args.only is None and not args.missing and args.out.exists():
        shutil.rmtree(args.out)  # a full remake: no stale runs from cases that were renamed
    args.out.mkdir(parents=True, exist_ok=True)
    written = generate(args.out, args.only, args.quick, args.missing)
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"{len(written)} runs, {size / 1e6:.2f} MB in {args.out}, {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
