r"""ft_launcher's log (logs/launcher.log, `--ft-nvrx-logfile`): every pattern its readers match, once.

Readers: `evidence/launcher_log.py` (the facts), `evidence/scan/launcher_blocks.py` (which lines to hand it),
`ftqual/verification/causes.py` and `ftqual/workflow/progress.py`. Unified here, each time on the parser's
pattern:

- the section timeout: `Section '([^']+)'` (causes and progress had `'(\w+)'`): every section name of the
  recorded runs (`step`, `checkpointing`) is a word, and `[^']+` also takes one with a `-` or a `.`; its
  numbers are `\d+(?:\.\d+)?` (causes had `[\d.]+`, which `float()` can refuse), and it wants the whole
  `... seconds. Timeout is T seconds` (progress stopped at the elapsed time): every recorded line has it;
- the out-of-section timeout: `Was out of section for X seconds. Timeout is T seconds` (causes had
  `.*out.of.section.*?([\d.]+) seconds.*Timeout is`, which backtracks on a forged line); no recorded run
  prints it;
- a worker's exit: `failed (exitcode: C) local_rank: R (pid: P)` (causes wanted only the code, progress
  the code and the rank): every recorded exit line carries the three.
"""

from __future__ import annotations

import re

_NUM = r"(\d+(?:\.\d+)?)"
_TIMEOUT_IS = r" seconds\. Timeout is " + _NUM + " seconds"

# The NVRx logger's prefix (local time; the rank monitor's local rank in `(LR)`):
#   2026-11-29 14:19:09,847 [INFO] [vm] [workload:0(0) infra:0(0)] launcher.py:619 msg
NVRX_PREFIX = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \[(?P<level>\w+)\] \[(?P<host>[^\]]*)\] "
    r"\[workload:(?P<rank>[^(\s]*)\((?P<local>[^)]*)\)"
)
# torch's glog prefix (local time without a year; the launcher's pid):
#   E1130 16:18:13.471000 3026 torch/distributed/elastic/multiprocessing/api.py:986] msg
GLOG_PREFIX = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+(\d+) ")
# A worker's exit (code, local rank, pid):
#   ... api.py:986] failed (exitcode: -9) local_rank: 1 (pid: 3059) of binary: /opt/torch/.venv/bin/python3
WORKER_EXIT = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\)")
# The launcher's restart decision:
#   ... launcher.py:636 [default] Worker group UNHEALTHY. 3/3 attempts left; will restart worker group
RESTART = re.compile(r"Worker group (UNHEALTHY|FAILED)\. (\d+)/(\d+) attempts left")
# A section timeout (cycle, section, elapsed, timeout):
#   ... [Cycle 0] Section 'step' has been open for 30.02 seconds. Timeout is 30.00 seconds.
SECTION_TIMEOUT = re.compile(r"\[Cycle (\d+)\] Section '([^']+)' has been open for " + _NUM + _TIMEOUT_IS)
# The out-of-section timeout (cycle, elapsed, timeout):
#   ... [Cycle 1] Was out of section for 61.50 seconds. Timeout is 60.00 seconds.
OUT_OF_SECTION = re.compile(r"\[Cycle (\d+)\] Was out of section for " + _NUM + _TIMEOUT_IS)
# The progress tracker's account of a cycle (cycle, NO, from, to):
#   ... progress_tracker.py:215 Training cycle #0 made progress: 0 → 5 (5 iterations)
#   ... Training cycle #2 made NO progress: 3 -> 3
PROGRESS = re.compile(r"Training cycle #(\d+) made (NO )?progress: (-?\d+) (?:→|->) (-?\d+)")
# The agent's exit code (no recorded run prints it):
#   ... Agent's exit code = 1
AGENT_EXIT = re.compile(r"Agent's exit code = (-?\d+)")
# A profiling event (cycle, event, node, rank, UTC time):
#   ... profiling.py:93   - Cycle: 0 Event: rendezvous_started Node: localhost_797_0 Rank: None Time:
#       2026-11-30 16:15:02.540 UTC
PROFILE_EVENT = re.compile(
    r"Cycle: (\d+) Event: (\w+) Node: (\S+) Rank: (\S+) Time: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) UTC"
)
# A node joining a rendezvous round (node id, node rank, number of nodes):
#   ... The node 'localhost_797_0' has joined the rendezvous 'baseline-...-a1' as rank 0 in a world of size 1.
RENDEZVOUS_JOIN = re.compile(
    r"The node '(?P<node>[^']+)' has joined the rendezvous '[^']*' as rank (?P<rank>\d+) "
    r"in a world of size (?P<world>\d+)"
)
# NVRx's barrier rendezvous giving up on the nodes it needs (node_loss without a spare); the same text comes
# again inside the agent's `RendezvousTimeoutError(...)` line:
#   ... The node 'n1_4699_0' rendezvous has timed out after 30.03 seconds (timeout: 30.0s).
RENDEZVOUS_TIMEOUT = re.compile(
    r"The node '(?P<node>[^']+)' rendezvous has timed out after "
    + _NUM
    + r" seconds \(timeout: "
    + _NUM
    + r"s\)"
)
# Any rendezvous timeout, NVRx's barrier or torch's (a cause: "the rendezvous timed out: ..."):
#   ... e=RendezvousTimeoutError("The node 'n1_4699_0' rendezvous has timed out after 30.03 seconds ...")
ANY_RENDEZVOUS_TIMEOUT = re.compile(r"RendezvousTimeoutError|rendezvous.*timed out", re.I)
# NVRx's GPU-memory check before a replacement starts (GPU index, seconds waited), and its giving up:
#   ... launcher.py:1237 GPU 0 memory reclaimed in 0s (2 samples): 528MB@0s, 0MB@0s
#   ... Timeout waiting for GPU memory to be reclaimed after 50.0s. ... Proceeding anyway as best effort.
GPU_RECLAIMED = re.compile(r"GPU (\d+) memory reclaimed in " + _NUM + r"s")
GPU_RECLAIM_TIMEOUT = re.compile(r"Timeout waiting for GPU memory to be reclaimed after " + _NUM + r"s")
# An NVRx node id (host, launcher pid): `localhost_797_0`
NODE_ID = re.compile(r"^(?P<host>.+)_(?P<pid>\d+)_\d+$")

# Lines that matter by their presence, found by substring:
# The progress tracker giving up (either line):
#   ... progress_tracker.py:248 EARLY TERMINATION: 3 consecutive training cycles without progress ...
#   ... launcher.py:619 [default] Progress tracker detected no progress across restarts. No more restarts ...
NO_PROGRESS_NEEDLES = ("EARLY TERMINATION", "no progress across restarts")
# The cause "no progress" cites the second of those lines:
NO_PROGRESS_STOP = re.compile(r"no progress across restarts", re.I)
# The run's success:
#   ... [default] worker group successfully finished. Waiting 300 seconds for other agents to finish.
SUCCESS = "worker group successfully finished"
SUCCESS_LINE = re.compile(re.escape(SUCCESS))
# Torch's elastic agent on a worker group that failed (no recorded run prints it), and the needle of
# `AGENT_EXIT`:
#   ... ... exited with non-zero exit code
NONZERO_EXIT = "exited with non-zero exit code"
AGENT_EXIT_NEEDLE = "exit code = "
