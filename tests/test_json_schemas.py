"""The JSON Schemas in docs/ are the contract a script author reads: valid, complete, and held to the code.

The tests that produce JSON (report, diagnose, watch alerts, export lines) validate it against these schemas;
this file checks the schemas themselves.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from tbtriage.analysis.causes import CAUSES
from tbtriage.analysis.datamodel import FINDING_KINDS, ROLES, SEVERITIES
from tbtriage.analysis.llm_answer import CONFIDENCES
from tests._report_contract import ALERT, COMPARE, DIAGNOSE, DOCS, EXPORT_LINE, REPORT, _registry, contract_problems

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = sorted(DOCS.glob("*.schema.json"))


def load(name: str) -> dict:
    return json.loads((DOCS / f"{name}.schema.json").read_text(encoding="utf-8"))


def refs(node) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if "$ref" in node else []
        return own + [r for v in node.values() for r in refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in refs(v)]
    return []


@pytest.mark.parametrize("path", SCHEMAS, ids=lambda p: p.name)
def test_each_schema_is_valid_and_every_reference_resolves(path):
    schema = json.loads(path.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    resolver = _registry().resolver(base_uri=path.name)
    for ref in refs(schema):
        resolver.lookup(ref)  # raises when the target is missing


def test_every_machine_output_has_a_schema():
    assert {p.name.removesuffix(".schema.json") for p in SCHEMAS} == {REPORT, DIAGNOSE, ALERT, EXPORT_LINE, COMPARE}


def test_the_schema_vocabularies_are_the_codes():
    """A new finding kind, role or severity must reach the published contract too."""
    finding = load(REPORT)["$defs"]["finding"]["properties"]
    assert finding["kind"]["enum"] == list(FINDING_KINDS)
    assert finding["severity"]["enum"] == list(SEVERITIES)
    tag_info = load(REPORT)["$defs"]["run"]["properties"]["tags"]["additionalProperties"]
    assert tag_info["properties"]["role"]["enum"] == [*ROLES, None]
    engine_cause = finding["causes"]["items"]["properties"]["cause"]
    assert engine_cause["enum"] == [*CAUSES, "unclear"]
    cause = load(DIAGNOSE)["$defs"]["answer"]["properties"]["causes"]["items"]
    assert cause["properties"]["confidence"]["enum"] == list(CONFIDENCES)


GOOD_FINDING = {
    "kind": "divergence",
    "severity": "critical",
    "tags": ["train/loss"],
    "step": 600,
    "end_step": None,
    "evidence": {"summary": "train/loss went NaN at step 600"},
    "message": "train/loss diverged at step 600",
    "suggestion": "lower the learning rate",
    "causes": [
        {
            "cause": "lr_too_high",
            "summary": "the learning rate is too high for this model and batch size",
            "confidence": 0.7,
            "evidence": {"for": ["train/lr peaks at 3, high for any optimizer"]},
            "try": "lower the peak learning rate 3-10x",
        }
    ],
}
GOOD_REPORT = {
    "tool": "tbtriage",
    "version": "0.1.0",
    "logdir": "runs/",
    "runs": [
        {
            "run": "bs64",
            "files": ["bs64/events.out.tfevents.1.host"],
            "last_step": 1000,
            "last_wall_time": 1.7e9,
            "tags": {"train/loss": {"role": "train_loss", "points": 100}},
            "health": {"score": 40, "components": {"stability": 40, "resource_efficiency": None}},
            "findings": [GOOD_FINDING],
        }
    ],
}


def test_a_field_added_later_is_accepted_but_a_renamed_one_is_not():
    """DESIGN: fields are only added, never renamed; consumers ignore what they do not know."""
    grown = copy.deepcopy(GOOD_REPORT)
    grown["generated_at"] = "2026-01-01T00:00:00Z"
    grown["runs"][0]["primary_tags"] = {"train_loss": "train/loss"}
    grown["runs"][0]["findings"][0]["causes"][0]["twin"] = "bs64_lr1e-3"
    assert contract_problems(GOOD_REPORT) == []
    assert contract_problems(grown) == []

    renamed = copy.deepcopy(GOOD_REPORT)
    finding = renamed["runs"][0]["findings"][0]
    finding["level"] = finding.pop("severity")
    renamed["runs"][0]["score"] = renamed["runs"][0].pop("health")
    problems = contract_problems(renamed)
    assert any("'severity' is a required property" in p for p in problems)
    assert any("'health' is a required property" in p for p in problems)


def test_an_alert_is_a_finding_plus_where_and_when():
    alert = {"tool": "tbtriage", "logdir": "logs/", "run": "exp_a", "detected_at": "2026-12-01T10:00:00+00:00"}
    assert contract_problems({**alert, **GOOD_FINDING}, ALERT) == []
    assert any("'kind'" in p for p in contract_problems(alert, ALERT))


def test_an_export_line_with_a_null_value_says_why():
    line = {"run": "r", "tag": "loss", "step": 3, "wall_time": 1.5, "value": None}
    assert any("'nonfinite' is a required property" in p for p in contract_problems(line, EXPORT_LINE))
    assert contract_problems({**line, "nonfinite": "nan"}, EXPORT_LINE) == []


def test_the_readme_links_the_report_schema():
    assert "docs/report.schema.json" in (ROOT / "README.md").read_text(encoding="utf-8")
