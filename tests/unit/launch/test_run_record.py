"""run.json is one record: `RunRecord` declares its keys once; the launcher, the verifier and the plan use it.

Each test fails where a key is declared a second time: a schema rule outside the record, a key the launcher
writes that the record lacks, a field the verifier's `RunMeta` or `RunPlan` repeats, a copy of the record's
fields into another record (`run_plan_from` used to copy 14 of them).
"""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from ftqual.launch import command, run, run_schema, settings
from ftqual.launch.run_schema import RunRecord
from ftqual.stack import resolve as stack
from ftqual.verification.checks import run_plan
from ftqual.verification.evidence.run_meta import RunMeta, read_run_meta

ROOT = Path(__file__).resolve().parents[3]
KEYS = RunRecord.keys()
# The keys of the run-directory contract (docs/interfaces.md), first in every run.json.
CONTRACT_KEYS = ("schema", "run_id", "scenario", "fault", "fault_rank", "world_size", "train_iters",
                 "save_interval", "checkpoint_dir", "max_restarts", "timeouts", "started_at", "finished_at",
                 "exit_code")  # fmt: skip
# The modules of the chain that used to declare run.json's fields again: the writer and the reader's package.
CHAIN = [ROOT / "ftqual/launch/run.py", *sorted((ROOT / "ftqual/verification").rglob("*.py"))]
# More of run.json's keys than this in one dict, call or class outside RunRecord is a second declaration
# (other records share a few names: a node record's host, started_at, finished_at and exit_code).
MOST_SHARED = 5


def _written(tmp_path: Path, fault: str = "kill") -> dict:
    env = {"NVRX_WORK_DIR": str(tmp_path), "NVRX_WORKLOAD": "smoke", "NVRX_RUN_ID": "r1",
           "NVRX_DEMO_FAULT": fault, "TRAIN_ITERS": "12", "SAVE_INTERVAL": "4"}  # fmt: skip
    s = settings.load_settings(env, [], pid=1)
    choice = stack.resolve("local", "off", stack.Probe(False, False, False))
    record = run.run_record(s, command.build_plan(s, choice, 1, "x"), choice, {}, "h")
    return dataclasses.replace(record, storage={"cap_bytes": 1}).to_json()


def test_the_launcher_writes_exactly_the_records_keys_in_its_order(tmp_path):
    written = _written(tmp_path)
    assert tuple(written) == KEYS
    assert KEYS[: len(CONTRACT_KEYS)] == CONTRACT_KEYS
    assert run_schema.problem(json.loads(json.dumps(written))) is None


def test_every_key_has_its_rule_on_the_record_and_the_schema_is_made_of_them():
    """The schema (problems), the reader's defaults and the writer all come from the fields' `Key`s."""
    assert all(isinstance(f.metadata.get("key"), run_schema.Key) for f in dataclasses.fields(RunRecord))
    assert len(set(KEYS)) == len(KEYS)
    # An empty object reads as the record's defaults: the defaults of the reader are the fields' defaults.
    absent = RunRecord.from_json({"fault": "none"}, run_id="d")
    assert absent == RunRecord(run_id="d", scenario="none", fault="none")


def test_the_verifiers_record_declares_no_key_again(tmp_path):
    own = RunMeta.__dict__.get("__annotations__", {})
    assert set(own) == {"named", "ref"}, "RunMeta adds only the keys the file named (and the Ref)"
    written = _written(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps(written))
    meta = read_run_meta(tmp_path)
    assert isinstance(meta, RunRecord) and meta.named == frozenset(KEYS)
    # read back, the written record is itself (times to the microsecond)
    assert RunRecord(**{k: getattr(meta, k) for k in KEYS}).to_json() == written


def test_the_plan_holds_the_record_and_only_what_it_derives(tmp_path):
    own = {f.name for f in dataclasses.fields(run_plan.RunPlan)}
    assert own == {"run", "replay_tolerance", "baseline_tolerance"} and not own & set(KEYS)
    (tmp_path / "run.json").write_text(json.dumps(_written(tmp_path)))
    meta = read_run_meta(tmp_path)
    plan = run_plan.run_plan_from(meta, 0.5)
    assert plan.run is meta, "run_plan_from copies nothing: the plan holds the record read"
    assert (plan.fault, plan.max_restarts, plan.replay_tolerance) == ("kill", meta.max_restarts, 0.5)


def test_a_plan_with_a_key_replaced_is_the_plan_of_the_record_so_changed():
    plan = run_plan.RunPlan(RunRecord(fault="kill", injections=3), 0.5)
    one = dataclasses.replace(plan, injections=1)
    assert one.run == RunRecord(fault="kill", injections=1) and one.replay_tolerance == 0.5
    assert (plan.injections, one.expected_cycles) == (3, 2)
    with pytest.raises(TypeError):
        dataclasses.replace(plan, meteor=1)


def _keys_named(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Dict):
        return [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id == "RunRecord"):
        return [k.arg for k in node.keywords if k.arg]
    if isinstance(node, ast.ClassDef):
        return [
            s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
        ]
    return []


def test_no_module_of_the_chain_declares_or_copies_the_records_fields():
    found = []
    for path in CHAIN:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            named = [name for name in _keys_named(node) if name in KEYS]
            if len(named) > MOST_SHARED:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} names {len(named)} of run.json's keys")
    assert not found, (
        "declare run.json's keys once, in RunRecord (ftqual/launch/run_schema.py):\n" + "\n".join(found)
    )


def test_the_scan_sees_a_copy():
    """Negative control: the old `run_plan_from`, a call copying the record's fields, is found."""
    copy = ast.parse("RunPlan(fault=m.fault, fault_rank=m.fault_rank, train_iters=1, save_interval=1, "
                     "world_size=1, max_restarts=m.max_restarts)").body[0].value  # fmt: skip
    assert len([n for n in _keys_named(copy) if n in KEYS]) > MOST_SHARED
