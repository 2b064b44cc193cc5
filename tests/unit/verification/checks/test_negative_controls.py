"""Negative controls: broken copies of the recorded runs must fail, or be inconclusive, on the right check."""

from __future__ import annotations

import json
import re
import shutil

from ftqual.verification.verify import check_by_id as check

C1 = "logs/train_cycle1.log"
C0 = "logs/train_cycle0.log"
LAUNCHER = "logs/launcher.log"
HEAD = "2026-11-29 14:20:02,300 [{}] [vm] [workload:?(?) infra:?(?)] "
INJECT = '[ftqual-inject] {"fault": "kill", "rank": 1, "checkpoint_iteration": 5, "cycle": %d}'


def status(report: dict, check_id: str) -> str:
    return check(report, check_id)["status"]


def _renumber(match: re.Match) -> str:
    iteration, consumed = int(match[2]) - 5, int(match[4]) - 10
    return f"{match[1]}{iteration:>9}{match[3]}{consumed:>12}"


def test_kill_copy_passes_unchanged(kill_run, verify):
    code, report = verify(kill_run)
    assert (code, report["verdict"]) == (0, "pass")


def test_fails_when_resumed_from_iteration_zero(kill_run, verify):
    """The replacement found no checkpoint and trained from random weights."""
    kill_run.sub(
        C1,
        r"^0:  loading distributed checkpoint from (\S+) at iteration 5$",
        "0: WARNING: could not find the metadata file \\1/latest_checkpointed_iteration.txt\n"
        "0:     will not load any checkpoints and will start from random",
    )
    kill_run.delete_lines(C1, lambda line: "successfully loaded checkpoint" in line)
    kill_run.sub(C1, r"^(1:  \[[^\]]+\] iteration)\s+(\d+)(/\s+30 \| consumed samples:)\s+(\d+)", _renumber)
    code, report = verify(kill_run)
    assert code == 1
    item = check(report, "resumed_from_checkpoint")
    assert item["status"] == "fail"
    assert "from scratch" in item["detail"]


def test_fails_when_restored_iteration_is_zero(kill_run, verify):
    kill_run.sub(C1, r"at iteration 5$", "at iteration 0")
    code, report = verify(kill_run)
    assert code == 1
    assert status(report, "resumed_from_checkpoint") == "fail"
    assert "iteration 0" in check(report, "resumed_from_checkpoint")["detail"]


def test_fails_when_no_load_line(kill_run, verify):
    kill_run.delete_lines(
        C1, lambda line: "loading distributed checkpoint" in line or "successfully loaded" in line
    )
    code, report = verify(kill_run)
    assert code == 1
    item = check(report, "resumed_from_checkpoint")
    assert item["status"] == "fail"
    assert "no 'loading" in item["detail"]


def test_fails_when_load_never_completes(kill_run, verify):
    """Megatron started loading and asserted (the distributed-optimizer resume failure without TE/Apex)."""
    kill_run.sub(
        C1,
        r"^0:   successfully loaded checkpoint from .*$",
        "0: Traceback (most recent call last):\n0: AssertionError",
    )
    code, report = verify(kill_run)
    assert code == 1
    item = check(report, "resumed_from_checkpoint")
    assert item["status"] == "fail"
    assert any("AssertionError" in e.get("text", "") for e in item["evidence"])


def test_fails_when_optimizer_not_loaded(kill_run, verify):
    kill_run.insert_after(
        C1,
        lambda line: "loading distributed checkpoint" in line,
        [
            "0: Unable to load optimizer from checkpoint /lus/nvrx/runs/kill/checkpoints. Specify "
            "--no-load-optim or --finetune to prevent attempting to load the optimizer state, exiting ...",
        ],
    )
    code, report = verify(kill_run)
    assert code == 1
    item = check(report, "resumed_from_checkpoint")
    assert item["status"] == "fail" and "optimizer" in item["detail"]


def test_fails_when_no_load_optim_is_set(kill_run, verify):
    kill_run.sub(C1, r"^(0:   no_load_optim \.+ )None$", r"\1True")
    code, report = verify(kill_run)
    assert code == 1
    item = check(report, "resumed_from_checkpoint")
    assert item["status"] == "fail" and "no_load_optim" in item["detail"]


def test_fails_when_finetune_is_set(kill_run, verify):
    kill_run.sub(C1, r"^(0:   finetune \.+ )False$", r"\1True")
    code, report = verify(kill_run)
    assert status(report, "resumed_from_checkpoint") == "fail"


