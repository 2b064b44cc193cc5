"""Which attempt of each scenario the workflow works on: the workflow's state rules, as pure functions.

Every scenario attempt has a slot `results/<scenario>/<key>-<n>/` (attempt.json, the attempt's record:
where its run lies, the launcher's exit, the stack; verify.json, its verdict), and the
preflight has `results/preflight/<key>-<n>/preflight.json`. The key (`attempt_key`) hashes the resolved
settings that shape the run (ftqual.scenario.model) together with the identity of the stack under test
(ftqual.stack.identity), so a run made under other settings, or on another stack (an upgraded torch, NVRx or
Megatron tree, another driver, GPU, machine or executor), lives in another slot and can never be verified
or summarised as the current one's. The rules, decided before Snakemake plans anything (so `snakemake -n`
plans exactly what a real run does):

- no slot for the key yet: slot 1 (the settings or the stack are new or changed: the scenario runs; the
  reason names the stack parts that changed since the scenario's previous attempt under these settings);
- the latest slot has no verdict yet (never run, interrupted): that slot (Snakemake redoes what is missing);
- the latest outcome is pass (the verdict the scenario expects: pass, or fail as a negative control expects)
  and its run directory still exists: that slot (nothing reruns);
- the latest verdict is not_applicable (the preflight found this stack cannot run it): that slot; the
  preflight of this key that judged so is kept as well, so a new attempt would say the same (a new stack or
  new settings make a new key; after fixing the node itself, remove results/preflight/ to judge again);
- the latest outcome is anything else, or the run directory is gone: the next slot (a fresh attempt with a
  fresh run ID), unless `rerun_failed` is off, which keeps reporting the failed slot.

Nothing here writes (but `adopt_legacy_records`, which the workflow calls once before planning): the slots,
their runs/<run-id>/ directories and the archived verify reports stay.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ftqual.preflight import report_schema as preflight_schema
from ftqual.stack import identity as stackid
from ftqual.stack.identity import StackIdentity
from ftqual.verification import schema as verify_schema
from ftqual.verification.schema import judged
from ftqual.verification.verdict import NOT_APPLICABLE

RESULTS = "results"
# The attempt's record in its slot; not the run directory's run.json (the launcher's record of the run).
ATTEMPT_RECORD = "attempt.json"
LEGACY_RECORD = (
    "run.json"  # the record's name in workspaces of earlier versions: read, renamed, never written
)
PASS = "pass"
SLOT_NAME = re.compile(r"[0-9a-f]{12}-[1-9][0-9]{0,5}")


@dataclass(frozen=True)
class Slot:
    name: str  # <fingerprint>-<n>
    reason: str  # why this slot: shown in the log so a user sees why a scenario reruns or not

    @property
    def number(self) -> int:
        return int(self.name.rsplit("-", 1)[1])


def attempt_key(settings_fingerprint: str, stack_digest: str) -> str:
    """The slot key: the settings' fingerprint and the stack's digest, hashed together (12 hex digits)."""
    text = f"{settings_fingerprint}:{stack_digest}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


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


def why_new(folder: Path, settings_fingerprint: str | None, stack: StackIdentity | None) -> str:
    """Why a scenario has no slot under its key: new settings, or the stack changed (and how) since the
    scenario's latest attempt under the same settings."""
    if settings_fingerprint is None or stack is None:
        return "no attempt under these settings yet"
    latest: tuple[float, str, dict] | None = None
    try:
        entries = list(os.scandir(folder))
    except OSError:
        entries = []
    for entry in entries:
        if not SLOT_NAME.fullmatch(entry.name):
            continue
        record = record_path(Path(entry.path))
        run = _read_json(record)
        if run is None or run.get("settings_fingerprint") != settings_fingerprint:
            continue
        try:
            when = record.stat().st_mtime
        except OSError:
            continue
        if latest is None or when > latest[0]:
            latest = (when, entry.name, run)
    if latest is None:
        return "no attempt under these settings yet"
    _, name, run = latest
    before = stackid.from_json(run.get("stack"))
    if before is None:
        return f"the stack of attempt {name} (same settings) was not recorded: requalifying on this stack"
    return (
        f"the stack changed since attempt {name} (same settings): {stackid.describe_changes(before, stack)}"
    )


