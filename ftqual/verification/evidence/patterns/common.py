"""Patterns searched for in the lines of any log of a run, whatever its format."""

from __future__ import annotations

import re

# A line that names an error, the last resort of a cause ("unknown cause; the last error line: ..."):
#   0: RuntimeError: CUDA error: out of memory
#   E1129 14:19:09.846000 4242 api.py:734] failed (exitcode: -9) local_rank: 0 (pid: 4321) of binary: ...
#   ... The node 'n1_4699_0' rendezvous has timed out after 30.03 seconds (timeout: 30.0s).
TELLING = re.compile(r"error|exception|traceback|timed? ?out|exitcode|failed|refus", re.I)
