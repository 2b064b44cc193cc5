"""The mutation corpus, extended to what `ftqual report` reads: every field of a real verify report (and of
each of its checks) deleted or given a value of every wrong type. No mutation ends in a traceback (summary,
summary.md, junit.xml all render), and none of the fields that carry the verdict can be mutated into a PASS.
"""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET

import pytest

from ftqual.report.inputs import PreflightInput, load_verify
from ftqual.report.junit import render_junit
from ftqual.report.markdown import render_markdown
from ftqual.report.summary import ReportOptions, build_summary
from ftqual.verification.schema import REQUIRED_CHECKS, campaign_problems
from tests.unit.report.conftest import DATA

DELETE = object()
VALUES = {
    "deleted": DELETE,
    "null": None,
    "string": "x",
    "integer": 7,
    "boolean": True,
    "list": [1, "a"],
    "object": {"a": 1},
}
# Fields whose corruption must never leave a PASS standing (their value decides the verdict).
VERDICT_FIELDS = ("schema", "verdict", "checks")


def summarize(tmp_path, doc) -> dict:
    path = tmp_path / "kill" / "verify.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    summary = build_summary(
        [load_verify("kill", path)],
        PreflightInput(None, None, "none"),
        ReportOptions(),
        "2026-01-01T00:00:00Z",
    )
    render_markdown(summary)
    ET.fromstring(render_junit(summary))
    return summary["scenarios"][0]


def mutated(doc: dict, path: tuple, value) -> dict:
    out = copy.deepcopy(doc)
    target = out
    for key in path[:-1]:
        target = target[key]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return out


def test_the_unmutated_report_passes(tmp_path, docs):
    assert summarize(tmp_path, docs["kill"])["verdict"] == "pass"


@pytest.mark.parametrize("kind", sorted(VALUES))
def test_every_top_level_field(tmp_path, docs, kind):
    doc = docs["kill"]
    for key in list(doc):
        scenario = summarize(tmp_path, mutated(doc, (key,), VALUES[kind]))
        if key in VERDICT_FIELDS:
            assert scenario["verdict"] != "pass", (key, kind)


@pytest.mark.parametrize("kind", sorted(VALUES))
def test_every_field_of_every_check(tmp_path, docs, kind):
    doc = docs["kill"]
    for index, check in enumerate(doc["checks"]):
        for key in list(check):
            scenario = summarize(tmp_path, mutated(doc, ("checks", index, key), VALUES[kind]))
            gating = check.get("gates") is not False
            # a renamed check is a missing one: that matters for the checks the fault requires
            renamed_required = (
                key == "id" and check["id"] in REQUIRED_CHECKS["kill"] and VALUES[kind] != check["id"]
            )
            broken_status = key == "status" and VALUES[kind] != "pass"
            if gating and (renamed_required or broken_status):
                assert scenario["verdict"] != "pass", (check["id"], key, kind)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "null",
        "[]",
        '"x"',
        "{",
        '{"schema": "ftqual.verify/v1", "checks": ' + "[" * 50000 + "]" * 50000 + "}",
    ],
)
def test_unreadable_reports(tmp_path, text):
    assert summarize(tmp_path, text)["verdict"] == "inconclusive"


CAMPAIGN_PARTS = (("campaign",), ("campaign", "cycles", 3), ("campaign", "plan", 3), ("campaign", "goodput"))


@pytest.mark.parametrize("kind", sorted(VALUES))
def test_every_field_of_the_campaign_section(tmp_path, kind):
    """A campaign report (data/campaign.verify.json): each field of its `campaign` section, of a cycle row,
    of a plan entry and of its goodput, deleted or of every wrong type. Nothing raises; whatever the schema
    refuses is inconclusive, with one line naming the campaign field."""
    doc = json.loads((DATA / "campaign.verify.json").read_text())
    for part in CAMPAIGN_PARTS:
        target = doc
        for key in part:
            target = target[key]
        for key in list(target):
            changed = mutated(doc, (*part, key), VALUES[kind])
            scenario = summarize(tmp_path, changed)
            if campaign_problems(changed["campaign"]) if isinstance(changed.get("campaign"), dict) else True:
                assert scenario["verdict"] == "inconclusive", (part, key, kind)
                assert "campaign" in scenario["reason"] and "\n" not in scenario["reason"]
