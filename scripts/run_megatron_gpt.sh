#!/usr/bin/env bash
# Walkthrough-compatible entry point: the walkthrough's environment interface, implemented in `python -m ftqual.launch`.
# FTQUAL_PYTHON picks the interpreter (default python3); it needs nvidia-resiliency-ext (ft_launcher)
# and, for a real run, torch and Megatron-LM (or NVRX_WORKLOAD=smoke). See docs/interfaces.md.
# Exit codes: ft_launcher's; 2 for a bad setting (one line on stderr, nothing created); 74 when ft_launcher
# exited 0 but the run's logs were never written (run.json's launcher_error names the cause).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="${REPO_ROOT}${PYTHONPATH:+:${PYTHONPATH}}"
exec "${FTQUAL_PYTHON:-python3}" -m ftqual.launch "$@"