def test_fails_when_consumed_samples_not_restored(kill_run, verify):
    kill_run.sub(C1, r"(iteration        6/      30 \| consumed samples:)           12", r"\1            2")
    code, report = verify(kill_run)
    item = check(report, "resumed_from_checkpoint")
    assert item["status"] == "fail" and "consumed samples" in item["detail"]


def test_fails_when_injected_before_any_checkpoint_completed(kill_run, verify):
    kill_run.set_json("fault_injected.json", injected_at="2026-11-29T14:19:09.300000Z")
    code, report = verify(kill_run)
    assert code == 1
    item = check(report, "checkpoint_before_failure")
    assert item["status"] == "fail" and "after the injection" in item["detail"]


def test_fails_when_marker_iteration_is_zero(kill_run, verify):
    kill_run.set_json("fault_injected.json", checkpoint_iteration=0)
    code, report = verify(kill_run)
    assert status(report, "checkpoint_before_failure") == "fail"


def test_fails_when_marker_iteration_never_saved(kill_run, verify):
    kill_run.set_json("fault_injected.json", checkpoint_iteration=10)
    code, report = verify(kill_run)
    assert code == 1
    item = check(report, "checkpoint_before_failure")
    assert item["status"] == "fail"
    assert "successfully saved checkpoint from iteration 10" in item["detail"]


def test_fails_when_marker_checkpoint_folder_missing(kill_run, verify):
    shutil.rmtree(kill_run.path("checkpoints/iter_0000005"))
    code, report = verify(kill_run)
    assert status(report, "checkpoint_before_failure") == "fail"


def test_fails_when_injected_twice(kill_run, verify):
    kill_run.append(C0, ["1: " + INJECT % 0])
    kill_run.insert_after(C1, lambda line: "iteration        8/" in line, ["1: " + INJECT % 1])
    code, report = verify(kill_run)
    assert code == 1
    item = check(report, "clean_finish")
    assert item["status"] == "fail" and "more than once" in item["detail"]


def test_one_injection_line_is_accepted(kill_run, verify):
    kill_run.append(C0, ["1: " + INJECT % 0])
    code, report = verify(kill_run)
    assert code == 0, report["checks"]


def test_fails_when_no_injection_recorded(kill_run, verify):
    kill_run.path("fault_injected.json").unlink()
    code, report = verify(kill_run)
    assert code == 1
    assert status(report, "clean_finish") == "fail"
    assert status(report, "checkpoint_before_failure") == "inconclusive"


def test_fails_when_no_replacement_cycle(kill_run, verify):
    kill_run.path("cycle_infos/cycle_info..0.1").unlink()
    kill_run.path("cycle_infos/cycle_info..current").write_text("cycle_info..0.0")
    kill_run.path(C1).unlink()
    code, report = verify(kill_run)
    assert code == 1
    item = check(report, "failure_detected_and_restarted")
    assert item["status"] == "fail" and "no replacement cycle" in item["detail"]
    assert status(report, "resumed_from_checkpoint") == "fail"


def test_fails_when_no_worker_exit_in_launcher_log(kill_run, verify):
    kill_run.delete_lines(LAUNCHER, lambda line: "failed (exitcode:" in line)
    code, report = verify(kill_run)
    assert status(report, "failure_detected_and_restarted") == "fail"


def test_fails_when_final_iteration_not_reached(kill_run, verify):
    late = re.compile(r"iteration\s+(2[6-9]|30)/|from iteration\s+30 |at iteration\s+30 ")
    kill_run.delete_lines(C1, lambda line: bool(late.search(line)))
    kill_run.path("checkpoints/latest_checkpointed_iteration.txt").write_text("25")
    code, report = verify(kill_run)
    assert code == 1
    item = check(report, "progress_after_resume")
    assert item["status"] == "fail" and "final iteration 30 not reached" in item["detail"]


def test_fails_when_tracker_short_of_final_iteration(kill_run, verify):
    kill_run.path("checkpoints/latest_checkpointed_iteration.txt").write_text("25")
    code, report = verify(kill_run)
    item = check(report, "progress_after_resume")
    assert item["status"] == "fail" and "tracker says 25" in item["detail"]


def test_fails_when_no_later_checkpoint(kill_run, verify):
    kill_run.delete_lines(C1, lambda line: "successfully saved checkpoint" in line)
    code, report = verify(kill_run)
    assert code == 1
    item = check(report, "progress_after_resume")
    assert item["status"] == "fail" and "no checkpoint after iteration 5" in item["detail"]


