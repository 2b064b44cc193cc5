"""ftqual.contract is the fault registry and nothing else: the launcher and the rank's package (ftqual.rank,
standard library only besides the contract) take the fault kinds from it. The names it used to hold live with
their users, each written once: the tracker's name in ftqual.rank.tracker (the rank, the launcher and the
smoke workload import it), the model's shape in ftqual.scenario.job."""

from __future__ import annotations

import ast

import pytest

from ftqual import contract
from ftqual.launch import command, settings
from ftqual.rank import tracker, worker
from ftqual.scenario.job import MODEL


def test_the_rank_takes_its_names_from_the_contract():
    """The rank's modules import the contract's names, never writing them again."""
    assert worker.FAULTS is contract.FAULTS and worker.GPU_ONLY_FAULTS is contract.GPU_ONLY_FAULTS
    assert worker.TRACKER_NAME is tracker.TRACKER_NAME


def test_the_contract_holds_the_fault_registry_and_nothing_else():
    """Every name ftqual.contract defines is the registry's: its record, the tables derived from it (one
    value per fault kind, or the kinds a test holds for), the functions that ask it, the check ids the
    required checks come from. A constant of another kind lives with its users."""
    asking = {
        "fault",
        "family_of",
        "faults_where",
        "is_fault",
        "detection_path",
        "detection_paths",
        "launcher_prepares",
    }
    records = {"Fault", "FAULT_KINDS", "FAMILIES", "DETECTIONS", "RECOVERY_CHECKS", "BASELINE_CHECKS"}
    # the vocabularies of the entry's fields, which the stages' tables resolve
    records |= {
        "LAUNCHER_PREPARATIONS",
        "RANK_PREPARATIONS",
        "AFTER_CHECKPOINT",
        "WRITING_PHASES",
        "ANY_TIMING",
    }
    records |= {"RECURS_AT", "EXIT_JUDGEMENTS", "TAMPERS", "TAMPER_WORKLOADS"}
    own = {
        name
        for name, value in vars(contract).items()
        if not name.startswith("_")
        and not isinstance(value, type(contract))
        and getattr(value, "__module__", "ftqual.contract") == "ftqual.contract"
        and name != "annotations"
    }
    kinds = set(contract.FAULT_KINDS)
    for name in own - asking - records:
        value = getattr(contract, name)
        per_kind = isinstance(value, dict) and set(value) <= kinds
        of_kinds = isinstance(value, tuple) and set(value) <= kinds
        assert per_kind or of_kinds or name in {"gpu_only_problem", "UNWIND_MARGIN_S"}, name
    for gone in (
        "ModelShape",
        "MODEL",
        "EXIT_MEANINGS",
        "exit_meaning",
        "TRACKER_NAME",
        "SAVE_PHASES",
        "CHECKPOINT_DAMAGES",
        "FILLER_NAME",
        "RANK_MONITOR_INTERVAL_S",
    ):
        assert not hasattr(contract, gone), gone


@pytest.mark.parametrize("fault", contract.FAULTS)
def test_worker_accepts_every_fault_kind(fault):
    argv = ["--entrypoint", "x.py", "--checkpoint-dir", "c", "--fault-marker", "m", "--fault", fault]
    plan = ["--campaign-plan", "p.json"] if fault == "campaign" else []  # a campaign's faults are its plan's
    if fault == "writer_stall":  # the writer is stopped at a phase of a save
        plan = ["--fault-timing", "save_shards_partial"]
    args, _ = worker.parse_args([*argv, "--fault-rank", "0", *plan])
    assert args.fault == fault


def test_worker_refuses_a_campaign_without_its_plan():
    argv = ["--entrypoint", "x.py", "--checkpoint-dir", "c", "--fault-marker", "m", "--fault", "campaign"]
    with pytest.raises(SystemExit):
        worker.parse_args(argv)


def test_worker_refuses_other_fault_kinds():
    argv = ["--entrypoint", "x.py", "--checkpoint-dir", "c", "--fault-marker", "m", "--fault", "crash"]
    with pytest.raises(SystemExit):
        worker.parse_args(argv)


def test_smoke_workload_takes_the_tracker_name_from_the_rank(repo_root):
    """smoke_train.py (it imports torch, so it is read, not imported) imports the name from the rank's
    ftqual.rank.tracker, never writing it again."""
    tree = ast.parse((repo_root / "workloads" / "smoke_train.py").read_text())
    imported = {
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert ("ftqual.rank.tracker", "TRACKER_NAME") in imported
    assigned = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    assert "TRACKER_NAME" not in assigned


def test_launcher_uses_the_contract():
    assert settings.TRACKER_NAME == tracker.TRACKER_NAME and settings.FAULTS == contract.FAULTS
    m = MODEL
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
    assert MODEL.parallelism_problem(tp, pp) == problem


def test_an_unwinding_fault_is_detected_by_its_exit_or_the_open_sections_timeout():
    from ftqual.contract import detection_paths

    assert detection_paths("exception") == ("exit", "timeout")
    assert detection_paths("sigint") == ("exit", "timeout")
    assert detection_paths("segfault") == ("exit",)
    assert detection_paths("gil_lock") == ("timeout",)
    assert detection_paths("none") == ()
