"""The flat-memory verifier gives exactly the verify.json of the verifier that held every iteration line.

tests/unit/verification/parity/ holds the report (without `verifier`) the previous implementation (commit
e7bf56c) wrote
for every recorded run under tests/data and the shared fixtures (alone, and with its sibling baseline as
--baseline) and for generated runs (bench/make_run.py, every planted defect): verdicts, checks, evidence,
metrics and timeline must be identical. The runs recorded after that commit (the extended scenarios, node
loss, Transformer Engine, resume_existing) have the report of the flat-memory verifier as it landed (commit
e0c42aa, itself identical to e7bf56c on every older run), so that every later change is held to it too.
"""

from __future__ import annotations

import json

import pytest

from ftqual.verification.checks.recurring import RECURRING_OUTCOME
from ftqual.verification.metrics import ENDING_METRICS
from ftqual.verification.verify import DEFAULT_BASELINE_TOLERANCE, DEFAULT_REPLAY_TOLERANCE, build_report
from tests.support.synthetic.runs import Spec, generate
from tests.unit.verification.parity_cases import GENERATED, RECORDED, cases, normalized

ADDED_CHECKS = {RECURRING_OUTCOME}


def _same(name: str, report: dict) -> None:
    recorded = RECORDED / f"{name}.json"
    if not recorded.is_file():  # a run added after the change: there is no previous output to agree with
        pytest.skip(f"{name}: no report of the previous implementation recorded")
    want = json.loads(recorded.read_text(encoding="utf-8"))
    got = json.loads(json.dumps(normalized(report), sort_keys=True))
    # The one-line cause is composed after the checks (ftqual.verification.verdict,
    # tests/unit/verification/test_verdict.py), and the quoted log lines (`excerpts`, verify.json's added
    # key: ftqual.verification.evidence.excerpts, tests/unit/verification/evidence/test_excerpts.py) came
    # later than the recordings; so did the checkpoint and restart account (`checkpoint_account`, an added
    # key computed from the same evidence: ftqual.verification.checkpoint_account, its figures held against
    # these runs by tests/unit/verification/checks/test_checkpoint_account.py): every other key, the verdict
    # included, must be identical.
    added_later = {"cause", "cause_evidence", "excerpts", "checkpoint_account"}
    # The metrics of how a run ended (ftqual.verification.evidence.endings: the final exit codes, a silent
    # end, restarts from scratch or without progress) are optional keys added later too, held by
    # tests/unit/verification/evidence/test_endings.py; every other metric must be identical.
    # So is the stop of a fault injected more than once (recurring_fault_outcome, held by
    # tests/unit/verification/checks/test_recurring.py): every other check must be identical.
    for report in (want, got):
        if isinstance(report.get("metrics"), dict):
            report["metrics"] = {k: v for k, v in report["metrics"].items() if k not in ENDING_METRICS}
        if isinstance(report.get("checks"), list):
            report["checks"] = [c for c in report["checks"] if c.get("id") not in ADDED_CHECKS]
    for key in sorted((want.keys() | got.keys()) - added_later):
        assert got.get(key) == want.get(key), f"{name}: {key} differs"


@pytest.mark.parametrize(("name", "run", "baseline"), cases(), ids=lambda value: str(value)[-60:])
def test_recorded_runs(name, run, baseline):
    report = build_report(
        str(run), str(baseline) if baseline else None, DEFAULT_REPLAY_TOLERANCE, DEFAULT_BASELINE_TOLERANCE
    )
    _same(name, report)


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_runs(tmp_path, name):
    generate(Spec(**GENERATED[name]), tmp_path / name)
    report = build_report(str(tmp_path / name), None, DEFAULT_REPLAY_TOLERANCE, DEFAULT_BASELINE_TOLERANCE)
    _same(f"generated__{name}", report)


def test_every_recording_is_compared():
    """No recording is left without its run (a renamed fixture would silently drop out of the test)."""
    names = {name for name, _, _ in cases()} | {f"generated__{name}" for name in GENERATED}
    stale = {path.stem for path in RECORDED.glob("*.json")} - names
    assert not stale
    assert len(names & {path.stem for path in RECORDED.glob("*.json")}) >= 50


@pytest.mark.parametrize("name", ["kill_restarts3", "loss_divergence", "resumed_from_zero", "hang"])
def test_small_chunks_and_windows(tmp_path, monkeypatch, name):
    """Spilled chunks, many windows and many blocks give the same report as one of each."""
    from ftqual.verification.checks import series
    from ftqual.verification.evidence import iterations
    from ftqual.verification.evidence.scan import train_blocks

    generate(Spec(**GENERATED[name]), tmp_path / name)
    monkeypatch.setattr(iterations, "CHUNK_ROWS", 7)
    monkeypatch.setattr(series, "WINDOW", 16)
    monkeypatch.setattr(train_blocks, "BLOCK_BYTES", 3000)
    report = build_report(str(tmp_path / name), None, DEFAULT_REPLAY_TOLERANCE, DEFAULT_BASELINE_TOLERANCE)
    _same(f"generated__{name}", report)


@pytest.mark.parametrize("name", ["kill__with_baseline", "hang__with_baseline"])
def test_small_windows_with_baseline(monkeypatch, name):
    from ftqual.verification.checks import series
    from ftqual.verification.evidence import iterations

    monkeypatch.setattr(iterations, "CHUNK_ROWS", 3)
    monkeypatch.setattr(series, "WINDOW", 4)
    for case, run, baseline in cases():
        if case.endswith(name):
            report = build_report(
                str(run), str(baseline), DEFAULT_REPLAY_TOLERANCE, DEFAULT_BASELINE_TOLERANCE
            )
            _same(case, report)
