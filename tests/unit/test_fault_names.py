"""A fault's behaviour is asked of its registry entry, never branched on by its name.

Every stage asks the entry (ftqual.contract.FAULT_KINDS: its family, detection, act, preparations, timings,
...), so a new fault touches its entry, its action and its tests, nothing else (docs/architecture.md, "Adding
a fault"). This walks the AST of every module of ftqual/ and flags a comparison (`==`, `!=`, `in`, `not in`,
a `match` case) of a string literal that is a fault kind's name. Exempt: the registry module and the rank's
dispatch table (ftqual/rank/faults.py), whose job is to name them.

Two names are also words of another vocabulary: "none" (the baseline; also a checkpoint_damage, a dump tool,
a stop cause) and "campaign" (also their families). A comparison with one of those is a fault-name comparison
only when the other side speaks of a fault (its source mentions `fault`) and is not a family
(`family_of(...)`, `.family`): `family_of(s.fault) == "none"` asks the registry, `s.fault == "none"` does not.
"""

from __future__ import annotations

import ast
from pathlib import Path

from ftqual.contract import FAMILIES, FAULT_KINDS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ftqual"
EXEMPT = {"ftqual/contract.py", "ftqual/rank/faults.py"}  # the registry and the rank's dispatch table
NAMES = set(FAULT_KINDS)
SHARED_WORDS = NAMES & set(FAMILIES)
# Comparisons left in ftqual/verification/checks/, which the check-selection rework owns and rewrites now (the
# kill's exit check, a sigterm the workload handled, disk_full's filler against writer_stall's writers): the
# count of each module, which may only go down (a stale count fails too), until it is empty.


def _literals(node: ast.AST) -> list[ast.Constant]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [lit for element in node.elts for lit in _literals(element)]
    return []


def _is_family(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name == "family_of"
    if isinstance(node, ast.Attribute):
        return node.attr == "family"
    return isinstance(node, ast.Name) and node.id == "family"


def _speaks_of_a_fault(node: ast.AST) -> bool:
    return not _is_family(node) and "fault" in ast.unparse(node).lower()


def name_comparisons(source: str, path: str = "<probe>") -> list[str]:
    """Each comparison in `source` of a fault kind's name as a string literal: 'path:line: the code'."""
    found = []
    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for i, side in enumerate(sides):
                others = sides[:i] + sides[i + 1 :]
                for lit in _literals(side):
                    if lit.value not in NAMES:
                        continue
                    if lit.value in SHARED_WORDS and not any(_speaks_of_a_fault(o) for o in others):
                        continue
                    found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Match):
            subject = node.subject
            for case in node.cases:
                for pattern in ast.walk(case.pattern):
                    if not isinstance(pattern, ast.MatchValue):
                        continue
                    for lit in _literals(pattern.value):
                        if lit.value in NAMES and (
                            lit.value not in SHARED_WORDS or _speaks_of_a_fault(subject)
                        ):
                            found.append(f"{path}:{pattern.lineno}: case {lit.value!r}")
    return sorted(set(found))


def test_no_module_compares_a_fault_name_outside_the_registry():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        hits = [] if rel in EXEMPT else name_comparisons(path.read_text(encoding="utf-8"), rel)
        found += hits
    assert not found, (
        "fault names compared outside the registry: ask the entry (ftqual.contract.FAULT_KINDS) instead, "
        "adding a field where none says it (docs/architecture.md, 'Adding a fault'):\n" + "\n".join(found)
    )


def test_the_walk_flags_every_form_and_spares_families_and_other_vocabularies():
    """Negative and positive controls of the walk itself."""
    flagged = name_comparisons(
        "if s.fault == 'disk_full': pass\n"
        "if fault in ('kill', 'hang'): pass\n"
        "if 'writer_stall' != kind: pass\n"
        "if run['fault'] == 'none': pass\n"
        "match s.fault:\n"
        "    case 'node_loss': pass\n"
        "    case _: pass\n"
    )
    assert [hit.split(":")[1] for hit in flagged] == ["1", "2", "3", "4", "6"]
    spared = name_comparisons(
        "if family_of(s.fault) == 'none': pass\n"
        "if kind.family == 'campaign': pass\n"
        "if s.checkpoint_damage != 'none': pass\n"
        "if stop.by == 'none': pass\n"
        "if launcher_prepares(s.fault) == 'capped_fs': pass\n"
        "print('kill')\n"
    )
    assert spared == []


def test_the_exempt_modules_exist():
    assert all((ROOT / rel).is_file() for rel in EXEMPT)
