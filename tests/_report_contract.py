"""A hand-written validator for the JSON report contract of shared/DESIGN.md (no jsonschema dependency)."""

from __future__ import annotations

from typing import Any

from tbtriage.analysis.datamodel import FINDING_KINDS, ROLES, SEVERITIES

_FINDING_KEYS = {"kind", "severity", "tags", "step", "end_step", "evidence", "message", "suggestion"}
_RUN_KEYS = {"run", "files", "last_step", "last_wall_time", "tags", "health", "findings"}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def contract_problems(doc: Any) -> list[str]:
    """Every way `doc` departs from the contract (extra fields are allowed: the contract only grows)."""
    problems: list[str] = []

    def need(cond: bool, where: str, what: str) -> bool:
        if not cond:
            problems.append(f"{where}: {what}")
        return cond

    if not need(isinstance(doc, dict), "$", "not an object"):
        return problems
    need(doc.get("tool") == "tbtriage", "$.tool", f"{doc.get('tool')!r} is not 'tbtriage'")
    need(isinstance(doc.get("version"), str), "$.version", "not a string")
    need(isinstance(doc.get("logdir"), str), "$.logdir", "not a string")
    if not need(isinstance(doc.get("runs"), list), "$.runs", "not a list"):
        return problems
    for i, run in enumerate(doc["runs"]):
        at = f"$.runs[{i}]"
        if not need(isinstance(run, dict), at, "not an object"):
            continue
        missing = _RUN_KEYS - set(run)
        need(not missing, at, f"missing {sorted(missing)}")
        need(isinstance(run.get("run"), str), f"{at}.run", "not a string")
        need(
            isinstance(run.get("files"), list) and all(isinstance(f, str) for f in run.get("files", [])),
            f"{at}.files",
            "not a list of strings",
        )
        need(_is_int(run.get("last_step")) or run.get("last_step") is None, f"{at}.last_step", "not an int")
        need(
            _is_number(run.get("last_wall_time")) or run.get("last_wall_time") is None,
            f"{at}.last_wall_time",
            "not a number",
        )
        tags = run.get("tags")
        if need(isinstance(tags, dict), f"{at}.tags", "not an object"):
            for tag, info in tags.items():
                where = f"{at}.tags[{tag!r}]"
                if need(isinstance(info, dict), where, "not an object"):
                    need(
                        info.get("role") is None or info.get("role") in ROLES,
                        f"{where}.role",
                        f"{info.get('role')!r} not a role",
                    )
                    need(_is_int(info.get("points")) and info["points"] >= 0, f"{where}.points", "not a count")
        health = run.get("health")
        if need(isinstance(health, dict), f"{at}.health", "not an object"):
            score = health.get("score")
            need(_is_number(score) and 0 <= score <= 100, f"{at}.health.score", f"{score!r} not in 0-100")
            components = health.get("components")
            if need(isinstance(components, dict), f"{at}.health.components", "not an object"):
                for name, value in components.items():
                    need(
                        value is None or (_is_number(value) and 0 <= value <= 100),
                        f"{at}.health.components.{name}",
                        f"{value!r} not null or 0-100",
                    )
        findings = run.get("findings")
        if not need(isinstance(findings, list), f"{at}.findings", "not a list"):
            continue
        for j, f in enumerate(findings):
            where = f"{at}.findings[{j}]"
            if not need(isinstance(f, dict), where, "not an object"):
                continue
            missing = _FINDING_KEYS - set(f)
            need(not missing, where, f"missing {sorted(missing)}")
            need(f.get("kind") in FINDING_KINDS, f"{where}.kind", f"{f.get('kind')!r} not in the vocabulary")
            need(f.get("severity") in SEVERITIES, f"{where}.severity", f"{f.get('severity')!r}")
            need(
                isinstance(f.get("tags"), list) and all(isinstance(t, str) for t in f.get("tags", [])),
                f"{where}.tags",
                "not a list of strings",
            )
            for key in ("step", "end_step"):
                need(f.get(key) is None or _is_int(f.get(key)), f"{where}.{key}", "not an int or null")
            need(isinstance(f.get("evidence"), dict), f"{where}.evidence", "not an object")
            need(isinstance(f.get("message"), str) and f.get("message"), f"{where}.message", "empty")
            need(isinstance(f.get("suggestion"), str), f"{where}.suggestion", "not a string")
    return problems
