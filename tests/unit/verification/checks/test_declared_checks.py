"""The checks declare themselves (ftqual.verification.checks.spec): one ordered registry, which the report's
legend, docs/checks.md, the fault registry's required checks and every verify report follow."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ftqual import contract
from ftqual.report.summary import CHECK_LEGEND
from ftqual.verification.checks import CHECKS, run_checks, run_declared, run_plan_from, waived_by
from ftqual.verification.checks.result import CheckResult
from ftqual.verification.checks.spec import CheckInputs, CheckSpec, Waiver
from ftqual.verification.evidence import build_snapshot

REPO = Path(__file__).resolve().parents[4]
DECLARED = [spec.id for spec in CHECKS]
# The checks a report may carry that no check module declares: the launcher's outcome adds them
# (ftqual.verification.verdict), after the declared ones.
ADDED_BY_THE_VERDICT = {"launched", "launcher_exit"}


def test_every_check_is_declared_once_with_a_legend_line():
    assert len(DECLARED) == len(set(DECLARED))
    for spec in CHECKS:
        assert spec.legend.strip() and "\n" not in spec.legend, spec.id


def test_the_report_legend_is_the_declarations():
    for spec in CHECKS:
        assert CHECK_LEGEND[spec.id] == spec.legend
    # Only the overall verdict's row and the check older reports carry are the report's own lines.
    assert set(CHECK_LEGEND) - set(DECLARED) == {"verdict", "loss_continuity"}


def _documented_ids() -> list[str]:
    """The ids of the first column of docs/checks.md's table of checks."""
    text = (REPO / "docs" / "checks.md").read_text(encoding="utf-8")
    table = text.split("| check | scenarios | gates |", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\| `(\w+)` \|", table, flags=re.M)


def test_docs_checks_md_tabulates_exactly_the_declared_checks():
    documented = _documented_ids()
    assert len(documented) == len(set(documented))
    assert sorted(documented) == sorted(DECLARED)


def test_every_check_the_fault_registry_requires_is_declared():
    required = {cid for f in contract.FAULT_KINDS.values() for cid in f.required_checks}
    assert required <= set(DECLARED), required - set(DECLARED)


def test_every_waiver_named_is_an_outcome_check_that_declares_one():
    by_id = {spec.id: spec for spec in CHECKS}
    for spec in CHECKS:
        for outcome in spec.waived_by:
            assert by_id[outcome].waives is not None, (spec.id, outcome)
            # An outcome check comes after what it waives: the report reads the waived check, then its judge.
            assert DECLARED.index(outcome) > DECLARED.index(spec.id)


def test_the_recovery_checks_each_outcome_waives_are_the_ones_it_always_waived():
    """Pinned: the verdicts of recorded runs depend on which checks say skip (a negative control for a
    `waived_by` added or dropped by mistake)."""
    recovery = ("resumed_from_checkpoint", "progress_after_resume", "clean_finish")
    assert waived_by("node_loss_outcome") == (
        "failure_detected_and_restarted",
        *recovery,
        "active_world_unchanged",
        "no_leftovers",
        "interrupted_save_discarded",
        "replay_consistency",
        "exact_replay",  # carried by replay-exact runs only: the recorded runs' verdicts keep their checks
        "checkpoint_equal",  # carried where the runs hold checkpoint digests (none of the older recorded)
    )
    assert waived_by("checkpoint_break_outcome") == (
        *recovery,
        "active_world_unchanged",
        "replay_consistency",
        "exact_replay",
        "checkpoint_equal",
    )
    late = ("replay_consistency", "exact_replay", "checkpoint_equal")
    assert waived_by("storage_fault_outcome") == (*recovery, *late)
    assert waived_by("recurring_fault_outcome") == (*recovery, *late)


def _result(cid: str, status: str = "pass", **values: object) -> CheckResult:
    return CheckResult(cid, status, f"{cid} ran", values=dict(values))


def _inputs() -> CheckInputs:
    return CheckInputs(snap=None, exp=None)  # type: ignore[arg-type]  # the specs below read neither


def test_a_waived_check_says_skip_with_its_waivers_reason_and_is_not_run():
    ran: list[str] = []

    def check(cid: str, **values: object):
        def run(_: CheckInputs) -> CheckResult:
            ran.append(cid)
            return _result(cid, **values)

        return run

    stopped = Waiver("stopped loudly: nothing to recover", lambda _, r: r.values.get("outcome") == "stopped")
    registry = (
        CheckSpec("recovery", "a recovery", check("recovery"), waived_by=("outcome",)),
        CheckSpec("other", "another", check("other")),
        CheckSpec("absent", "not carried", check("absent"), carried=lambda _: False),
        CheckSpec("outcome", "the ending", check("outcome", outcome="stopped"), waives=stopped),
    )
    results = run_declared(_inputs(), registry)
    assert [r.id for r in results] == ["recovery", "other", "outcome"]
    assert (results[0].status, results[0].detail) == ("skip", "stopped loudly: nothing to recover")
    assert ran == ["outcome", "other"]  # the outcome once (its result decides), the waived check never
    # Negative control: the same registry whose outcome does not stop runs the recovery check.
    registry = (
        *registry[:3],
        CheckSpec("outcome", "the ending", check("outcome", outcome="went on"), waives=stopped),
    )
    results = run_declared(_inputs(), registry)
    assert results[0].status == "pass"


def test_an_outcome_check_not_carried_waives_nothing():
    always = Waiver("why", lambda *_: True)
    registry = (
        CheckSpec("recovery", "a recovery", lambda _: _result("recovery"), waived_by=("outcome",)),
        CheckSpec("outcome", "", lambda _: _result("outcome"), carried=lambda _: False, waives=always),
    )
    assert [(r.id, r.status) for r in run_declared(_inputs(), registry)] == [("recovery", "pass")]


def _reports() -> list[Path]:
    return sorted((REPO / "tests" / "unit" / "verification" / "parity").glob("*.json"))


@pytest.mark.parametrize("path", _reports(), ids=lambda p: p.stem[-40:])
def test_a_recorded_verify_report_lists_its_checks_in_the_declared_order(path):
    ids = [c["id"] for c in json.loads(path.read_text(encoding="utf-8"))["checks"]]
    declared = [cid for cid in ids if cid not in ADDED_BY_THE_VERDICT]
    assert set(declared) <= set(DECLARED), path.name
    assert declared == sorted(declared, key=DECLARED.index)
    assert ids[: len(declared)] == declared  # the launcher's outcome's checks come after


def test_run_checks_on_a_recorded_node_loss_run_skips_with_the_outcome_s_reason():
    """A real run: node_loss without a spare, whose recovery checks say skip with node_loss's reason."""
    snap = build_snapshot(REPO / "tests" / "data" / "slurm-cpu-node-loss")
    results = run_checks(snap, run_plan_from(snap.meta))
    assert [r.id for r in results] == sorted((r.id for r in results), key=DECLARED.index)
    outcome = next(spec for spec in CHECKS if spec.id == "node_loss_outcome").waives
    assert outcome is not None
    skipped = {r.id: r for r in results if r.id in waived_by("node_loss_outcome")}
    # exact_replay: not carried by a replay-tolerance run
    assert set(skipped) == set(waived_by("node_loss_outcome")) - {"exact_replay", "checkpoint_equal"}
    assert all(r.status == "skip" and r.detail == outcome.reason for r in skipped.values())
    # Negative control: a check node_loss does not waive still ran.
    assert next(r for r in results if r.id == "checkpoint_before_failure").status != "skip"
