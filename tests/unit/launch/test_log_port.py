"""The log server's port: held from the moment we choose it, refused when given but busy, and a run whose
logs were lost is a failed run with its cause (never exit 0); the real launches are
tests/integration/e2e/test_log_port_real.py."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from ftqual.launch import command, logport, run, settings
from tests.support.launch import tree
from tests.unit.launch.test_launch_validation import assert_refused


def plain_bind(port: int, family=socket.AF_INET) -> socket.socket:
    """What an unrelated program does: bind without SO_REUSEPORT (raises OSError when refused)."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind(("::" if family == socket.AF_INET6 else "", port))
    except OSError:
        sock.close()
        raise
    return sock


def grpc_like_listener(port: int) -> socket.socket:
    """What NVRx's gRPC log server does: SO_REUSEPORT, bind 0.0.0.0, listen."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("0.0.0.0", port))
    sock.listen()
    return sock


def test_reserved_port_is_refused_to_others_until_released():
    reservation = logport.reserve()
    port = reservation.port
    try:
        with pytest.raises(OSError):
            plain_bind(port)
        if socket.has_ipv6 and len(reservation.sockets) == 2:
            with pytest.raises(OSError):
                plain_bind(port, socket.AF_INET6)  # dual-stack [::] would take 0.0.0.0 too
    finally:
        reservation.release()
    plain_bind(port).close()


def test_reserved_port_is_left_to_the_log_server():
    reservation = logport.reserve()
    try:
        with grpc_like_listener(reservation.port) as server:
            with socket.create_connection(("127.0.0.1", reservation.port), timeout=5):
                conn, _ = server.accept()  # the connection reached the server, not our reservation
                conn.close()
    finally:
        reservation.release()


def test_kernel_never_hands_a_reserved_port_to_someone_else():
    """Measured: other programs asking for any free port (bind 0) never get ours while we hold it."""
    reservation = logport.reserve()
    try:
        given = set()
        for _ in range(2000):
            with socket.socket() as sock:
                sock.bind(("", 0))
                given.add(sock.getsockname()[1])
        assert reservation.port not in given
    finally:
        reservation.release()


def test_busy_explicit_port_is_refused():
    with plain_bind(0) as holder:
        port = holder.getsockname()[1]
        holder.listen()
        with pytest.raises(logport.PortBusy, match=f"NVRX_LOG_SERVER_PORT={port} is in use on this host"):
            logport.reserve(port)


def test_explicit_port_held_by_another_run_is_refused():
    """Another run's reservation (SO_REUSEPORT, same user) could be shared; two log servers must not."""
    other = logport.reserve()
    try:
        with pytest.raises(logport.PortBusy):
            logport.reserve(other.port)
    finally:
        other.release()
    logport.reserve(other.port).release()


def test_busy_explicit_port_stops_a_real_run_before_anything(
    base_env, work, run_launch, tmp_path, monkeypatch
):
    sentinel = tmp_path / "executed"
    fake = tmp_path / "ft_launcher"
    fake.write_text(f"#!/bin/sh\ntouch {sentinel}\n")
    fake.chmod(0o755)
    monkeypatch.setattr(command, "ft_launcher_executable", lambda: str(fake))
    with plain_bind(0) as holder:
        holder.listen()
        port = holder.getsockname()[1]
        before = tree(work)
        result = run_launch({**base_env, "NVRX_DRY_RUN": "0", "NVRX_LOG_SERVER_PORT": str(port)})
    assert_refused(result, f"NVRX_LOG_SERVER_PORT={port} is in use on this host")
    assert tree(work) == before and not sentinel.exists()


