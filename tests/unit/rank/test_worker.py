"""workloads/megatron_gpt_worker.py: tracker rules, marker claim, once-only injection, running the
workload."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import types

import pytest

from ftqual.rank.ids import EXIT_BAD_TRACKER, EXIT_FAULT_NEVER_INJECTED
from ftqual.rank.injector import Injector
from ftqual.rank.leftovers import leftovers_record, sample_gpu_apps, write_pid_record
from ftqual.rank.markers import claim_marker, count_markers, marker_path
from ftqual.rank.procfs import proc_start_time
from ftqual.rank.sections import SectionWatch, install_section_hooks
from ftqual.rank.tracker import TrackerError, newest_checkpoint_iteration, poll_tracker, read_tracker_baseline
from ftqual.rank.worker import main, parse_args
from tests.support.wait import wait_until

# --- tracker ---------------------------------------------------------------------------------------------


def test_absent_tracker_is_a_zero_baseline(tmp_path):
    assert read_tracker_baseline(tmp_path / "latest_checkpointed_iteration.txt") == 0


@pytest.mark.parametrize(("content", "value"), [(b"5", 5), (b"30\n", 30), (b" 0 ", 0)])
def test_integer_tracker_is_the_baseline(tmp_path, content, value):
    path = tmp_path / "t.txt"
    path.write_bytes(content)
    assert read_tracker_baseline(path) == value


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"", "is empty"),
        (b"\n", "is empty"),
        (b"release", "does not hold an integer"),
        (b"-3", "does not hold an integer"),
        (b"\xff", "is unreadable"),
        (b"\xd9\xa3", "does not hold an integer"),
    ],
)
def test_untrustworthy_tracker_at_startup_is_an_error(tmp_path, content, fragment):
    path = tmp_path / "t.txt"
    path.write_bytes(content)
    with pytest.raises(TrackerError, match=fragment):
        read_tracker_baseline(path)


def test_tracker_that_cannot_be_read_is_an_error(tmp_path):
    path = tmp_path / "t.txt"
    path.mkdir()
    with pytest.raises(TrackerError, match="unreadable"):
        read_tracker_baseline(path)


@pytest.mark.parametrize(
    ("content", "value"),
    [
        (None, None),
        (b"", None),
        (b"abc", None),
        (b"\xff", None),
        (b"12", 12),
        (b"12\n", 12),
    ],
)
def test_polling_ignores_every_read_failure(tmp_path, content, value):
    path = tmp_path / "t.txt"
    if content is not None:
        path.write_bytes(content)
    assert poll_tracker(path) == value


# --- marker ----------------------------------------------------------------------------------------------


def test_marker_claim_is_exclusive(tmp_path):
    path = tmp_path / "fault_injected.json"
    assert claim_marker(path, {"a": 1}) is True
    assert json.loads(path.read_text()) == {"a": 1}
    assert claim_marker(path, {"a": 2}) is False
    assert json.loads(path.read_text()) == {"a": 1}


def test_marker_claim_fails_loudly_without_its_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        claim_marker(tmp_path / "missing" / "fault_injected.json", {})


# --- injector --------------------------------------------------------------------------------------------


def make_injector(tmp_path, *, fault="kill", placement="step", baseline=0, watch=True):
    kills = []
    injector = Injector(
        fault=fault,
        placement=placement,
        tracker=tmp_path / "tracker.txt",
        marker=tmp_path / "marker.json",
        baseline=baseline,
        identity={"run_id": "r1", "rank": 1, "local_rank": 1, "host": "h", "cycle": 0},
        watch=SectionWatch() if watch else None,
        kill=lambda pid, sig: kills.append((pid, sig)),
    )
    return injector, kills


def test_injects_only_after_the_tracker_passes_the_baseline(tmp_path):
    injector, kills = make_injector(tmp_path, placement="immediate", baseline=5)
    assert injector.on_tracker(None) is False
    assert injector.on_tracker(5) is False
    assert kills == []
    assert injector.on_tracker(10) is True
    assert kills == [(os.getpid(), signal.SIGKILL)]
    marker = json.loads((tmp_path / "marker.json").read_text())
    assert marker["schema"] == "ftqual.fault/v1"
    assert (marker["baseline_iteration"], marker["checkpoint_iteration"]) == (5, 10)
    assert {k: marker[k] for k in ("run_id", "fault", "rank", "local_rank", "host", "cycle", "pid")} == {
        "run_id": "r1",
        "fault": "kill",
        "rank": 1,
        "local_rank": 1,
        "host": "h",
        "cycle": 0,
        "pid": os.getpid(),
    }
    assert marker["placement"] == "immediate" and marker["section"] is None
    assert marker["injected_at"].endswith("Z")


def test_injects_once(tmp_path):
    injector, kills = make_injector(tmp_path, placement="immediate")
    injector.on_tracker(5)
    injector.on_tracker(10)
    injector.watch.started("step")
    assert len(kills) == 1


def test_hang_sends_sigstop(tmp_path):
    injector, kills = make_injector(tmp_path, fault="hang", placement="immediate")
    injector.on_tracker(5)
    assert kills == [(os.getpid(), signal.SIGSTOP)]


def test_step_placement_waits_for_a_step_section(tmp_path):
    injector, kills = make_injector(tmp_path, fault="hang")
    injector.watch.started("checkpointing")
    assert injector.on_tracker(5) is True  # armed, poller done
    assert kills == []
    injector.watch.ended("checkpointing")
    injector.watch.started("setup")
    assert kills == []
    injector.watch.started("step")
    assert kills == [(os.getpid(), signal.SIGSTOP)]
    marker = json.loads((tmp_path / "marker.json").read_text())
    assert (marker["placement"], marker["section"], marker["checkpoint_iteration"]) == ("step", "step", 5)


def test_step_placement_never_injects_from_the_poller_thread(tmp_path):
    # Marker claim + fsync can outlast a GPU step: only the training thread, at a step's start, injects.
    injector, kills = make_injector(tmp_path)
    injector.watch.started("step")
    injector.on_tracker(5)
    assert kills == []
    injector.watch.ended("step")
    injector.watch.started("step")
    assert len(kills) == 1


def test_a_step_arms_from_the_tracker_itself_when_the_poller_is_too_slow(tmp_path):
    """On a GPU two saves can finalize between two polls: the training thread reads the tracker per step."""
    injector, kills = make_injector(tmp_path, baseline=30)
    tracker = tmp_path / "tracker.txt"
    tracker.write_text("30")
    injector.watch.started("step")  # tracker at the baseline: nothing
    injector.watch.ended("step")
    assert kills == []
    tracker.write_text("35")  # finalized; the poller has not run
    injector.watch.started("step")
    assert kills == [(os.getpid(), signal.SIGKILL)]
    marker = json.loads((tmp_path / "marker.json").read_text())
    assert (marker["baseline_iteration"], marker["checkpoint_iteration"], marker["section"]) == (
        30,
        35,
        "step",
    )


def test_checkpointing_placement_waits_for_the_next_save_section(tmp_path):
    injector, kills = make_injector(tmp_path, fault="hang", placement="checkpointing")
    assert injector.on_tracker(5) is True  # armed
    injector.watch.started("step")
    injector.watch.ended("step")
    injector.watch.closed("step")
    assert kills == []  # a step is not the placement
    injector.watch.started("checkpointing")
    assert kills == [(os.getpid(), signal.SIGSTOP)]
    marker = json.loads((tmp_path / "marker.json").read_text())
    assert (marker["placement"], marker["section"]) == ("checkpointing", "checkpointing")


def test_out_of_section_placement_lands_after_a_step_closed_with_no_section_open(tmp_path):
    injector, kills = make_injector(tmp_path, fault="hang", placement="out_of_section")
    injector.on_tracker(5)
    injector.watch.started("checkpointing")  # a section still open: not out of every section
    injector.watch.started("step")
    injector.watch.ended("step")
    injector.watch.closed("step")
    assert kills == []
    injector.watch.ended("checkpointing")
    injector.watch.started("step")
    assert kills == []  # a step's start is not the placement
    injector.watch.ended("step")
    injector.watch.closed("step")
    assert kills == [(os.getpid(), signal.SIGSTOP)]
    marker = json.loads((tmp_path / "marker.json").read_text())
    assert (marker["placement"], marker["section"]) == ("out_of_section", None)


def test_setup_placement_stops_a_replacement_as_it_closes_setup(tmp_path):
    """Armed by the cycle's start from checkpoint 8 (no save needed): the SIGSTOP lands as the workload
    closes `setup`, before the monitor is told, so the section is still open; the marker names the loaded
    checkpoint. Steps and the tracker never trigger it."""
    injector, kills = make_injector(tmp_path, fault="hang", placement="setup", baseline=8)
    assert injector.start() is None  # no tracker poller: the setup's close is the trigger
    injector.on_tracker(12)
    injector.watch.started("setup")
    assert kills == []
    injector.watch.closing("setup")
    assert kills == [(os.getpid(), signal.SIGSTOP)]
    assert injector.watch.inside("setup")  # stopped before the monitor knew it closed
    marker = json.loads((tmp_path / "marker.json").read_text())
    assert (marker["placement"], marker["section"]) == ("setup", "setup")
    assert (marker["baseline_iteration"], marker["checkpoint_iteration"]) == (8, 8)


def test_setup_placement_never_injects_in_a_cycle_that_loaded_nothing(tmp_path, capsys):
    injector, kills = make_injector(tmp_path, fault="hang", placement="setup", baseline=0)
    injector.watch.started("setup")
    injector.watch.closing("setup")
    injector.watch.started("step")
    assert kills == [] and not (tmp_path / "marker.json").exists()
    assert "started from no checkpoint" in capsys.readouterr().err


def test_without_section_hooks_placement_falls_back_to_immediate(tmp_path):
    injector, kills = make_injector(tmp_path, watch=False)
    assert injector.placement == "immediate"
    injector.on_tracker(5)
    assert len(kills) == 1


def test_existing_marker_blocks_injection(tmp_path, capsys):
    (tmp_path / "marker.json").write_text("{}")
    injector, kills = make_injector(tmp_path, placement="immediate")
    injector.on_tracker(5)
    assert kills == []
    assert "already exists; not injecting" in capsys.readouterr().err


def test_no_injection_after_the_workload_ended(tmp_path):
    injector, kills = make_injector(tmp_path)
    injector.on_tracker(5)
    injector.finish()
    injector.watch.started("step")
    assert kills == [] and not (tmp_path / "marker.json").exists()


def test_injection_line_on_stderr(tmp_path, capsys):
    injector, _ = make_injector(tmp_path, placement="immediate")
    injector.on_tracker(5)
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("[ftqual-inject] ")
    assert json.loads(line.split(" ", 1)[1]) == json.loads((tmp_path / "marker.json").read_text())


def test_poller_thread_arms_from_the_file(tmp_path):
    injector, kills = make_injector(tmp_path, placement="immediate")
    injector.poll_seconds = 0.01
    looks = []
    on_tracker = injector.on_tracker

    def looked(value):
        looks.append(value)
        return on_tracker(value)

    injector.on_tracker = looked  # what each of the poller's looks read
    (tmp_path / "tracker.txt").write_text("")  # truncated mid-write: ignored
    thread = injector.start()
    # looked at the empty tracker more than once (polling on after the first look), however slow the thread
    done = lambda: len(looks) >= 2 or not thread.is_alive()  # noqa: E731
    wait_until(done, 10, 0.01, "two of the poller's looks at the empty tracker, or its end")
    assert kills == [] and thread.is_alive() and set(looks) == {None}
    (tmp_path / "tracker.txt").write_text("4")
    wait_until(lambda: not thread.is_alive(), 10, 0.01, "the poller to arm and end")
    assert len(kills) == 1 and looks[-1] == 4


def fake_rank_monitor_client(monkeypatch, calls: list) -> type:
    """A RankMonitorClient recording its calls in `calls`, importable where NVRx's would be."""

    class FakeClient:
        def start_section(self, section):
            calls.append(("start", section))

        def end_section(self, section):
            calls.append(("end", section))

        def end_all_sections(self):
            calls.append(("end_all", None))

    modules = {
        name: types.ModuleType(name)
        for name in (
            "nvidia_resiliency_ext",
            "nvidia_resiliency_ext.fault_tolerance",
            "nvidia_resiliency_ext.fault_tolerance.rank_monitor_client",
        )
    }
    modules["nvidia_resiliency_ext.fault_tolerance.rank_monitor_client"].RankMonitorClient = FakeClient
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return FakeClient


