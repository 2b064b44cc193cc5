"""The log server's port on two real smoke launches under ft_launcher: held from the moment we choose it
against a thief, and a run whose logs were lost (its port taken) is a failed run with its cause, never exit 0.
The port's unit tests are tests/unit/launch/test_log_port.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ftqual.launch import cleanup, command
from tests.unit.launch.test_log_port import plain_bind, write

FAKE_LAUNCHER = textwrap.dedent("""\
    #!{python}
    import os, socket, subprocess, sys, time
    real, mode, report = {real!r}, {mode!r}, {report!r}
    args = sys.argv[1:]
    flag = next(a for a in args if a.startswith("--ft-log-server-port="))
    port = int(flag.split("=")[1])
    if mode == "steal":
        thief = subprocess.Popen([sys.executable, "-c", '''
    import socket, sys, time
    s = socket.socket()
    try:
        s.bind(("", int(sys.argv[1]))); s.listen()
    except OSError as exc:
        open(sys.argv[2], "w").write("refused: " + exc.strerror); sys.exit(0)
    open(sys.argv[2], "w").write("stolen"); time.sleep(120)
    ''', str(port), report])
        while not os.path.exists(report) or not open(report).read():
            time.sleep(0.05)
    else:
        args[args.index(flag)] = "--ft-log-server-port=" + mode
    os.execv(real, [real, *args])
""")

DRIVER = textwrap.dedent("""\
    import json, sys
    from ftqual.launch import command, main
    command.ft_launcher_executable = lambda: sys.argv[2]
    sys.exit(main([], env=json.loads(sys.argv[1])))
""")


def smoke_launch(
    repo_root: Path, tmp_path: Path, mode: str
) -> tuple[subprocess.CompletedProcess, Path, Path]:
    real = command.ft_launcher_executable()
    if real is None:
        pytest.skip("ft_launcher is not installed")
    report = tmp_path / "thief.txt"
    fake = write(
        tmp_path / "fake" / "ft_launcher",
        FAKE_LAUNCHER.format(python=sys.executable, real=real, mode=mode, report=str(report)),
    )
    fake.chmod(0o755)
    work = tmp_path / "work"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NVRX_", "SLURM_"))}
    launcher_env = {
        **env,
        "NVRX_WORK_DIR": str(work),
        "NVRX_WORKLOAD": "smoke",
        "NVRX_RUN_ID": f"port-{mode}-1",
        "NVRX_DEMO_FAULT": "none",
        "GPUS_PER_NODE": "1",
        "TRAIN_ITERS": "4",
        "SAVE_INTERVAL": "2",
        "NVRX_TERM_TIMEOUT": "5",
        "NVRX_WORKERS_STOP_TIMEOUT": "5",
        "NVRX_SETTINGS_FINGERPRINT": "0123abcd",
        "TMPDIR": "/tmp",  # NVRx's rank-monitor sockets live there; long paths break AF_UNIX
    }
    result = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(launcher_env), str(fake)],
        env={**env, "PYTHONPATH": str(repo_root)},
        capture_output=True,
        text=True,
        timeout=240,
    )
    return result, work / "runs" / f"port-{mode}-1", report


@pytest.mark.timeout(300)
def test_real_launch_keeps_its_port_from_a_thief(repo_root, tmp_path):
    result, run_dir, report = smoke_launch(repo_root, tmp_path, "steal")
    assert report.read_text().startswith("refused"), report.read_text()
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((run_dir / "run.json").read_text())
    assert record["exit_code"] == 0 and record["launcher_error"] is None
    assert record["settings_fingerprint"] == "0123abcd"
    assert (run_dir / "logs" / "launcher.log").stat().st_size > 0
    assert "iteration        4/       4" in (run_dir / "logs" / "train_cycle0.log").read_text()
    assert cleanup.survivors(run_dir) == []


@pytest.mark.timeout(300)
def test_real_launch_that_lost_its_logs_fails_with_the_cause(repo_root, tmp_path):
    with plain_bind(0) as holder:
        holder.listen()
        port = holder.getsockname()[1]
        began = time.monotonic()
        result, run_dir, _ = smoke_launch(repo_root, tmp_path, str(port))
        took = time.monotonic() - began
    assert result.returncode != 0, result.stderr[-3000:]
    record = json.loads((run_dir / "run.json").read_text())
    assert "Failed to bind to address" in record["launcher_error"], record["launcher_error"]
    assert f"run port-{port}-1 failed: " in result.stderr and "Failed to bind" in result.stderr
    assert record["exit_code"] is not None and record["finished_at"]
    assert cleanup.survivors(run_dir) == []
    print(f"\n[port] lost logs detected, run stopped after {took:.1f} s, exit {result.returncode}")
