"""config/faults.yaml on one H200 (tests/data/megatron-h200-faults-1gpu): NVRx's fault catalog on a real GPU,
what the machine decided and what ftqual decides now from the same evidence. An exception and a SIGINT unwind
(a traceback) and leave the rank alive after it: the 10 s step timeout of these runs ended it before the
rank's own exit (with a 60 s one, the rank exited by itself 37.4 s after its traceback). The machine's
verifier failed them; today the open section's timeout is a detection of such a fault, whose linger is given
as "at least N s" (no stack dump was taken then, and the report says so). A fault that must end its rank at
once (a segfault) still fails when only a timeout caught it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftqual.report.budgets import budgets_for
from ftqual.verification import schema as verify_schema
from ftqual.verification.schema import judged
from ftqual.verification.verify import build_report

DATA = Path(__file__).resolve().parents[3] / "data" / "megatron-h200-faults-1gpu"
BASELINE = DATA / "runs" / "baseline-20261202T145438Z-660-a1"
# scenario -> (verdict today, detected_by) of every completed attempt
EXPECTED = {
    "baseline": ("pass", None),
    "segfault": ("pass", "exit"),
    "abort": ("pass", "exit"),
    "sigterm": ("pass", "exit"),
    "gpu_error": ("pass", "exit"),
    "gil_lock": ("pass", "section:step"),
    "gpu_hang": ("pass", "section:step"),
    "exception": ("pass", "section:step"),
    "sigint": ("pass", "section:step"),
}
# what the machine's verifier said where today's says otherwise: a timeout that cut an unwinding fault's
# linger was not a detection then
MACHINE = {"exception": "fail", "sigint": "fail"}


def attempts(scenario: str) -> list[dict]:
    return [
        json.loads(p.read_text()) for p in sorted((DATA / "results" / scenario).glob("*-[0-9]/verify.json"))
    ]


def test_every_catalog_fault_ran_on_the_gpu():
    assert set(EXPECTED) == {p.name for p in (DATA / "results").iterdir() if p.is_dir()} - {
        "preflight",
        "stack",
    }


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_the_machine_and_today_agree_on_every_attempt(scenario):
    verdict, detected_by = EXPECTED[scenario]
    for report in attempts(scenario):
        assert (judged(report).outcome.verdict, report["metrics"].get("detected_by")) == (
            MACHINE.get(scenario, verdict),
            detected_by,
        )
        base = None if scenario == "baseline" else BASELINE
        now = build_report(DATA / "runs" / report["run_id"], base)
        assert now["verdict"] == verdict, now.get("cause")
        assert now["metrics"].get("detected_by") == detected_by


@pytest.mark.parametrize("scenario", ["gpu_error", "gpu_hang"])
def test_gpu_faults_leave_nothing_behind(scenario):
    """The faulted process and its GPU memory were gone before the replacement started (NVRx's reclaim
    check: 528 MB to 0 MB at once on this stack)."""
    (report,) = attempts(scenario)
    run = DATA / "runs" / report["run_id"]
    now = build_report(run, BASELINE)
    check = {c["id"]: c for c in now["checks"]}["no_leftovers"]
    assert check["status"] == "pass"
    assert check["values"]["gpu_reclaim_s_max"] == 0.0
    assert "NVRx's GPU-memory check before 1 replacement(s): reclaimed, at most 0 s" in check["detail"]


def test_nvrx_giving_up_on_gpu_memory_is_said(tmp_path):
    """NVRx's reclaim timeout (another process on the GPU, or the failed cycle's memory) is a note with its
    line: the restart includes that wait; whose memory it was, the leftovers records say."""
    import shutil

    (report,) = attempts("gpu_error")
    run = tmp_path / "run"
    shutil.copytree(DATA / "runs" / report["run_id"], run)
    log = run / "logs" / "launcher.log"
    text = log.read_text()
    line = next(x for x in text.splitlines() if "memory reclaimed in" in x)
    gave_up = line.split("launcher.py")[0].replace("[INFO]", "[ERROR]") + (
        "launcher.py:1290 Timeout waiting for GPU memory to be reclaimed after 50.0s. Memory may not have "
        "been fully cleaned up. Proceeding anyway as best effort."
    )
    log.write_text(text.replace(line, gave_up))
    check = {c["id"]: c for c in build_report(run, BASELINE)["checks"]}["no_leftovers"]
    assert check["values"]["gpu_reclaim_s_max"] == 50.0
    assert any("gave up waiting for GPU memory after 50 s" in note for note in check["notes"]), check


LINGERED = {  # run -> (the step timeout's kill after the injection, s; the fault)
    "exception-20261202T150548Z-664-a1": (12.759, "exception"),
    "exception-20261202T152038Z-662-a2": (11.438, "exception"),
    "sigint-20261202T152534Z-2144-a1": (13.562, "sigint"),
}


@pytest.mark.parametrize("run_id", sorted(LINGERED))
def test_an_unwinding_fault_the_timeout_cut_qualifies_with_its_linger(run_id):
    """The rank printed its traceback and lived on; the 10 s step timeout ended it: a detection, with the
    linger a lower bound ("at least N s", N the timeout's kill after the injection) and no stack dump."""
    seconds, fault = LINGERED[run_id]
    report = build_report(DATA / "runs" / run_id, BASELINE)
    assert report["verdict"] == "pass", report.get("cause")
    check = {c["id"]: c for c in report["checks"]}["failure_detected_and_restarted"]
    assert check["status"] == "pass"
    assert f"the {fault} unwound (a traceback follows the injection) and its rank lingered" in check["detail"]
    assert (
        f"the section 'step' timeout 10 s ended it at least {seconds:.1f} s after the injection"
        in (check["detail"])
    )
    no_dump = "what held the rank: unknown (no stack dump: the run predates the rank sentinels)"
    assert no_dump in check["detail"]
    metrics = report["metrics"]
    assert metrics["linger_s"] == pytest.approx(seconds) and metrics["linger_s"] >= 10
    assert metrics["linger_cut_by_timeout"] is True and metrics["linger_ended_by"] == "timeout"
    assert (metrics["linger_section"], metrics["linger_bound_s"], metrics["held_by"]) == ("step", 10.0, None)
    assert check["values"]["linger_s"] == metrics["linger_s"]
    assert not verify_schema.problems(report)
    cited = {(e["path"], e["line"]) for e in check["evidence"]}
    log = (DATA / "runs" / run_id / "logs" / "train_cycle0.log").read_text().splitlines()
    traces = [path_line for path_line in cited if path_line[0] == "logs/train_cycle0.log"]
    assert any("Traceback" in log[line - 1] for _, line in traces), cited
    # the report's latency budget judges its cost: the linger, bounded by the open section's timeout
    rows = {b.measure: b for b in budgets_for(fault, metrics, report["expected"])}
    assert rows["detection_s"].budget == pytest.approx(10 + 5) and rows["detection_s"].within is True
    assert f"linger at least {seconds:.1f} s, cut by the timeout" in rows["detection_s"].formula


def test_a_segfault_only_a_timeout_caught_fails(tmp_path):
    """Negative control: a fault that must end its rank at once is not detected by a timeout. The segfault run
    forged so that the step timeout fired and killed the rank (-9) before any exit of its own: a FAIL."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(DATA / "runs" / "segfault-20261202T145551Z-1031-a1", run)
    log = run / "logs" / "launcher.log"
    lines = log.read_text().splitlines()
    at = next(n for n, x in enumerate(lines) if "failed (exitcode: -11) local_rank: 0" in x)
    timeout = (
        "2026-12-02 14:56:37,900 [WARNING] [vm] [workload:?(0) infra:?(?)] rank_monitor_server.py:522 "
        "[Cycle 0] Section 'step' has been open for 10.06 seconds. Timeout is 10.00 seconds."
    )
    lines[at] = lines[at].replace("exitcode: -11", "exitcode: -9")
    lines.insert(at, timeout)
    log.write_text("\n".join(lines) + "\n")
    report = build_report(run, BASELINE)
    assert report["verdict"] == "fail"
    check = {c["id"]: c for c in report["checks"]}["failure_detected_and_restarted"]
    assert check["status"] == "fail"
    assert "worker local_rank 0 exited with code -9; a segfault exits with -11 or 139" in check["detail"]
    assert "a timeout (section 'step') fired before the exit" in check["detail"]
    assert "linger_s" not in report["metrics"]


def test_the_same_linger_without_a_traceback_fails(tmp_path):
    """Negative control: an exception whose rank printed no traceback did not unwind: the timeout that caught
    it is another path, a FAIL (the timeout is the linger's detection only with the traceback, the evidence
    that the fault acted)."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(DATA / "runs" / "exception-20261202T152038Z-662-a2", run)
    log = run / "logs" / "train_cycle0.log"
    text = log.read_text()
    inject = text.index("[ftqual-inject]")
    head, tail = text[:inject], text[inject:]
    kept = [x for x in tail.splitlines() if "[rank0]:" not in x]
    log.write_text(head + "\n".join(kept) + "\n")
    report = build_report(run, BASELINE)
    check = {c["id"]: c for c in report["checks"]}["failure_detected_and_restarted"]
    assert check["status"] == "fail", check["detail"]
    assert "a timeout (section 'step') fired before the exit" in check["detail"]


@pytest.mark.parametrize("run_id", ["gpu_hang-20261202T150128Z-4848-a1", "sigint-20261202T152220Z-1460-a1"])
def test_a_run_the_time_limit_stopped_is_inconclusive(run_id):
    run = DATA / "runs" / run_id
    assert json.loads((run / "run.json").read_text())["interrupted_by"] == "SIGTERM"
    report = build_report(run, BASELINE)
    assert report["verdict"] == "inconclusive"
    assert report["cause_evidence"]["kind"] == "interrupted"


def test_the_committed_catalog_report_is_todays():
    """docs/gpu-qualification/faults-h200-1gpu/summary.json: every fault, rebuilt from the run directories
    with today's verifier: the lingering exception and SIGINT qualify, their linger cut by the step
    timeout."""
    doc = json.loads((DATA.parents[2] / "docs/gpu-qualification/faults-h200-1gpu/summary.json").read_text())
    rows = {row["scenario"]: row for row in doc["faults"]}
    assert set(rows) == set(EXPECTED) - {"baseline"}
    assert {name: row["verdict"] for name, row in rows.items()} == {
        name: verdict for name, (verdict, _) in EXPECTED.items() if name != "baseline"
    }
    assert doc["verdict"] == "pass"
    scenarios = {sc["name"]: sc for sc in doc["scenarios"]}
    for name in ("exception", "sigint"):
        metrics = scenarios[name]["metrics"]
        assert metrics["linger_cut_by_timeout"] is True and metrics["linger_s"] >= 10
        (detection,) = [b for b in scenarios[name]["budgets"] if b["measure"] == "detection_s"]
        assert detection["within"] is True
        assert "what held the rank: unknown (no stack dump of the rank)" in detection["formula"]


def test_the_same_cut_without_a_recorded_stop_fails(tmp_path):
    """Negative control: the SIGINT run the time limit cut (its rank ended by the stop's SIGTERM, no
    replacement cycle) is a FAIL once run.json no longer says the launcher was stopped from outside."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(DATA / "runs" / "sigint-20261202T152220Z-1460-a1", run)
    meta = json.loads((run / "run.json").read_text())
    meta["interrupted_by"] = None
    (run / "run.json").write_text(json.dumps(meta))
    report = build_report(run, BASELINE)
    assert report["verdict"] == "fail"
    failed = {c["id"] for c in report["checks"] if c["status"] == "fail"}
    assert {"failure_detected_and_restarted", "resumed_from_checkpoint", "clean_finish"} <= failed


def test_the_linger_metrics_are_checked_by_every_reader():
    """ftqual.verify/v1 with the linger (additions only): a report that carries them with the wrong kind is
    not usable; one without them (every older report) still is."""
    report = build_report(DATA / "runs" / "exception-20261202T152038Z-662-a2", BASELINE)
    bad = {**report, "metrics": {**report["metrics"], "linger_cut_by_timeout": "yes", "linger_s": "11"}}
    assert verify_schema.problems(bad) == [
        "metrics.linger_s is not a number",
        "metrics.linger_cut_by_timeout is not true or false",
    ]
    old = {**report, "metrics": {k: v for k, v in report["metrics"].items() if not k.startswith("linger")}}
    assert verify_schema.problems(old) == []


def test_an_exception_whose_rank_exited_by_itself_after_a_linger_qualifies_with_the_measured_one(tmp_path):
    """The same run as if the rank had exited by itself (exit 1) just before the step timeout fired (with a
    60 s step timeout it did, 37.4 s after its traceback): its own exit is the detection, the linger the
    measured figure (not a lower bound)."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(DATA / "runs" / "exception-20261202T152038Z-662-a2", run)
    log = run / "logs" / "launcher.log"
    lines = [x for x in log.read_text().splitlines() if "Section 'step' has been open" not in x]
    log.write_text("\n".join(x.replace("(exitcode: -9)", "(exitcode: 1)") for x in lines) + "\n")
    report = build_report(run, BASELINE)
    assert report["verdict"] == "pass", report.get("cause")
    check = {c["id"]: c for c in report["checks"]}["failure_detected_and_restarted"]
    assert "worker local_rank 0 exited with code 1 (exception: 1)" in check["detail"]
    assert (
        "the rank lingered: it exited by itself 11.5 s after the injection; what held the rank: unknown "
        "(no stack dump: the run predates the rank sentinels)"
    ) in check["detail"]
    metrics = report["metrics"]
    assert (metrics["detected_by"], metrics["linger_ended_by"], metrics["linger_cut_by_timeout"]) == (
        "exit",
        "exit",
        False,
    )
    assert metrics["linger_s"] == pytest.approx(11.542)
    rows = {b.measure: b for b in budgets_for("exception", metrics, report["expected"])}
    assert rows["detection_s"].budget == pytest.approx(15) and rows["detection_s"].within is True
    assert "(linger 11.5 s; what held the rank: unknown" in rows["detection_s"].formula