def test_section_hooks_wrap_rank_monitor_client(monkeypatch):
    calls = []
    FakeClient = fake_rank_monitor_client(monkeypatch, calls)
    watch = SectionWatch()
    seen = []
    watch.on_start = lambda name: seen.append((name, watch.inside(name)))
    assert install_section_hooks(watch) is True
    client = FakeClient()
    client.start_section("setup")
    client.end_section("setup")
    client.start_section("step")
    assert watch.current() == "step" and seen == [("setup", True), ("step", True)]
    client.end_all_sections()
    assert watch.current() is None
    assert calls == [("start", "setup"), ("end", "setup"), ("start", "step"), ("end_all", None)]


def test_section_hooks_report_missing_nvrx(monkeypatch):
    monkeypatch.setitem(sys.modules, "nvidia_resiliency_ext", None)  # import fails
    assert install_section_hooks(SectionWatch()) is False


# --- arguments, pid records, running the entrypoint -------------------------------------------------------


def test_arguments_split_at_double_dash(tmp_path):
    args, rest = parse_args(
        [
            "--megatron-path",
            "/m",
            "--checkpoint-dir",
            "/c",
            "--fault-marker",
            "/f.json",
            "--fault",
            "kill",
            "--fault-rank",
            "1",
            "--",
            "--train-iters=5",
            "--fault",
            "x",
        ]
    )
    assert str(args.entrypoint) == "/m/pretrain_gpt.py"
    assert args.hang_placement == "step" and args.run_id is None
    assert rest == ["--train-iters=5", "--fault", "x"]


