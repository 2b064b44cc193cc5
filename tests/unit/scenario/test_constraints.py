"""The cross-field rules (ftqual.scenario.constraints) hold alike in both vocabularies: over a seeded grid of
the
settings they relate, the workflow's config refuses a scenario exactly when the launcher refuses the same
settings as its environment, and both say the same rule."""

from __future__ import annotations

import random

import pytest

from ftqual.launch.settings import SettingsError, load_settings
from ftqual.scenario import constraints
from ftqual.scenario import model as scenarios

GRID = {
    "nnodes": (1, 2),
    "gpus_per_node": (1, 2, 3, 4),
    "tp": (1, 2, 4),
    "pp": (1, 2),
    "rank": (0, 1, 2, 3, 5, 8),
    "injections": (1, 2, 3),
    "save_interval": (2, 5),
    "train_iters": (6, 10, 20),
    "fault": ("kill", "hang", "node_loss"),
    "fault_timing": ("checkpoint", "in_save"),
    "hang_placement": ("step", "step", "setup"),
}


def cases(n: int = 300, seed: int = 20261202):
    rng = random.Random(seed)
    for _ in range(n):
        yield {key: rng.choice(values) for key, values in GRID.items()}


def config_problems(case: dict) -> list[str]:
    top = {k: case[k] for k in ("nnodes", "gpus_per_node", "tp", "pp", "train_iters", "save_interval")}
    entry = {k: case[k] for k in ("fault", "rank", "injections", "fault_timing", "hang_placement")}
    if case["fault"] == "node_loss":
        entry["join_timeout"] = 60
    raw = {**top, "scenarios": {"baseline": {"fault": "none"}, "x": entry}}
    try:
        scenarios.resolve(raw, env={})
    except scenarios.ConfigError as exc:
        return [line.strip() for line in str(exc).splitlines()]
    return []


def launcher_problem(case: dict, tmp_path) -> str | None:
    env = {
        "NVRX_WORKLOAD": "smoke",
        "NVRX_WORK_DIR": str(tmp_path),
        "NVRX_RUN_ID": "x",
        "RDZV_ENDPOINT": "127.0.0.1:29500",
        "NNODES": str(case["nnodes"]),
        "GPUS_PER_NODE": str(case["gpus_per_node"]),
        "TP": str(case["tp"]),
        "PP": str(case["pp"]),
        "TRAIN_ITERS": str(case["train_iters"]),
        "SAVE_INTERVAL": str(case["save_interval"]),
        "NVRX_DEMO_FAULT": case["fault"],
        "NVRX_FAULT_RANK": str(case["rank"]),
        "NVRX_INJECTIONS": str(case["injections"]),
        "NVRX_FAULT_TIMING": case["fault_timing"],
        "NVRX_HANG_PLACEMENT": case["hang_placement"],
    }
    try:
        load_settings(env)
    except SettingsError as exc:
        return str(exc)
    return None


RULE_WORDS = (
    "is outside the world of",
    "must be divisible by",
    "must divide the model",
    "each fault needs a new checkpoint",
    "in_save needs",
    "node_loss needs",
    "is on the first node",
    "node_loss takes one injection",
    "setup needs",
    "setup places a rank fault",
)


def rule_of(message: str) -> str | None:
    return next((words for words in RULE_WORDS if words in message), None)


def test_the_config_and_the_launcher_refuse_the_same_settings(tmp_path):
    compared = refused = 0
    for case in cases():
        config_side = [p for p in config_problems(case) if rule_of(p)]
        launcher_side = launcher_problem(case, tmp_path)
        if launcher_side is not None and rule_of(launcher_side) is None:
            continue  # a rule of the launcher's own (e.g. SAVE_INTERVAL below TRAIN_ITERS): not shared
        compared += 1
        assert bool(config_side) == bool(launcher_side), (case, config_side, launcher_side)
        if launcher_side:
            refused += 1
            # the launcher stops at its first problem; the config names it among all of them
            assert rule_of(launcher_side) in {rule_of(p) for p in config_side}, (
                case,
                config_side,
                launcher_side,
            )
    assert compared > 200 and 0 < refused < compared  # the grid exercises both outcomes


@pytest.mark.parametrize(
    ("vocabulary", "said"),
    [(constraints.CONFIG, "rank 4 is outside the world of 2 rank(s) (nnodes*gpus_per_node)"),
     (constraints.ENVIRONMENT, "NVRX_FAULT_RANK=4 is outside the world of 2 rank(s) (NNODES*GPUS_PER_NODE)")],
)  # fmt: skip
def test_each_vocabulary_names_its_own_settings(vocabulary, said):
    assert constraints.rank_outside_world(vocabulary, 4, 2).startswith(said)
    assert constraints.rank_outside_world(vocabulary, 1, 2) is None
