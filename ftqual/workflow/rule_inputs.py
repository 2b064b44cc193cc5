"""What the rules ask of the plan: inputs, resources, a verdict's expectation, the summary's command.

What the rules ask of the plan (ftqual.workflow.plan.Plan): each rule's inputs, a run's resources, a
verdict's expectation, the summary's plots and command. rules/common.smk wraps each in a function of
Snakemake's `wildcards`; Snakemake's `ancient` comes in as an argument, so that this module runs without it.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ftqual.contract import family_of
from ftqual.launch import payloads as checkpoint_payloads
from ftqual.workflow import interrupts
from ftqual.workflow import plan as workflow_plan

Ancient = Callable[[str], Any]


def run_scenario(plan: workflow_plan.Plan, scenario: str, slot: str, ancient: Ancient) -> dict[str, Any]:
    """run_scenario's inputs: the preflight first; every other scenario after the baseline's current attempt
    has a verdict. Ordering only (`ancient`), and only while the attempt is still to run: an attempt that
    exists never waits for (nor reruns after) a later preflight or baseline attempt; one that an
    interrupt left incomplete is redone, in order."""
    record = f"results/{scenario}/{slot}/attempt.json"
    if (plan.workdir / record).exists() and not interrupts.left_incomplete(plan.workdir, record):
        return {}
    inputs = {"preflight": ancient(plan.preflight_report())}
    if scenario != plan.baseline:
        inputs["baseline"] = ancient(plan.current_verify_reports()[plan.baseline])
    return inputs


def verify(plan: workflow_plan.Plan, scenario: str, slot: str, ancient: Ancient) -> dict[str, Any]:
    """verify's inputs: the attempt's record; while the verdict is still to come, also the baseline's
    (for --baseline), for ordering only."""
    own = f"results/{scenario}/{slot}"
    inputs: dict[str, Any] = {"run": f"{own}/attempt.json"}
    if scenario != plan.baseline and not (plan.workdir / own / "verify.json").exists():
        inputs["baseline"] = ancient(f"{plan.slot_dir(plan.baseline)}/attempt.json")
    return inputs


def run_resources(s) -> dict[str, Any]:
    """A scenario's run (ftqual.scenario.model's resolved scenario) as Snakemake resources. A single-node run
    asks for its GPUs as `gpu` (the local scheduler's budget, sbatch --gpus); a multi-node run asks per node
    with `gres` instead (`gpu` would be a job total that Slurm may pack onto one node), and `mpi` leaves the
    srun to the rule (one launcher per node). `tasks_per_node` is allocation geometry only (the plugin
    requires > 1 with `mpi`); the step itself runs one task per node."""
    many = s.multinode
    return {
        "gpu": None if many else s.gpus_per_node,
        "gres": f"gpu:{s.gpus_per_node}" if many else None,
        "nodes": s.allocated_nodes,
        "mpi": "srun" if many else None,
        "tasks_per_node": max(2, s.gpus_per_node) if many else None,
    }


def expectation(plan: workflow_plan.Plan, scenario: str) -> dict[str, Any]:
    """What the scenario expects of its verdict (ftqual.verification.expectation): pass, or fail with the
    checks that must fail."""
    s = plan.scenarios[scenario]
    return {"expect": s.expect, "failing": list(s.expect_failing)}


def payloads(plan: workflow_plan.Plan, config: Mapping[str, Any], scenario: str) -> dict[str, Any]:
    """What verify does with the run's checkpoint payloads once verified (ftqual.launch.payloads)."""
    return checkpoint_payloads.rule_param(config, plan.scenarios, scenario, plan.baseline)


def summary_plots(plan: workflow_plan.Plan) -> list[str]:
    """The plots `ftqual report` draws: a recovery timeline per fault scenario and the loss curves, each
    campaign's, the checkpoints' (a placeholder without checkpoint accounts) and, with the config's
    `scale`, the at-scale panel; all declared, so Snakemake's report shows every one."""
    names = [f"timeline_{s.name}" for s in plan.cfg.fault_scenarios] + ["loss_comparison"]
    names += [f"campaign_{s.name}" for s in plan.cfg.fault_scenarios if family_of(s.fault) == "campaign"]
    names.append("checkpoints")
    return names + (["at_scale"] if "--scale" in plan.timeouts_for_argv else [])


def summary_command(
    plan: workflow_plan.Plan,
    input: Mapping[str, str],
    summary_json: str | os.PathLike,
    project: str | os.PathLike,
    python: str,
) -> str:
    """`ftqual report` of the current attempts (Plan.summary_argv), quoted for the shell: the rule's inputs
    (`preflight`, and each scenario's verify.json by its name), into the folder of summary.json."""
    verify_reports = {name: input[name] for name in plan.scenarios}
    argv = plan.summary_argv(input["preflight"], verify_reports, Path(summary_json).parent)
    return f"{workflow_plan.ftqual_cli(project, python)} {shlex.join(argv)}"