def test_fault_rank_required_with_a_fault(capsys):
    with pytest.raises(SystemExit):
        parse_args(
            ["--entrypoint", "e.py", "--checkpoint-dir", "/c", "--fault-marker", "/f", "--fault", "kill"]
        )


def test_pid_record(tmp_path):
    path = write_pid_record(tmp_path, "hostA", 2, 5, 1)
    assert path.name == "hostA.cycle2.rank5.json"
    record = json.loads(path.read_text())
    assert record["pid"] == os.getpid() and record["pgid"] == os.getpgrp()
    assert record["start_time"] == int(open("/proc/self/stat").read().rpartition(")")[2].split()[19])
    assert (record["rank"], record["local_rank"], record["cycle"], record["host"]) == (5, 1, 2, "hostA")


@pytest.fixture
def entrypoint(tmp_path):
    """A stand-in workload: records its argv and sys.path[0], then exits with EXIT_CODE from its args."""
    path = tmp_path / "ep" / "train.py"
    path.parent.mkdir()
    path.write_text(
        "import json, sys\n"
        "if __name__ == '__main__':\n"
        "    out = sys.argv[sys.argv.index('--out') + 1]\n"
        "    json.dump({'argv': sys.argv, 'path0': sys.path[0]}, open(out, 'w'))\n"
        "    sys.exit(int(sys.argv[sys.argv.index('--code') + 1]))\n"
    )
    return path


