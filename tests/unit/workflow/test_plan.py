"""ftqual.workflow.plan: what rules/common.smk decides while Snakemake parses, from plain values. The same
decisions inside real Snakemake runs: tests/integration/workflow/ (dry run, state, interrupt, stack)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
from enum import Enum
from pathlib import Path
from types import SimpleNamespace

import pytest

from ftqual.scenario import model as scenarios
from ftqual.stack import current as stack_current
from ftqual.stack.identity import StackIdentity
from ftqual.workflow import attempts, plan
from ftqual.workflow import lock as workflow_lock

REPO = Path(__file__).resolve().parents[3]
STACK = StackIdentity({"python": "3.11", "torch": "2.9.0", "executor": "local"}, {"workload": "smoke"})


@pytest.fixture
def config():
    """The config Snakemake holds for the shipped config/config.yaml (before schema defaults)."""
    return scenarios.read_config_file(REPO / "config" / "config.yaml")


@pytest.fixture
def sighup():
    before = signal.getsignal(signal.SIGHUP)
    yield
    signal.signal(signal.SIGHUP, before)


class Trigger(Enum):  # what Snakemake's RerunTrigger values look like
    MTIME = 0
    PARAMS = 1
    CODE = 2


def fake_workflow(plugin=None, resources=None, dryrun=False, triggers=(Trigger.MTIME,), main=True):
    class Value:  # a Resource of Snakemake's: its text as written is `.raw`
        def __init__(self, raw):
            self.raw = raw

    return SimpleNamespace(
        is_main_process=main,
        executor_plugin=None if plugin is None else SimpleNamespace(name=plugin),
        resource_settings=SimpleNamespace(
            default_resources={k: Value(v) for k, v in (resources or {}).items()} or None
        ),
        output_settings=SimpleNamespace(dryrun=dryrun),
        dag_settings=SimpleNamespace(rerun_triggers=list(triggers)),
    )


def no_probe(*args, **kwargs):
    raise AssertionError("a job must not probe the stack")


def make(config, tmp_path, invocation, said=None, **more):
    more.setdefault("probe", lambda workdir, **kw: STACK)
    return plan.make(
        config,
        basedir=REPO,
        invocation=invocation,
        cwd=tmp_path,
        python=sys.executable,
        env={},
        say=(said.append if said is not None else lambda line: None),
        **more,
    )


# ---------------------------------------------------------------------------------------------
# the invocation: executor and dry run, as Snakemake's workflow object gives them while parsing


def test_the_invocation_is_read_from_snakemakes_workflow_object():
    found = plan.Invocation.of(
        fake_workflow("dryrun", {"slurm_partition": "'gpu'"}, True, (Trigger.MTIME, Trigger.CODE), False)
    )
    assert found == plan.Invocation(
        is_main_process=False,
        executor_plugin="dryrun",
        default_resources=found.default_resources,
        dry_run_setting=True,
        rerun_triggers=("mtime", "code"),
    )
    assert found.default_resource("slurm_partition") == "gpu"  # quotes as the profile wrote them: stripped
    bare = plan.Invocation.of(SimpleNamespace(is_main_process=True, executor_plugin=None))
    assert bare == plan.Invocation() and bare.executor == "local" and not bare.dry_run


@pytest.mark.parametrize(
    ("plugin", "resources", "executor"),
    [
        (None, {}, "local"),  # parsing, nothing said: the local profile
        (None, {"slurm_partition": "gpu"}, "slurm"),  # profiles/slurm names the partition
        (None, {"slurm_account": '"proj"'}, "slurm"),  # or the account
        (None, {"slurm_partition": "''", "mem_mb": 1000}, "local"),  # an empty one names nothing
        ("dryrun", {"slurm_partition": "gpu"}, "slurm"),  # -n stands a dry-run executor in for slurm
        ("touch", {}, "local"),
        ("slurm", {}, "slurm"),  # the executor Snakemake chose
        ("local", {"slurm_partition": "gpu"}, "local"),  # a Slurm job runs under the local executor
    ],
)
def test_the_executor_from_the_default_resources(plugin, resources, executor):
    assert plan.Invocation.of(fake_workflow(plugin, resources)).executor == executor


def test_a_dry_run_is_the_stand_in_executor_or_the_output_setting():
    assert plan.Invocation(executor_plugin="dryrun").dry_run
    assert plan.Invocation(executor_plugin="touch").dry_run
    assert plan.Invocation(dry_run_setting=True).dry_run
    assert not plan.Invocation(executor_plugin="slurm").dry_run
    assert not plan.Invocation().dry_run


# ---------------------------------------------------------------------------------------------
# the refusals, each one line


def test_an_invalid_config_is_refused_in_its_own_words(config, tmp_path):
    config["baseline_scenario"] = "nosuch"
    with pytest.raises(plan.Refusal) as exc:
        make(config, tmp_path, plan.Invocation())
    assert str(exc.value) == (
        "invalid config: baseline_scenario 'nosuch' is not an enabled scenario "
        "(enabled: baseline, kill, hang)"
    )
    assert not (tmp_path / ".snakemake").exists()  # refused before the directory is taken


def test_multinode_scenarios_are_refused_on_the_local_executor(config, tmp_path):
    config["scenarios"]["kill"]["nnodes"] = 2
    with pytest.raises(plan.Refusal) as exc:
        make(config, tmp_path, plan.Invocation(dry_run_setting=True))
    assert str(exc.value) == (
        "the local executor cannot run multi-node scenarios: kill (nnodes=2); use --profile profiles/slurm "
        "(one ft_launcher per node through srun; a profile of your own must name slurm_partition or "
        "slurm_account in default-resources, which is how ftqual knows it plans for Slurm), or set "
        "nnodes: 1 or enabled: false for them"
    )
    cfg = plan.resolve_config(config, REPO)
    assert plan.multinode_refusal(cfg, plan.Invocation(default_resources={"slurm_partition": "gpu"})) is None
    assert plan.multinode_refusal(cfg, plan.Invocation(is_main_process=False)) is None  # a job never refuses


def test_rerun_triggers_other_than_mtime_are_refused():
    assert plan.onstart_refusal(plan.Invocation.of(fake_workflow("local"))) is None
    refusal = plan.onstart_refusal(plan.Invocation.of(fake_workflow("local", triggers=list(Trigger))))
    assert refusal == (
        "ftqual: --rerun-triggers code params would rerun attempts that passed, but ftqual's "
        "attempts decide what reruns: leave --rerun-triggers to profiles/default (mtime) and keep that "
        "workflow profile (no --workflow-profile none)"
    )


def test_a_slurm_run_without_the_accounting_commands_is_refused():
    nothing = lambda command: None  # noqa: E731
    guessed = plan.onstart_refusal(plan.Invocation(executor_plugin="slurm"), which=nothing)
    assert guessed.startswith("ftqual: `sacct` is not on PATH") and "to guess an account" in guessed
    named = plan.Invocation(executor_plugin="slurm", default_resources={"slurm_account": "proj"})
    assert plan.onstart_refusal(named, which=nothing).startswith("ftqual: `sacctmgr` is not on PATH")
    assert plan.onstart_refusal(named, which=lambda command: f"/usr/bin/{command}") is None
    # only a real Slurm run submits: a dry run's stand-in and the local executor never ask
    assert plan.onstart_refusal(plan.Invocation(executor_plugin="dryrun"), which=nothing) is None
    assert plan.onstart_refusal(plan.Invocation(executor_plugin="local"), which=nothing) is None


def test_a_stack_that_cannot_be_established_is_one_line(config, tmp_path):
    def probe(workdir, **kwargs):
        raise stack_current.StackProbeError("the node-side stack probe failed (srun: no partition)")

    with pytest.raises(plan.Refusal) as exc:
        make(config, tmp_path, plan.Invocation(dry_run_setting=True), probe=probe)
    assert str(exc.value) == "ftqual: the node-side stack probe failed (srun: no partition)"


# ---------------------------------------------------------------------------------------------
# the directory lock


def test_a_job_and_a_dry_run_leave_the_directory_alone(tmp_path):
    for invocation in (plan.Invocation(is_main_process=False), plan.Invocation(executor_plugin="dryrun")):
        assert plan.take_directory(tmp_path, invocation, print, cancel_orphans=no_probe) is None
    assert not (tmp_path / ".snakemake").exists()


def test_a_real_run_records_itself_and_stops_on_a_closed_terminal_as_on_ctrl_c(tmp_path, sighup):
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    assert plan.take_directory(tmp_path, plan.Invocation(), print, cancel_orphans=no_probe) == "unlocked"
    record = json.loads((tmp_path / workflow_lock.OWNERS / f"{os.getpid()}.json").read_text())
    assert record["pid"] == os.getpid()
    with pytest.raises(KeyboardInterrupt):
        signal.getsignal(signal.SIGHUP)(signal.SIGHUP, None)


def test_a_stale_lock_is_released_and_under_slurm_the_orphans_are_cancelled(tmp_path, sighup):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    (tmp_path / workflow_lock.LOCKS).mkdir(parents=True)
    (tmp_path / workflow_lock.LOCKS / "0.output.lock").write_text("results/summary.json\n")
    gone = {"pid": child.pid, "start_ticks": 1, "host": socket.gethostname(), "argv": "x"}
    (tmp_path / workflow_lock.OWNERS).mkdir(parents=True)
    (tmp_path / workflow_lock.OWNERS / f"{child.pid}.json").write_text(json.dumps(gone))
    said, cancelled = [], []

    def cancel(workdir, say):
        cancelled.append(workdir)
        say("cancelled 41")

    slurm = plan.Invocation(default_resources={"slurm_partition": "gpu"})
    assert plan.take_directory(tmp_path, slurm, said.append, cancel_orphans=cancel) == "released"
    assert cancelled == [tmp_path] and not (tmp_path / workflow_lock.LOCKS).exists()
    assert said[0].startswith("ftqual: released the lock left by a workflow that is gone")
    assert said[1] == "ftqual: cancelled 41"


def test_a_live_holder_keeps_its_lock_and_no_job_is_cancelled(tmp_path, sighup):
    workflow_lock.record_self(tmp_path)  # this process: alive
    (tmp_path / workflow_lock.LOCKS).mkdir(parents=True)
    (tmp_path / workflow_lock.LOCKS / "0.output.lock").write_text("x\n")
    slurm = plan.Invocation(default_resources={"slurm_partition": "gpu"})
    said = []
    assert plan.take_directory(tmp_path, slurm, said.append, cancel_orphans=no_probe) == "held"
    assert said[0].startswith("ftqual: this directory is locked by a workflow that is still running")


# ---------------------------------------------------------------------------------------------
# the stack and the slots


def test_slots_are_keyed_by_the_settings_and_the_stack(config, tmp_path):
    cfg = plan.resolve_config(config, REPO)
    slots = plan.scenario_slots(cfg, tmp_path, STACK)
    assert list(slots) == ["baseline", "kill", "hang"]
    for name, slot in slots.items():
        key = attempts.attempt_key(cfg.fingerprint(cfg.by_name[name]), STACK.digest)
        assert slot.name == f"{key}-1"
    other = StackIdentity({**STACK.parts, "torch": "2.10.0"})
    assert all(
        a.name != b.name
        for a, b in zip(slots.values(), plan.scenario_slots(cfg, tmp_path, other).values(), strict=True)
    )


def test_a_dry_run_plans_and_says_the_plan_without_taking_the_directory(config, tmp_path):
    said, asked = [], []

    def probe(workdir, **kwargs):
        asked.append(kwargs)
        kwargs["say"]("stack: probed")
        return STACK

    found = make(config, tmp_path, plan.Invocation(executor_plugin="dryrun"), said, probe=probe)
    assert asked[0]["dry_run"] and asked[0]["executor"] == "local" and asked[0]["slurm"] is None
    assert said[0] == "ftqual: stack: probed"
    assert said[1:] == [f"ftqual: {n}: attempt {s.name} ({s.reason})" for n, s in found.slots.items()]
    assert found.slots == plan.scenario_slots(found.cfg, tmp_path, STACK)
    key = attempts.attempt_key(found.cfg.preflight_fingerprint(), STACK.digest)
    assert found.preflight.name == f"{key}-1"
    assert found.report_dir == attempts.report_dir(
        found.preflight.name, found.expected_attempts(), "baseline"
    )
    assert not (tmp_path / ".snakemake").exists()


def test_a_slurm_plan_asks_the_stack_of_the_partition(config, tmp_path):
    asked = []
    config = {**config, "node_stack_probe": False}
    invocation = plan.Invocation(default_resources={"slurm_partition": "gpu", "slurm_account": "proj"})
    make(
        config,
        tmp_path,
        invocation,
        probe=lambda workdir, **kw: asked.append(kw) or STACK,
        cancel_orphans=lambda workdir, say: [],
    )
    target = asked[0]["slurm"]
    assert asked[0]["executor"] == "slurm" and not asked[0]["dry_run"]
    assert target == stack_current.SlurmTarget(partition="gpu", account="proj", gpus=None, probe_node=False)


def test_a_job_inherits_the_stack_its_workflow_exported_and_says_nothing(config, tmp_path):
    record = tmp_path / stack_current.record_path(STACK.digest)
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps(STACK.to_json()))
    said = []
    job = plan.Invocation(is_main_process=False, executor_plugin="local")
    found = plan.make(
        config, basedir=REPO, invocation=job, cwd=tmp_path, python=sys.executable,
        env={stack_current.ENV_VAR: STACK.digest}, say=said.append, probe=no_probe,
    )  # fmt: skip
    assert found.stack == STACK and said == []
    main = make(config, tmp_path, plan.Invocation(executor_plugin="dryrun"))
    assert found.slots == main.slots and found.report_dir == main.report_dir


def test_legacy_records_are_adopted_before_the_slots_are_read(config, tmp_path):
    cfg = plan.resolve_config(config, REPO)
    slot = tmp_path / plan.scenario_slots(cfg, tmp_path, STACK)["baseline"].name
    legacy = tmp_path / "results" / "baseline" / slot.name / "run.json"
    legacy.parent.mkdir(parents=True)
    legacy.write_text("{}")
    make(config, tmp_path, plan.Invocation(executor_plugin="dryrun"))
    assert (legacy.parent / "attempt.json").exists() and not legacy.exists()


# ---------------------------------------------------------------------------------------------
# the summary: one command line, for the rule and for onerror's rebuild


def test_the_summary_command_line(config, tmp_path):
    found = make(config, tmp_path, plan.Invocation(executor_plugin="dryrun"))
    argv = found.summary_argv("pre.json", {n: f"{n}.json" for n in found.scenarios}, Path("out"))
    slots = found.expected_attempts()
    assert argv == [
        "report", "--preflight", "pre.json", "--baseline", "baseline",
        "--verify", "baseline=baseline.json", "--attempt", f"baseline={slots['baseline']}",
        "--verify", "kill=kill.json", "--attempt", f"kill={slots['kill']}",
        "--verify", "hang=hang.json", "--attempt", f"hang={slots['hang']}",
        "--out", "out",
    ]  # fmt: skip
    assert plan.ftqual_cli(REPO, "/py", which=lambda c: "/bin/ftqual") == "ftqual"
    assert plan.ftqual_cli(REPO, "/py", which=lambda c: None) == (
        f"PYTHONPATH={REPO}${{PYTHONPATH:+:$PYTHONPATH}} /py -m ftqual"
    )


def test_after_a_failed_job_the_summary_is_rebuilt_from_what_exists(config, tmp_path):
    found = make(config, tmp_path, plan.Invocation(executor_plugin="local"))
    workflow_lock.record_self(tmp_path)
    ran, said = [], []

    def run(cmd, **kwargs):
        ran.append((cmd, kwargs))

    env = {"PYTHONPATH": "/site", "HOME": "/h"}
    assert plan.salvage_summary(found, project=REPO, python="/py", env=env, say=said.append, run=run)
    cmd, kwargs = ran[0]
    reports = found.current_verify_reports()
    assert cmd == ["/py", "-m", "ftqual", *found.summary_argv(found.preflight_report(), reports, "results")]
    assert kwargs["env"] == {"PYTHONPATH": f"{REPO}:/site", "HOME": "/h"} and kwargs["cwd"] == tmp_path
    assert (tmp_path / "logs" / "summary-after-error.log").exists()
    assert said == [
        "ftqual: a job failed; results/summary.md and junit.xml were rebuilt from what exists "
        "(logs/summary-after-error.log)"
    ]
    assert not list((tmp_path / workflow_lock.OWNERS).glob("*.json"))  # the lock's holder forgotten

    # results/ already shows these attempts (the gate failed on a verdict): left as it is
    (tmp_path / "results").mkdir(exist_ok=True)
    (tmp_path / "results" / "summary.json").write_text(json.dumps({"attempts": found.expected_attempts()}))
    assert not plan.salvage_summary(found, project=REPO, python="/py", env=env, say=said.append, run=run)
    # a job (a Slurm job's own Snakemake) never rebuilds it
    (tmp_path / "results" / "summary.json").unlink()
    job = dataclasses.replace(found, invocation=plan.Invocation(is_main_process=False))
    assert not plan.salvage_summary(job, project=REPO, python="/py", env=env, say=said.append, run=run)
    assert len(ran) == 1
