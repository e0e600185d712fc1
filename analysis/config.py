"""The user's settings: `$XDG_CONFIG_HOME/tbtriage/config.toml` (or `--config FILE`).

    [roles]                      # regex (searched in the tag) -> role; checked before the built-in rules
    "^myloss$" = "train_loss"
    "acc_top5" = "metric+"       # a metric needs a direction: metric+ (higher is better) or metric-
    "noise/.*" = "none"          # "none" (or "") hides a tag from the detectors

    [keys]                       # TUI action -> key
    quit = "q"

    [llm]
    model = "~/models/qwen2.5-1.5b-instruct-q4_k_m.gguf"
    threads = 8
    lang = "en"
    n_ctx = 4096

    theme = "dark"               # a top-level key

A missing default file is fine (every setting has a default); a file that is there but cannot be read or
parsed raises `ConfigError` with one line naming the file and the problem.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

from .datamodel import ROLES

#: Role spellings accepted in `[roles]` besides the plain role names.
ROLE_ALIASES = {
    "metric+": ("metric", 1),
    "metric-": ("metric", -1),
    "metric_max": ("metric", 1),
    "metric_min": ("metric", -1),
    "none": (None, 0),
    "": (None, 0),
}
#: Sections whose values must be tables, and the keys that must be strings at top level.
_TABLES = ("roles", "keys", "llm")
#: `[llm]` settings that are counts, and those that are text: checked here so a typo is one line, not a traceback.
_LLM_COUNTS = ("threads", "n_ctx")
_LLM_STRINGS = ("model", "lang")


class ConfigError(Exception):
    """The config file exists but cannot be used; the message is one line naming the file."""


@dataclass(frozen=True)
class Config:
    """Settings every part reads; the defaults are what a missing config file means."""

    roles: tuple[tuple[str, str], ...] = ()  # (regex, role) in file order, checked before the built-ins
    keys: dict[str, str] = field(default_factory=dict)  # TUI action -> key
    llm: dict[str, Any] = field(default_factory=dict)  # model, threads, lang, n_ctx
    theme: str | None = None
    path: Path | None = None  # the file these came from (None: defaults)


def default_config_path() -> Path:
    """`$XDG_CONFIG_HOME/tbtriage/config.toml`, `~/.config/tbtriage/config.toml` when that is unset."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "tbtriage" / "config.toml"


def parse_role(spelling: str) -> tuple[str | None, int]:
    """(role, direction) for a `[roles]` value; raises ValueError for an unknown role."""
    key = spelling.strip().lower()
    if key in ROLE_ALIASES:
        return ROLE_ALIASES[key]
    if key in ROLES:
        return key, (-1 if key in ("train_loss", "val_loss", "loss_component") else 0)
    raise ValueError(f"unknown role {spelling!r} (known: {', '.join(ROLES)}, metric+, metric-, none)")


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """Read the config file (`path`, or the XDG default); a missing default file gives the defaults."""
    explicit = path is not None
    file = Path(path).expanduser() if path is not None else default_config_path()
    if not file.exists():
        if explicit:
            raise ConfigError(f"{file}: no such config file")
        return Config()
    if not file.is_file():  # a FIFO would block the read forever, a directory cannot be parsed
        raise ConfigError(f"{file}: not a regular file")
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read config ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{file}: config is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: invalid TOML ({exc})") from None
    return _config_from_dict(data, file)


def _config_from_dict(data: dict[str, Any], file: Path) -> Config:
    for name in _TABLES:
        if name in data and not isinstance(data[name], dict):
            raise ConfigError(f"{file}: [{name}] must be a table")
    roles: list[tuple[str, str]] = []
    for pattern, role in data.get("roles", {}).items():
        if not isinstance(role, str):
            raise ConfigError(f"{file}: [roles] {pattern!r} must map to a role name, not {role!r}")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"{file}: [roles] {pattern!r} is not a valid regular expression ({exc})") from None
        try:
            parse_role(role)
        except ValueError as exc:
            raise ConfigError(f"{file}: [roles] {pattern!r}: {exc}") from None
        roles.append((pattern, role))
    keys = data.get("keys", {})
    bad_key = next((k for k, v in keys.items() if not isinstance(v, str)), None)
    if bad_key is not None:
        raise ConfigError(f"{file}: [keys] {bad_key!r} must be a key name string")
    theme = data.get("theme")
    if theme is not None and not isinstance(theme, str):
        raise ConfigError(f"{file}: theme must be a string")
    llm = dict(data.get("llm", {}))
    for name in _LLM_COUNTS:
        value = llm.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise ConfigError(f"{file}: [llm] {name} must be a positive whole number, not {value!r}")
    for name in _LLM_STRINGS:
        if name in llm and not isinstance(llm[name], str):
            raise ConfigError(f"{file}: [llm] {name} must be a string, not {llm[name]!r}")
    return Config(roles=tuple(roles), keys=dict(keys), llm=llm, theme=theme, path=file)