def wrapper_argv(entrypoint, tmp_path, *extra, code=0):
    return [
        "--entrypoint",
        str(entrypoint),
        "--checkpoint-dir",
        str(tmp_path / "ckpt"),
        "--fault-marker",
        str(tmp_path / "fault_injected.json"),
        *extra,
        "--pid-dir",
        str(tmp_path),
        "--",
        "--out",
        str(tmp_path / "ran.json"),
        "--code",
        str(code),
    ]


@pytest.fixture
def rank_env(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "0")
    saved_argv, saved_path = list(sys.argv), list(sys.path)
    yield
    sys.argv[:], sys.path[:] = saved_argv, saved_path


def test_entrypoint_runs_in_process_with_its_own_argv(entrypoint, tmp_path, rank_env):
    (tmp_path / "ckpt").mkdir()
    rc = main(wrapper_argv(entrypoint, tmp_path, "--fault", "none", code=4))
    assert rc == 4
    ran = json.loads((tmp_path / "ran.json").read_text())
    assert ran["argv"][0] == str(entrypoint) and ran["argv"][1:3] == ["--out", str(tmp_path / "ran.json")]
    assert ran["path0"] == str(entrypoint.parent)
    assert any(p.name.endswith(".cycle0.rank1.json") for p in tmp_path.iterdir())


def test_bad_tracker_stops_before_the_workload(entrypoint, tmp_path, rank_env, capsys):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").write_text("")
    rc = main(wrapper_argv(entrypoint, tmp_path, "--fault", "kill", "--fault-rank", "1"))
    assert rc == EXIT_BAD_TRACKER
    assert not (tmp_path / "ran.json").exists()
    assert "is empty; refusing to start the workload" in capsys.readouterr().err


def test_requested_fault_that_never_happened_fails_the_fault_rank(
    entrypoint, tmp_path, rank_env, monkeypatch, capsys
):
    monkeypatch.setattr("ftqual.rank.worker.install_section_hooks", lambda watch: False)
    (tmp_path / "ckpt").mkdir()
    rc = main(wrapper_argv(entrypoint, tmp_path, "--fault", "kill", "--fault-rank", "1"))
    assert rc == EXIT_FAULT_NEVER_INJECTED
    assert (tmp_path / "ran.json").exists()
    assert "was never injected" in capsys.readouterr().err


def test_other_ranks_do_not_fail_for_a_missing_fault(entrypoint, tmp_path, rank_env):
    (tmp_path / "ckpt").mkdir()
    assert main(wrapper_argv(entrypoint, tmp_path, "--fault", "kill", "--fault-rank", "0")) == 0


def test_existing_marker_means_no_injection_and_no_failure(entrypoint, tmp_path, rank_env, capsys):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "fault_injected.json").write_text("{}")
    assert main(wrapper_argv(entrypoint, tmp_path, "--fault", "hang", "--fault-rank", "1")) == 0
    assert "not injecting again" in capsys.readouterr().err


# --- real signals, in a child process --------------------------------------------------------------------


FAKE_NVRX = {
    "nvidia_resiliency_ext/__init__.py": "",
    "nvidia_resiliency_ext/fault_tolerance/__init__.py": "",
    "nvidia_resiliency_ext/fault_tolerance/rank_monitor_client.py": (
        "class RankMonitorClient:\n"
        "    def start_section(self, name): pass\n"
        "    def end_section(self, name): pass\n"
        "    def end_all_sections(self): pass\n"
    ),
}

# Advances the tracker, then keeps "training": two out-of-section pauses, then a step section.
WORKLOAD = """
import sys, time
from pathlib import Path
from nvidia_resiliency_ext.fault_tolerance.rank_monitor_client import RankMonitorClient
if __name__ == "__main__":
    ckpt, log = Path(sys.argv[1]), Path(sys.argv[2])
    (ckpt / "latest_checkpointed_iteration.txt").write_text("5")
    time.sleep(1.0)
    log.write_text("before-step")
    client = RankMonitorClient()
    client.start_section("step")
    time.sleep(0.5)
    log.write_text("survived-step")
"""


