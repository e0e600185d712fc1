"""Hyperparameters a run records beside its event files: `hparams.yaml` (PyTorch Lightning) and `config.json`.

The hparams plugin's values arrive in `Run.hparams` from the reader; many training scripts instead
(or also) drop a config file in the run directory (`compare.hparams_of` merges every source). Both are untrusted data: values are kept as
short scalars, nested mappings are flattened to dotted keys, and files above a size cap are
ignored rather than parsed, because a run directory is not ours to trust.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Collection
from pathlib import Path
from typing import Any

from .datamodel import Run

#: Config files a training script drops beside its events, on top of those `run_config` knows.
EXTRA_CONFIG_FILES = ("args.json",)
#: Text summaries whose tag says they hold the run's arguments (HF Trainer writes `args`, others `hparams`).
HPARAM_TEXT_TAG = re.compile(r"(?:^|/)(args|hparams|hyperparameters|config|params)(?:/text_summary)?$", re.I)
#: Config files looked for in a run directory, in the order their values override each other.
CONFIG_FILES = ("hparams.yaml", "hparams.yml", "config.json")
#: A hyperparameter file is a few KB; anything far larger is a dataset or a dump, not a config.
MAX_CONFIG_BYTES = 256 * 1024

_YAML_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>[^:#\s][^:#]*?)\s*:\s*(?P<value>.*?)\s*$")


def _scalar(text: str) -> Any:
    """A YAML/JSON-ish scalar from its text: int, float, bool, None or the (unquoted) string."""
    low = text.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    if low in ("null", "none", "~", ""):
        return None
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text.strip("'\"")


def parse_flat_yaml(text: str) -> dict[str, Any]:
    """The `key: value` mappings of a YAML document, nesting flattened to dotted keys; lists are skipped.

    Enough for hparams.yaml as Lightning and most scripts write it, without a YAML dependency.
    """
    out: dict[str, Any] = {}
    stack: list[tuple[int, str]] = []  # (indent, key) of the mappings we are inside
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip()
        if not line.strip() or line.lstrip().startswith(("#", "-", "---")):
            continue
        match = _YAML_LINE.match(line)
        if not match:
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = ".".join([k for _, k in stack] + [match["key"].strip("'\"")])
        value = match["value"]
        if value == "" or value in ("|", ">"):
            stack.append((indent, match["key"].strip("'\"")))
            continue
        if value.startswith("!!"):  # python object tags Lightning sometimes writes
            continue
        out[key] = _scalar(value)
    return out


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    if isinstance(obj, (list, tuple)):
        if len(obj) <= 4 and all(isinstance(v, (int, float, str, bool)) for v in obj):
            return {prefix[:-1]: ",".join(str(v) for v in obj)}
        return {}
    return {prefix[:-1]: obj}


def read_config_file(path: Path) -> dict[str, Any]:
    """Flat hyperparameters from one config file; {} when it is absent, too large or unparsable."""
    try:
        # One stat for both questions (`Path.is_file` is a stat that answers False where this one raises).
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_CONFIG_BYTES:
            return {}
        text = path.read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError):
        return {}
    return parse_config(path.name, text)


def parse_config(name: str, text: str) -> dict[str, Any]:
    """Flat hyperparameters from a config file's text (JSON by its name, else flat YAML); {} when unparsable."""
    if name.endswith(".json"):
        try:
            return _flatten(json.loads(text))
        except (ValueError, RecursionError):
            return {}
    return parse_flat_yaml(text)


def _hparams_from_text(text: str) -> dict[str, Any]:
    """Arguments a text summary holds: a JSON object, a Markdown `| key | value |` table, or `key: value` lines."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            return {str(k): v for k, v in obj.items() if isinstance(v, (str, int, float, bool)) or v is None}
    lines = [line.strip() for line in stripped.splitlines() if line.strip()]
    if any(line.startswith("|") for line in lines):
        rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("|")]
        separator = next((i for i, row in enumerate(rows) if all(set(c) <= set("-: ") for c in row)), None)
        body = rows[separator + 1 :] if separator is not None else rows  # the row above `---` is the header
        return {row[0]: row[1] for row in body if len(row) == 2 and row[0]}
    out: dict[str, Any] = {}
    for line in lines:
        key, colon, value = line.partition(":")
        if colon and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


def config_paths(run: Run) -> dict[str, Path]:
    """Where a local run's config files would be (name -> path, whether there or not); {} for a run on a store."""
    if run.path is None or "://" in str(run.path):
        return {}
    directory = Path(run.path)
    if directory.is_file():
        directory = directory.parent
    return {name: directory / name for name in _NAMES}


def config_file_stats(run: Run, listed: Collection[str] | None = None) -> dict[str, list | None]:
    """What each config file the run's hyperparameters may come from is (`config_paths`): [size, mtime, device,
    inode, content hash], None where absent, a directory or unreadable (nothing is read from it either). A cached
    verdict, and the health index, hold only while these are unchanged.

    `listed`: every name in the run's directory (`run.path`), from a listing the caller has just taken: a config
    file not among them is absent without a stat of its own (the health index checks every run of a logdir before
    the app's first frame: ~5 stats a run otherwise, nearly all of files that are not there)."""
    if listed is not None:
        directory = os.fspath(run.path or "")
        return {name: _config_file_stat(os.path.join(directory, name)) if name in listed else None for name in _NAMES}
    return {name: _config_file_stat(path) for name, path in config_paths(run).items()}


#: Every config file name `config_paths` looks for, in its order.
_NAMES = (*CONFIG_FILES, *EXTRA_CONFIG_FILES)


def _config_file_stat(path: str | Path) -> list | None:
    try:
        st = os.stat(path)
        with open(path, "rb") as f:
            digest = hashlib.blake2b(f.read(MAX_CONFIG_BYTES + 1), digest_size=16).hexdigest()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino, digest]


def run_hparams(run: Run) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Every hyperparameter known for a run and where they came from; later sources win.

    Order: text summaries (HF Trainer's `args`), config files beside the events (`hparams.yaml`,
    `config.json`, `args.json`; read only), then the hparams plugin, which is the most deliberate record.
    """
    merged: dict[str, Any] = {}
    sources: list[str] = []
    for tag, entries in sorted(run.texts.items()):
        if entries and HPARAM_TEXT_TAG.search(tag):
            found = _hparams_from_text(entries[-1].text)
            if found:
                merged.update(found)
                sources.append(f"text summary {tag}")
    # A run read from a store (`s3://...`) has a URL for a path: its config files were read with its events.
    remote = run.path is not None and "://" in str(run.path)
    local = config_paths(run)
    for name in (*CONFIG_FILES, *EXTRA_CONFIG_FILES) if local or remote else ():
        if remote:
            text = run.config_texts.get(name)
            found = parse_config(name, text) if text is not None else {}
        else:
            found = read_config_file(local[name])
        if found:
            merged.update(found)
            sources.append(name)
    if run.hparams:
        merged.update({str(k): v for k, v in run.hparams.items()})
        sources.append("hparams plugin")
    return merged, tuple(sources)