def test_multi_node_port_is_shared_on_purpose_and_never_held(base_env):
    from ftqual.launch import _port

    with plain_bind(0) as holder:
        holder.listen()
        port = holder.getsockname()[1]
        env = {**base_env, "NVRX_DRY_RUN": "0", "NNODES": "2", "RDZV_ENDPOINT": "node1:29400"}
        s = settings.load_settings({**env, "NVRX_LOG_SERVER_PORT": str(port)})
        assert _port(s) == (port, None)  # another launcher's server may hold it: that is the point
        assert _port(settings.load_settings(env)) == (50051, None)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_logs_problem(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    assert "logs/launcher.log is missing or empty" in logport.logs_problem(tmp_path)
    write(logs / "launcher.log", "started\n")
    write(logs / "train_cycle0.log", "")
    assert logport.logs_problem(tmp_path) == "no worker output reached logs/train_cycle*.log"
    write(logs / "train_cycle1.log", "0: iteration 1\n")
    assert logport.logs_problem(tmp_path) is None
    (logs / "launcher.log").write_text("")
    write(
        logs / "launcher_grpc_root.log",
        "Traceback (most recent call last):\nRuntimeError: Failed to bind to address 0.0.0.0:1; set GRPC\n",
    )
    problem = logport.logs_problem(tmp_path)
    assert problem.startswith("logs/launcher.log is missing or empty: ft_launcher's log server failed")
    assert "RuntimeError: Failed to bind to address 0.0.0.0:1" in problem


# A stand-in for ft_launcher that meddles with the log server's port, then execs the real one.
# steal: another program tries to take the chosen port first (and keeps it if it can).
# lost: the port ft_launcher is given is one that another program already holds (the race was lost).
def test_exit_code_when_ft_launcher_said_zero_but_logs_are_missing(tmp_path, base_env, work, capsys):
    """The fallback after the run: ft_launcher's 0 stays in run.json, our exit code says failure."""
    s = settings.load_settings({**base_env, "NVRX_DRY_RUN": "0", "NVRX_DEMO_FAULT": "none"}, pid=1)
    run.make_dirs(s)
    plan = command.LaunchPlan(launcher=["true"], workload=[], megatron_flags=[], log_server_port=1)
    choice = run.StackChoice("local", False, [])
    assert run.launch(s, plan, choice, "h", {"PATH": os.environ["PATH"]}) == run.EXIT_LOGS_LOST
    record = json.loads((s.run_dir / "run.json").read_text())
    assert record["exit_code"] == 0 and record["launcher_error"].startswith("logs/launcher.log is missing")
    assert "run r1 failed: logs/launcher.log is missing or empty" in capsys.readouterr().err


# --- multi-node ports: outside the kernel's ephemeral range -------------------------------------------


def test_multinode_ports_avoid_the_ephemeral_range_and_are_free(tmp_path):
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("32768\t60999\n")
    for _ in range(20):
        ports = logport.ports_outside_ephemeral(2, range_file=ranges)
        assert len(set(ports)) == 2
        for port in ports:
            assert logport.LOWEST_PICKED <= port < 32768 or 60999 < port <= 65535
            logport._probe(port)  # bindable now


def test_a_port_someone_holds_is_never_chosen(tmp_path, monkeypatch):
    port = next(p for p in range(20000, 32768) if _free(p))
    monkeypatch.setattr(logport, "LOWEST_PICKED", port)
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text(f"{port + 1} 65535\n")  # leaves exactly one port outside the range
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", port))
        with pytest.raises(OSError, match="no 1 free TCP ports found outside the ephemeral range"):
            logport.ports_outside_ephemeral(1, range_file=ranges)
    assert logport.ports_outside_ephemeral(1, range_file=ranges) == [port]


def _free(port: int) -> bool:
    try:
        logport._probe(port)
    except OSError:
        return False
    return True


def test_unreadable_range_falls_back_to_linux_s_default(tmp_path):
    assert logport.ephemeral_range(tmp_path / "absent") == (32768, 60999)
    (tmp_path / "bad").write_text("x y")
    assert logport.ephemeral_range(tmp_path / "bad") == (32768, 60999)
    (tmp_path / "ok").write_text("40000 50000\n")
    assert logport.ephemeral_range(tmp_path / "ok") == (40000, 50000)
