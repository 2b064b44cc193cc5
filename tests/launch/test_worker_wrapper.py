"""scripts/megatron_gpt_worker.py: tracker rules, marker claim, once-only injection, running the workload."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import types

import pytest


@pytest.fixture
def w(worker_module):
    return worker_module


# --- tracker ---------------------------------------------------------------------------------------------


def test_absent_tracker_is_a_zero_baseline(w, tmp_path):
    assert w.read_tracker_baseline(tmp_path / "latest_checkpointed_iteration.txt") == 0


@pytest.mark.parametrize(("content", "value"), [(b"5", 5), (b"30\n", 30), (b" 0 ", 0)])
def test_integer_tracker_is_the_baseline(w, tmp_path, content, value):
    path = tmp_path / "t.txt"
    path.write_bytes(content)
    assert w.read_tracker_baseline(path) == value


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
def test_untrustworthy_tracker_at_startup_is_an_error(w, tmp_path, content, fragment):
    path = tmp_path / "t.txt"
    path.write_bytes(content)
    with pytest.raises(w.TrackerError, match=fragment):
        w.read_tracker_baseline(path)


def test_tracker_that_cannot_be_read_is_an_error(w, tmp_path):
    path = tmp_path / "t.txt"
    path.mkdir()
    with pytest.raises(w.TrackerError, match="unreadable"):
        w.read_tracker_baseline(path)


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
def test_polling_ignores_every_read_failure(w, tmp_path, content, value):
    path = tmp_path / "t.txt"
    if content is not None:
        path.write_bytes(content)
    assert w.poll_tracker(path) == value


# --- marker ----------------------------------------------------------------------------------------------


def test_marker_claim_is_exclusive(w, tmp_path):
    path = tmp_path / "fault_injected.json"
    assert w.claim_marker(path, {"a": 1}) is True
    assert json.loads(path.read_text()) == {"a": 1}
    assert w.claim_marker(path, {"a": 2}) is False
    assert json.loads(path.read_text()) == {"a": 1}


def test_marker_claim_fails_loudly_without_its_directory(w, tmp_path):
    with pytest.raises(FileNotFoundError):
        w.claim_marker(tmp_path / "missing" / "fault_injected.json", {})


# --- injector --------------------------------------------------------------------------------------------


def make_injector(w, tmp_path, *, fault="kill", placement="step", baseline=0, watch=True):
    kills = []
    injector = w.Injector(
        fault=fault,
        placement=placement,
        tracker=tmp_path / "tracker.txt",
        marker=tmp_path / "marker.json",
        baseline=baseline,
        identity={"run_id": "r1", "rank": 1, "local_rank": 1, "host": "h", "cycle": 0},
        watch=w.SectionWatch() if watch else None,
        kill=lambda pid, sig: kills.append((pid, sig)),
    )
    return injector, kills


def test_injects_only_after_the_tracker_passes_the_baseline(w, tmp_path):
    injector, kills = make_injector(w, tmp_path, placement="immediate", baseline=5)
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


def test_injects_once(w, tmp_path):
    injector, kills = make_injector(w, tmp_path, placement="immediate")
    injector.on_tracker(5)
    injector.on_tracker(10)
    injector.watch.started("step")
    assert len(kills) == 1


def test_hang_sends_sigstop(w, tmp_path):
    injector, kills = make_injector(w, tmp_path, fault="hang", placement="immediate")
    injector.on_tracker(5)
    assert kills == [(os.getpid(), signal.SIGSTOP)]


def test_step_placement_waits_for_a_step_section(w, tmp_path):
    injector, kills = make_injector(w, tmp_path, fault="hang")
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


def test_step_placement_never_injects_from_the_poller_thread(w, tmp_path):
    # Marker claim + fsync can outlast a GPU step: only the training thread, at a step's start, injects.
    injector, kills = make_injector(w, tmp_path)
    injector.watch.started("step")
    injector.on_tracker(5)
    assert kills == []
    injector.watch.ended("step")
    injector.watch.started("step")
    assert len(kills) == 1


def test_without_section_hooks_placement_falls_back_to_immediate(w, tmp_path):
    injector, kills = make_injector(w, tmp_path, watch=False)
    assert injector.placement == "immediate"
    injector.on_tracker(5)
    assert len(kills) == 1


def test_existing_marker_blocks_injection(w, tmp_path, capsys):
    (tmp_path / "marker.json").write_text("{}")
    injector, kills = make_injector(w, tmp_path, placement="immediate")
    injector.on_tracker(5)
    assert kills == []
    assert "already exists; not injecting" in capsys.readouterr().err


def test_no_injection_after_the_workload_ended(w, tmp_path):
    injector, kills = make_injector(w, tmp_path)
    injector.on_tracker(5)
    injector.finish()
    injector.watch.started("step")
    assert kills == [] and not (tmp_path / "marker.json").exists()


def test_injection_line_on_stderr(w, tmp_path, capsys):
    injector, _ = make_injector(w, tmp_path, placement="immediate")
    injector.on_tracker(5)
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("[ftqual-inject] ")
    assert json.loads(line.split(" ", 1)[1]) == json.loads((tmp_path / "marker.json").read_text())


def test_poller_thread_arms_from_the_file(w, tmp_path):
    injector, kills = make_injector(w, tmp_path, placement="immediate")
    injector.poll_seconds = 0.01
    thread = injector.start()
    (tmp_path / "tracker.txt").write_text("")  # truncated mid-write: ignored
    time.sleep(0.05)
    assert kills == []
    (tmp_path / "tracker.txt").write_text("4")
    thread.join(2)
    assert not thread.is_alive() and len(kills) == 1


def test_section_hooks_wrap_rank_monitor_client(w, monkeypatch):
    calls = []

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
    watch = w.SectionWatch()
    seen = []
    watch.on_start = lambda name: seen.append((name, watch.inside(name)))
    assert w.install_section_hooks(watch) is True
    client = FakeClient()
    client.start_section("setup")
    client.end_section("setup")
    client.start_section("step")
    assert watch.current() == "step" and seen == [("setup", True), ("step", True)]
    client.end_all_sections()
    assert watch.current() is None
    assert calls == [("start", "setup"), ("end", "setup"), ("start", "step"), ("end_all", None)]


def test_section_hooks_report_missing_nvrx(w, monkeypatch):
    monkeypatch.setitem(sys.modules, "nvidia_resiliency_ext", None)  # import fails
    assert w.install_section_hooks(w.SectionWatch()) is False


# --- arguments, pid records, running the entrypoint -------------------------------------------------------


def test_arguments_split_at_double_dash(w, tmp_path):
    args, rest = w.parse_args(
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


def test_fault_rank_required_with_a_fault(w, capsys):
    with pytest.raises(SystemExit):
        w.parse_args(
            ["--entrypoint", "e.py", "--checkpoint-dir", "/c", "--fault-marker", "/f", "--fault", "kill"]
        )


def test_pid_record(w, tmp_path):
    path = w.write_pid_record(tmp_path, "hostA", 2, 5, 1)
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


def test_entrypoint_runs_in_process_with_its_own_argv(w, entrypoint, tmp_path, rank_env):
    (tmp_path / "ckpt").mkdir()
    rc = w.main(wrapper_argv(entrypoint, tmp_path, "--fault", "none", code=4))
    assert rc == 4
    ran = json.loads((tmp_path / "ran.json").read_text())
    assert ran["argv"][0] == str(entrypoint) and ran["argv"][1:3] == ["--out", str(tmp_path / "ran.json")]
    assert ran["path0"] == str(entrypoint.parent)
    assert any(p.name.endswith(".cycle0.rank1.json") for p in tmp_path.iterdir())


def test_bad_tracker_stops_before_the_workload(w, entrypoint, tmp_path, rank_env, capsys):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").write_text("")
    rc = w.main(wrapper_argv(entrypoint, tmp_path, "--fault", "kill", "--fault-rank", "1"))
    assert rc == w.EXIT_BAD_TRACKER
    assert not (tmp_path / "ran.json").exists()
    assert "is empty; refusing to start the workload" in capsys.readouterr().err


def test_requested_fault_that_never_happened_fails_the_fault_rank(
    w, entrypoint, tmp_path, rank_env, monkeypatch, capsys
):
    monkeypatch.setattr(w, "install_section_hooks", lambda watch: False)
    (tmp_path / "ckpt").mkdir()
    rc = w.main(wrapper_argv(entrypoint, tmp_path, "--fault", "kill", "--fault-rank", "1"))
    assert rc == w.EXIT_FAULT_NEVER_INJECTED
    assert (tmp_path / "ran.json").exists()
    assert "was never injected" in capsys.readouterr().err


def test_other_ranks_do_not_fail_for_a_missing_fault(w, entrypoint, tmp_path, rank_env):
    (tmp_path / "ckpt").mkdir()
    assert w.main(wrapper_argv(entrypoint, tmp_path, "--fault", "kill", "--fault-rank", "0")) == 0


def test_existing_marker_means_no_injection_and_no_failure(w, entrypoint, tmp_path, rank_env, capsys):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "fault_injected.json").write_text("{}")
    assert w.main(wrapper_argv(entrypoint, tmp_path, "--fault", "hang", "--fault-rank", "1")) == 0
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


def run_wrapper_child(repo_root, tmp_path, fault, placement):
    fake = tmp_path / "fake"
    for rel, text in FAKE_NVRX.items():
        (fake / rel).parent.mkdir(parents=True, exist_ok=True)
        (fake / rel).write_text(text)
    (tmp_path / "ckpt").mkdir()
    script = tmp_path / "workload.py"
    script.write_text(WORKLOAD)
    env = {
        **os.environ,
        "PYTHONPATH": str(fake),
        "RANK": "0",
        "LOCAL_RANK": "0",
        "TORCHELASTIC_RESTART_COUNT": "0",
    }
    cmd = [
        sys.executable,
        str(repo_root / "scripts" / "megatron_gpt_worker.py"),
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
        "--",
        str(tmp_path / "ckpt"),
        str(tmp_path / "log.txt"),
    ]
    return subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)


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
    proc = run_wrapper_child(repo_root, tmp_path, "hang", "immediate")
    try:
        deadline = time.monotonic() + 30
        state = None
        while time.monotonic() < deadline:
            state = open(f"/proc/{proc.pid}/stat").read().rpartition(")")[2].split()[0]
            if state == "T":
                break
            time.sleep(0.1)
        assert state == "T"
        marker = json.loads((tmp_path / "fault_injected.json").read_text())
        assert marker["fault"] == "hang" and marker["section"] is None and marker["placement"] == "immediate"
        assert not (tmp_path / "log.txt").exists()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
