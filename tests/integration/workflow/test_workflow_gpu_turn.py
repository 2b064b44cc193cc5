"""Run by the workflow itself (no Slurm), a scenario waits for a GPU it uses while another run holds it
(ftqual.launch.gpu_turn), and says which run of which checkout: nothing is launched until it is free, then it
runs as usual. The machine's GPUs are given (FTQUAL_MACHINE_GPUS): on a machine without, no turn is taken."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ftqual.launch import gpu_turn
from tests.support.wait import stays, wait_until
from tests.support.workflow import copy_project, read_json, snakemake_cmd, snakemake_env, write_yaml


def rule_log(project: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in (project / "logs" / "run_scenario").glob("*/*.log"))


@pytest.mark.timeout(400)
def test_a_scenario_waits_for_the_gpu_another_run_holds(tmp_path):
    project = copy_project(tmp_path / "project")
    write_yaml(
        project / "only-baseline.yaml",
        {"scenarios": {name: {"fault": name, "enabled": False} for name in ("kill", "hang")}},
    )
    lock = tmp_path / "gpus.lock"
    # a run computing on GPU 0; the smoke baseline (2 ranks) shares GPUs 0 and 1, which ft_launcher looks at
    other = gpu_turn.GpuTurn(
        lock, gpu_turn.GpuSet(("0",)), "scenario kill (run kill-9) of /elsewhere (pid 4242)"
    )
    assert other.take()
    out = open(project / "snakemake.out", "w")
    proc = subprocess.Popen(
        snakemake_cmd("--profile", "profiles/local", "--configfile", "only-baseline.yaml"),
        cwd=project,
        env={**snakemake_env(), gpu_turn.LOCK_ENV: str(lock), gpu_turn.GPUS_ENV: "0,1"},
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    try:

        def waiting() -> bool:
            assert proc.poll() is None, (project / "snakemake.out").read_text()
            return "waiting for GPU 0 of GPUs 0,1: held by " in rule_log(project)

        wait_until(waiting, 180, 0.5, "the scenario to wait for GPU 0", detail=lambda: rule_log(project))
        assert "held by scenario kill (run kill-9) of /elsewhere (pid 4242)" in rule_log(project)
        # nothing launched while another run holds them: a window, looked at throughout
        launched = lambda: list((project / "runs").glob("baseline-*"))  # noqa: E731
        stays(lambda: not launched(), 3, "nothing launched while another run held GPU 0", interval=0.25)
        other.release()
        # the baseline alone qualifies nothing: the gate says INCONCLUSIVE (exit 1), the baseline passed
        assert proc.wait(timeout=300) == 1, (project / "snakemake.out").read_text()[-4000:]
    finally:
        other.release()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = rule_log(project)
    assert "got GPUs 0,1: launching" in log and "launcher exited 0" in log
    assert not list(tmp_path.glob("gpus-gpu*.lock.holder-*"))  # the run let go of them
    summary = read_json(project / "results" / "summary.json")
    assert [(sc["name"], sc["verdict"]) for sc in summary["scenarios"]] == [("baseline", "pass")]
