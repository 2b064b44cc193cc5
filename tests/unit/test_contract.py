"""ftqual.contract is the one source of the tracker name, the fault kinds and the model's shape; the
stdlib-only scripts keep copies (they cannot import the package), pinned to it here."""

from __future__ import annotations

import ast
import importlib.util

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


def module_constant(path, name: str):
    """A top-level constant of a script, read without importing it (smoke_train imports torch)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{name} not found in {path}")


def test_worker_copies_match_the_contract(worker):
    assert worker.TRACKER_NAME == contract.TRACKER_NAME
    assert tuple(worker.FAULTS) == contract.FAULTS


@pytest.mark.parametrize("fault", contract.FAULTS)
def test_worker_accepts_every_fault_kind(worker, fault):
    argv = ["--entrypoint", "x.py", "--checkpoint-dir", "c", "--fault-marker", "m", "--fault", fault]
    plan = ["--campaign-plan", "p.json"] if fault == "campaign" else []  # a campaign's faults are its plan's
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


def test_smoke_workload_tracker_name_matches(repo_root):
    assert (
        module_constant(repo_root / "workloads" / "smoke_train.py", "TRACKER_NAME") == contract.TRACKER_NAME
    )


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
