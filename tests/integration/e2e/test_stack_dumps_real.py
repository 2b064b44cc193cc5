"""Stack dumps with the real ft_launcher on the smoke workload: a hang, a GIL lock and a lingering exception
each leave a dump of the faulted rank that names the frame holding it; the verifier cites it, the fault table
and a failed run's cause name it; without py-spy the verdict is the same (the faulthandler answers where the
rank can still run a handler, and nothing where it is stopped)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ftqual.launch.command import stack_dump_tool
from ftqual.report.faults_table import build_fault_table, fault_table_section
from tests.support.launch import FAST_STEPS, SHORT_FAULT_RUN, launch_smoke, verify_run

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(stack_dump_tool({}) is None, reason="py-spy is pinned in requirements.lock"),
]

# What holds each faulted rank, as the dump of rank 1 in cycle 0 says it.
HELD = {
    "hang": r"^main thread in (?:ftqual/rank/)?faults\.py `by_signal\.<locals>\.<lambda>` "
    r".*stopped process",
    "gil_lock": r"^thread ftqual-gil-lock holds the GIL in (?:ftqual/rank/)?faults\.py `hold_gil_forever`",
    "exception": r"^main thread in multiprocessing/util\.py `_exit_function` -> `BaseProcess\.join` .*"
    r"waiting on 1 child process: pid \d+ in smoke_train\.py `data_worker`",
}
EXTRA = {"exception": ["--smoke-exit-linger-seconds=3"]}  # the rank joins its data worker for 3 s


def check(report: dict, cid: str) -> dict:
    return next(c for c in report["checks"] if c["id"] == cid)


@pytest.fixture(scope="module")
def runs(repo_root, tmp_path_factory):
    """(fault, tool) -> its run directory, launched on first use."""
    work = tmp_path_factory.mktemp("dumps")
    made: dict[tuple[str, str], Path] = {}

    def get(fault: str, tool: str = "py-spy") -> Path:
        key = (fault, tool)
        if key not in made:
            env = {**SHORT_FAULT_RUN, **({"FTQUAL_DUMP_TOOL": "none"} if tool == "none" else {})}
            run_id = f"{fault.replace('_', '-')}-{tool.replace('-', '')}"
            made[key] = launch_smoke(
                repo_root, work, run_id, fault, [*FAST_STEPS, *EXTRA.get(fault, [])], env, timeout=240
            )
        return made[key]

    return get


@pytest.mark.timeout(300)
@pytest.mark.parametrize("fault", sorted(HELD))
def test_the_faulted_rank_s_dump_names_what_holds_it(fault, runs, repo_root):
    run_dir = runs(fault)
    dumps = sorted((run_dir / "dumps").glob("*.cycle0.rank1.*.json"))
    assert dumps, sorted(p.name for p in (run_dir / "dumps").iterdir())
    record = json.loads(dumps[0].read_text())
    assert record["trigger"]["kind"] == "fault" and record["trigger"]["fault"] == fault
    assert record["tool"].endswith("py-spy") and record["processes"][0]["format"] == "py-spy-json"
    rc, report = verify_run(repo_root, run_dir)
    assert (rc, report["verdict"]) == (0, "pass"), [c for c in report["checks"] if c["status"] != "pass"]
    held = check(report, "what_held_the_rank")
    assert held["status"] == "pass" and held["gates"] is False
    assert re.search(HELD[fault], report["metrics"]["held_by"]), report["metrics"]["held_by"]
    assert held["evidence"][0]["path"] == report["metrics"]["stack_dump"]
    assert report["metrics"]["stack_dump"].startswith("dumps/") and "rank1" in report["metrics"]["stack_dump"]
    assert any(d["path"] == report["metrics"]["stack_dump"] for d in report["stack_dumps"])
    # the fault table says it next to the path NVRx saw
    rows = build_fault_table(
        [{"name": fault, "fault": fault, "metrics": report["metrics"], "verdict": "pass"}]
    )
    table = "\n".join(fault_table_section(rows))
    assert "| held by |" in table and report["metrics"]["stack_dump"] in table


@pytest.mark.timeout(300)
def test_a_peer_that_a_section_timeout_is_about_to_kill_is_dumped_too(runs):
    """The hang's peer waits in its collective: its own sentinel dumps it before the step timeout is due."""
    run_dir = runs("hang")
    peer = [json.loads(p.read_text()) for p in (run_dir / "dumps").glob("*.cycle0.rank0.*.json")]
    assert peer and peer[0]["trigger"]["kind"] == "timeout_due" and peer[0]["trigger"]["section"] == "step"
    frames = [f["name"] for t in peer[0]["processes"][0]["output"] for f in t["frames"]]
    assert "all_reduce" in frames


@pytest.mark.timeout(300)
def test_a_failed_run_s_cause_names_what_held_the_rank(runs, repo_root, tmp_path):
    """Negative control: the hang's launcher.log without its timeout lines FAILs, and its cause says where
    the rank waited."""
    copy = tmp_path / "hang-unseen"
    shutil.copytree(runs("hang"), copy, symlinks=True)
    log = copy / "logs" / "launcher.log"
    log.write_text(re.sub(r"(?m)^.*Section '\w+' has been open for .*\n", "", log.read_text()))
    rc, report = verify_run(repo_root, copy)
    assert (rc, report["verdict"]) == (1, "fail")
    assert re.search(r"; held by: main thread in (ftqual/rank/)?faults\.py", report["cause"]), report["cause"]


@pytest.mark.timeout(400)
@pytest.mark.parametrize(("fault", "dumped"), [("gil_lock", True), ("hang", False)])
def test_without_py_spy_the_verdict_is_the_same(fault, dumped, runs, repo_root):
    """FTQUAL_DUMP_TOOL=none: the GIL-locked rank's faulthandler still answers (a C signal handler needs no
    GIL); a stopped rank cannot, and the check says why; both verdicts are the ones py-spy's runs have."""
    run_dir = runs(fault, "none")
    run = json.loads((run_dir / "run.json").read_text())
    assert run["stack_dump_tool"] is None
    rc, report = verify_run(repo_root, run_dir)
    _, with_tool = verify_run(repo_root, runs(fault))
    assert (rc, report["verdict"]) == (0, with_tool["verdict"]) == (0, "pass")
    held = check(report, "what_held_the_rank")
    if dumped:
        assert held["status"] == "pass" and held["values"]["tool"] == "faulthandler"
        assert "faults.py" in report["metrics"]["held_by"]  # the rank's ftqual.rank.faults
    else:
        assert held["status"] == "skip" and "stopped" in held["detail"], held["detail"]
        assert report["metrics"]["held_by"] is None
