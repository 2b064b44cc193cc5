"""The versions the README says were qualified are the versions pyproject.toml pins."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def qualified_versions() -> dict[str, str]:
    """First version in each row of the README's 'Qualified versions' table."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Qualified versions", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and (m := re.match(r"[\w.]*?(\d+\.\d+(?:\.\d+)?)", cells[1])):
            rows[cells[0]] = m.group(1)
    return rows


def test_gpu_extra_pins_the_qualified_gpu_stack():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = dict(p.split("==") for p in project["optional-dependencies"]["gpu"])
    qualified = qualified_versions()
    assert pins["nvidia-resiliency-ext"] == qualified["nvidia-resiliency-ext"]
    assert pins["transformer-engine[pytorch]"] == qualified["Transformer Engine"]
    for dep in project["dependencies"]:
        name, _, version = dep.partition("==")
        if name in qualified:
            assert version == qualified[name], dep


def test_py_spy_is_pinned_where_the_ranks_run():
    """The ranks' sentinels dump stacks with py-spy: the training extras and the lock pin the version the
    README says was qualified."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    want = qualified_versions()["py-spy"]
    for extra in ("train", "gpu"):
        assert f"py-spy=={want}" in extras[extra], extra
    assert f"py-spy=={want}" in (ROOT / "requirements.lock").read_text().splitlines()