def child_files(tmp_path, workload=WORKLOAD):
    """A fake NVRx (tmp_path/fake, for PYTHONPATH), an empty checkpoint dir and the workload script."""
    fake = tmp_path / "fake"
    for rel, text in FAKE_NVRX.items():
        (fake / rel).parent.mkdir(parents=True, exist_ok=True)
        (fake / rel).write_text(text)
    (tmp_path / "ckpt").mkdir()
    script = tmp_path / "workload.py"
    script.write_text(workload)
    return fake, script


def run_wrapper_child(repo_root, tmp_path, fault, placement, workload=WORKLOAD, extra=()):
    fake, script = child_files(tmp_path, workload)
    env = {
        **os.environ,
        "PYTHONPATH": str(fake),
        "RANK": "0",
        "LOCAL_RANK": "0",
        "TORCHELASTIC_RESTART_COUNT": "0",
    }
    cmd = [
        sys.executable,
        str(repo_root / "workloads" / "megatron_gpt_worker.py"),
        "--entrypoint",
        str(script),
        "--checkpoint-dir",
        str(tmp_path / "ckpt"),
        "--fault-marker",
        str(tmp_path / "fault_injected.json"),
        "--fault",
        fault,
        "--fault-rank",
        "0",
        "--run-id",
        "child",
        "--hang-placement",
        placement,
        *extra,
        "--",
        str(tmp_path / "ckpt"),
        str(tmp_path / "log.txt"),
    ]
    return subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)


def proc_state(pid: int) -> str | None:
    try:
        return open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0]
    except OSError:
        return None


@pytest.mark.timeout(60)
def test_kill_lands_inside_the_step_section(repo_root, tmp_path):
    proc = run_wrapper_child(repo_root, tmp_path, "kill", "step")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert (tmp_path / "log.txt").read_text() == "before-step"  # killed in the step, not before it
    marker = json.loads((tmp_path / "fault_injected.json").read_text())
    assert (marker["section"], marker["placement"], marker["checkpoint_iteration"]) == ("step", "step", 5)
    assert "[ftqual-inject] " in err


@pytest.mark.timeout(60)
def test_hang_stops_the_process_immediately(repo_root, tmp_path):
    # the workload writes its log 20 s after the tracker, not 1 s: "stopped before it" holds on a busy machine
    proc = run_wrapper_child(
        repo_root, tmp_path, "hang", "immediate", WORKLOAD.replace("time.sleep(1.0)", "time.sleep(20)")
    )
    try:
        wait_until(lambda: proc_state(proc.pid) == "T", 30, what=f"the rank (pid {proc.pid}) to be stopped")
        marker = json.loads((tmp_path / "fault_injected.json").read_text())
        assert marker["fault"] == "hang" and marker["section"] is None and marker["placement"] == "immediate"
        assert not (tmp_path / "log.txt").exists()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


# --- several injections: one marker each --------------------------------------------------------------


def test_marker_path_of_each_injection(tmp_path):
    first = tmp_path / "fault_injected.json"
    assert marker_path(first, 1) == first
    assert marker_path(first, 2) == tmp_path / "fault_injected.2.json"
    assert marker_path(first, 12) == tmp_path / "fault_injected.12.json"


def test_markers_are_counted_from_the_first(tmp_path):
    first = tmp_path / "fault_injected.json"
    (tmp_path / "fault_injected.2.json").write_text("{}")
    assert count_markers(first) == 0  # no first marker: nothing counts
    first.write_text("{}")
    assert count_markers(first) == 2
    for name in ["fault_injected.3.json", "fault_injected.1.json", "fault_injected.x.json", "other.4.json"]:
        (tmp_path / name).write_text("{}")
    assert count_markers(first) == 3  # .2 and .3 only


def test_marker_records_the_injection_and_timing(tmp_path):
    injector, kills = make_injector(tmp_path, placement="immediate")
    injector.injection, injector.injections = 2, 3
    injector.on_tracker(5)
    marker = json.loads((tmp_path / "marker.json").read_text())
    assert (marker["injection"], marker["injections"], marker["timing"]) == (2, 3, "checkpoint")
    assert "save_iteration" not in marker and len(kills) == 1


def run_main(entrypoint, tmp_path, *extra, code=0):
    return main(wrapper_argv(entrypoint, tmp_path, *extra, code=code))


