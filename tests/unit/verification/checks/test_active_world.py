"""active_world_unchanged: every cycle ran on the whole world (ranks, nodes), the replacement too.

Positive: the recorded runs (two ranks on one node; one rank) pass, the baseline skips. Negative controls are
broken copies of them: a replacement in which rank 1 never printed, a world_size larger than the ranks that
printed, a rank outside the world, and, with the launcher log and cycle_infos edited into a two-node run, a
node that did not come back (rendezvous and active_nodes).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ftqual.verification.checks.world import expand_hostlist, spans
from ftqual.verification.evidence import train_log
from ftqual.verification.evidence.clock import Clock
from ftqual.verification.evidence.scan import train_blocks
from ftqual.verification.verify import check_by_id as check

ID = "active_world_unchanged"
C0, C1 = "logs/train_cycle0.log", "logs/train_cycle1.log"
LAUNCHER = "logs/launcher.log"
DATA = Path(__file__).resolve().parents[3] / "data" / "megatron-h200-1gpu"
JOIN = "has joined the rendezvous 'kill' as rank 0 in a world of size 1."
N2_JOIN = (
    "{t} [INFO] [n2] [workload:?(?) infra:?(?)] ft_rendezvous_barrier.py:2804 The node 'n2_777_0' "
    "has joined the rendezvous 'kill' as rank 1 in a world of size 2."
)


def failing(report: dict) -> list[str]:
    return [c["id"] for c in report["checks"] if c["status"] == "fail"]


def two_nodes(run, rejoin: bool = True) -> None:
    """Make kill-2gpu a two-node run (vm: rank 0, n2: rank 1); `rejoin=False`: n2 is gone in cycle 1."""
    run.set_json("run.json", nnodes=2, gpus_per_node=1)
    run.replace(LAUNCHER, JOIN, JOIN.replace("world of size 1", "world of size 2"))
    run.insert_after(
        LAUNCHER,
        lambda line: "14:18:37,084" in line and "has joined" in line,
        [N2_JOIN.format(t="2026-11-29 14:18:37,090")],
    )
    if rejoin:
        run.insert_after(
            LAUNCHER,
            lambda line: "14:19:14,349" in line and "has joined" in line,
            [N2_JOIN.format(t="2026-11-29 14:19:14,352")],
        )
    run.set_json("cycle_infos/cycle_info..0.0", active_nodes="vm,n2")
    run.set_json("cycle_infos/cycle_info..0.1", active_nodes="vm,n2" if rejoin else "vm")
    # rank 1 is now n2's local rank 0, and n2's launcher (pid 777) reports its exit
    run.set_json("fault_injected.json", host="n2", local_rank=0)
    run.replace(
        LAUNCHER,
        "19484 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: -9) local_rank: 1",
        "777 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: -9) local_rank: 0",
    )


# ------------------------------------------------------------------------------------------------- pass


def test_recorded_two_rank_kill_passes(kill_run, verify):
    code, report = verify(kill_run)
    item = check(report, ID)
    assert (code, item["status"]) == (0, "pass"), item
    assert item["values"]["world_size"] == 2 and item["values"]["ranks_per_cycle"] == {"0": 2, "1": 2}
    assert "ranks 0-1 (2 of world_size 2) printed in cycle(s) 0-1" in item["detail"]
    assert (
        "every rank resumed" in item["detail"]
        and "continue at 6 after the load of iteration 5" in item["detail"]
    )
    assert "Megatron prints load lines on rank 0 only" in item["detail"]
    cited = {(e["path"], e["line"]) for e in item["evidence"]}
    # the first line of each rank in each cycle, the rendezvous joins, the load and the next iteration
    assert {(C0, 1), (C0, 3), (C1, 1), (C1, 21), (LAUNCHER, 36), (LAUNCHER, 61)} <= cited
    assert {(C1, 975), (C1, 1023)} <= cited


@pytest.mark.parametrize("name", ["kill", "hang", "hang-seed-placement"])
def test_recorded_one_rank_runs_pass(name, verify):
    code, report = verify(DATA / name)
    item = check(report, ID)
    assert item["status"] == "pass", item
    assert "ranks 0 (1 of world_size 1) printed in cycle(s) 0-1" in item["detail"]
    assert "restarted on all 1 node(s) (vm)" in item["detail"]


def test_baseline_skips(verify):
    _, report = verify(DATA / "baseline")
    assert check(report, ID)["status"] == "skip"


def test_two_node_run_passes_and_names_the_nodes(kill_run, verify):
    two_nodes(kill_run)
    code, report = verify(kill_run)
    item = check(report, ID)
    assert (code, item["status"]) == (0, "pass"), item
    assert "vm (node rank 0), n2 (node rank 1) joined cycle(s) 0-1 in a world of 2 node(s)" in item["detail"]
    assert "cycle_infos active_nodes vm,n2 in cycle(s) 0-1" in item["detail"]
    assert "restarted on all 2 node(s) (n2, vm) in cycle 1" in item["detail"]
    assert item["values"]["nnodes"] == 2 and item["values"]["nodes"] == ["n2", "vm"]


# ---------------------------------------------------------------------------------------- fail (controls)


def test_fails_when_rank_1_never_printed_in_the_replacement(kill_run, verify):
    """Rank 1's lines of cycle 1 relabelled as rank 0: the iterations are all there, rank 1 is not."""
    assert kill_run.sub(C1, r"^1: ", "0: ") == 69
    code, report = verify(kill_run)
    item = check(report, ID)
    assert (code, item["status"]) == (1, "fail")
    assert failing(report) == [ID]  # the negative control breaks this check only
    assert "cycle 1: rank(s) 1 never printed in logs/train_cycle1.log (1 of 2 ranks)" in item["detail"]
    assert item["values"]["ranks_per_cycle"] == {"0": 2, "1": 1}


