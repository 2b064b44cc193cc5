"""The mutation corpus (tests/unit/verification/mutations.py) against `ftqual verify`: no broken run passes.

Every mutation is applied to a fresh copy of a recorded run and verified in process; it must finish within
seconds, raise nothing, and exit non-zero when it breaks an invariant (benign controls keep the original
verdict). A few hostile ones also go through the CLI. The last test prints the corpus size and outcomes.
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from functools import cache

import pytest

from tests.unit.verification import mutations as mut

CORPUS = mut.corpus()
FULL = mut.corpus(stride=1)
BY_ID = {m.id: m for m in CORPUS}
OUTCOMES: dict[str, mut.Outcome] = {}
MAX_SECONDS = 10.0


@cache
def original_code(run: str, baseline: str | None) -> int:
    return mut.verify_in_process(mut.DATA / run, mut.DATA / baseline if baseline else None).code


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mutation", CORPUS, ids=[m.id for m in CORPUS])
def test_mutation(mutation: mut.Mutation, tmp_path):
    try:
        run, baseline = mut.materialize(mutation, tmp_path)
        outcome = mut.verify_in_process(run, baseline)
    finally:
        mut.cleanup(tmp_path)
    OUTCOMES[mutation.id] = outcome
    assert not outcome.error, outcome.error
    assert outcome.seconds < MAX_SECONDS, f"{outcome.seconds:.1f} s"
    if mutation.breaks:
        assert outcome.code != 0, f"{mutation.id} breaks '{mutation.invariant}' but verifies as pass"
    else:
        assert outcome.code == original_code(mutation.run, mutation.baseline), outcome.label


# one mutation of each of these kinds also goes through the CLI (a subprocess: no traceback, one line)
CLI_KINDS = (
    "fifo:logs:launcher.log",
    "devzero:",
    "run.json:tz_offset_s=1e+300",
    "run.json:fault_rank=²",
    "run.json:deep-nesting",
    "cycle:active_nodes-huge-range",
    "etc-passwd:launcher.log",
)
CLI_IDS = [
    next(m.id for m in FULL if m.breaks and m.id[len(m.run) + 1 :].startswith(kind)) for kind in CLI_KINDS
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mutation_id", CLI_IDS)
def test_hostile_mutations_through_the_cli(mutation_id, tmp_path, repo_root, python_exe):
    mutation = next(m for m in FULL if m.id == mutation_id)
    run, baseline = mut.materialize(mutation, tmp_path)
    cmd = [python_exe, "-m", "ftqual", "verify", str(run), "--json", str(tmp_path / "v.json")]
    if baseline is not None:
        cmd += ["--baseline", str(baseline)]
    env = {**os.environ, "PYTHONPATH": str(repo_root)}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.returncode in (1, 2, 3), (proc.returncode, proc.stdout, proc.stderr)
    if proc.returncode == 2:
        assert proc.stderr.strip().startswith("ftqual verify: ") and len(proc.stderr.splitlines()) == 1


def test_every_class_has_members_and_the_counts_are_printed(capsys):
    classes = Counter(m.klass for m in CORPUS)
    assert set(classes) == set(mut.CLASSES), set(mut.CLASSES) ^ set(classes)
    runs = {m.run for m in CORPUS}
    assert runs == {p.relative_to(mut.DATA).as_posix() for p in mut.recorded_runs()}
    labels = Counter(o.label for o in OUTCOMES.values())
    breaking = [m for m in CORPUS if m.breaks]
    with capsys.disabled():
        print(
            f"\nmutation corpus: {len(CORPUS)} mutations of {len(runs)} recorded runs "
            f"({len(breaking)} break an invariant, {len(CORPUS) - len(breaking)} benign controls); "
            f"ran {len(OUTCOMES)}: " + ", ".join(f"{k} {v}" for k, v in sorted(labels.items()))
        )
        print("  by class: " + ", ".join(f"{k} {classes[k]}" for k in mut.CLASSES))
    for mutation in breaking:
        outcome = OUTCOMES.get(mutation.id)
        assert outcome is None or outcome.code != 0, mutation.id
