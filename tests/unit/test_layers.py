"""The package's layers hold: no module imports from a layer above its own, at module level or lazily inside
a function (the whole AST is walked), and no two modules import each other, directly or round a circle.

`LAYERS` is the one statement of the order, bottom to top (docs/architecture.md, "Modules", cites it). A
module belongs to the layer of the longest prefix naming it; a layer may import from itself and from those
below. `ALLOWED` lists the upward imports that stand, each with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ftqual"

# Bottom to top. Each entry is one layer: the modules (and packages, with everything under them) in it.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "ftqual",
        "ftqual.contract",
        "ftqual.jsonfile",
    ),  # the version, the shared constants, records written whole
    ("ftqual.rank",),  # the code that runs in a rank: the standard library and the contract only
    ("ftqual.stack",),  # the stack under test
    ("ftqual.scenario",),  # the scenario model and its rules
    ("ftqual.preflight",),  # will the runs work here
    ("ftqual.launch",),  # one run under ft_launcher, its processes and its record
    # the verification chain: a run directory to its verdict
    ("ftqual.verification.evidence", "ftqual.verification.fastjson"),
    ("ftqual.verification.checks",),
    ("ftqual.verification.metrics",),
    ("ftqual.verification.causes",),
    ("ftqual.verification.expectation", "ftqual.verification.verdict"),
    ("ftqual.verification.schema",),
    ("ftqual.verification.campaign",),
    ("ftqual.verification", "ftqual.verification.verify", "ftqual.verification.proc_tuning"),
    ("ftqual.report",),  # reads verify reports only
    ("ftqual.workflow",),  # the Snakemake rules' functions
    ("ftqual.cli", "ftqual.__main__"),  # the entry point: dispatches every command
)

# (importer, imported) -> why the upward import stands. An entry must still be needed (a test says so).
_ARGV = (
    "the preflight builds each scenario's ft_launcher argv with the launcher's own code, lazily, so "
    "that what it checks is what the launcher will run (ftqual/preflight/flags.py)"
)
ALLOWED: dict[tuple[str, str], str] = {
    ("ftqual.preflight.flags", "ftqual.launch"): _ARGV,
    ("ftqual.preflight.flags", "ftqual.launch.command"): _ARGV,
    ("ftqual.preflight.flags", "ftqual.launch.compat"): _ARGV,
    ("ftqual.preflight.flags", "ftqual.launch.settings"): _ARGV,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> int:
    best, index = -1, None
    for i, layer in enumerate(LAYERS):
        for prefix in layer:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, index = len(prefix), i
    assert index is not None, f"{module} is in no layer of LAYERS"
    return index


def _known(name: str) -> str | None:
    """The module of ours an imported name resolves to (`ftqual.a.b.func` -> `ftqual.a.b`)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path | None = None) -> list[tuple[str, int]]:
    """Every module of ours `module` (in `path`) imports, anywhere in its body, with the line: `from pkg
    import sub` names the submodule, `from pkg import name` the package (its __init__)."""
    path = MODULES[module] if path is None else path
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        for name in names:
            target = _known(name)
            if target is not None and target != module:
                out.append((target, node.lineno))
    return sorted(set(out))


GRAPH = {module: imports_of(module) for module in MODULES}


def test_every_module_is_in_a_layer():
    for module in MODULES:
        layer_of(module)


def test_no_module_imports_from_a_layer_above_its_own():
    upward = [
        f"{MODULES[m].relative_to(ROOT)}:{line} imports {t} (layer {layer_of(t)} above {layer_of(m)})"
        for m, targets in GRAPH.items()
        for t, line in targets
        if layer_of(t) > layer_of(m) and (m, t) not in ALLOWED
    ]
    assert not upward, "imports against the layers (tests/unit/test_layers.py LAYERS):\n" + "\n".join(upward)


def test_every_allowed_upward_import_is_still_there():
    stale = [pair for pair in ALLOWED if pair[1] not in {t for t, _ in GRAPH.get(pair[0], [])}]
    assert not stale, f"ALLOWED names imports no longer made: {stale}"


def _circles() -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w, _ in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    return found


def test_no_import_circles():
    circles = _circles()
    assert not circles, "modules that import each other (round a circle):\n" + "\n".join(
        " <-> ".join(c) for c in circles
    )


def test_the_checker_sees_lazy_and_relative_imports(tmp_path):
    """The walk finds an import inside a function and resolves a relative one, as the tests above rely on."""
    source = tmp_path / "probe.py"
    source.write_text(
        "from . import verdict\n"
        "def later():\n"
        "    from ftqual.report import summary\n"
        "    import ftqual.workflow.verify_rule\n"
        "    from ftqual.verification.evidence.model import Ref\n"
    )
    found = {t for t, _ in imports_of("ftqual.verification.probe", source)}
    assert found == {
        "ftqual.verification.verdict",
        "ftqual.report.summary",
        "ftqual.workflow.verify_rule",
        "ftqual.verification.evidence.model",
    }
    assert layer_of("ftqual.verification.evidence.model") < layer_of("ftqual.verification.verdict")
    assert layer_of("ftqual.report.summary") > layer_of("ftqual.verification.probe")
