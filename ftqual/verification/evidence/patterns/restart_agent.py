r"""The restart agent's lines in the launcher log, each with NVRx's source line.

NVRx's restart agent as the launcher's log (logs/launcher.log) records it: one reader,
`evidence/restart_agent.py`. The lines, as NVRx 0.7.0 prints them (docs/faults.md, "The restart agent"):

- the verdict on a failed cycle's log, once the service has analysed it (about 15 s after the cycle ended:
  the service waits for the log to stay quiet), `shared_utils/health_check.py:2155` (`AttributionService.
  _get_results`, the text from `attribution/orchestration/client_response.py:117`, `format_log_message`):
  `... health_check.py:2155 AttrSvcResult for /run/logs/train_cycle0.log: status=completed
  recommendation=RESTART reason=Line 6 matched failure class observed_exception; policy basis is
  general_retry_available. should_stop=False result preview: `; where the log matched no failure signature,
  `recommendation=UNKNOWN reason=No actionable failure signature was found in the available log.
  should_stop=False`, and the launcher goes on (`health_check.py:1975 Attribution recommends continuing`)
- a stop acted on (stop-action no-restart): while workers run, `fault_tolerance/launcher.py:692`:
  `... launcher.py:692 [default] Attribution recommended stopping the job; terminating workers and
  signalling the rest of the job.`; where the STOP came while the next cycle was forming (the verdict is
  latched, `health_check.py:1945 Attribution recommends stopping the job (analyzed log: ...); the job will be
  terminated`), the rendezvous closes instead, `launcher.py:533`: `Rendezvous closed because NVRx decided the
  job must not be restarted (attribution_stop). Original rendezvous message: ...` (seen on CPU with the
  smoke workload, tests/integration/e2e/test_restart_agent_real.py)
- a failed cycle left unanalysed because an earlier one is still awaited (one analysis at a time),
  `shared_utils/health_check.py:2039`: `AttributionService terminal analysis for /run/logs/train_cycle3.log
  deferred: still awaiting a verdict for /run/logs/train_cycle2.log`
- the service started, or its start failed: `attribution_manager.py:240 Managed attribution service is ready:
  PID=16855 endpoint=http://127.0.0.1:50050`; `Agent run ended with exception, e=ValueError('managed
  attribution service requires --ft-attribution-llm-api-key-file or LLM_API_KEY_FILE')`.

Paths are matched by their `train_cycle<N>.log` tail only: the run directory may have moved.
"""

from __future__ import annotations

import re

VERDICT = re.compile(
    r"AttrSvcResult for \S*train_cycle(?P<cycle>\d+)\.log: status=(?P<status>\w+) "
    r"recommendation=(?P<decision>[A-Z_]+) reason=(?P<reason>.*?) should_stop=(?P<stop>True|False)\b"
)
BASIS = re.compile(r"policy basis is (\w+)")
ENFORCED_STOP = re.compile(
    r"Attribution recommended stopping the job; terminating workers"
    r"|NVRx decided the job must not be restarted \(attribution_stop\)"
)
DEFERRED = re.compile(
    r"AttributionService terminal analysis for \S*train_cycle(\d+)\.log deferred: still awaiting a verdict "
    r"for \S*train_cycle(\d+)\.log"
)
SERVICE_READY = re.compile(r"Managed attribution service is ready: PID=\d+")
SERVICE_FAILED = re.compile(r"(managed attribution service [^'\"]{0,200})")
NEEDLES = (
    "AttrSvcResult",
    "Attribution recommended stopping",
    "(attribution_stop)",
    "terminal analysis for",
    "attribution service",
)
