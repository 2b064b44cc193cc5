"""The run_scenario rule's logic (ftqual.workflow.run_scenario) without Snakemake: the srun prefix, the
cause's telling line, the refusals before launch, checkpoint seeding, the summary's invalidation and the
slot's record (attempt.json)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from ftqual.rank.tracker import TRACKER_NAME
from ftqual.scenario import model as scenarios
from ftqual.workflow import run_scenario as rs
from ftqual.workflow.attempts import attempt_key

VALID_PREFLIGHT = {"schema": "ftqual.preflight/v1", "verdict": "pass", "checks": []}
STACK = {"digest": "0123456789ab", "parts": {}}


def voice(scenario="kill"):
    log, console = io.StringIO(), io.StringIO()
    return rs.Say(scenario, log, console), log, console


def write_json(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


# --- srun -----------------------------------------------------------------------------------------------


def test_srun_prefix_starts_one_launcher_per_node_with_the_first_node_as_endpoint():
    cmd = rs.srun_prefix(3, 4, 29500, SimpleNamespace())
    assert cmd[:4] == ["srun", "--nodes=3", "--ntasks-per-node=1", "--gres=gpu:4"]
    assert cmd[4:7] == ["--label", "bash", "-c"]
    assert cmd[-1] == "bash"  # $0 of the step; the launcher's argv follows as "$@"
    step = cmd[7]
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1' in step
    assert step.endswith(':29500"; exec "$@"') and step.startswith('export RDZV_ENDPOINT="$(')
    assert not any(a.startswith("--cpus-per-task") for a in cmd)


def test_srun_prefix_asks_the_cpus_of_the_node_from_cpus_per_gpu_first():
    both = SimpleNamespace(cpus_per_gpu=2, cpus_per_task=7, tasks_per_node=1)
    assert "--cpus-per-task=8" in rs.srun_prefix(2, 4, 1, both)
    per_task = SimpleNamespace(cpus_per_task=3, tasks_per_node=4)
    assert "--cpus-per-task=12" in rs.srun_prefix(2, 4, 1, per_task)
    assert "--cpus-per-task=5" in rs.srun_prefix(2, 4, 1, SimpleNamespace(cpus_per_task=5))
    # Snakemake's "unset" of cpus_per_task is 0 or negative: no flag
    assert not any("cpus" in a for a in rs.srun_prefix(2, 4, 1, SimpleNamespace(cpus_per_task=0)))


# --- tail and the telling line --------------------------------------------------------------------------


def test_tail_keeps_the_last_non_blank_lines_and_reads_nothing_of_a_missing_file(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n\n  \n" for i in range(30)))
    assert rs.tail(log, 3) == ["line 27", "line 28", "line 29"]
    assert len(rs.tail(log)) == rs.TAIL_LINES
    assert rs.tail(tmp_path / "absent.log") == []


def test_telling_line_is_the_last_error_line_without_nvrx_logger_prefix():
    lines = [
        "worker 0: Traceback (most recent call last)",
        "2025-01-01 12:00:00,000 [INFO] [node1] [ft_launcher] launcher.py:412 - started cycle 2",
        "2025-01-01 12:00:09,000 [ERROR] [node1] [ft_launcher] launcher.py:517 - no progress across restarts",
        "bye",
    ]
    assert rs.telling_line(lines) == "no progress across restarts"
    assert rs.telling_line(["all good", "done"]) is None
    # "exhausted" and "no progress" are telling here, though ftqual.verification.causes' pattern names neither
    assert rs.telling_line(["restarts exhausted"]) == "restarts exhausted"
    assert rs.telling_line(["Error: " + "x" * 500]) == ("Error: " + "x" * 500)[:200]


# --- reading verdicts and the refusals ------------------------------------------------------------------


def test_verdict_of_is_none_for_a_missing_unparsable_or_non_object_report(tmp_path):
    assert rs.verdict_of(tmp_path / "absent.json") is None
    assert rs.verdict_of(None) is None
    (tmp_path / "bad.json").write_text("{not json")
    assert rs.verdict_of(tmp_path / "bad.json") is None
    assert rs.verdict_of(write_json(tmp_path / "list.json", [1])) is None
    assert rs.verdict_of(write_json(tmp_path / "ok.json", {"verdict": "pass"})) == "pass"
    assert rs.verdict_of(tmp_path / "ok.json", lambda doc: doc["verdict"].upper()) == "PASS"


@pytest.fixture
def cfg():
    return scenarios.resolve({}, env={})  # the schema's scenarios: baseline, kill, hang


def test_refusal_names_a_failed_missing_or_malformed_preflight(tmp_path, cfg):
    failed = write_json(tmp_path / "failed.json", {**VALID_PREFLIGHT, "verdict": "fail"})
    assert rs.refusal(cfg, "baseline", failed, None) == f"the preflight failed ({failed})"
    missing = tmp_path / "absent.json"
    assert rs.refusal(cfg, "baseline", missing, None) == f"the preflight report ({missing}) is missing"
    # a rerun whose record existed named no input (an interrupt's leftover): no TypeError, a refusal
    assert rs.refusal(cfg, "baseline", None, None) == "the preflight report (none given) is missing"
    passed = write_json(tmp_path / "pass.json", {**VALID_PREFLIGHT, "verdict": "pass"})
    assert "the baseline's attempt (None) is missing" in rs.refusal(cfg, "kill", passed, None)
    malformed = write_json(tmp_path / "malformed.json", {"verdict": "pass"})
    assert rs.refusal(cfg, "baseline", malformed, None) == f"the preflight report is malformed ({malformed})"
    warned = write_json(tmp_path / "warn.json", {**VALID_PREFLIGHT, "verdict": "warn"})
    assert rs.refusal(cfg, "baseline", warned, None) is None


def test_refusal_holds_fault_scenarios_until_the_baseline_passed(tmp_path, cfg):
    preflight = write_json(tmp_path / "preflight.json", VALID_PREFLIGHT)
    missing = tmp_path / "baseline" / "verify.json"
    assert rs.refusal(cfg, "kill", preflight, missing) == (
        f"the baseline's attempt ({missing}) is missing: fault scenarios run after the baseline passes"
    )
    failed = write_json(tmp_path / "failed" / "verify.json", {"verdict": "fail"})
    assert rs.refusal(cfg, "hang", preflight, failed).startswith(
        f"the baseline's attempt ({failed}) is fail:"
    )
    # a passing baseline without a run to measure refuses nothing (nothing measured to judge by)
    passed = write_json(tmp_path / "passed" / "verify.json", {"verdict": "pass"})
    assert rs.refusal(cfg, "kill", preflight, passed) is None
    # the baseline itself never waits for a baseline
    assert rs.refusal(cfg, "baseline", preflight, missing) is None


def test_not_launched_records_the_cause_and_succeeds(tmp_path):
    say, log, console = voice()
    out = tmp_path / "run.json"
    assert rs.not_launched(say, out, {"scenario": "kill", "slot": "k-1"}, "the preflight failed (p)") == 0
    assert (
        out.read_text()
        == json.dumps(
            {"scenario": "kill", "slot": "k-1", "launched": False, "cause": "the preflight failed (p)"},
            indent=2,
        )
        + "\n"
    )
    assert log.getvalue() == "[run_scenario kill] not launched: the preflight failed (p)\n"
    assert console.getvalue() == "ftqual: kill: not launched: the preflight failed (p)\n"


# --- checkpoint seeding ---------------------------------------------------------------------------------


def baseline_with_checkpoint(tmp_path: Path, tracker: str | None = "20", folder: int | None = 20) -> Path:
    """A baseline slot (verify.json, attempt.json pointing at its run) whose run saved iteration 20."""
    run_dir = tmp_path / "runs" / "baseline-1"
    write_json(run_dir / "run.json", {"checkpoint_dir": "checkpoints"})
    ckpt = run_dir / "checkpoints"
    ckpt.mkdir()
    if tracker is not None:
        (ckpt / TRACKER_NAME).write_text(tracker)
    if folder is not None:
        iter_dir = ckpt / f"iter_{folder:07d}"
        (iter_dir / "mp_rank_00").mkdir(parents=True)
        (iter_dir / "mp_rank_00" / "model_optim_rng.pt").write_bytes(b"weights")
        (iter_dir / "latest").symlink_to("mp_rank_00")
    slot = tmp_path / "results" / "baseline" / "k-1"
    write_json(
        slot / "attempt.json", {"run_dir": str(run_dir), "run_id": "baseline-1", "scenario": "baseline"}
    )
    return write_json(slot / "verify.json", {"verdict": "pass"})


def test_seed_checkpoint_copies_the_tracker_and_its_iteration_only(tmp_path):
    verify = baseline_with_checkpoint(tmp_path)
    ckpt = tmp_path / "runs" / "baseline-1" / "checkpoints"
    (ckpt / "iter_0000010").mkdir()  # an older save: not the tracker's
    dest = tmp_path / "checkpoints" / "kill-1"
    seeded = rs.seed_checkpoint(verify, dest)
    assert seeded == {
        "scenario": "baseline",
        "run_id": "baseline-1",
        "source_checkpoint_dir": str(ckpt),
        "iteration": 20,
        "checkpoint_dir": str(dest),
    }
    assert sorted(p.name for p in dest.iterdir()) == ["iter_0000020", TRACKER_NAME]
    assert (dest / TRACKER_NAME).read_text() == "20"
    assert (dest / "iter_0000020" / "mp_rank_00" / "model_optim_rng.pt").read_bytes() == b"weights"
    assert (dest / "iter_0000020" / "latest").is_symlink()  # copied as a link, not followed


def test_seed_checkpoint_refuses_what_cannot_be_resumed(tmp_path):
    dest = tmp_path / "dest"
    absent = baseline_with_checkpoint(tmp_path / "a", tracker=None)
    assert rs.seed_checkpoint(absent, dest).startswith("resume_from: the baseline's checkpoint tracker ")
    assert rs.seed_checkpoint(absent, dest).endswith(f"{TRACKER_NAME} is absent")
    gone = baseline_with_checkpoint(tmp_path / "b", tracker="30")
    assert rs.seed_checkpoint(gone, dest).startswith(
        "resume_from: the baseline's tracker names iteration 30; "
    )
    bad = baseline_with_checkpoint(tmp_path / "c", tracker="not a number")
    assert rs.seed_checkpoint(bad, dest).startswith(
        "resume_from: the baseline's checkpoint cannot be resumed: "
    )
    unread = write_json(tmp_path / "d" / "verify.json", {"verdict": "pass"})  # no attempt.json beside it
    assert rs.seed_checkpoint(unread, dest).startswith(
        f"resume_from: cannot read the baseline's run ({unread.parent}): "
    )
    assert not dest.exists()  # nothing copied on a refusal


# --- the summary's invalidation -------------------------------------------------------------------------


def test_invalidate_summary_removes_the_published_summary_and_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results" / "plots").mkdir(parents=True)
    for name in ("summary.json", "junit.xml"):
        (tmp_path / "results" / name).write_text("{}")
    say, log, _ = voice()
    rs.invalidate_summary(say)
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["plots"]
    assert log.getvalue().splitlines() == [
        "[run_scenario kill] removed results/summary.json: it is rebuilt when the workflow finishes",
        "[run_scenario kill] removed results/junit.xml: it is rebuilt when the workflow finishes",
    ]


# --- the rule's job up to the launch --------------------------------------------------------------------


@pytest.fixture
def job(tmp_path, monkeypatch, cfg):
    """run()'s arguments for the kill scenario in its current slot, in a project at tmp_path."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(rs, "probe_machine", lambda keyed_host: {"gpus": "none", "node": "n1"})
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    key = attempt_key(cfg.fingerprint(cfg.by_name["kill"]), STACK["digest"])
    log, console = io.StringIO(), io.StringIO()
    return dict(
        scenario="kill",
        slot=f"{key}-1",
        config={},
        stack=STACK,
        slot_reason="first attempt",
        preflight=str(
            write_json(tmp_path / "results" / "preflight" / "p-1" / "preflight.json", VALID_PREFLIGHT)
        ),
        baseline=str(tmp_path / "results" / "baseline" / "b-1" / "verify.json"),
        output=f"results/kill/{key}-1/attempt.json",
        resources=SimpleNamespace(),
        log=log,
        console=console,
    )