def test_fails_when_exit_93_after_no_progress_stop(kill_run, verify):
    kill_run.set_json("run.json", exit_code=93)
    kill_run.append(
        LAUNCHER,
        [
            HEAD.format("INFO") + "launcher.py:619 [default] Progress tracker "
            "detected no progress across restarts. No more restarts will be attempted.",
            HEAD.format("ERROR") + "progress_tracker.py:248 EARLY TERMINATION: "
            "3 consecutive cycles without progress",
            HEAD.format("ERROR") + "launcher.py:3741 NVRx decided the job must "
            "not be restarted (no_progress): ... Agent's exit code = 93",
        ],
    )
    code, report = verify(kill_run)
    assert code == 1
    item = check(report, "clean_finish")
    assert item["status"] == "fail"
    assert "93" in item["detail"] and "no progress" in item["detail"]


def test_fails_when_restarts_ran_out_exit_1(kill_run, verify):
    kill_run.set_json("run.json", exit_code=1)
    kill_run.append(
        LAUNCHER,
        [
            HEAD.format("ERROR") + "launcher.py:3745 Some rank(s) exited with "
            "non-zero exit code: {1: -9}. Agent's exit code = 1",
        ],
    )
    code, report = verify(kill_run)
    assert code == 1
    item = check(report, "clean_finish")
    assert item["status"] == "fail" and "exit code 1" in item["detail"]


def test_fails_when_more_cycles_than_expected(kill_run, verify):
    record = kill_run.json("cycle_infos/cycle_info..0.1")
    record.update(cycle_number=2)
    kill_run.path("cycle_infos/cycle_info..0.2").write_text(json.dumps(record))
    code, report = verify(kill_run)
    item = check(report, "clean_finish")
    assert item["status"] == "fail" and "3 cycles ran, expected 2" in item["detail"]


def test_fails_when_stray_ft_state_json(kill_run, verify):
    kill_run.path("checkpoints/ft_state.json").write_text('{"current_timeouts": {}}')
    code, report = verify(kill_run)
    assert code == 1
    item = check(report, "fixed_timeouts_in_force")
    assert item["status"] == "fail" and "ft_state.json" in item["detail"]


def test_fails_when_timeouts_differ(kill_run, verify):
    kill_run.set_json(
        "run.json", timeouts={"setup": 900, "step": 60, "checkpointing": 600, "out_of_section": 180}
    )
    code, report = verify(kill_run)
    assert code == 1
    item = check(report, "fixed_timeouts_in_force")
    assert item["status"] == "fail" and "step 120.0 != 60" in item["detail"]


def test_fails_when_calculated_timeouts_loaded(kill_run, verify):
    kill_run.insert_after(
        C1,
        lambda line: "FT: initialized." in line,
        [
            "0: FT: loaded timeouts from /lus/nvrx/runs/kill/checkpoints/ft_state.json. SectionTimeouts(...)",
        ],
    )
    code, report = verify(kill_run)
    assert status(report, "fixed_timeouts_in_force") == "fail"


def test_fails_when_loss_jump_after_resume_persists(kill_run, verify):
    def jump(match: re.Match) -> str:
        iteration, loss = int(match[1]), float(match[3])
        return f"{match[0][: match.start(3) - match.start(0)]}{loss * 1.2 if iteration >= 8 else loss:.6E}"

    kill_run.sub(C1, r"iteration\s+(\d+)/\s+30 (.*?)lm loss: ([-+.\dE]+)", jump)
    code, report = verify(kill_run)
    assert code == 1
    item = check(report, "replay_consistency")
    assert item["status"] == "fail"
    assert item["values"]["classification"] == "divergent"
    assert item["values"]["max_rel_dev"] > 0.1


def test_replay_tolerance_option(kill_run, verify):
    """A tolerance looser than iteration 7's difference makes the replay identical."""
    code, report = verify(kill_run, "--replay-tolerance", "0.05")
    assert code == 0
    assert check(report, "replay_consistency")["values"]["classification"] == "identical"


def test_inconclusive_when_train_log_truncated(kill_run, verify):
    data = kill_run.path(C1).read_bytes()
    cut = data.index(b"iteration       18/")
    kill_run.path(C1).write_bytes(data[: cut + 40])
    code, report = verify(kill_run)
    assert code == 3, [(c["id"], c["status"], c["detail"]) for c in report["checks"]]
    assert report["verdict"] == "inconclusive"
    assert status(report, "progress_after_resume") == "inconclusive"
    assert report["sources"]["train_logs"]["complete"] is False


