"""Fixtures of the preflight tests: contexts built from made-up facts."""

from __future__ import annotations

import pytest

from ftqual.preflight.checks import Context
from ftqual.preflight.nvrx_args import ParseResult
from ftqual.preflight.probes import Facts
from ftqual.scenario.model import resolve
from ftqual.stack.facts import resolve_for_stack
from tests.support.preflight import good_facts

# The walkthrough's GPU settings: what the preflight judges on a real run.
GPU_RUN = {
    "workload": "megatron",
    "megatron_path": "/opt/mlm",
    "train_iters": 30,
    "timeouts": {"setup": 900, "step": 120, "checkpointing": 600, "out_of_section": 180},
}


@pytest.fixture
def make_ctx():
    """make_ctx(config_dict, facts=None, stack=None) -> Context, with `auto` resolved on the facts' stack."""

    def _make(raw: dict | None = None, facts: Facts | None = None, **fact_overrides) -> Context:
        raw = {**GPU_RUN, **(raw or {})}
        if "scenarios" in raw:  # every workflow config has its baseline
            raw["scenarios"] = {"baseline": {"fault": "none"}, **raw["scenarios"]}
        cfg = resolve(raw, env={})
        f = facts or good_facts(**fact_overrides)
        resolved = resolve_for_stack(
            f.stack, cfg.workload, cfg.defaults.transformer_impl, cfg.defaults.dist_optimizer
        )
        return Context(facts=f, cfg=cfg, resolved=resolved)

    return _make


@pytest.fixture
def ok_parse() -> ParseResult:
    return ParseResult(
        True,
        None,
        {
            "rank_section_timeouts": {"setup": 900.0, "step": 120.0, "checkpointing": 600.0},
            "rank_out_of_section_timeout": 180.0,
        },
    )
