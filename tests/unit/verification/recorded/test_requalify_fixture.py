"""The requalification recorded on one H200 (tests/data/megatron-h200-requalify/): a Megatron-LM tree replaced
at the same path is another stack, named part by part, and the attempts made on each stack verify."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftqual.stack import identity as stackid
from ftqual.verification.verify import build_report
from ftqual.workflow import attempts
from ftqual.workflow.attempts import record_path

ROOT = Path(__file__).resolve().parents[3] / "data" / "megatron-h200-requalify"
V019 = ("baseline/b6be74abf843-1", "kill/50bfe18db278-1")
V016 = ("baseline/6e961af280cb-1",)


def record(slot: str) -> dict:
    # recorded by an earlier version, whose attempt records were named run.json (ftqual.workflow.attempts)
    return json.loads(record_path(ROOT / "results" / slot).read_text())


@pytest.mark.parametrize("run_dir", sorted((ROOT / "runs").iterdir()), ids=lambda p: p.name)
def test_every_recorded_run_passes(run_dir):
    assert build_report(run_dir)["verdict"] == "pass"


def test_each_attempt_is_keyed_by_its_settings_and_the_stack_it_ran_on():
    for slot in (*V019, *V016):
        run = record(slot)
        ident = stackid.from_json(run["stack"])
        assert ident is not None and ident.digest == run["stack_digest"]
        assert slot.split("/")[1].rsplit("-", 1)[0] == attempts.attempt_key(
            run["settings_fingerprint"], ident.digest
        )
        assert run["machine"]["gpus"] == "1 x NVIDIA H200" and run["machine"]["driver"] == "580.159.04"
    assert stackid.from_json(record(V019[0])["stack"]).parts["megatron"] == "0.19.1 at /tmp/mlm"
    assert stackid.from_json(record(V016[0])["stack"]).parts["megatron"] == "0.16.0 at /tmp/mlm"


def test_the_replaced_tree_is_named_as_the_change():
    old = stackid.from_json(record(V019[0])["stack"])
    new = stackid.from_json(record(V016[0])["stack"])
    assert stackid.changes(old, new) == [
        "Megatron-LM 0.19.1 at /tmp/mlm -> 0.16.0 at /tmp/mlm",
        "Megatron-LM tree digest 8737ef05c07e3d86 (593 files) -> cb3b108416ea7e5f (485 files)",
    ]
    assert record(V016[0])["slot_reason"].startswith("the stack changed since attempt b6be74abf843-1")
    # the kill's next attempt, planned on the new stack, says the same
    kill = record(V019[1])
    reason = attempts.why_new(ROOT / "results" / "kill", kill["settings_fingerprint"], new)
    assert reason == (
        "the stack changed since attempt 50bfe18db278-1 (same settings): "
        + stackid.describe_changes(old, new)
    )


def test_the_recorded_identities_are_whole():
    for path in sorted((ROOT / "results" / "stack").glob("*.json")):
        ident = stackid.from_json(json.loads(path.read_text()))
        assert ident is not None and path.stem == ident.digest
        assert {
            "torch",
            "torch_cuda",
            "nccl",
            "nvrx",
            "ft_launcher",
            "megatron_tree",
            "gpus",
            "driver",
        } <= set(ident.parts)