def test_run_refuses_a_slot_the_settings_and_stack_do_not_name(job):
    job["slot"] = "0000-1"
    assert rs.run(**job) == rs.SLOT_MISMATCH == 2
    assert "slot 0000-1 does not match the current settings and stack (" in job["log"].getvalue()
    assert not Path(job["output"]).exists()


def test_run_without_a_passed_baseline_records_why_and_leaves_the_summary(job, tmp_path):
    summary = write_json(tmp_path / "results" / "summary.json", {"verdict": "pass"})
    assert rs.run(**job) == 0
    record = json.loads(Path(job["output"]).read_text())
    cause = (
        f"the baseline's attempt ({job['baseline']}) is missing: "
        "fault scenarios run after the baseline passes"
    )
    assert record["launched"] is False and record["cause"] == cause
    assert record["scenario"] == "kill" and record["slot"] == job["slot"]
    assert record["stack"] == STACK and record["stack_digest"] == STACK["digest"]
    assert record["slot_reason"] == "first attempt"
    assert record["machine"] == {
        "gpus": "none",
        "node": "n1",
        "slurm_job_id": None,
        "cuda_visible_devices": record["machine"]["cuda_visible_devices"],
    }
    assert record["settings"]["fault"] == "kill"
    assert job["console"].getvalue() == f"ftqual: kill: not launched: {cause}\n"
    assert summary.exists()  # a refused attempt changes nothing the summary describes
    assert not (tmp_path / "runs").exists()


