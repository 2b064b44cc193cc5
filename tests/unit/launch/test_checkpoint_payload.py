"""checkpoint_payload_mb, the setting added through the table (ftqual.launch.fields): from the config to
NVRX_SMOKE_CHECKPOINT_MB, the launcher's Settings and the smoke workload's --smoke-checkpoint-mb, which writes
that many MiB of random bytes into every checkpoint it saves."""

from __future__ import annotations

import pytest

from ftqual.launch import settings
from ftqual.scenario.model import from_resolved, launcher_env, resolve
from tests.unit.launch.test_launch_extended_faults import assert_refused, body
from tests.unit.launch.test_smoke_workload import smoke


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


def test_every_save_holds_the_payload(repo_root, tmp_path):
    ckpt = tmp_path / "ckpt"
    smoke(repo_root, ckpt, "--train-iters=4", "--smoke-checkpoint-mb=2")
    payloads = sorted(ckpt.glob("iter_*/smoke_payload.bin"))
    assert [p.parent.name for p in payloads] == ["iter_0000002", "iter_0000004"]
    data = payloads[0].read_bytes()
    assert len(data) == 2 << 20 and data != payloads[1].read_bytes() and len(set(data[:4096])) > 200
