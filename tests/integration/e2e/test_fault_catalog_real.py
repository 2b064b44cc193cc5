"""NVRx's fault catalog end to end on CPU: the real ft_launcher (NVRx 0.7.0) runs the smoke workload, the
wrapper injects each CPU fault once after a completed checkpoint, and `ftqual verify` judges the run by the
path that fault must be detected by. Each fault runs once per module (8 iterations, a checkpoint every 4,
0.05 s steps, a 5 s step timeout for the live fault); the negative controls reuse those runs as edited copies.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ftqual.contract import (
    EXIT_CODES,
    GPU_ONLY_FAULTS,
    LIVE_FAULTS,
    RECURRING_FAULTS,
    UNWINDING_FAULTS,
    faults_where,
)
from tests.support.launch import FAST_STEPS, SHORT_FAULT_RUN, launch_smoke, verify_run

CPU_FAULTS = ("segfault", "abort", "exception", "sigterm", "sigint", "gil_lock")
DETECTED = "failure_detected_and_restarted"
# What the check must say it saw, per fault (the exit code, or the section timeout of a live rank).
SEEN = {
    "segfault": "exited with code -11",
    "abort": "exited with code -6",
    "exception": "exited with code 1 ",
    "sigterm": "exited with code -15",
    "sigint": "exited with code 1 ",
    "gil_lock": "section 'step' open",
}
EXIT_LINE = re.compile(r"^.*failed \(exitcode: -?\d+\) local_rank: \d+ \(pid: \d+\).*$", re.M)
TIMEOUT_LINE = re.compile(r"^.*\[Cycle \d+\] Section '\w+' has been open for .*$", re.M)


def launch(repo_root: Path, work: Path, run_id: str, fault: str, args: list[str], **extra: str) -> Path:
    return launch_smoke(
        repo_root, work, run_id, fault, [*FAST_STEPS, *args], {**SHORT_FAULT_RUN, **extra}, timeout=240
    )


def check(report: dict, cid: str = DETECTED) -> dict:
    return next(c for c in report["checks"] if c["id"] == cid)


@pytest.fixture(scope="module")
def catalog_work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("catalog")


@pytest.fixture(scope="module")
def runs(repo_root, catalog_work):
    """fault -> its run directory, launched on first use (one launch per fault in the module)."""
    made: dict[str, Path] = {}

    def get(fault: str, run_id: str | None = None, args: tuple[str, ...] = ()) -> Path:
        key = run_id or fault
        if key not in made:
            made[key] = launch(repo_root, catalog_work, key.replace("_", "-"), fault, list(args))
        return made[key]

    return get


def edited_copy(run_dir: Path, name: str, edit) -> Path:
    copy = run_dir.parent / name
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("checkpoints"), symlinks=True)
    shutil.copytree(run_dir / "checkpoints", copy / "checkpoints", symlinks=True)
    log = copy / "logs" / "launcher.log"
    log.write_text(edit(log.read_text()))
    return copy


def test_the_catalog_is_covered():
    recurring = set(RECURRING_FAULTS)  # tests/integration/e2e/test_recurring_faults_real.py
    # a kill whose save or restore loses state: tests/unit/verification/checks/test_exact_faults_recorded.py
    exactness = set(faults_where(lambda f: f.family == "exactness"))
    assert exactness
    assert (
        set(CPU_FAULTS) | set(GPU_ONLY_FAULTS)
        == (set(EXIT_CODES) | set(LIVE_FAULTS)) - {"kill", "hang"} - recurring - exactness
    )


@pytest.mark.timeout(300)
@pytest.mark.parametrize("fault", CPU_FAULTS)
def test_fault_is_detected_by_its_path_and_recovered(fault, runs, repo_root):
    run_dir = runs(fault)
    marker = json.loads((run_dir / "fault_injected.json").read_text())
    assert (marker["fault"], marker["rank"], marker["section"], marker["timing"]) == (
        fault,
        1,
        "step",
        "checkpoint",
    )
    assert marker["method"] and marker["checkpoint_iteration"] == 4
    rc, report = verify_run(repo_root, run_dir)
    detected = check(report)
    assert rc == 0 and report["verdict"] == "pass", (report.get("cause"), detected)
    assert marker["method"] in detected["detail"], detected
    peer_first = any("a peer died first" in n for n in detected.get("notes", []))
    # A rank that unwinds its fault may be outlived by a peer the launcher reports first (then its own code
    # is not reported); any other fault must show its own exit or timeout.
    assert peer_first == (fault in UNWINDING_FAULTS and peer_first), detected
    if not peer_first:
        assert SEEN[fault] in detected["detail"], detected
    if fault in LIVE_FAULTS:
        assert report["metrics"]["detected_by"] == "section:step"
    else:
        assert report["metrics"]["detected_by"] == "exit"
        if not peer_first:
            assert detected["values"]["exit_code"] in EXIT_CODES[fault]


@pytest.mark.timeout(300)
def test_segfault_seen_as_a_step_timeout_fails(runs, repo_root):
    """Negative control: the segfault run's launcher.log edited so that a step timeout, not the exit, is
    what the launcher reported."""
    run_dir = runs("segfault")

    def to_timeout(text: str) -> str:
        line = EXIT_LINE.search(text)
        assert line, "no worker exit in the segfault run's launcher.log"
        stamp = re.search(r"(\d\d:\d\d:\d\d)\.(\d{3})", line[0])
        day = re.search(r"^(\d{4}-\d\d-\d\d) ", text, re.M)[1]
        fake = (
            f"{day} {stamp[1]},{stamp[2]} [WARNING] [vm] [workload:?(1) infra:?(?)] "
            "rank_monitor_server.py:522 [Cycle 0] Section 'step' has been open for 7.57 seconds. "
            "Timeout is 5.00 seconds."
        )
        return text.replace(line[0], fake)

    copy = edited_copy(run_dir, "segfault-as-timeout", to_timeout)
    rc, report = verify_run(repo_root, copy)
    detected = check(report)
    assert rc == 1 and detected["status"] == "fail", detected
    assert "must be detected by the rank's exit; another path fired" in detected["detail"], detected


@pytest.mark.timeout(300)
def test_gil_lock_seen_as_an_exit_fails(runs, repo_root):
    """Negative control: the gil_lock run's launcher.log without its timeout lines, so a worker exit is the
    first report after the injection."""
    copy = edited_copy(runs("gil_lock"), "gil-lock-as-exit", lambda text: TIMEOUT_LINE.sub("", text))
    rc, report = verify_run(repo_root, copy)
    detected = check(report)
    assert rc == 1 and detected["status"] == "fail", detected
    assert "not a timeout" in detected["detail"] and "another path fired" in detected["detail"], detected


@pytest.mark.timeout(300)
def test_sigterm_handled_by_the_workload_is_said_and_fails(runs, repo_root):
    """With Megatron's --exit-signal-handler the job saves and every rank exits 0: ft_launcher sees no failure
    and restarts nothing; the check says what happened and which checkpoint was written on the way out."""
    run_dir = runs("sigterm", "sigterm_handled", ("--exit-signal-handler",))
    log = (run_dir / "logs" / "train_cycle0.log").read_text()
    assert "[exiting program after receiving SIGTERM.] datetime: " in log
    rc, report = verify_run(repo_root, run_dir)
    detected = check(report)
    assert rc == 1 and detected["status"] == "fail", detected
    assert "the workload handled SIGTERM itself" in detected["detail"], detected
    wrote = re.search(r"wrote checkpoint (\d+) on the way out", detected["detail"])
    assert wrote and re.search(rf"successfully saved checkpoint from iteration +{wrote[1]} ", log), detected


@pytest.mark.parametrize(("fault", "verdict"), [("exception", "pass"), ("segfault", "fail")])
def test_a_peer_that_dies_first(fault, verdict, runs, repo_root):
    """The run with the faulted rank's own exit line made a peer's (the launcher stopped the group first):
    an exception's rank was still unwinding, so the peer's exit is the detection, said in a note; a
    segfault's rank dies at once, so a missing exit of its own still fails."""
    run_dir = runs(fault)
    rank = json.loads((run_dir / "fault_injected.json").read_text())["local_rank"]

    def drop_own_exit(text: str) -> str:
        peer = re.sub(rf"local_rank: {rank} ", "local_rank: 0 ", EXIT_LINE.search(text)[0])
        return EXIT_LINE.sub(lambda m: peer if f"local_rank: {rank} " in m[0] else m[0], text)

    copy = edited_copy(run_dir, f"{fault}-peer-first", drop_own_exit)
    rc, report = verify_run(repo_root, copy)
    detected = check(report)
    assert detected["status"] == verdict, detected["detail"]
    if verdict == "pass":
        assert any("a peer died first" in n for n in detected["notes"]), detected["notes"]