def test_run_with_resume_from_refuses_an_unseedable_baseline_before_launch(job, tmp_path, monkeypatch):
    # what the baseline measured is sizing's and causes' to judge (their own tests): nothing to refuse here
    monkeypatch.setattr(rs, "baseline_says_no", lambda verify, s: None)
    monkeypatch.setattr(rs, "too_short", lambda verify, s: None)
    job["config"] = {
        "scenarios": {"baseline": {"fault": "none"}, "kill": {"fault": "kill", "resume_from": "baseline"}}
    }
    cfg = scenarios.resolve(job["config"], env={})
    key = attempt_key(cfg.fingerprint(cfg.by_name["kill"]), STACK["digest"])
    job["slot"], job["output"] = f"{key}-1", f"results/kill/{key}-1/attempt.json"
    # a passed baseline whose run kept no checkpoint tracker
    verify = baseline_with_checkpoint(tmp_path, tracker=None)
    job["baseline"] = str(verify)
    assert rs.run(**job) == 0
    record = json.loads(Path(job["output"]).read_text())
    assert record["launched"] is False
    assert record["cause"].startswith("resume_from: the baseline's checkpoint tracker ")
    assert not (tmp_path / "checkpoints").exists()


# --- the attempt's record after the launcher -------------------------------------------------------------


