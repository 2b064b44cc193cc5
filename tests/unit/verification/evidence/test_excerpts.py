"""verify.json's `excerpts` (ftqual.verification.evidence.excerpts): the log lines the non-passing checks
cite, quoted by `ftqual verify` from regular files inside the run only, so that the report reads them from
the verify report and never reopens a run's logs."""

from __future__ import annotations

import os

import pytest

from ftqual.verification import schema as verify_schema
from ftqual.verification.evidence.excerpts import EXCERPT_MAX, EXCERPTS_PER_CHECK, cited, excerpts


@pytest.mark.timeout(30)
def test_evidence_is_only_quoted_from_regular_files_inside_the_run(tmp_path):
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "ok.log").write_text("first\nsecond\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("do not quote me\n")
    (run / "logs" / "out").symlink_to(secret)
    os.mkfifo(run / "logs" / "fifo")
    (run / "logs" / "long.log").write_bytes(b"x" * (3 << 20) + b"\nafter\n")
    paths = ["logs/ok.log", "logs/out", "../secret.txt", str(secret), "logs/fifo", "logs/long.log"]
    lines = [2, 1, 1, 1, 1, 2]
    checks = [
        {"id": p, "status": "fail", "evidence": [{"path": p, "line": n}]}
        for p, n in zip(paths, lines, strict=True)
    ]
    assert excerpts(run, checks) == {"logs/ok.log:2": "second", "logs/long.log:2": "after"}


def test_only_the_unquoted_lines_of_non_passing_checks_are_quoted(tmp_path):
    (tmp_path / "a.log").write_text("".join(f"  line {n} {'y' * 300}\n" for n in range(1, 21)))
    cite = [{"path": "a.log", "line": n} for n in range(1, 10)]
    checks = [
        {"id": "p", "status": "pass", "evidence": [{"path": "a.log", "line": 15}]},
        {"id": "s", "status": "skip", "evidence": [{"path": "a.log", "line": 16}]},
        {"id": "f", "status": "fail", "evidence": [{"path": "a.log", "line": 20, "text": "own"}, *cite]},
        {"id": "i", "status": "inconclusive", "evidence": [{"path": "a.log", "line": 0}, {"path": "a.log"}]},
    ]
    got = excerpts(tmp_path, checks)
    # the first EXCERPTS_PER_CHECK entries of the failed check, less the one with its own text
    assert sorted(got) == [f"a.log:{n}" for n in range(1, EXCERPTS_PER_CHECK)]
    assert got["a.log:3"].startswith("line 3 y") and len(got["a.log:3"]) == EXCERPT_MAX


def test_verify_quotes_the_lines_its_failed_checks_cite(kill_run, verify):
    """A failed run's verify.json carries `excerpts`, each the cited line as it stands in the run, and stays
    a valid ftqual.verify/v1 report."""
    log = kill_run.root / "logs" / "train_cycle1.log"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[: len(lines) // 2]))  # the replacement cycle never finished
    code, report = verify(kill_run)
    assert code != 0 and report["verdict"] != "pass" and verify_schema.problems(report) == []
    assert isinstance(report["excerpts"], dict)  # the checks quote most lines themselves (Ref.text)
    wanted = {f"{path}:{n}" for path, ns in cited(report["checks"]).items() for n in ns}
    assert set(report["excerpts"]) <= wanted
    for where, text in report["excerpts"].items():
        rel, _, line = where.rpartition(":")
        said = (kill_run.root / rel).read_text(errors="replace").splitlines()[int(line) - 1]
        assert said.strip()[:EXCERPT_MAX] == text