def test_second_cycle_arms_the_second_injection(entrypoint, tmp_path, rank_env, monkeypatch, capsys):
    monkeypatch.setattr("ftqual.rank.worker.install_section_hooks", lambda watch: False)
    made = []
    monkeypatch.setattr(Injector, "start", lambda self: made.append(self))
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").write_text("5")
    (tmp_path / "fault_injected.json").write_text("{}")
    rc = run_main(entrypoint, tmp_path, "--fault", "kill", "--fault-rank", "1", "--injections", "2")
    # injection 2 was armed (baseline 5, its own marker) and never happened: exit 3 for this cycle too
    assert rc == EXIT_FAULT_NEVER_INJECTED
    (injector,) = made
    assert (injector.injection, injector.injections, injector.baseline) == (2, 2, 5)
    assert injector.marker == tmp_path / "fault_injected.2.json"
    assert "injection 2 of 2" in capsys.readouterr().err


def test_second_injection_is_claimed_in_its_own_marker(entrypoint, tmp_path, rank_env, monkeypatch):
    monkeypatch.setattr("ftqual.rank.worker.install_section_hooks", lambda watch: False)
    kills = []
    (tmp_path / "ckpt").mkdir()
    tracker = tmp_path / "ckpt" / "latest_checkpointed_iteration.txt"
    tracker.write_text("5")
    (tmp_path / "fault_injected.json").write_text("{}")
    injectors = []
    original = Injector.start

    def start(self):
        injectors.append(self)
        self.kill = lambda pid, sig: kills.append(sig)
        self.poll_seconds = 0.01
        tracker.write_text("10")  # the cycle's first checkpoint completes
        thread = original(self)
        thread.join(5)
        return thread

    monkeypatch.setattr(Injector, "start", start)
    rc = run_main(entrypoint, tmp_path, "--fault", "kill", "--fault-rank", "1", "--injections", "2")
    assert rc == 0 and kills == [signal.SIGKILL]
    marker = json.loads((tmp_path / "fault_injected.2.json").read_text())
    assert (marker["injection"], marker["baseline_iteration"], marker["checkpoint_iteration"]) == (2, 5, 10)
    assert json.loads((tmp_path / "fault_injected.json").read_text()) == {}


def test_no_injection_once_every_marker_exists(entrypoint, tmp_path, rank_env, capsys):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "fault_injected.json").write_text("{}")
    (tmp_path / "fault_injected.2.json").write_text("{}")
    rc = run_main(entrypoint, tmp_path, "--fault", "kill", "--fault-rank", "1", "--injections", "2")
    assert rc == 0
    assert "2 of 2 injection marker(s) exist" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra",
    [
        ["--injections", "0"],
        ["--injections", "-1"],
        ["--injections", "x"],
        ["--fault-timing", "later"],
        ["--fault", "hang", "--fault-timing", "in_save"],
    ],
)
def test_bad_injection_arguments_are_refused(extra):
    argv = ["--entrypoint", "e.py", "--checkpoint-dir", "/c", "--fault-marker", "/f", "--fault-rank", "0"]
    if "--fault" not in extra:
        argv += ["--fault", "kill"]
    with pytest.raises(SystemExit):
        parse_args([*argv, *extra])


def test_injection_arguments_default_to_one_fault_after_a_checkpoint():
    args, _ = parse_args(
        ["--entrypoint", "e.py", "--checkpoint-dir", "/c", "--fault-marker", "/f"] + ["--fault", "none"]
    )
    assert (args.injections, args.fault_timing, args.leftovers_dir) == (1, "checkpoint", None)


# --- in_save: kill while an async save is in flight ------------------------------------------------------


def make_in_save(tmp_path, baseline=0):
    (tmp_path / "ckpt").mkdir(exist_ok=True)
    kills = []
    injector = Injector(
        fault="kill",
        placement="step",
        tracker=tmp_path / "ckpt" / "latest_checkpointed_iteration.txt",
        marker=tmp_path / "marker.json",
        baseline=baseline,
        identity={"run_id": "r1", "rank": 1, "local_rank": 1, "host": "h", "cycle": 0},
        watch=SectionWatch(),
        kill=lambda pid, sig: kills.append((pid, sig)),
        timing="in_save",
    )
    return injector, kills


def checkpoint_state(tmp_path, tracker: int | None, iterations: list[int]) -> None:
    ckpt = tmp_path / "ckpt"
    if tracker is not None:
        (ckpt / "latest_checkpointed_iteration.txt").write_text(str(tracker))
    for it in iterations:
        (ckpt / f"iter_{it:07d}").mkdir(exist_ok=True)


def test_newest_checkpoint_iteration(tmp_path):
    assert newest_checkpoint_iteration(tmp_path / "missing") is None
    assert newest_checkpoint_iteration(tmp_path) is None
    for name in ["iter_0000005", "iter_0000010", "iter_0000100.tmp", "iter_12"]:
        (tmp_path / name).mkdir()
    (tmp_path / "iter_0000200").write_text("a file, not a checkpoint")
    assert newest_checkpoint_iteration(tmp_path) == 10


