"""checkpoint_payload_mb, the setting added through the table (ftqual.scenario.fields): from the config to
NVRX_SMOKE_CHECKPOINT_MB, the launcher's Settings and the smoke workload's --smoke-checkpoint-mb, which writes
that many MiB of random bytes into every checkpoint it saves (trained in
tests/integration/workload/test_smoke_workload.py)."""

from __future__ import annotations

import pytest

from ftqual.launch import settings
from ftqual.scenario.model import from_resolved, launcher_env, resolve
from tests.unit.launch.test_launch_extended_faults import assert_refused, body


def test_the_config_reaches_the_launcher_and_keeps_the_other_fingerprints(base_env):
    plain = resolve({}, env={})
    cfg = resolve(
        {
            "checkpoint_payload_mb": 2,
            "scenarios": {
                "big": {"fault": "none", "checkpoint_payload_mb": 3},
                "baseline": {"fault": "none"},
            },
        },
        env={},
    )
    big, base = cfg.by_name["big"], cfg.by_name["baseline"]
    assert (big.checkpoint_payload_mb, base.checkpoint_payload_mb) == (3, 2)
    assert launcher_env(cfg, big)["NVRX_SMOKE_CHECKPOINT_MB"] == "3"
    assert "NVRX_SMOKE_CHECKPOINT_MB" not in launcher_env(plain, plain.by_name["baseline"])
    assert cfg.fingerprint(base) != plain.fingerprint(plain.by_name["baseline"])
    assert "checkpoint_payload_mb" not in plain.shaping_settings(plain.by_name["baseline"])
    assert from_resolved(cfg.to_json()) == cfg
    s = settings.load_settings({**base_env, **launcher_env(cfg, big)}, pid=1)
    assert s.checkpoint_payload_mb == 3
    assert settings.load_settings(base_env, pid=1).checkpoint_payload_mb == 0


def test_the_smoke_workload_gets_it_only_when_set(base_env, run_launch):
    assert not any(a.startswith("--smoke-checkpoint-mb") for a in body(run_launch(base_env).argv))
    argv = run_launch({**base_env, "NVRX_SMOKE_CHECKPOINT_MB": "5"}).argv
    assert "--smoke-checkpoint-mb=5" in body(argv)


@pytest.mark.parametrize("raw", ["-1", "1.5", "65537"])
def test_a_bad_value_is_refused_in_one_line(raw, base_env, run_launch):
    assert_refused(
        run_launch({**base_env, "NVRX_SMOKE_CHECKPOINT_MB": raw}), "NVRX_SMOKE_CHECKPOINT_MB must be"
    )
