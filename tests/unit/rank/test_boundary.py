"""ftqual.rank runs inside every training rank: it imports the standard library and ftqual.contract only (and
NVRx's own modules, lazily, where the rank hooks or injects through them), so a rank needs neither the
project's dependencies nor the rest of the package. And every fault the wrapper accepts has its action."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from ftqual import contract
from ftqual.rank import exactness, faults, ids, recurring

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "ftqual" / "rank"
MODULES = sorted(f"ftqual.rank.{p.stem}" for p in PACKAGE.glob("*.py") if p.stem != "__init__")
# NVRx's, imported inside the function that needs them, each failure handled: not a condition of the rank
LAZY_NVRX = {
    ("sections", "nvidia_resiliency_ext.fault_tolerance.rank_monitor_client"),
    ("faults", "nvidia_resiliency_ext.shared_utils"),
}


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.add(node.module)
    return found


def allowed(name: str) -> bool:
    top = name.partition(".")[0]
    return (
        top in sys.stdlib_module_names
        or name in ("ftqual", "ftqual.contract")
        or name.startswith("ftqual.rank")
    )


def test_every_import_of_the_package_is_the_standard_library_s_or_the_contract():
    assert len(MODULES) >= 10
    for path in sorted(PACKAGE.glob("*.py")):
        extra = {name for name in imports_of(path) if not allowed(name)}
        assert extra == {name for stem, name in LAZY_NVRX if stem == path.stem}, path.name


def test_the_package_imports_in_an_interpreter_without_site_packages():
    """-I -S: no site-packages, no PYTHONPATH, so neither the editable install nor any dependency is there;
    the checkout on sys.path, as the entry script puts it there. Every module loaded is the standard
    library's, the contract or the rank's."""
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "before = set(sys.modules)\n"
        f"for name in {MODULES!r}:\n"
        "    __import__(name)\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60, cwd="/"
    )
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout)
    assert set(MODULES) <= set(loaded)
    assert [name for name in loaded if not allowed(name)] == []


def test_every_fault_the_rank_injects_has_an_action():
    """The registry's faults a rank injects (every injected kind but a campaign, whose faults are its plan's)
    name an action of the dispatch table, and a preparation of its table where they need one; the tables hold
    nothing no entry names."""
    injected = [f for f in contract.FAULT_KINDS.values() if f.injected and f.family != "campaign"]
    assert {f.act for f in injected} == set(faults.ACTIONS)
    assert (
        {f.rank_prepares for f in injected} - {None}
        == set(faults.PREPARATIONS)
        == set(contract.RANK_PREPARATIONS)
    )
    assert set(faults.FREEZABLE) <= set(faults.ACTIONS)
    assert recurring.TRIGGERS[1:] == contract.RECURS_AT
    assert exactness.TAMPERS == contract.TAMPERS
    assert {f.tampers for f in injected} - {None} == set(exactness.RESTORE_TAMPERS) | {exactness.STALE_SAVE}


def test_every_timing_an_entry_takes_is_the_wrappers():
    """The registry writes the timings out (it imports nothing of ours): each is one the wrapper takes."""
    assert set(contract.ANY_TIMING) == set(ids.TIMINGS)
    assert set(contract.WRITING_PHASES) <= set(ids.SAVE_PHASES)
