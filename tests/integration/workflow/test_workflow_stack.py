"""A verdict belongs to the stack that earned it: real runs (smoke workload, real ft_launcher) across a change
of the stack under test.

The steps run in the order written, on one module-scoped workspace:
(1) pass; the summary and junit.xml name the stack; a rerun on the same stack runs only the gate;
(2) a second install of NVRx on the path (the real package, its version raised): `ftqual status` says the
    stack changed, the plan requalifies every scenario naming the change, the run passes on the new stack with
    fresh run IDs, and the report names the change; a rerun there runs only the gate;
(3) back on the first stack: its passed attempts are reused (settings and stack that passed).
A changed Megatron tree under the same path is a dry-run test below (its key, without training Megatron).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.workflow import (
    FAST_KILL,
    copy_project,
    job_stats,
    project_with,
    read_json,
    requalified,
    run_snakemake,
    snakemake_env,
    write_yaml,
)

PROFILE = ("--profile", "profiles/local")
FAST = FAST_KILL
ALT_VERSION = "0.7.0.post1"


def second_nvrx_install(dest: Path) -> Path:
    """A second, real install of NVRx (this interpreter's package, copied) whose metadata says ALT_VERSION."""
    import nvidia_resiliency_ext

    package = Path(nvidia_resiliency_ext.__file__).parent
    [info] = package.parent.glob("nvidia_resiliency_ext-*.dist-info")
    dest.mkdir(parents=True)
    shutil.copytree(package, dest / package.name, ignore=shutil.ignore_patterns("__pycache__"))
    alt_info = dest / f"nvidia_resiliency_ext-{ALT_VERSION}.dist-info"
    shutil.copytree(info, alt_info)
    meta = alt_info / "METADATA"
    meta.write_text(re.sub(r"(?m)^Version: .*$", f"Version: {ALT_VERSION}", meta.read_text()))
    return dest


def run(project, *args, env=None, timeout=900):
    return run_snakemake(project, *PROFILE, *args, env=env, timeout=timeout)


def cited(project) -> dict[str, str]:
    summary = read_json(project / "results" / "summary.json")
    return {sc["name"]: sc["run_id"] for sc in summary["scenarios"]}


def junit_properties(project) -> dict[str, dict[str, str]]:
    root = ET.parse(project / "results" / "junit.xml").getroot()
    return {
        suite.get("name"): {p.get("name"): p.get("value") for p in suite.iter("property")}
        for suite in root.iter("testsuite")
    }


def status(project, env=None) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "ftqual", "status", str(project)],
        env={**snakemake_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    base = tmp_path_factory.mktemp("stack")
    project = project_with(base / "project", FAST)
    return project


@pytest.fixture(scope="module")
def alt_env(tmp_path_factory):
    return {"PYTHONPATH": str(second_nvrx_install(tmp_path_factory.mktemp("nvrx") / "site"))}


def test_1_pass_names_the_stack_and_a_rerun_on_it_runs_only_the_gate(project):
    first = run(project)
    assert first.returncode == 0, first.stdout
    summary = read_json(project / "results" / "summary.json")
    assert summary["verdict"] == "pass"
    ident = summary["stack_identity"]
    assert ident["digest"] and ident["parts"]["nvrx"] == "0.7.0" and ident["parts"]["executor"] == "local"
    assert set(ident["by_scenario"].values()) == {ident["digest"]}
    md = (project / "results" / "summary.md").read_text()
    assert f"Every verdict above was earned on stack `{ident['digest']}`" in md
    assert "| nvidia-resiliency-ext | 0.7.0 |" in md
    # the storage floor the preflight measured, and each scenario's checkpoint and restart account next to it
    floor = summary["checkpoints"]["floor"]
    assert floor is not None and floor["write_gbps"] > 0 and floor["read_gbps"] > 0
    assert summary["checkpoints"]["by_scenario"]["kill"]["restarts"][0]["load_s"] is not None
    assert "## Checkpoints and restarts" in md and "Storage floor (preflight" in md
    props = junit_properties(project)
    assert props["kill"]["stack"] == ident["digest"] and props["kill"]["stack.nvrx"] == "0.7.0"
    record = read_json(next((project / "results" / "kill").glob("*-1/attempt.json")))
    assert record["stack_digest"] == ident["digest"] and record["machine"]["node"]
    assert "unchanged since the latest attempts" in status(project)

    again = run(project, "-n")
    assert job_stats(again.stdout) == {"gate": 1}, again.stdout


def test_2_another_nvrx_requalifies_every_scenario_naming_the_change(project, alt_env):
    before = cited(project)
    told = status(project, alt_env)
    assert "CHANGED since the latest attempts of baseline, kill" in told, told
    assert f"nvidia-resiliency-ext 0.7.0 -> {ALT_VERSION}" in told, told

    plan = run(project, "-n", env=alt_env)
    assert job_stats(plan.stdout) == {"preflight": 1, "run_scenario": 2, "verify": 2, "summary": 1, "gate": 1}
    change = rf"nvidia-resiliency-ext 0\.7\.0 -> {re.escape(ALT_VERSION)}"
    assert requalified(plan.stdout, ("baseline", "kill"), change), plan.stdout

    moved = run(project, env=alt_env)
    assert moved.returncode == 0, moved.stdout
    summary = read_json(project / "results" / "summary.json")
    assert summary["verdict"] == "pass"
    now = cited(project)
    assert all(now[name] != before[name] for name in before), (before, now)  # requalified: fresh run IDs
    ident = summary["stack_identity"]
    assert ident["parts"]["nvrx"] == ALT_VERSION
    assert set(ident["requalified"]) == {"baseline", "kill"}
    md = (project / "results" / "summary.md").read_text()
    assert "Requalified **kill**: the stack changed since attempt" in md and ALT_VERSION in md
    props = junit_properties(project)
    assert props["kill"]["stack.nvrx"] == ALT_VERSION and ALT_VERSION in props["kill"]["attempt_reason"]
    # the old attempts and their run directories are kept
    assert all((project / "runs" / run_id).is_dir() for run_id in before.values())

    plan = run(project, "-n", env=alt_env)
    assert job_stats(plan.stdout) == {"gate": 1}, plan.stdout


def test_3_back_on_the_first_stack_its_passed_attempts_stand(project):
    first_stack = run(project)
    assert first_stack.returncode == 0, first_stack.stdout
    assert job_stats(first_stack.stdout) == {"gate": 1}, first_stack.stdout
    summary = read_json(project / "results" / "summary.json")
    assert summary["stack_identity"]["parts"]["nvrx"] == "0.7.0" and summary["verdict"] == "pass"


def megatron_tree(root: Path) -> Path:
    core = root / "megatron" / "core"
    (core / "datasets").mkdir(parents=True)
    (core / "package_info.py").write_text("MAJOR = 0\nMINOR = 19\nPATCH = 0\nPRE_RELEASE = ''\n")
    (core / "datasets" / "helpers.cpp").write_text("int x;\n")
    (root / "pretrain_gpt.py").write_text("pass\n")
    return root


def attempt_lines(stdout: str) -> dict[str, str]:
    return dict(re.findall(r"^ftqual: (\w+): attempt (\w+-\d+)", stdout, re.M))


def test_a_changed_megatron_tree_under_the_same_path_is_another_stack(tmp_path):
    project = copy_project(tmp_path / "project")
    tree = megatron_tree(tmp_path / "mlm")
    write_yaml(project / "mlm.yaml", {"workload": "megatron", "megatron_path": str(tree)})
    args = ("-n", "--configfile", "mlm.yaml")
    first = run(project, *args)
    assert first.returncode == 0, first.stdout
    slots = attempt_lines(first.stdout)
    assert set(slots) == {"baseline", "kill", "hang"}
    # Megatron's first start compiles its dataset helper into the tree: the same stack
    (tree / "megatron" / "core" / "datasets" / "helpers_cpp.cpython-312-x86_64-linux-gnu.so").write_bytes(
        b"\0"
    )
    assert attempt_lines(run(project, *args).stdout) == slots
    # a source changed (another release unpacked over the same path): every attempt key changes
    (tree / "megatron" / "core" / "datasets" / "helpers.cpp").write_text("int y;\n")
    changed = attempt_lines(run(project, *args).stdout)
    assert all(changed[name] != slots[name] for name in slots), (slots, changed)
