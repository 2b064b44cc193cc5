"""Calculated timeouts through the config and the launcher: `calc_ft_timeouts` reaches the launcher as
NVRX_CALC_FT_TIMEOUTS=1 and the workload (Megatron's path included) as `--calc-ft-timeouts`; a stale
ft_state.json is refused in fixed mode and kept in calculated mode; bad values are one line, nothing made."""

from __future__ import annotations

import pytest

from ftqual.scenario import model as scenarios
from tests.support.launch import checkpoint_dir


@pytest.fixture
def megatron_env(base_env, megatron_checkout):
    return {**base_env, "NVRX_WORKLOAD": "megatron", "MEGATRON_PATH": str(megatron_checkout)}


def test_the_config_setting_reaches_the_launcher_and_keeps_fixed_fingerprints():
    plain = scenarios.resolve({}, env={})
    calc = scenarios.resolve({"calc_ft_timeouts": True}, env={})
    hang = calc.by_name["hang"]
    assert scenarios.launcher_env(calc, hang)["NVRX_CALC_FT_TIMEOUTS"] == "1"
    assert "NVRX_CALC_FT_TIMEOUTS" not in scenarios.launcher_env(plain, plain.by_name["hang"])
    assert calc.fingerprint(hang) != plain.fingerprint(plain.by_name["hang"])
    with pytest.raises(scenarios.ConfigError, match="no recommendation"):
        scenarios.resolve({"calc_ft_timeouts": True, "timeouts_from": dict(hang.timeouts.as_dict())}, env={})


def test_megatron_gets_calc_ft_timeouts(megatron_env, run_launch):
    result = run_launch({**megatron_env, "NVRX_CALC_FT_TIMEOUTS": "1"})
    assert result.rc == 0, result.err
    assert "--calc-ft-timeouts" in result.argv
    assert "--calc-ft-timeouts" not in run_launch(megatron_env).argv


def test_ft_state_refused_when_fixed_kept_when_calculated(megatron_env, run_launch, tmp_path):
    ckpt = checkpoint_dir(tmp_path, "5", [5])
    (tmp_path / "ckpt" / "ft_state.json").write_text("{}")
    env = {**megatron_env, "NVRX_CHECKPOINT_DIR": ckpt}
    fixed = run_launch(env)
    assert fixed.rc == 2 and "ft_state.json" in fixed.err
    assert run_launch({**env, "NVRX_RUN_ID": "r2", "NVRX_CALC_FT_TIMEOUTS": "1"}).rc == 0


def test_a_bad_value_is_one_line(megatron_env, run_launch):
    result = run_launch({**megatron_env, "NVRX_CALC_FT_TIMEOUTS": "yes"})
    assert result.rc == 2 and "NVRX_CALC_FT_TIMEOUTS must be 0 or 1" in result.err
