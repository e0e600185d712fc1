"""The contracts of tbtriage's JSON outputs: the JSON Schemas in docs/, checked with jsonschema.

Every test that parses JSON tbtriage produced runs it through `contract_problems` (or `assert_follows`), so the
schema a user reads is the one the tests hold the code to.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource

DOCS = Path(__file__).resolve().parent.parent / "docs"

#: The schema of each machine-readable output (file stem under docs/).
REPORT, DIAGNOSE, ALERT, EXPORT_LINE, COMPARE = "report", "diagnose", "alert", "export-line", "compare"


@cache
def _registry() -> Registry:
    """Every docs/*.schema.json under its file name, so `report.schema.json#/$defs/finding` resolves."""
    return Registry().with_resources(
        (path.name, Resource.from_contents(json.loads(path.read_text(encoding="utf-8"))))
        for path in sorted(DOCS.glob("*.schema.json"))
    )


@cache
def validator(schema: str = REPORT) -> Draft202012Validator:
    contents = _registry()[f"{schema}.schema.json"].contents
    return Draft202012Validator(contents, registry=_registry(), format_checker=FormatChecker())


def contract_problems(doc: Any, schema: str = REPORT) -> list[str]:
    """Every way `doc` departs from docs/<schema>.schema.json, as `$.json.path: what is wrong` lines."""
    return sorted(f"{e.json_path}: {e.message}" for e in validator(schema).iter_errors(doc))


def assert_follows(doc: Any, schema: str = REPORT) -> Any:
    """`doc`, after failing the test with every problem when it does not follow the schema."""
    problems = contract_problems(doc, schema)
    assert not problems, f"does not follow docs/{schema}.schema.json:\n" + "\n".join(problems)
    return doc