def test_inconclusive_when_launcher_log_missing(kill_run, verify):
    kill_run.path(LAUNCHER).unlink()
    code, report = verify(kill_run)
    assert code == 3
    item = check(report, "failure_detected_and_restarted")
    assert item["status"] == "inconclusive" and "launcher.log" in item["detail"]


def test_inconclusive_when_cycle_infos_missing(kill_run, verify):
    shutil.rmtree(kill_run.path("cycle_infos"))
    code, report = verify(kill_run)
    assert code == 3
    item = check(report, "failure_detected_and_restarted")
    assert item["status"] == "inconclusive" and "cycle_infos" in item["detail"]
    assert report["sources"]["cycle_infos"]["ok"] is False


def test_inconclusive_when_cycle_info_json_is_cut(kill_run, verify):
    path = kill_run.path("cycle_infos/cycle_info..0.1")
    path.write_text(path.read_text()[:120])
    code, report = verify(kill_run)
    assert code == 3
    assert status(report, "failure_detected_and_restarted") == "inconclusive"
    assert "unreadable" in report["sources"]["cycle_infos"]["reason"]


def test_inconclusive_when_marker_json_is_cut(kill_run, verify):
    path = kill_run.path("fault_injected.json")
    path.write_text(path.read_text()[:80])
    code, report = verify(kill_run)
    assert code == 3
    assert status(report, "checkpoint_before_failure") == "inconclusive"


def test_inconclusive_when_tracker_empty(kill_run, verify):
    kill_run.path("checkpoints/latest_checkpointed_iteration.txt").write_text("")
    code, report = verify(kill_run)
    assert code == 3
    item = check(report, "progress_after_resume")
    assert item["status"] == "inconclusive" and "empty" in item["detail"]


def test_fails_when_tracker_absent(kill_run, verify):
    kill_run.path("checkpoints/latest_checkpointed_iteration.txt").unlink()
    code, report = verify(kill_run)
    assert status(report, "progress_after_resume") == "fail"


def test_inconclusive_when_checkpoint_dir_missing(kill_run, verify):
    shutil.rmtree(kill_run.path("checkpoints"))
    code, report = verify(kill_run)
    assert code == 3
    assert status(report, "checkpoint_before_failure") == "inconclusive"
    assert status(report, "fixed_timeouts_in_force") == "inconclusive"


def test_exit_2_when_run_json_missing(kill_run, verify, capsys):
    kill_run.path("run.json").unlink()
    code, report = verify(kill_run)
    assert code == 2 and report == {}
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run.json" in err[0]


def test_exit_2_when_run_json_corrupt(kill_run, verify, capsys):
    path = kill_run.path("run.json")
    path.write_text(path.read_text()[:100])
    code, report = verify(kill_run)
    assert code == 2 and report == {}
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unreadable run.json" in err[0]


def test_exit_2_when_run_dir_missing(tmp_path, verify, capsys):
    code, _ = verify(tmp_path / "nope")
    assert code == 2
    assert "not a directory" in capsys.readouterr().err


def test_exit_2_when_baseline_unreadable(kill_run, verify, tmp_path):
    code, _ = verify(kill_run, "--baseline", str(tmp_path / "nope"))
    assert code == 2


def test_exit_2_on_bad_tolerance(kill_run, verify):
    code, _ = verify(kill_run, "--replay-tolerance", "-1")
    assert code == 2


def test_baseline_fails_when_a_checkpoint_never_completed(baseline_run, verify):
    baseline_run.delete_lines(C0, lambda line: "successfully saved checkpoint from iteration      15" in line)
    code, report = verify(baseline_run)
    assert code == 1
    item = check(report, "uninterrupted_completion")
    assert item["status"] == "fail" and "[15]" in item["detail"]


def test_baseline_fails_when_a_marker_exists(baseline_run, verify, shared_fixtures):
    shutil.copy(
        shared_fixtures / "kill-2gpu" / "fault_injected.json", baseline_run.path("fault_injected.json")
    )
    code, report = verify(baseline_run)
    assert status(report, "uninterrupted_completion") == "fail"


def test_baseline_inconclusive_when_tracker_empty(baseline_run, verify):
    baseline_run.path("checkpoints/latest_checkpointed_iteration.txt").write_text("")
    code, report = verify(baseline_run)
    assert code == 3
    assert status(report, "uninterrupted_completion") == "inconclusive"
