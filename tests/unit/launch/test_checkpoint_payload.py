"""checkpoint_payload_mb, the setting added through the table (ftqual.scenario.fields): from the config to
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
    """The payload is in the rank's own torch_dist shard (one rank here: `__0_0.distcp`), random (zlib cannot
    shrink it), in every save; the run's last-rank output prints Megatron's save-checkpoint timer."""
    import zlib

    ckpt = tmp_path / "ckpt"
    out = smoke(repo_root, ckpt, "--train-iters=4", "--smoke-checkpoint-mb=2")
    shards = sorted(ckpt.glob("iter_*/__0_0.distcp"))
    assert [p.parent.name for p in shards] == ["iter_0000002", "iter_0000004"]
    for shard in shards:
        data = shard.read_bytes()
        assert 2 << 20 <= len(data) < 3 << 20
        assert len(zlib.compress(data[-(1 << 20) :])) > 0.9 * (1 << 20)  # incompressible
    assert not list(ckpt.glob("iter_*/smoke_payload.bin"))
    timers = [line for line in out if line.startswith("    save-checkpoint ")]
    assert len(timers) == 2 and all(
        line.startswith("    save-checkpoint " + "." * 32 + ": (") for line in timers
    )
    # a second run loads the last save, payload included, and says how long the load took
    again = smoke(repo_root, ckpt, "--train-iters=6", "--smoke-checkpoint-mb=2")
    assert any("successfully loaded checkpoint" in line and "at iteration 4" in line for line in again)
    assert any(line.startswith("    load-checkpoint " + "." * 32 + ": (") for line in again)
