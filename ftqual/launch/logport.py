"""ft_launcher's gRPC log server: hold its port from the moment we choose it, and notice lost logs.

Why: with `--ft-nvrx-logfile`, ft_launcher (NVRx 0.7.0) starts `grpc_log_server` as a child and does not
check that it bound its port. When another program took the port between our choice and that bind, the
server dies with "Failed to bind to address" (in logs/launcher_grpc_root.log), every client waits for it
forever, training still succeeds and ft_launcher exits 0 with no launcher.log and empty train logs.

How: gRPC servers set SO_REUSEPORT. We bind the chosen port with SO_REUSEPORT (without listening) and
keep that socket open until ft_launcher has exited. Linux then refuses the port to every socket without
SO_REUSEPORT and to every other user, while ft_launcher's server (same user, SO_REUSEPORT) binds it
beside ours; a socket that never listens receives no connections, so the clients reach the server. An
IPv6 twin keeps `localhost` from resolving to a stranger on ::1. What this cannot stop: another process
of the same user that also sets SO_REUSEPORT on exactly this port; `logs_problem` reports that case (and
any other way the logs were lost) after the run.

Multi-node runs share one port on purpose (every node dials the store host's server), so nothing is held
for them: the store host's launcher is not necessarily ours to reason about.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path

# What the log server prints when it cannot serve (NVRx 0.7.0 grpc_log_server.py raises at bind).
SERVER_FAILURES = ("Failed to bind", "Traceback (most recent call last)")
GRPC_ROOT_LOG_GLOB = "*_grpc_root.log"
READ_LIMIT = 1 << 20  # the root log of a healthy run stays small; never slurp a huge file


class PortBusy(Exception):
    """The requested port is held by another program; the message is one line."""


@dataclass
class PortReservation:
    """Sockets bound to `port` with SO_REUSEPORT, held until release()."""

    port: int
    sockets: list[socket.socket] = field(default_factory=list)

    def release(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.sockets.clear()


def _bound(family: socket.AddressFamily, port: int) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(("::", port))
        else:
            sock.bind(("0.0.0.0", port))  # the address NVRx's log server binds
    except OSError:
        sock.close()
        raise
    return sock


def _probe(port: int) -> None:
    """Bind `port` without SO_REUSEPORT and let go: fails while anyone holds it, even another run's
    reservation or log server (which SO_REUSEPORT alone would let us share, mixing two runs' logs)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("0.0.0.0", port))


def reserve(port: int | None = None) -> PortReservation:
    """Hold `port` (or a free one the kernel picks) for ft_launcher's log server; PortBusy if taken.

    The kernel never gives an automatically chosen port (bind to 0) that any socket holds, so only a
    requested port needs the probe first."""
    try:
        if port:
            _probe(port)
        first = _bound(socket.AF_INET, port or 0)
    except OSError as exc:
        raise PortBusy(
            f"NVRX_LOG_SERVER_PORT={port} is in use on this host ({exc.strerror}): ft_launcher's log server "
            "could not bind it and every log would be lost; choose another port or leave it unset"
        ) from exc
    reservation = PortReservation(first.getsockname()[1], [first])
    if socket.has_ipv6:
        try:
            reservation.sockets.append(_bound(socket.AF_INET6, reservation.port))
        except OSError:
            pass  # no IPv6 here, or ::1 taken: gRPC's client falls back to 127.0.0.1 either way
    return reservation


def free_port() -> int:
    """A TCP port free right now (the dry run's choice; a real run holds its port with reserve())."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL = (32768, 60999)  # Linux's default ip_local_port_range
LOWEST_PICKED = 10000  # below: well-known and commonly configured service ports


def ephemeral_range(path: Path = EPHEMERAL_RANGE_FILE) -> tuple[int, int]:
    """The kernel's range for automatically chosen ports (bind to 0, outgoing connections)."""
    try:
        low, high = (int(part) for part in path.read_text().split()[:2])
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL
    return (low, high) if 0 < low <= high <= 65535 else DEFAULT_EPHEMERAL


def ports_outside_ephemeral(count: int, rng=None, range_file: Path = EPHEMERAL_RANGE_FILE) -> list[int]:
    """`count` distinct TCP ports free right now and outside the kernel's ephemeral range.

    A multi-node run's rendezvous and log-server ports are chosen on one host and bound later by
    ft_launcher on the nodes. A port from the ephemeral range can meanwhile be handed to anyone's bind(0):
    seen on the CI cluster, where the nodes share one network namespace: another run's workers took the
    rendezvous port for their MASTER_PORT, NVRx then joined that store as a client (its fallback when the
    bind fails), and the run died with DistNetworkError when the other run's workers finished. Outside the
    range only an explicit choice can take the port."""
    import random

    rng = rng or random.SystemRandom()
    low, high = ephemeral_range(range_file)
    pool = [(LOWEST_PICKED, low - 1), (high + 1, 65535)]
    pool = [(a, b) for a, b in pool if a <= b]
    if not pool:
        raise OSError("no TCP ports outside the kernel's ephemeral range (ip_local_port_range)")
    chosen: list[int] = []
    for _ in range(1000):
        a, b = rng.choice(pool)
        port = rng.randint(a, b)
        if port in chosen:
            continue
        try:
            _probe(port)
        except OSError:
            continue
        chosen.append(port)
        if len(chosen) == count:
            return chosen
    raise OSError(f"no {count} free TCP ports found outside the ephemeral range {low}-{high}")


def _head(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(READ_LIMIT).decode("utf-8", "replace")
    except OSError:
        return ""


def server_failure(log_dir: Path) -> str | None:
    """The log server's own error line (from logs/*_grpc_root.log) once it has failed, else None."""
    for path in sorted(log_dir.glob(GRPC_ROOT_LOG_GLOB)):
        text = _head(path)
        if not any(marker in text for marker in SERVER_FAILURES):
            continue
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        errors = [line for line in lines if "Error" in line or "Failed" in line]
        detail = (errors or lines or ["(no detail)"])[-1]
        return f"ft_launcher's log server failed ({path.name}: {detail[:300]})"
    return None


def _has_text(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def logs_problem(run_dir: Path) -> str | None:
    """Why the run's logs did not come into being (no launcher.log, only empty train logs), or None."""
    log_dir = run_dir / "logs"
    missing = []
    if not _has_text(log_dir / "launcher.log"):
        missing.append("logs/launcher.log is missing or empty")
    train_logs = list(log_dir.glob("train_cycle*.log"))
    if not any(_has_text(path) for path in train_logs):
        missing.append("no worker output reached logs/train_cycle*.log")
    if not missing:
        return None
    cause = server_failure(log_dir)
    return "; ".join(missing) + (f": {cause}" if cause else "")
