"""Faults that come back (ftqual.rank.recurring): whether a cycle injects, where its injection lands, what the
marker says, and nan_loss's poison of one iteration's embeddings."""

from __future__ import annotations

import json
import sys
import types

import pytest

from ftqual.contract import RECURRING_FAULTS
from ftqual.rank import recurring
from ftqual.rank.faults import InjectedFault
from ftqual.rank.injector import Injector
from ftqual.rank.markers import claim_marker, count_markers, marker_path
from ftqual.rank.recurring import CHECKPOINT, FIRST_STEP, SETUP, InjectedDeviceFailure, injects_now, trigger
from ftqual.rank.sections import SectionWatch
from ftqual.rank.worker import RECURRING_PLACEMENTS, main


def test_a_recurring_fault_injects_in_every_cycle_and_a_curable_one_n_times():
    for fault in RECURRING_FAULTS:
        assert all(injects_now(fault, made, 1) for made in range(10))
    assert [injects_now("exception", made, 2) for made in range(4)] == [True, True, False, False]


@pytest.mark.parametrize(
    ("fault", "made", "baseline", "expected"),
    [
        ("recurring_exception", 0, 0, CHECKPOINT),  # cycle 0: train until the first checkpoint K
        ("recurring_exception", 1, 5, FIRST_STEP),  # every later cycle resumes K: K+1 again
        ("recurring_exception", 3, 5, FIRST_STEP),
        ("nan_loss", 0, 0, CHECKPOINT),
        ("nan_loss", 2, 5, FIRST_STEP),
        ("setup_crash", 0, 0, CHECKPOINT),  # the first fault needs a checkpoint to come back to
        ("setup_crash", 1, 5, SETUP),  # then it dies in setup on every start
        ("setup_crash", 1, 0, CHECKPOINT),  # nothing to resume: as the first
        ("recurring_exception", 0, 10, CHECKPOINT),  # a run resuming K0: the first fault after a new save
    ],
)
def test_where_each_cycles_injection_lands(fault, made, baseline, expected):
    assert trigger(fault, made, baseline) == expected


def injector(tmp_path, fault, placement, *, trig, baseline=5, injection=2, cycle=1):
    return Injector(
        fault=fault,
        placement=placement,
        tracker=tmp_path / "latest_checkpointed_iteration.txt",
        marker=marker_path(tmp_path / "fault_injected.json", injection),
        baseline=baseline,
        identity={"run_id": "r1", "rank": 1, "local_rank": 1, "host": "h", "cycle": cycle},
        watch=SectionWatch(),
        kill=lambda pid, sig: None,
        injection=injection,
        trigger=trig,
    )


def test_a_later_cycle_raises_as_the_first_step_begins_and_numbers_its_marker(tmp_path):
    claim_marker(tmp_path / "fault_injected.json", {"fault": "recurring_exception"})  # cycle 0's
    inj = injector(tmp_path, "recurring_exception", RECURRING_PLACEMENTS[FIRST_STEP], trig=FIRST_STEP)
    assert inj.start() is None  # no tracker to wait for: it resumes K and fails at K+1
    inj.watch.started("setup")
    with pytest.raises(InjectedFault):
        inj.watch.closing("setup")  # Megatron's on_training_step_start closes setup: iteration K+1 begins
    marker = json.loads((tmp_path / "fault_injected.2.json").read_text())
    assert count_markers(tmp_path / "fault_injected.json") == 2
    assert (marker["recurring"], marker["trigger"], marker["injections"]) == (True, "first_step", None)
    assert (marker["checkpoint_iteration"], marker["baseline_iteration"], marker["cycle"]) == (5, 5, 1)
    assert (marker["placement"], marker["section"], marker["injection"]) == ("setup", "setup", 2)
    assert marker["method"] == "raise InjectedFault on the training thread"


def test_setup_crash_dies_as_setup_opens_on_every_later_start(tmp_path):
    inj = injector(tmp_path, "setup_crash", RECURRING_PLACEMENTS[SETUP], trig=SETUP, injection=3, cycle=2)
    inj.watch.started("step")  # no step comes before setup in a cycle; a stray one changes nothing
    assert not (tmp_path / "fault_injected.3.json").exists()
    with pytest.raises(InjectedDeviceFailure, match="device failure on rank 1"):
        inj.watch.started("setup")
    marker = json.loads((tmp_path / "fault_injected.3.json").read_text())
    assert (marker["trigger"], marker["placement"], marker["section"]) == ("setup", "setup_start", "setup")
    assert marker["checkpoint_iteration"] == 5


def test_the_first_cycle_waits_for_the_first_checkpoint_then_the_next_step(tmp_path):
    inj = injector(tmp_path, "setup_crash", "step", trig=CHECKPOINT, baseline=0, injection=1, cycle=0)
    inj.watch.started("setup")
    inj.watch.closing("setup")
    inj.watch.ended("setup")
    inj.watch.started("step")  # iteration 1..K: no checkpoint yet
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("5")
    with pytest.raises(InjectedDeviceFailure):
        inj.watch.started("step")  # K+1
    marker = json.loads((tmp_path / "fault_injected.json").read_text())
    assert (marker["checkpoint_iteration"], marker["trigger"], marker["section"]) == (5, "checkpoint", "step")


