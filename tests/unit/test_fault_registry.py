"""A fault is one object: ftqual.contract.FAULT_KINDS holds every kind with what the stages must agree on, and
every fault table is derived from it. The schema's lists, the verifier's required checks and the tables the
stages read are pinned to the registry here; the tables' values are pinned too, so that moving them into the
registry moved no verdict."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from ftqual import contract
from ftqual.contract import FAULT_KINDS, RECOVERY_CHECKS, Fault
from ftqual.launch.run_schema import RunRecord
from ftqual.verification import schema as verify_schema
from ftqual.verification.checks.run_plan import RunPlan
from ftqual.verification.verdict import ENDS_NONZERO_BY_DESIGN

REPO = Path(__file__).resolve().parents[2]
CATALOG = ("segfault", "abort", "exception", "sigterm", "sigint", "gil_lock", "gpu_error", "gpu_hang")
RECURRING = ("recurring_exception", "nan_loss", "setup_crash")
EXACTNESS = ("stale_save", "optimizer_not_restored", "rng_not_restored", "data_position_lost")


@pytest.fixture(scope="module")
def config_schema() -> dict:
    return yaml.safe_load((REPO / "config" / "schema.yaml").read_text())


def test_the_registry_is_keyed_by_name_in_definition_order():
    assert all(name == f.name and isinstance(f, Fault) for name, f in FAULT_KINDS.items())
    assert contract.FAULTS == tuple(FAULT_KINDS)
    assert contract.FAULTS[0] == "none" and contract.FAULTS[-1] == "campaign"
    assert contract.fault("kill") is FAULT_KINDS["kill"] and contract.fault("meteor") is None
    assert contract.fault(None) is None and contract.family_of(["kill"]) is None
    assert [f.name for f in FAULT_KINDS.values() if f.family == "none"] == ["none"]


def test_the_derived_tables_keep_their_values():
    assert contract.FAULTS == (
        "none", "kill", "hang", "node_loss", *CATALOG, "disk_full", "writer_stall", *RECURRING, *EXACTNESS,
        "campaign",
    )  # fmt: skip
    assert contract.EXACTNESS_FAULTS == EXACTNESS
    assert contract.INJECTED_FAULTS == contract.FAULTS[1:]
    assert contract.RANK_FAULTS == ("kill", "hang", *CATALOG)
    assert contract.STORAGE_FAULTS == ("disk_full", "writer_stall")
    assert contract.GPU_ONLY_FAULTS == ("gpu_error", "gpu_hang")
    assert contract.LIVE_FAULTS == ("hang", "gil_lock", "gpu_hang")
    assert contract.UNWINDING_FAULTS == ("exception", "sigint", *RECURRING)
    assert contract.RECURRING_FAULTS == RECURRING
    assert contract.CATALOG_FAULTS == CATALOG
    assert contract.EXIT_CODES == {
        "kill": (-9, 137),
        "segfault": (-11, 139),
        "abort": (-6, 134),
        "exception": (1,),
        "sigterm": (-15, 143),
        "sigint": (-2, 130, 1),
        "gpu_error": (1, -6, 134),
        "recurring_exception": (1,),
        "nan_loss": (1, 16, 17),
        "setup_crash": (1,),
        **{f: (-9, 137) for f in EXACTNESS},  # a kill, after the save or before the restore it tampers
    }
    assert list(contract.FAULT_ACTIONS) == list(contract.FAULTS)
    assert contract.FAULT_ACTIONS["kill"] == "SIGKILL" and contract.FAULT_ACTIONS["hang"] == "SIGSTOP"
    assert ENDS_NONZERO_BY_DESIGN == ("node_loss", "disk_full", "writer_stall", *RECURRING)
    ends_at_once = contract.faults_where(lambda f: f.ends_at_once)
    assert ends_at_once == ("kill", "node_loss", "segfault", "abort", "sigterm", *EXACTNESS)


def test_detection_follows_the_registry():
    paths = {name: contract.detection_path(name) for name in contract.FAULTS}
    assert {name for name, path in paths.items() if path == "exit"} == set(contract.EXIT_CODES)
    assert {name for name, path in paths.items() if path == "timeout"} == set(contract.LIVE_FAULTS)
    assert [name for name, path in paths.items() if path == "node"] == ["node_loss"]
    assert contract.detection_paths("exception") == ("exit", "timeout")
    assert contract.detection_paths("kill") == ("exit",) and contract.detection_paths("none") == ()
    assert contract.detection_path("meteor") is None and contract.detection_paths("meteor") == ()


def test_a_fault_refuses_exit_codes_without_an_exit_and_an_unknown_family():
    with pytest.raises(ValueError):
        Fault("x", "rank", "x", "timeout", (1,))
    with pytest.raises(ValueError):
        Fault("x", "rank", "x", "exit")
    with pytest.raises(ValueError):
        Fault("x", "meteor", "x")


def test_the_config_schemas_fault_enums_are_the_registrys(config_schema):
    props = config_schema["$defs"]["scenario"]["properties"]
    assert tuple(props["fault"]["enum"]) == contract.FAULTS
    kinds = props["campaign"]["properties"]["kinds"]["items"]["enum"]
    assert tuple(kinds) == contract.RANK_FAULTS  # a campaign draws from the faults of one rank


def test_the_verifiers_required_checks_are_the_registrys():
    assert verify_schema.REQUIRED_CHECKS == {f.name: f.required_checks for f in FAULT_KINDS.values()}
    # as they were written out before the registry (recorded runs' verdicts depend on them)
    assert verify_schema.REQUIRED_CHECKS == {
        "none": ("uninterrupted_completion",),
        "node_loss": (*RECOVERY_CHECKS, "node_loss_outcome"),
        "campaign": (*RECOVERY_CHECKS, "campaign_plan_followed", "cycles_do_not_accumulate"),
        **{f: RECOVERY_CHECKS for f in ("kill", "hang", *CATALOG)},
        **{f: (*RECOVERY_CHECKS, "storage_fault_outcome") for f in ("disk_full", "writer_stall")},
        **{f: (*RECOVERY_CHECKS, "recurring_fault_outcome") for f in RECURRING},
        **{f: (*RECOVERY_CHECKS, "checkpoint_equal") for f in EXACTNESS},
    }
    assert RECOVERY_CHECKS == (
        "checkpoint_before_failure",
        "failure_detected_and_restarted",
        "resumed_from_checkpoint",
        "progress_after_resume",
        "clean_finish",
    )


def test_a_run_plans_kind_comes_from_the_registry():
    def plan(fault: str) -> RunPlan:
        return RunPlan(RunRecord(fault=fault, train_iters=10, save_interval=5, world_size=2, max_restarts=3))

    assert [name for name in contract.FAULTS if plan(name).node_loss] == ["node_loss"]
    assert [name for name in contract.FAULTS if not plan(name).faulty] == ["none"]
    assert plan("meteor").faulty and not plan("meteor").node_loss  # as before: unknown is not "none"


def test_only_rank_node_and_storage_faults_aim_at_a_rank():
    assert contract.faults_where(lambda f: not f.has_rank) == ("none", "campaign")


def test_every_fault_kind_has_a_recorded_report_carrying_its_required_checks():
    """The verifier's run_checks adds each family's outcome check by the registry's predicates; the parity
    references (tests/unit/verification/parity: what the verifier writes today, test_verify_parity.py) hold
    a report of every kind, and each carries every check its registry entry requires."""
    seen: set[str] = set()
    for path in sorted((REPO / "tests" / "unit" / "verification" / "parity").glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        fault = str(verify_schema.fault_of(doc))
        seen.add(fault)
        assert verify_schema.missing_checks(doc) == [], path.name
        ids = {c.get("id") for c in doc.get("checks", [])}
        if contract.is_fault(fault, lambda f: f.lives_on):
            assert "detected_within_timeout" in ids, path.name
    assert seen == set(contract.FAULTS)


# Where a fault's name may still be compared with the baseline's, the node loss's or the campaign's by hand,
# and why (path prefixes): the rank's injection dispatches on each fault's own name (node_loss's freeze); its
# argument checks, moved from workloads/, and the scenario driver, edited elsewhere at the same time, are to
# read the registry (INJECTED_FAULTS, has_rank, family_of) as the rest of the package does.
PENDING = {
    "ftqual/rank/": "the injection's dispatch; the argument checks (INJECTED_FAULTS, has_rank)",
}
FAMILY_NAMES = "(none|node_loss|campaign)"
BY_NAME = re.compile(
    rf"""(fault\w*|fault"\]) (==|!=) "{FAMILY_NAMES}"|fault\w* (not )?in \("{FAMILY_NAMES}\"|\bFAULTS\["""
)


def test_no_stage_tests_a_faults_family_by_its_name():
    """The stages ask the registry (family_of, is_fault, the derived tables) whether a fault is the baseline,
    a node loss or a campaign; a fault's own injection or judgement may still name it (kill's texts,
    disk_full's mount)."""
    found = []
    for path in sorted((REPO / "ftqual").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel == "ftqual/contract.py" or rel.startswith(tuple(PENDING)):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if BY_NAME.search(line):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert found == []