def test_in_save_waits_for_a_save_in_flight_after_the_baseline(tmp_path):
    injector, kills = make_in_save(tmp_path, baseline=5)
    watch = injector.watch
    checkpoint_state(tmp_path, 5, [5, 10])  # a save of 10 in flight, but the tracker is still the baseline
    watch.closed("checkpointing")
    checkpoint_state(tmp_path, 10, [10])  # 10 finalized: nothing in flight
    watch.closed("checkpointing")
    checkpoint_state(tmp_path, 10, [15])
    watch.closed("step")  # not the end of a checkpointing section
    assert kills == [] and not (tmp_path / "marker.json").exists()
    assert injector.on_tracker(10) is False and injector.start() is None  # no poller: sections decide
    watch.closed("checkpointing")
    assert kills == [(os.getpid(), signal.SIGKILL)]
    marker = json.loads((tmp_path / "marker.json").read_text())
    assert (marker["checkpoint_iteration"], marker["save_iteration"], marker["baseline_iteration"]) == (
        10,
        15,
        5,
    )
    assert (marker["timing"], marker["placement"], marker["section"]) == (
        "in_save",
        "in_save",
        "checkpointing",
    )
    checkpoint_state(tmp_path, 10, [20])
    watch.closed("checkpointing")
    assert len(kills) == 1  # once only


def test_in_save_never_fires_after_the_workload_ended(tmp_path):
    injector, kills = make_in_save(tmp_path)
    checkpoint_state(tmp_path, 5, [5, 10])
    injector.finish()
    injector.watch.closed("checkpointing")
    assert kills == [] and not injector.claimed


def test_section_hooks_report_the_end_after_the_monitor(monkeypatch):
    calls = []
    FakeClient = fake_rank_monitor_client(monkeypatch, calls)
    watch = SectionWatch()
    watch.on_end = lambda name: calls.append(("closed", name, watch.inside(name)))
    assert install_section_hooks(watch) is True
    client = FakeClient()
    client.start_section("checkpointing")
    client.end_section("checkpointing")
    assert calls == [("start", "checkpointing"), ("end", "checkpointing"), ("closed", "checkpointing", False)]


# Saves 5 (finalized), then schedules the save of 10 and ends its checkpointing section.
IN_SAVE_WORKLOAD = """
import sys
from pathlib import Path
from nvidia_resiliency_ext.fault_tolerance.rank_monitor_client import RankMonitorClient
if __name__ == "__main__":
    ckpt, log = Path(sys.argv[1]), Path(sys.argv[2])
    client = RankMonitorClient()
    for iteration, finalize in [(5, True), (10, False)]:
        client.start_section("checkpointing")
        (ckpt / f"iter_{iteration:07d}").mkdir()
        if finalize:
            (ckpt / "latest_checkpointed_iteration.txt").write_text(str(iteration))
        client.end_section("checkpointing")
        log.write_text(f"after-{iteration}")
"""


