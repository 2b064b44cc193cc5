"""Which attempt of each scenario the workflow works on: the workflow's state rules, as pure functions.

Every scenario attempt has a slot `results/<scenario>/<fingerprint>-<n>/` (run.json, verify.json), and the
preflight has `results/preflight/<fingerprint>-<n>/preflight.json`. The fingerprint is the hash of the
resolved settings that shape the run (ftqual.scenarios), so a run made under other settings lives in another
slot and can never be verified or summarised as the current config's. The rules, decided before Snakemake
plans anything (so `snakemake -n` plans exactly what a real run does):

- no slot for the fingerprint yet: slot 1 (the settings are new or changed: the scenario runs);
- the latest slot has no verdict yet (never run, interrupted): that slot (Snakemake redoes what is missing);
- the latest outcome is pass (the verdict the scenario expects: pass, or fail as a negative control expects)
  and its run directory still exists: that slot (nothing reruns);
- the latest outcome is anything else, or the run directory is gone: the next slot (a fresh attempt with a
  fresh run ID), unless `rerun_failed` is off, which keeps reporting the failed slot.

Nothing here writes: the slots, their runs/<run-id>/ directories and the archived verify reports stay.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ftqual.expectation import judge_report

RESULTS = "results"
PASS = "pass"


@dataclass(frozen=True)
class Slot:
    name: str  # <fingerprint>-<n>
    reason: str  # why this slot: shown in the log so a user sees why a scenario reruns or not

    @property
    def number(self) -> int:
        return int(self.name.rsplit("-", 1)[1])


def _slot_numbers(folder: Path, fingerprint: str) -> list[int]:
    pattern = re.compile(re.escape(fingerprint) + r"-([1-9][0-9]{0,5})")
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(int(m.group(1)) for n in names if (m := pattern.fullmatch(n)))


def _read_json(path: Path) -> dict | None:
    try:
        if not path.is_file():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _run_dir_exists(run: dict | None, workdir: Path) -> bool:
    """A launched run's directory must still exist; a run that never launched has none to lose."""
    if run is None:
        return False
    if not run.get("launched", True):
        return True
    run_dir = run.get("run_dir")
    if not isinstance(run_dir, str) or not run_dir:
        return False
    path = Path(run_dir)
    return (path if path.is_absolute() else workdir / path).is_dir()


def scenario_slot(workdir: Path, scenario: str, fingerprint: str, rerun_failed: bool = True) -> Slot:
    folder = workdir / RESULTS / scenario
    numbers = _slot_numbers(folder, fingerprint)
    if not numbers:
        return Slot(f"{fingerprint}-1", "no attempt under these settings yet")
    latest = f"{fingerprint}-{numbers[-1]}"
    report = _read_json(folder / latest / "verify.json")
    if report is None:
        return Slot(latest, "latest attempt unfinished")
    # The outcome judged against the scenario's expectation (a negative control that failed as expected is
    # done); the expectation is part of the fingerprint, so the one the report carries is the current one.
    outcome = judge_report(report)
    verdict = outcome.verdict
    if outcome.met:
        if _run_dir_exists(_read_json(folder / latest / "run.json"), workdir):
            return Slot(latest, "latest attempt passed")
        return Slot(f"{fingerprint}-{numbers[-1] + 1}", f"run directory of attempt {latest} is gone")
    if not rerun_failed:
        return Slot(latest, f"latest attempt {verdict} (rerun_failed_verification: false)")
    return Slot(f"{fingerprint}-{numbers[-1] + 1}", f"latest attempt {latest} was {verdict}")


def preflight_slot(workdir: Path, fingerprint: str) -> Slot:
    folder = workdir / RESULTS / "preflight"
    numbers = _slot_numbers(folder, fingerprint)
    if not numbers:
        return Slot(f"{fingerprint}-1", "no preflight for this config yet")
    latest = f"{fingerprint}-{numbers[-1]}"
    report = _read_json(folder / latest / "preflight.json")
    if report is None:
        return Slot(latest, "latest preflight unfinished")
    if report.get("verdict") == "fail":
        return Slot(f"{fingerprint}-{numbers[-1] + 1}", f"preflight {latest} failed")
    return Slot(latest, "preflight done for this config")


def report_dir(preflight: str, slots: dict[str, str], baseline: str) -> str:
    """results/reports/<hash of the attempts it reports>: one folder per set of current attempts."""
    text = json.dumps({"preflight": preflight, "slots": slots, "baseline": baseline}, sort_keys=True)
    return f"{RESULTS}/reports/{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def scenario_dir(scenario: str, slot: str) -> str:
    return f"{RESULTS}/{scenario}/{slot}"


def preflight_path(slot: str) -> str:
    return f"{RESULTS}/preflight/{slot}/preflight.json"