def attempt_in(tmp_path: Path, run_json: dict | None = None) -> rs.Attempt:
    run_dir = tmp_path / "runs" / "kill-1"
    (run_dir / "logs").mkdir(parents=True)
    if run_json is not None:
        write_json(run_dir / "run.json", run_json)
    console = tmp_path / "results" / "kill" / "attempts" / "kill-1.console.log"
    console.parent.mkdir(parents=True)
    console.write_text("")
    return rs.Attempt({"scenario": "kill", "slot": "k-1"}, "kill-1-job", run_dir, console, None, tmp_path)


def test_attempt_record_of_a_failed_launcher_names_its_telling_line(tmp_path):
    attempt = attempt_in(tmp_path, {"run_id": "kill-own-id", "fault": "kill", "scenario": "overwritten"})
    attempt.console.write_text("python -m ftqual.launch\nRuntimeError: worker died\n")
    (attempt.run_dir / "logs" / "launcher.log").write_text(
        "2025-01-01 [INFO] [n1] [ft] launcher.py:10 - cycle 0\n"
        "2025-01-01 [ERROR] [n1] [ft] launcher.py:99 - worker failed (exitcode: 1)\n"
        "closing\n"
    )
    (attempt.run_dir / "fault_injected.json").write_text('{"cycle": 0}')
    out_run = tmp_path / "results" / "kill" / "k-1" / "attempt.json"
    out_run.parent.mkdir(parents=True)
    say, log, console = voice()
    run = rs.attempt_record(say, attempt, 1, 12.34567, "kill", out_run)
    assert run["cause"] == "the launcher exited 1: worker failed (exitcode: 1)"
    assert run["launcher_tail"][-1] == "closing" and run["launcher_tail"][1] == "RuntimeError: worker died"
    assert run["run_id"] == "kill-own-id"  # the run directory's own ID stands
    assert run["scenario"] == "kill"  # the job's record on top of the run's
    assert run["launched"] is True and run["launcher_exit"] == 1 and run["duration_s"] == 12.346
    assert run["run_dir"] == "runs/kill-1"  # relative to the project
    assert run["console_log"] == str(attempt.console)
    assert (out_run.parent / "fault_injected.json").read_text() == '{"cycle": 0}'
    assert (
        console.getvalue()
        == f"ftqual: kill: FAILED: the launcher exited 1; evidence kept in {attempt.run_dir}\n"
    )