class FakeHandle:
    def __init__(self, hooks: list) -> None:
        self.hooks = hooks

    def remove(self) -> None:
        self.hooks.clear()


@pytest.fixture
def fake_torch(monkeypatch):
    """Just enough of torch for the poison's bookkeeping: the global forward hook's registration."""
    hooks: list = []
    module = types.SimpleNamespace(
        register_module_forward_hook=lambda h: hooks.append(h) or FakeHandle(hooks)
    )
    torch = types.SimpleNamespace(nn=types.SimpleNamespace(modules=types.SimpleNamespace(module=module)))
    monkeypatch.setitem(sys.modules, "torch", torch)
    return hooks


def test_nan_loss_poisons_exactly_the_iteration_it_lands_in(tmp_path, fake_torch):
    inj = injector(tmp_path, "nan_loss", RECURRING_PLACEMENTS[FIRST_STEP], trig=FIRST_STEP)
    inj.watch.started("setup")
    inj.watch.closing("setup")  # iteration K+1 begins: the poison is on, nothing raised by us
    assert len(fake_torch) == 1
    inj.watch.started("step")  # K+1's own step section: still poisoned (the job's check raises in it)
    assert len(fake_torch) == 1
    inj.watch.started("step")  # K+2 (a workload without the check trains on): its batch is its own
    assert fake_torch == []
    marker = json.loads((tmp_path / "fault_injected.2.json").read_text())
    assert marker["fault"] == "nan_loss" and "NaN" in marker["method"]


def test_nan_loss_in_the_first_cycle_poisons_the_step_it_lands_in(tmp_path, fake_torch):
    inj = injector(tmp_path, "nan_loss", "step", trig=CHECKPOINT, baseline=0, injection=1, cycle=0)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("5")
    inj.watch.started("step")
    assert len(fake_torch) == 1
    inj.watch.started("step")
    assert fake_torch == []


def test_the_poison_adds_nan_to_embeddings_only():
    torch = pytest.importorskip("torch")
    emb, lin = torch.nn.Embedding(4, 3), torch.nn.Linear(3, 3)
    poison = recurring.Poison()
    poison.start(0)
    try:
        assert torch.isnan(emb(torch.tensor([1, 2]))).all()
        assert not torch.isnan(lin(torch.zeros(3))).any()
    finally:
        poison.handle.remove()
    assert not torch.isnan(emb(torch.tensor([1, 2]))).any()


def fake_nvrx(monkeypatch) -> None:
    """A stand-in for NVRx's RankMonitorClient in sys.modules (restored after the test): the hooks wrap its
    class, never the real one's."""

    class RankMonitorClient:
        def start_section(self, name): ...
        def end_section(self, name): ...
        def end_all_sections(self): ...

    names = ("nvidia_resiliency_ext", "fault_tolerance", "rank_monitor_client")
    for depth in range(1, 4):
        module = types.ModuleType(".".join(names[:depth]))
        if depth == 3:
            module.RankMonitorClient = RankMonitorClient
        monkeypatch.setitem(sys.modules, module.__name__, module)


@pytest.fixture
def rank_env(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    saved_argv, saved_path = list(sys.argv), list(sys.path)
    yield monkeypatch
    sys.argv[:], sys.path[:] = saved_argv, saved_path


def test_the_worker_arms_a_recurring_fault_past_the_injections_count(tmp_path, rank_env, capsys):
    """Two markers exist (cycles 0 and 1 injected), --injections is 1: a curable fault would not inject
    again; a recurring one arms its third, in setup for setup_crash. The stand-in workload opens setup."""
    rank_env.setenv("TORCHELASTIC_RESTART_COUNT", "2")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "latest_checkpointed_iteration.txt").write_text("5")
    first = tmp_path / "fault_injected.json"
    claim_marker(first, {})
    claim_marker(marker_path(first, 2), {})
    entry = tmp_path / "train.py"
    entry.write_text(
        "from nvidia_resiliency_ext.fault_tolerance.rank_monitor_client import RankMonitorClient\n"
        "RankMonitorClient().start_section('setup')\n"
    )
    argv = ["--entrypoint", str(entry), "--checkpoint-dir", str(ckpt), "--fault-marker", str(first)]
    argv += ["--fault", "setup_crash", "--fault-rank", "1", "--pid-dir", str(tmp_path)]
    fake_nvrx(rank_env)
    with pytest.raises(InjectedDeviceFailure):
        main(argv)
    marker = json.loads(marker_path(first, 3).read_text())
    assert (marker["injection"], marker["trigger"], marker["cycle"]) == (3, "setup", 2)
    assert "injection 3 of every cycle armed" in capsys.readouterr().err