def scenario_slot(
    workdir: Path,
    scenario: str,
    fingerprint: str,
    rerun_failed: bool = True,
    settings_fingerprint: str | None = None,
    stack: StackIdentity | None = None,
) -> Slot:
    """`fingerprint` is the slot key (attempt_key); with the settings' own fingerprint and the current
    stack, a new slot's reason says what changed."""
    folder = workdir / RESULTS / scenario
    numbers = _slot_numbers(folder, fingerprint)
    if not numbers:
        return Slot(f"{fingerprint}-1", why_new(folder, settings_fingerprint, stack))
    latest = f"{fingerprint}-{numbers[-1]}"
    report = _read_json(folder / latest / "verify.json")
    if report is None:
        # An interrupt may leave a record whose launched run's directory is gone (deleted since): there is no
        # evidence left to verify, so the attempt is redone in the next slot.
        record = _read_json(record_path(folder / latest))
        if record is not None and not _run_dir_exists(record, workdir):
            return Slot(
                f"{fingerprint}-{numbers[-1] + 1}", f"run directory of unverified attempt {latest} is gone"
            )
        return Slot(latest, "latest attempt unfinished")
    # The outcome judged against the scenario's expectation (a negative control that failed as expected is
    # done); the expectation is part of the fingerprint, so the one the report carries is the current one.
    outcome = judged(report).outcome  # as the report will judge it (ftqual.verification.schema)
    verdict = outcome.verdict
    if verify_schema.problems(report):
        verdict = "malformed"  # never a reason to keep an attempt (ftqual.verification.schema)
    elif outcome.verdict == NOT_APPLICABLE:
        # Judged by the preflight of this key, which is kept too (preflight_slot): a rerun would say the same.
        return Slot(latest, "latest attempt not applicable on this stack")
    elif outcome.met:
        if _run_dir_exists(_read_json(record_path(folder / latest)), workdir):
            return Slot(latest, "latest attempt passed")
        return Slot(f"{fingerprint}-{numbers[-1] + 1}", f"run directory of attempt {latest} is gone")
    if not rerun_failed:
        return Slot(latest, f"latest attempt {verdict} (rerun_failed_verification: false)")
    return Slot(f"{fingerprint}-{numbers[-1] + 1}", f"latest attempt {latest} was {verdict}")


def preflight_slot(workdir: Path, fingerprint: str) -> Slot:
    folder = workdir / RESULTS / "preflight"
    numbers = _slot_numbers(folder, fingerprint)
    if not numbers:
        return Slot(f"{fingerprint}-1", "no preflight for this config on this stack yet")
    latest = f"{fingerprint}-{numbers[-1]}"
    report = _read_json(folder / latest / "preflight.json")
    if report is None:
        return Slot(latest, "latest preflight unfinished")
    verdict = preflight_schema.verdict_of(report)
    if verdict in ("fail", "malformed"):
        return Slot(
            f"{fingerprint}-{numbers[-1] + 1}", f"preflight {latest} {verdict.replace('fail', 'failed')}"
        )
    return Slot(latest, "preflight done for this config")


def report_dir(preflight: str, slots: dict[str, str], baseline: str) -> str:
    """results/reports/<hash of the attempts it reports>: one folder per set of current attempts."""
    text = json.dumps({"preflight": preflight, "slots": slots, "baseline": baseline}, sort_keys=True)
    return f"{RESULTS}/reports/{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def record_path(slot_dir: Path) -> Path:
    """The attempt's record in `slot_dir`: attempt.json, or the legacy run.json of an earlier version's
    workspace where only that exists."""
    record = Path(slot_dir) / ATTEMPT_RECORD
    legacy = Path(slot_dir) / LEGACY_RECORD
    return legacy if not record.exists() and legacy.is_file() else record


def adopt_legacy_records(workdir: Path, scenarios) -> list[Path]:
    """Rename each scenario slot's legacy record (run.json) to attempt.json where only the legacy one exists,
    keeping its content and times, so that a workspace of an earlier version keeps its attempts (Snakemake
    would otherwise see their record missing and run them again). Returns the records renamed."""
    renamed = []
    for scenario in scenarios:
        folder = Path(workdir) / RESULTS / scenario
        try:
            entries = [e for e in os.scandir(folder) if SLOT_NAME.fullmatch(e.name)]
        except OSError:
            continue
        for entry in entries:
            legacy, record = Path(entry.path) / LEGACY_RECORD, Path(entry.path) / ATTEMPT_RECORD
            if legacy.is_file() and not legacy.is_symlink() and not record.exists():
                try:
                    os.rename(legacy, record)
                except OSError:
                    continue
                renamed.append(record)
    return renamed


def scenario_dir(scenario: str, slot: str) -> str:
    return f"{RESULTS}/{scenario}/{slot}"


def preflight_path(slot: str) -> str:
    return f"{RESULTS}/preflight/{slot}/preflight.json"