def test_a_non_zero_end_a_scenario_may_have_is_no_failure_on_the_console(tmp_path):
    attempt = attempt_in(tmp_path)
    out_run = tmp_path / "results" / "disk_full" / "d-1" / "attempt.json"
    out_run.parent.mkdir(parents=True)
    say, log, console = voice()
    run = rs.attempt_record(say, attempt, 93, 1.0, "disk_full", out_run)
    assert run["cause"].startswith("the launcher exited 93")  # kept for the report, should verify fail
    assert console.getvalue() == (
        "ftqual: kill: stopped: the launcher exited 93 (this scenario may stop loudly: verify judges it); "
        f"evidence kept in {attempt.run_dir}\n"
    )


def test_attempt_record_of_a_clean_exit_without_run_json_says_so(tmp_path):
    attempt = attempt_in(tmp_path)
    out_run = tmp_path / "run.json"
    say, _, console = voice()
    run = rs.attempt_record(say, attempt, 0, 1.0, "none", out_run)
    assert run["cause"] == f"the launcher exited 0 but wrote no {attempt.run_dir / 'run.json'}"
    assert run["run_id"] == "kill-1-job" and "launcher_tail" not in run
    assert console.getvalue() == ""


def test_attempt_record_of_a_pass_has_no_cause(tmp_path):
    attempt = attempt_in(tmp_path, {"run_id": "kill-1-job"})
    run = rs.attempt_record(voice()[0], attempt, 0, 1.0, "kill", tmp_path / "run.json")
    assert "cause" not in run and run["launcher_exit"] == 0
    assert not (tmp_path / "fault_injected.json").exists()  # no marker to copy
