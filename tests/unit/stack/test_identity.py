"""The stack identity (ftqual.stack.identity, ftqual.stack.current) and the attempt keys it joins
(attempts)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ftqual.stack import current as stack_current
from ftqual.stack import identity as stackid
from ftqual.stack.identity import StackIdentity
from ftqual.workflow import attempts


def megatron_tree(root, version=(0, 19, 0)):
    core = root / "megatron" / "core"
    (core / "datasets").mkdir(parents=True)
    major, minor, patch = version
    (core / "package_info.py").write_text(
        f"MAJOR = {major}\nMINOR = {minor}\nPATCH = {patch}\nPRE_RELEASE = ''\n"
    )
    (core / "datasets" / "helpers.cpp").write_text("int main() { return 0; }\n")
    (core / "datasets" / "Makefile").write_text("all:\n")
    (root / "pretrain_gpt.py").write_text("print('train')\n")
    return root


def test_digest_covers_keyed_parts_only():
    a = StackIdentity({"torch": "2.11.0", "megatron_commit": "abc", "node": "n1"})
    b = StackIdentity({"torch": "2.11.0", "megatron_commit": "def", "node": "n7"})
    c = StackIdentity({"torch": "2.12.0", "megatron_commit": "abc", "node": "n1"})
    assert a.digest == b.digest  # a docs-only commit, another node of the partition: same stack
    assert a.digest != c.digest
    assert len(a.digest) == 12


def test_changes_name_each_part_readably():
    old = StackIdentity({"torch": "2.11.0", "nvrx": "0.7.0", "executor": "local", "host": "box"})
    new = StackIdentity({"torch": "2.12.0", "nvrx": "0.7.0", "executor": "slurm", "slurm_partition": "gpu"})
    found = stackid.changes(old, new)
    assert "torch 2.11.0 -> 2.12.0" in found
    assert "executor local -> slurm" in found
    assert "Slurm partition gpu (not recorded before)" in found
    assert "host no longer recorded (was box)" in found
    assert not any("nvidia-resiliency-ext" in line for line in found)
    assert stackid.describe_changes(old, new, limit=2).endswith("2 more")


def test_json_round_trip_and_malformed_records():
    ident = StackIdentity({"torch": "2.11.0"}, {"workload": "smoke"})
    data = json.loads(json.dumps(ident.to_json()))
    back = stackid.from_json(data)
    assert back == ident and back.inputs == {"workload": "smoke"} and data["digest"] == ident.digest
    for bad in (None, [], {"schema": "other", "parts": {}}, {"schema": stackid.SCHEMA, "parts": {"a": 1}}):
        assert stackid.from_json(bad) is None


def test_megatron_tree_digest_follows_sources_not_build_outputs(tmp_path):
    root = megatron_tree(tmp_path / "mlm")
    first = stackid.megatron_parts(root)
    assert first["megatron"].startswith("0.19.0 at ")
    # Megatron compiles its dataset helper into the tree at its first start: not a new stack
    (root / "megatron" / "core" / "datasets" / "helpers_cpp.cpython-312-x86_64-linux-gnu.so").write_bytes(
        b"\0"
    )
    (root / "megatron" / "core" / "__pycache__").mkdir()
    (root / "megatron" / "core" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert stackid.megatron_parts(root) == first
    # a changed source under the same path is
    (root / "megatron" / "core" / "datasets" / "helpers.cpp").write_text("int main() { return 1; }\n")
    changed = stackid.megatron_parts(root)
    assert changed["megatron_tree"] != first["megatron_tree"] and changed["megatron"] == first["megatron"]
    # and so is another release at the same path
    other = megatron_tree(tmp_path / "other", version=(0, 16, 0))
    assert stackid.megatron_parts(other)["megatron"].startswith("0.16.0 at ")


def test_megatron_commit_recorded_unkeyed(tmp_path):
    root = megatron_tree(tmp_path / "mlm")
    git = root / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "refs" / "heads" / "main").write_text("5be9626709af0123456789\n")
    parts = stackid.megatron_parts(root)
    assert parts["megatron_commit"] == "5be9626709af"
    assert "megatron_commit" not in StackIdentity(parts).keyed


def test_torch_cuda_read_from_source_text(tmp_path):
    torch = tmp_path / "torch"
    torch.mkdir()
    (torch / "version.py").write_text("from typing import Optional\ncuda: Optional[str] = '13.0'\n")
    assert stackid._torch_cuda(torch) == "13.0"
    (torch / "version.py").write_text("cuda = None\n")
    assert stackid._torch_cuda(torch) == "none (CPU build)"
    assert stackid._torch_cuda(None) == stackid.ABSENT


def test_software_parts_of_this_interpreter():
    parts = stackid.software_parts("smoke", None)
    assert parts["nvrx"] == "0.7.0"  # the real install the tests run with
    assert parts["ft_launcher"].split(" (")[0].endswith("ft_launcher")
    assert "megatron" not in parts  # the smoke workload has no tree


def test_stack_command_prints_the_identity():
    out = subprocess.run(
        [sys.executable, "-m", "ftqual", "stack"], capture_output=True, text=True, check=True
    )
    ident = stackid.from_json(json.loads(out.stdout))
    assert ident is not None and ident.parts["nvrx"] == "0.7.0" and "gpus" in ident.parts
    machine = subprocess.run(
        [sys.executable, "-m", "ftqual", "stack", "--machine"], capture_output=True, text=True, check=True
    )
    assert set(json.loads(machine.stdout)) == {"gpus", "driver", "node"}


# ---------------------------------------------------------------------------------------- the workflow


def test_local_identity_is_recorded_and_exported(tmp_path, monkeypatch):
    monkeypatch.delenv(stack_current.ENV_VAR, raising=False)
    ident = stack_current.current(
        tmp_path, workload="smoke", megatron_path=None, executor="local", python=sys.executable,
        dry_run=False,
    )  # fmt: skip
    assert ident.parts["executor"] == "local" and "host" in ident.parts
    assert stack_current.inherited(tmp_path) == ident  # what a job reads back
    record = json.loads((tmp_path / "results" / "stack" / f"{ident.digest}.json").read_text())
    assert record["digest"] == ident.digest


def test_dry_run_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(stack_current.ENV_VAR, raising=False)
    stack_current.current(
        tmp_path, workload="smoke", megatron_path=None, executor="local", python=sys.executable, dry_run=True
    )
    assert not (tmp_path / "results").exists()


def test_inherited_record_missing_or_forged_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv(stack_current.ENV_VAR, "0123456789ab")
    with pytest.raises(stack_current.StackProbeError, match="cannot be read"):
        stack_current.inherited(tmp_path)
    path = tmp_path / stack_current.record_path("0123456789ab")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(StackIdentity({"torch": "x"}).to_json()))  # another digest than its name
    with pytest.raises(stack_current.StackProbeError, match="is not the one"):
        stack_current.inherited(tmp_path)
    monkeypatch.delenv(stack_current.ENV_VAR)
    assert stack_current.inherited(tmp_path) is None


def slurm_target(probe_node=True):
    return stack_current.SlurmTarget(partition="gpu", account=None, gpus=1, probe_node=probe_node)


def test_slurm_node_side_is_probed_by_a_step_and_cached_for_dry_runs(tmp_path, monkeypatch):
    monkeypatch.delenv(stack_current.ENV_VAR, raising=False)
    asked = []

    def node(python, target):
        asked.append(stack_current.node_probe_command(python, target))
        return {"gpus": "8 x NVIDIA H200", "driver": "580.95", "node": "gpu17"}

    said = []
    common = dict(workload="smoke", megatron_path=None, executor="slurm", python="py", slurm=slurm_target())
    real = stack_current.current(tmp_path, dry_run=False, node_probe=node, say=said.append, **common)
    assert asked == [
        ["srun", "--nodes=1", "--ntasks=1", "--time=5", "--job-name=ftqual-stack-probe", "--partition=gpu",
         "--gpus=1", "py", "-m", "ftqual", "stack", "--machine"]
    ]  # fmt: skip
    assert real.parts["driver"] == "580.95" and real.parts["slurm_partition"] == "gpu"
    assert "host" not in real.parts  # the submitting host is not the one that trains
    dry = stack_current.current(tmp_path, dry_run=True, node_probe=node, say=said.append, **common)
    assert len(asked) == 1 and dry.digest == real.digest  # -n submits nothing, plans the same slots
    assert "as the last real run probed them" in said[-1]
    # another node of the partition: recorded, same key
    other = stack_current.current(
        tmp_path, dry_run=False, node_probe=lambda p, t: {**node(p, t), "node": "gpu3"}, **common
    )
    assert other.digest == real.digest
    # a driver upgrade on the nodes: another key
    upgraded = stack_current.current(
        tmp_path, dry_run=False, node_probe=lambda p, t: {**node(p, t), "driver": "590.10"}, **common
    )
    assert upgraded.digest != real.digest


def test_slurm_without_node_probe(tmp_path):
    ident = stack_current.current(
        tmp_path, workload="smoke", megatron_path=None, executor="slurm", python="py", dry_run=True,
        slurm=slurm_target(probe_node=False), node_probe=lambda p, t: pytest.fail("no probe wanted"),
    )  # fmt: skip
    assert "driver" not in ident.parts and ident.parts["executor"] == "slurm"


def test_failed_node_probe_is_one_clear_line():
    def srun(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, "", "srun: error: invalid partition specified: gpu\n")

    with pytest.raises(stack_current.StackProbeError) as info:
        stack_current.probe_node("py", slurm_target(), run=srun)
    text = str(info.value)
    assert "invalid partition specified" in text and "node_stack_probe: false" in text and "\n" not in text


def test_executor_change_is_another_identity(tmp_path):
    common = dict(workload="smoke", megatron_path=None, python=sys.executable, dry_run=True)
    local = stack_current.current(tmp_path, executor="local", **common)
    slurm = stack_current.current(tmp_path, executor="slurm", slurm=slurm_target(probe_node=False), **common)
    assert local.digest != slurm.digest
    assert "executor local -> slurm" in stackid.changes(local, slurm)


# ---------------------------------------------------------------------------------------- attempt keys


def write_attempt(results, scenario, slot, settings_fp, stack, verdict="pass"):
    folder = results / scenario / slot
    folder.mkdir(parents=True)
    run = {"settings_fingerprint": settings_fp, "launched": False}
    if stack is not None:
        run["stack"] = stack.to_json()
    (folder / "attempt.json").write_text(json.dumps(run))
    check = {"id": "uninterrupted_completion", "status": verdict, "detail": "", "evidence": []}
    report = {"schema": "ftqual.verify/v1", "verdict": verdict, "fault": "none", "checks": [check]}
    (folder / "verify.json").write_text(json.dumps(report))


def test_a_passed_attempt_is_not_reused_on_another_stack(tmp_path):
    old = StackIdentity({"nvrx": "0.7.0", "executor": "local"})
    new = StackIdentity({"nvrx": "0.8.0", "executor": "local"})
    key_old, key_new = (
        attempts.attempt_key("settings1", old.digest),
        attempts.attempt_key("settings1", new.digest),
    )
    assert key_old != key_new
    write_attempt(tmp_path / "results", "kill", f"{key_old}-1", "settings1", old)
    same = attempts.scenario_slot(tmp_path, "kill", key_old, settings_fingerprint="settings1", stack=old)
    assert same.name == f"{key_old}-1" and same.reason == "latest attempt passed"
    moved = attempts.scenario_slot(tmp_path, "kill", key_new, settings_fingerprint="settings1", stack=new)
    assert moved.name == f"{key_new}-1"
    assert moved.reason == (
        f"the stack changed since attempt {key_old}-1 (same settings): nvidia-resiliency-ext 0.7.0 -> 0.8.0"
    )
    # other settings: nothing to compare with
    fresh = attempts.scenario_slot(tmp_path, "kill", "0" * 12, settings_fingerprint="settings2", stack=new)
    assert fresh.reason == "no attempt under these settings yet"


def test_an_attempt_without_a_recorded_stack_is_requalified(tmp_path):
    write_attempt(tmp_path / "results", "kill", "aaaaaaaaaaaa-1", "settings1", None)
    new = StackIdentity({"nvrx": "0.7.0"})
    slot = attempts.scenario_slot(
        tmp_path,
        "kill",
        attempts.attempt_key("settings1", new.digest),
        settings_fingerprint="settings1",
        stack=new,
    )
    assert slot.number == 1 and "was not recorded" in slot.reason
