"""ftqual.contract is the one source of the tracker name, the fault kinds and the model's shape: the launcher
imports it, the stdlib-only worker wrapper loads the file by its path (it cannot import the package), and the
smoke workload's copy of the tracker name is pinned to it here."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys

import pytest

from ftqual import contract
from ftqual.launch import command, settings


@pytest.fixture(scope="module")
def worker(repo_root):
    path = repo_root / "workloads" / "megatron_gpt_worker.py"
    spec = importlib.util.spec_from_file_location("megatron_gpt_worker_contract", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # no work at import time: the wrapper keeps it under __main__
    return module


def test_worker_uses_the_contract(worker, repo_root):
    assert worker.CONTRACT_PATH == repo_root / "ftqual" / "contract.py"
    assert worker.contract.__file__ == str(repo_root / "ftqual" / "contract.py")
    for name in ("TRACKER_NAME", "FAULTS", "GPU_ONLY_FAULTS"):
        assert getattr(worker, name) == getattr(contract, name), name
    # taken from the loaded contract, not written again: `NAME = contract.NAME`
    tree = ast.parse((repo_root / "workloads" / "megatron_gpt_worker.py").read_text())
    taken = {
        node.targets[0].id: ast.unparse(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    assert {name: taken[name] for name in ("TRACKER_NAME", "FAULTS", "GPU_ONLY_FAULTS")} == {
        name: f"contract.{name}" for name in ("TRACKER_NAME", "FAULTS", "GPU_ONLY_FAULTS")
    }


def test_worker_imports_only_the_standard_library_and_the_contract(repo_root):
    """Imported by an interpreter without site-packages (-I -S), as ft_launcher's environment may lack them:
    every module it brings in is the standard library's or the contract file's, and the ftqual package is not
    imported."""
    path = repo_root / "workloads" / "megatron_gpt_worker.py"
    code = (
        "import importlib.util, json, sys\n"
        "before = set(sys.modules)\n"
        f"spec = importlib.util.spec_from_file_location('megatron_gpt_worker', {str(path)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60, cwd="/"
    )
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout)
    assert "_ftqual_contract" in loaded
    others = [
        name
        for name in loaded
        if name != "_ftqual_contract" and name.partition(".")[0] not in sys.stdlib_module_names
    ]
    assert others == []


@pytest.mark.parametrize("fault", contract.FAULTS)
def test_worker_accepts_every_fault_kind(worker, fault):
    argv = ["--entrypoint", "x.py", "--checkpoint-dir", "c", "--fault-marker", "m", "--fault", fault]
    plan = ["--campaign-plan", "p.json"] if fault == "campaign" else []  # a campaign's faults are its plan's
    if fault == "writer_stall":  # the writer is stopped at a phase of a save
        plan = ["--fault-timing", "save_shards_partial"]
    args, _ = worker.parse_args([*argv, "--fault-rank", "0", *plan])
    assert args.fault == fault


def test_worker_refuses_a_campaign_without_its_plan(worker):
    argv = ["--entrypoint", "x.py", "--checkpoint-dir", "c", "--fault-marker", "m", "--fault", "campaign"]
    with pytest.raises(SystemExit):
        worker.parse_args(argv)


def test_worker_refuses_other_fault_kinds(worker):
    argv = ["--entrypoint", "x.py", "--checkpoint-dir", "c", "--fault-marker", "m", "--fault", "crash"]
    with pytest.raises(SystemExit):
        worker.parse_args(argv)


def test_smoke_workload_takes_the_tracker_name_from_the_contract(repo_root, worker):
    """smoke_train.py (it imports torch, so it is read, not imported) takes the name from the contract the
    worker loads by path, never writing it again."""
    tree = ast.parse((repo_root / "workloads" / "smoke_train.py").read_text())
    imported = {
        (node.module, alias.name)
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert ("megatron_gpt_worker", "load_contract") in imported
    taken = {
        node.targets[0].id: ast.unparse(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    assert taken["TRACKER_NAME"] == "load_contract().TRACKER_NAME"
    assert worker.load_contract().TRACKER_NAME == contract.TRACKER_NAME


def test_launcher_uses_the_contract():
    assert settings.TRACKER_NAME == contract.TRACKER_NAME and settings.FAULTS == contract.FAULTS
    m = contract.MODEL
    assert command.model_args() == [
        f"--vocab-size={m.vocab_size}",
        f"--num-layers={m.num_layers}",
        f"--hidden-size={m.hidden_size}",
        f"--num-attention-heads={m.num_attention_heads}",
        f"--seq-length={m.seq_length}",
        f"--max-position-embeddings={m.seq_length}",
    ]


@pytest.mark.parametrize(
    ("tp", "pp", "problem"),
    [
        (1, 1, None),
        (8, 4, None),
        (3, 1, "TP=3 must divide the model's 8 attention heads"),
        (1, 3, "PP=3 must divide the model's 4 layers"),
    ],
)
def test_parallelism_problem(tp, pp, problem):
    assert contract.MODEL.parallelism_problem(tp, pp) == problem


def test_an_unwinding_fault_is_detected_by_its_exit_or_the_open_sections_timeout():
    from ftqual.contract import detection_paths

    assert detection_paths("exception") == ("exit", "timeout")
    assert detection_paths("sigint") == ("exit", "timeout")
    assert detection_paths("segfault") == ("exit",)
    assert detection_paths("gil_lock") == ("timeout",)
    assert detection_paths("none") == ()
