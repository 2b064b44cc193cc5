"""Patterns searched for in the lines of any log of a run, whatever its format."""

from __future__ import annotations

import re

# A line that names an error, the last resort of a cause ("unknown cause; the last error line: ..."):
#   0: RuntimeError: CUDA error: out of memory
#   E1129 14:19:09.846000 4242 api.py:734] failed (exitcode: -9) local_rank: 0 (pid: 4321) of binary: ...
#   ... The node 'n1_4699_0' rendezvous has timed out after 30.03 seconds (timeout: 30.0s).
TELLING = re.compile(r"error|exception|traceback|timed? ?out|exitcode|failed|refus", re.I)
# What a surviving rank logs because a peer failed, never the fault itself (a cause names the failing rank's
# own error before these; ftqual.verification.causes):
#   0: [rank0]: RuntimeError: [../gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:26349.
#      This is typically caused by a remote worker crashing. ...
#   0: [rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: ...
#   0: torch.distributed.DistBackendError: NCCL communicator was aborted on rank 0. ...
#   0: torch.distributed.elastic.multiprocessing.api.SignalException: Process 4242 got signal: 15
PEER_CONSEQUENCE = re.compile(
    r"connection (?:closed|reset) by peer|remote (?:worker|process|peer)|broken pipe"
    r"|watchdog caught collective|collective operation timeout|ran for \d+ milliseconds before timing out"
    r"|communicator was aborted|ncclRemoteError|NCCL operations have failed or timed out"
    r"|timed out waiting \d+ms for (?:recv|send)|pair closure|SignalException: Process \d+ got signal",
    re.I,
)
