"""config/README.md describes no setting a second time: each setting's description is its `description` in
config/schema.yaml, and the settings tables of config/README.md name only settings the schema has, each in a
short row (a default and a gist), never a second long description."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "config" / "README.md"
SCHEMA = ROOT / "config" / "schema.yaml"
MAX_ROW = 300  # characters: a longer row is a second description; the schema's description holds it
NAME = re.compile(r"`([A-Za-z_][\w.]*)`")


def schema_names() -> dict[str, list[dict]]:
    """Every property name anywhere in the schema (top level, $defs, scenario, nested blocks) -> its nodes."""
    names: dict[str, list[dict]] = {}

    def walk(node):
        if isinstance(node, dict):
            for group in ("properties", "$defs"):
                for key, sub in (node.get(group) or {}).items():
                    names.setdefault(key, []).append(sub if isinstance(sub, dict) else {})
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(yaml.safe_load(SCHEMA.read_text(encoding="utf-8")))
    return names


def settings_rows() -> list[tuple[int, str, list[str]]]:
    """(line number, row, the settings its first cell names) of every settings table: a table whose header's
    first cell is `key` or `setting` (the scenario, fault, preset and rerun tables describe other things)."""
    rows = []
    in_settings = False
    lines = README.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines, 1):
        if not line.startswith("|"):
            in_settings = False
            continue
        first = line.strip("|").split("|", 1)[0].strip()
        if i > 1 and not lines[i - 2].startswith("|"):  # a header row
            in_settings = first.split(" ", 1)[0] in ("key", "setting")
            continue
        if not in_settings or set(first) <= set("-: "):
            continue
        rows.append((i, line, NAME.findall(first.split("(", 1)[0])))
    return rows


def test_the_settings_tables_are_found():
    named = {n for _, _, names in settings_rows() for n in names}
    assert {"workload", "timeouts", "checkpoint_damage", "faults", "checkpoint_dir"} <= named


def test_every_setting_in_config_readme_is_in_the_schema():
    known = schema_names()
    missing = [
        f"config/README.md:{i}: `{n}`"
        for i, _, names in settings_rows()
        for n in names
        if n.split(".")[-1] not in known
    ]
    assert not missing, "settings the schema does not have:\n" + "\n".join(missing)


def test_no_row_is_a_second_description():
    long = [f"config/README.md:{i}: {len(row)} chars" for i, row, _ in settings_rows() if len(row) > MAX_ROW]
    assert not long, (
        f"settings rows longer than {MAX_ROW} characters (move the description to config/schema.yaml's "
        "description and keep the row's gist):\n" + "\n".join(long)
    )


def test_every_row_names_a_setting():
    nameless = [f"config/README.md:{i}: {row[:60]}" for i, row, names in settings_rows() if not names]
    assert not nameless, "\n".join(nameless)
