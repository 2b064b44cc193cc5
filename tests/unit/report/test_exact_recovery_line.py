"""The "Exact recovery" line: summary.json's replay.exact and summary.md's line, from verify.json's
exact_replay check (bitwise, the stack's finding named, or the first difference)."""

from ftqual.report.summary import exact_recovery


def _doc(status: str, **values: object) -> dict:
    check = {
        "id": "exact_replay",
        "status": status,
        "detail": "learning rate at K+1 (iteration 6): 5.999500E-05 against 6.000000E-05 in baseline b",
        "notes": ["loss accumulator not reset"],
        "evidence": [{"path": "logs/train_cycle1.log", "line": 9}],
        "values": values,
    }
    return {"checks": [check]}


def test_bitwise():
    assert exact_recovery(_doc("pass", exact="bitwise"))["line"] == "bitwise"


def test_the_stack_finding_is_named_not_called_bitwise_alone():
    line = exact_recovery(_doc("pass", exact="x", stack_finding={"id": "loss_accumulator_not_reset"}))["line"]
    assert line.startswith("bitwise, except a finding of the stack: loss accumulator not reset")


def test_the_first_difference_with_its_evidence():
    out = exact_recovery(_doc("fail", first_difference={"iteration": 6, "figure": "learning rate"}))
    assert out["line"].startswith("first difference: learning rate at K+1 (iteration 6): 5.999500E-05")
    assert out["evidence"] == [{"path": "logs/train_cycle1.log", "line": 9}]


def test_a_run_without_the_check_has_no_line():
    assert exact_recovery({"checks": [{"id": "replay_consistency", "status": "pass"}]}) is None
