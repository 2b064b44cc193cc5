"""replay exact: the workers' environment deterministic training needs; tolerance leaves it as it was."""

from ftqual.launch.run import DETERMINISTIC_ENV, child_env


def test_exact_sets_what_deterministic_mode_requires_and_tolerance_does_not():
    exact = child_env({}, deterministic=True)
    assert exact["NCCL_ALGO"] == "Ring" and exact["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert DETERMINISTIC_ENV.items() <= exact.items()
    assert not DETERMINISTIC_ENV.keys() & child_env({}).keys()
