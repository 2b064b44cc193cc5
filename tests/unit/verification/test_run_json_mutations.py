"""The mutation corpus, extended to run.json as `ftqual verify` reads it: every field of a real H200 kill
run's run.json deleted or given a value of every wrong type. Each mutation is a report (FAIL, INCONCLUSIVE,
or a PASS only where the field does not bear on recovery) or one clear line (RunMetaError, exit 2); never a
traceback. The fields that decide what the run was asked to do can never be mutated into a PASS."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ftqual.verification.evidence import RunMetaError
from ftqual.verification.verify import build_report

KILL = Path(__file__).resolve().parents[2] / "data" / "megatron-h200-1gpu" / "kill"
DELETE = object()
VALUES = {
    "deleted": DELETE,
    "null": None,
    "string": "x",
    "negative": -3,
    "float": 2.5,
    "boolean": True,
    "list": [1],
    "object": {"a": 1},
}
# run.json fields whose corruption must never leave a PASS standing (the scenario, its length, its exit).
DECIDING = ("schema", "fault", "train_iters", "save_interval", "exit_code")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    dest = tmp_path_factory.mktemp("mutations") / "kill"
    shutil.copytree(KILL, dest)
    return dest


@pytest.mark.parametrize("kind", sorted(VALUES))
def test_every_run_json_field(run_dir, kind):
    original = json.loads((KILL / "run.json").read_text())
    outcomes = {}
    for key in original:
        data = dict(original)
        if VALUES[kind] is DELETE:
            del data[key]
        else:
            data[key] = VALUES[kind]
        (run_dir / "run.json").write_text(json.dumps(data))
        try:
            report = build_report(run_dir)
        except RunMetaError as exc:
            assert "\n" not in str(exc) and "run.json" in str(exc)
            outcomes[key] = "usage error"
            continue
        outcomes[key] = report["verdict"]
        assert report["verdict"] in ("pass", "fail", "inconclusive")
    (run_dir / "run.json").write_text(json.dumps(original))
    for key in DECIDING:
        if key == "schema" and VALUES[kind] is DELETE:
            continue  # a run.json without its schema line is read as v1 (older recordings)
        if key in ("train_iters", "save_interval") and VALUES[kind] in (DELETE, None):
            continue  # unknown here: read from Megatron's own log (`iteration N/30`, its arguments dump)
        if key == "exit_code" and VALUES[kind] is DELETE:
            assert outcomes[key] != "pass", outcomes  # ft_launcher's exit unknown: never a clean finish
            continue
        assert outcomes[key] != "pass", (key, kind, outcomes)