def test_fails_naming_the_node_of_a_missing_rank(kill_run, verify):
    two_nodes(kill_run)
    kill_run.sub(C1, r"^1: ", "0: ")
    _, report = verify(kill_run)
    item = check(report, ID)
    assert item["status"] == "fail"
    assert "cycle 1: rank(s) 1 (on n2) never printed" in item["detail"]


def test_fails_when_fewer_ranks_printed_than_world_size(kill_run, verify):
    kill_run.set_json("run.json", world_size=4)
    code, report = verify(kill_run)
    item = check(report, ID)
    assert (code, item["status"]) == (1, "fail")
    assert failing(report) == [ID]
    for cycle in (0, 1):
        assert (
            f"cycle {cycle}: rank(s) 2-3 never printed in logs/train_cycle{cycle}.log (2 of 4 ranks)"
            in (item["detail"])
        )


def test_fails_when_a_one_rank_run_claims_two(tmp_path, verify):
    run = tmp_path / "kill"
    shutil.copytree(DATA / "kill", run)
    text = (run / "run.json").read_text().replace('"world_size": 1,', '"world_size": 2,')
    (run / "run.json").write_text(text)
    _, report = verify(run)
    item = check(report, ID)
    assert item["status"] == "fail"
    assert "cycle 1: rank(s) 1 (on node rank 1) never printed in logs/train_cycle1.log" in item["detail"]
    assert "run.json: nnodes x gpus_per_node = 1 x 1 is not world_size 2" in item["notes"]


def test_fails_on_a_rank_outside_the_world(kill_run, verify):
    kill_run.sub(C1, r"^1: (WARNING: one_logger)", r"2: \1")
    _, report = verify(kill_run)
    item = check(report, ID)
    assert item["status"] == "fail"
    assert "cycle 1: rank(s) 2 printed in logs/train_cycle1.log, outside the world of 2" in item["detail"]
    assert any(e["path"] == C1 and e["text"].startswith("2: WARNING") for e in item["evidence"])


def test_fails_when_a_node_did_not_rejoin(kill_run, verify):
    two_nodes(kill_run, rejoin=False)
    code, report = verify(kill_run)
    item = check(report, ID)
    assert (code, item["status"]) == (1, "fail")
    assert "cycle 1: node(s) n2 did not join the rendezvous (1 of 2 node(s) joined)" in item["detail"]
    assert "cycle 1: cycle_infos active_nodes 'vm' is 1 node(s), run.json says 2" in item["detail"]
    assert any(e["path"] == "cycle_infos/cycle_info..0.1" for e in item["evidence"])


def test_fails_when_the_rendezvous_world_shrank(kill_run, verify):
    kill_run.set_json("run.json", nnodes=2, gpus_per_node=1)
    _, report = verify(kill_run)
    item = check(report, ID)
    assert item["status"] == "fail"
    assert "cycle 0: rendezvous world of 1 node(s), run.json says 2" in item["detail"]


# ------------------------------------------------------------------------------------------ inconclusive


def test_inconclusive_without_rank_prefixes(kill_run, verify):
    kill_run.sub(C1, r"^[01]: ", "")
    _, report = verify(kill_run)
    item = check(report, ID)
    assert item["status"] == "inconclusive"
    assert "logs/train_cycle1.log has no '<rank>: ' lines" in item["detail"]


def test_inconclusive_when_the_replacement_log_is_cut(kill_run, verify):
    """A log cut short cannot prove a rank never printed."""
    lines = [line for line in kill_run.lines(C1) if not line.startswith("1: ")]
    lines[-1] = lines[-1].rstrip("\n")
    kill_run.write_lines(C1, lines)
    _, report = verify(kill_run)
    item = check(report, ID)
    assert item["status"] == "inconclusive"
    assert "rank(s) 1 never printed" in item["detail"] and "cut short" in item["detail"]


def test_inconclusive_without_world_size(kill_run, verify):
    data = kill_run.json("run.json")
    del data["world_size"]
    kill_run.path("run.json").write_text(json.dumps(data))
    _, report = verify(kill_run)
    assert check(report, ID)["status"] == "inconclusive"


# ------------------------------------------------------------------------------------------------- parts


def test_train_log_finds_the_first_line_of_every_rank(tmp_path, monkeypatch):
    """Right-aligned prefixes, a rank that first prints deep in the file, small and large blocks."""
    lines = [f"{r % 300:>3}: chatter {i}\n" for i, r in enumerate(range(6000))]
    lines[5000] = "777: late rank\n"
    lines[5001] = "no prefix here\n"
    path = tmp_path / "train_cycle0.log"
    path.write_text("".join(lines))
    for size in (100, 4096, 4 << 20):
        monkeypatch.setattr(train_blocks, "BLOCK_BYTES", size)
        log = train_log.parse_train_log(path, "logs/train_cycle0.log", 0, Clock())
        assert sorted(log.ranks) == [*range(300), 777]
        assert log.ranks[0].line == 1 and log.ranks[299].line == 300
        assert (log.ranks[777].line, log.ranks[777].text) == (5001, "777: late rank")


def test_hostlists_and_spans():
    assert expand_hostlist("n[1-2]") == ["n1", "n2"]
    assert expand_hostlist("gpu-[0001-0003,0007]") == ["gpu-0001", "gpu-0002", "gpu-0003", "gpu-0007"]
    assert expand_hostlist("localhost") == ["localhost"]
    assert expand_hostlist("a,b[1-2]") == ["a", "b1", "b2"]
    assert expand_hostlist("") == []
    assert spans([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
