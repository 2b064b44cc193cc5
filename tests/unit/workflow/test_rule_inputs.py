"""ftqual.workflow.rule_inputs: what the rules ask of the plan (rules/common.smk wraps each by wildcards),
without Snakemake: ordering inputs only while they matter, a run's resources, the summary's command."""

from __future__ import annotations

import dataclasses
import shlex
import sys
from pathlib import Path

import pytest

from ftqual.scenario import model as scenarios
from ftqual.stack.identity import StackIdentity
from ftqual.workflow import plan, rule_inputs

REPO = Path(__file__).resolve().parents[3]
STACK = StackIdentity({"python": "3.11", "torch": "2.9.0", "executor": "local"}, {"workload": "smoke"})


def ancient(path):
    return ("ancient", path)  # what Snakemake's ancient() marks: ordering only


@pytest.fixture
def found(tmp_path):
    config = scenarios.read_config_file(REPO / "config" / "config.yaml")
    return plan.make(
        config,
        basedir=REPO,
        invocation=plan.Invocation(executor_plugin="dryrun"),
        cwd=tmp_path,
        python=sys.executable,
        env={},
        probe=lambda workdir, **kw: STACK,
    )


def test_a_run_waits_for_the_preflight_and_the_baseline_s_verdict_until_it_exists(found, tmp_path):
    slot = found.slots["kill"].name
    inputs = rule_inputs.run_scenario(found, "kill", slot, ancient)
    assert inputs == {
        "preflight": ("ancient", found.preflight_report()),
        "baseline": ("ancient", found.current_verify_reports()["baseline"]),
    }
    baseline = rule_inputs.run_scenario(found, "baseline", found.slots["baseline"].name, ancient)
    assert baseline == {"preflight": ("ancient", found.preflight_report())}  # it waits for no baseline
    record = tmp_path / "results" / "kill" / slot / "attempt.json"
    record.parent.mkdir(parents=True)
    record.write_text("{}")
    assert (
        rule_inputs.run_scenario(found, "kill", slot, ancient) == {}
    )  # an attempt that exists waits for none


def test_a_verification_reads_the_baseline_s_record_only_until_its_verdict_exists(found, tmp_path):
    slot = found.slots["kill"].name
    own = f"results/kill/{slot}"
    assert rule_inputs.verify(found, "kill", slot, ancient) == {
        "run": f"{own}/attempt.json",
        "baseline": ("ancient", f"{found.slot_dir('baseline')}/attempt.json"),
    }
    assert rule_inputs.verify(found, "baseline", slot, ancient) == {
        "run": f"results/baseline/{slot}/attempt.json"
    }
    (tmp_path / own).mkdir(parents=True)
    (tmp_path / own / "verify.json").write_text("{}")
    assert rule_inputs.verify(found, "kill", slot, ancient) == {"run": f"{own}/attempt.json"}


def test_a_single_node_run_asks_for_gpus_and_a_multinode_run_per_node(found):
    one = found.scenarios["kill"]
    assert rule_inputs.run_resources(one) == {
        "gpu": one.gpus_per_node, "gres": None, "nodes": 1, "mpi": None, "tasks_per_node": None,
    }  # fmt: skip
    spare = dataclasses.replace(one, nnodes=2, spare_nodes=1, gpus_per_node=1)
    assert rule_inputs.run_resources(spare) == {
        "gpu": None, "gres": "gpu:1", "nodes": 3, "mpi": "srun", "tasks_per_node": 2,
    }  # fmt: skip
    wide = dataclasses.replace(one, nnodes=2, gpus_per_node=4)
    assert rule_inputs.run_resources(wide)["tasks_per_node"] == 4


def test_expectation_plots_and_the_summary_command(found):
    assert rule_inputs.expectation(found, "kill") == {"expect": "pass", "failing": []}
    negative = dataclasses.replace(found.scenarios["kill"], expect="fail", expect_failing=("clean_finish",))
    neg_plan = dataclasses.replace(found, cfg=dataclasses.replace(found.cfg, scenarios=(negative,)))
    assert rule_inputs.expectation(neg_plan, "kill") == {"expect": "fail", "failing": ["clean_finish"]}
    faulted = [s.name for s in found.cfg.fault_scenarios]
    assert faulted and rule_inputs.summary_plots(found) == [f"timeline_{n}" for n in faulted] + [
        "loss_comparison",
        "checkpoints",
    ]
    reports = {n: f"{n}.json" for n in found.scenarios}
    command = rule_inputs.summary_command(
        found, {"preflight": "pre.json", **reports}, "out/summary.json", REPO, "/py"
    )
    cli = plan.ftqual_cli(REPO, "/py")
    assert command.startswith(cli + " ")
    argv = shlex.split(command[len(cli) :])
    assert argv == found.summary_argv("pre.json", reports, "out")