@pytest.mark.timeout(60)
def test_in_save_kill_lands_at_the_end_of_the_save(repo_root, tmp_path):
    proc = run_wrapper_child(
        repo_root, tmp_path, "kill", "step", IN_SAVE_WORKLOAD, ["--fault-timing", "in_save"]
    )
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err
    assert (tmp_path / "log.txt").read_text() == "after-5"  # killed before the workload went on
    marker = json.loads((tmp_path / "fault_injected.json").read_text())
    assert (marker["checkpoint_iteration"], marker["save_iteration"], marker["section"]) == (
        5,
        10,
        "checkpointing",
    )
    assert (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").read_text() == "5"


# --- leftovers of earlier cycles -------------------------------------------------------------------------


def pid_record(pid_dir, host, cycle, rank, pid, start_time):
    record = {"pid": pid, "pgid": pid, "start_time": start_time, "rank": rank, "local_rank": rank}
    record |= {"cycle": cycle, "host": host}
    (pid_dir / f"{host}.cycle{cycle}.rank{rank}.json").write_text(json.dumps(record))


def test_leftovers_list_earlier_cycles_of_this_host_and_the_live_ones(tmp_path):
    me, start = os.getpid(), proc_start_time()
    pid_record(tmp_path, "h", 0, 0, me, start)  # still running (this process)
    pid_record(tmp_path, "h", 0, 1, me, start + 1)  # its pid reused: gone
    pid_record(tmp_path, "h", 1, 0, 999_999_999, 5)  # this cycle: not earlier
    pid_record(tmp_path, "other", 0, 2, me, start)  # another host
    (tmp_path / "h.launcher.json").write_text(json.dumps({"pid": me, "start_time": start}))
    (tmp_path / "h.cycle0.rank3.json").write_text("{broken")
    gpu = {
        "sampled": True,
        "error": None,
        "apps": [{"pid": me, "used_memory_mib": 512}, {"pid": 7, "used_memory_mib": 1}],
    }
    record = leftovers_record(tmp_path, "h", 1, gpu)
    assert record["schema"] == "ftqual.leftovers/v1" and (record["host"], record["cycle"]) == ("h", 1)
    assert record["sampled_at"].endswith("Z")
    assert record["earlier"] == [
        {"pid": me, "start_time": start, "cycle": 0, "rank": 0},
        {"pid": me, "start_time": start + 1, "cycle": 0, "rank": 1},
    ]
    assert record["alive"] == [{"pid": me, "start_time": start, "cycle": 0, "rank": 0}]
    assert record["gpu"]["held_by_earlier"] == [{"pid": me, "used_memory_mib": 512, "cycle": 0, "rank": 0}]
    assert record["gpu"]["apps"] == gpu["apps"] and record["gpu"]["sampled"] is True
    assert record["unreadable_pid_records"] == ["h.cycle0.rank3.json"]


def test_leftovers_of_a_clean_restart_are_empty(tmp_path):
    pid_record(tmp_path, "h", 0, 0, 999_999_999, 5)
    record = leftovers_record(tmp_path, "h", 1, {"sampled": False, "error": "x", "apps": []})
    assert len(record["earlier"]) == 1 and record["alive"] == [] and record["gpu"]["held_by_earlier"] == []


class FakeRun:
    def __init__(self, *, rc=0, out="", err="", raises=None):
        self.rc, self.out, self.err, self.raises = rc, out, err, raises
        self.calls = []

    def __call__(self, cmd, **kwargs):
        self.calls.append((cmd, kwargs))
        if self.raises is not None:
            raise self.raises
        return subprocess.CompletedProcess(cmd, self.rc, self.out, self.err)


def test_gpu_apps_from_nvidia_smi():
    run = FakeRun(out="123, 512\n456, [N/A]\n\n")
    gpu = sample_gpu_apps(run=run, which=lambda name: "/usr/bin/nvidia-smi")
    assert gpu == {
        "sampled": True,
        "error": None,
        "apps": [{"pid": 123, "used_memory_mib": 512}, {"pid": 456, "used_memory_mib": None}],
    }
    cmd, kwargs = run.calls[0]
    assert cmd == [
        "/usr/bin/nvidia-smi",
        "--query-compute-apps=pid,used_memory",
        "--format=csv,noheader,nounits",
    ]
    assert kwargs["timeout"] == 10


@pytest.mark.parametrize(
    ("which", "run", "error"),
    [
        (None, FakeRun(), "nvidia-smi not found"),
        (
            "/x/nvidia-smi",
            FakeRun(raises=subprocess.TimeoutExpired("nvidia-smi", 10)),
            "timed out after 10 s",
        ),
        ("/x/nvidia-smi", FakeRun(raises=PermissionError("denied")), "could not run: denied"),
        ("/x/nvidia-smi", FakeRun(rc=9, err="NVIDIA-SMI has failed\n"), "exited 9: NVIDIA-SMI has failed"),
        ("/x/nvidia-smi", FakeRun(out="No devices were found\n"), "unexpected nvidia-smi line"),
    ],
)
def test_gpu_sampling_failures_are_recorded_not_raised(which, run, error):
    gpu = sample_gpu_apps(run=run, which=lambda name: which)
    assert gpu["sampled"] is False and error in gpu["error"] and gpu["apps"] == []


@pytest.mark.parametrize(
    ("cycle", "local_rank", "written"), [("0", "0", False), ("1", "1", False), ("1", "0", True)]
)
def test_leftovers_are_written_by_local_rank_0_of_later_cycles(
    entrypoint, tmp_path, rank_env, monkeypatch, cycle, local_rank, written
):
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", cycle)
    monkeypatch.setenv("LOCAL_RANK", local_rank)
    monkeypatch.setattr(
        "ftqual.rank.leftovers.sample_gpu_apps", lambda: {"sampled": False, "error": "none here", "apps": []}
    )
    (tmp_path / "ckpt").mkdir()
    pids = tmp_path / "pids"
    pids.mkdir()
    argv = wrapper_argv(entrypoint, tmp_path, "--fault", "none", "--leftovers-dir", str(tmp_path / "left"))
    argv[argv.index("--pid-dir") + 1] = str(pids)
    assert main(argv) == 0
    host = socket.gethostname()
    path = tmp_path / "left" / f"{host}.cycle{cycle}.json"
    assert path.exists() == written
    if written:
        record = json.loads(path.read_text())
        assert record["cycle"] == 1 and record["earlier"] == [] and record["gpu"]["error"] == "none here"
        # written before the workload ran: the workload's output is newer
        assert path.stat().st_mtime_ns <= (tmp_path / "ran.json").stat().st_mtime_ns


def test_leftovers_that_cannot_be_written_do_not_stop_training(
    entrypoint, tmp_path, rank_env, monkeypatch, capsys
):
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setattr(
        "ftqual.rank.leftovers.sample_gpu_apps", lambda: {"sampled": False, "error": "x", "apps": []}
    )
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "left").write_text("a file where the folder should be")
    assert run_main(entrypoint, tmp_path, "--fault", "none", "--leftovers-dir", str(tmp_path / "left")) == 0
    assert "cannot record leftovers" in capsys.readouterr().err
