"""The exactness faults' hooks: what the workload's save and restore do once a change is armed."""

from __future__ import annotations

import pytest

from ftqual.contract import EXACTNESS_FAULTS, gpu_only_problem
from ftqual.rank import exactness


@pytest.fixture(autouse=True)
def disarmed():
    exactness.arm(None)
    yield
    exactness.arm(None)


def test_each_fault_arms_its_change_before_or_after_the_injection():
    assert [exactness.tampers_of(f) for f in EXACTNESS_FAULTS] == list(exactness.TAMPERS)
    assert exactness.tampers_of("kill") is None and not exactness.arms_now(None, 0)
    # the stale save is the checkpoint the kill follows: armed before the first marker, never after
    assert exactness.arms_now("stale_save", 0) and not exactness.arms_now("stale_save", 1)
    for tamper in exactness.RESTORE_TAMPERS:  # the replacement's restore: after the marker only
        assert exactness.arms_now(tamper, 1) and not exactness.arms_now(tamper, 0)


def test_nothing_armed_changes_nothing():
    assert exactness.restores_optimizer() and exactness.restores_rng()
    assert exactness.data_position(48) == 48
    exactness.after_step(lambda: pytest.fail("no copy is made unless stale_save is armed"))
    assert exactness.state_to_save("now", 10) == "now"


def test_the_restore_changes():
    exactness.arm("weights_only")
    assert not exactness.restores_optimizer() and exactness.restores_rng()
    exactness.arm("fresh_rng")
    assert exactness.restores_optimizer() and not exactness.restores_rng()
    exactness.arm("data_from_start")
    assert exactness.data_position(48) == 0


def test_a_stale_save_writes_the_previous_iteration_once():
    exactness.arm("stale_save")
    state = {"w": [1]}
    exactness.after_step(lambda: state)  # iteration 1
    assert exactness.state_to_save(state, 1) is state  # no iteration before it: written as it is
    state["w"] = [2]
    exactness.after_step(lambda: state)  # iteration 2
    state["w"] = [3]
    exactness.after_step(lambda: state)  # iteration 3
    assert exactness.state_to_save(state, 3) == {"w": [2]}  # iteration 2's, by copy
    state["w"] = [4]
    exactness.after_step(lambda: pytest.fail("no more copies once the stale save was written"))
    assert exactness.state_to_save(state, 4) is state  # once only


def test_the_megatron_workload_is_refused_for_them():
    for fault in EXACTNESS_FAULTS:
        said = gpu_only_problem(fault, "megatron")
        assert said is not None and "smoke" in said
        assert gpu_only_problem(fault, "smoke") is None
