"""`snakemake -n` on the project: the stages of the default config; bad configs rejected at parse time
or, for what only the stack check can judge, by the preflight before any run."""

from __future__ import annotations

import re

import pytest

from tests.support.workflow import copy_project, job_stats, jobs, run_snakemake, scenario_jobs, write_yaml


@pytest.fixture(scope="module")
def default_plan(tmp_path_factory):
    """`snakemake -n -p` of the default config in a fresh copy, once for the tests that read that plan (each
    start costs seconds of imports; -p only adds the shell commands)."""
    return run_snakemake(copy_project(tmp_path_factory.mktemp("plan") / "project"), "-n", "-p")


def test_dry_run_lists_the_stages_in_order(default_plan):
    proc = default_plan
    assert proc.returncode == 0, proc.stdout
    assert job_stats(proc.stdout) == {"preflight": 1, "run_scenario": 3, "verify": 3, "summary": 1, "gate": 1}
    assert sorted(scenario_jobs(proc.stdout, "run_scenario")) == ["baseline", "hang", "kill"]
    assert sorted(scenario_jobs(proc.stdout, "verify")) == ["baseline", "hang", "kill"]

    by_key = {(j["rule"], j.get("wildcards", "").split(",")[0]): j for j in jobs(proc.stdout)}
    # preflight -> baseline run -> baseline verify -> fault runs -> their verify -> summary -> gate
    [preflight] = re.findall(
        r"results/preflight/[0-9a-f]{12}-1/preflight.json", by_key[("preflight", "")]["output"]
    )
    slot = {
        s: re.search(
            rf"results/{s}/([0-9a-f]{{12}}-1)/attempt.json",
            by_key[("run_scenario", f"scenario={s}")]["output"],
        )[1]
        for s in ("baseline", "kill", "hang")
    }
    assert by_key[("run_scenario", "scenario=baseline")]["input"].split(", ") == [preflight]
    for fault in ("kill", "hang"):
        run_inputs = by_key[("run_scenario", f"scenario={fault}")]["input"].split(", ")
        assert run_inputs == [preflight, f"results/baseline/{slot['baseline']}/verify.json"]
        verify_inputs = by_key[("verify", f"scenario={fault}")]["input"].split(", ")
        assert verify_inputs == [
            f"results/{fault}/{slot[fault]}/attempt.json",
            f"results/baseline/{slot['baseline']}/attempt.json",
        ]
    summary_inputs = by_key[("summary", "")]["input"].split(", ")
    assert summary_inputs[0] == preflight
    assert sorted(summary_inputs[1:]) == sorted(f"results/{s}/{slot[s]}/verify.json" for s in slot)
    assert by_key[("summary", "")]["output"].startswith("results/reports/")
    assert by_key[("gate", "")]["input"].split(", ")[0].endswith("/summary.json")


def test_dry_run_plans_from_the_config_alone(default_plan):
    """Changing nothing plans the same; the plan names each scenario's attempt and why."""
    proc = default_plan
    for s in ("baseline", "kill", "hang"):
        assert re.search(
            rf"ftqual: {s}: attempt [0-9a-f]{{12}}-1 \(no attempt under these settings yet\)", proc.stdout
        )


def test_dry_run_with_the_profiles(project):
    for profile in ("profiles/local", "profiles/slurm"):
        proc = run_snakemake(project, "-n", "--profile", profile)
        assert proc.returncode == 0, proc.stdout
        assert job_stats(proc.stdout)["run_scenario"] == 3


def test_profiles_work_by_name(project, tmp_path):
    """As after `ftqual install-profiles`: <user config dir>/snakemake/<name> -> profiles/<name>."""
    config_home = tmp_path / "xdg"
    (config_home / "snakemake").mkdir(parents=True)
    for name in ("local", "slurm"):
        (config_home / "snakemake" / name).symlink_to(project / "profiles" / name)
        proc = run_snakemake(project, "-n", "--profile", name, env={"XDG_CONFIG_HOME": str(config_home)})
        assert proc.returncode == 0, proc.stdout
        # with the workflow's own profile (profiles/default), which Snakemake reads beside the Snakefile
        said = f"Using profiles {name} and workflow specific profile profiles/default for setting default"
        assert said in proc.stdout, proc.stdout
        assert job_stats(proc.stdout)["run_scenario"] == 3


def test_megatron_config_dry_runs(project):
    proc = run_snakemake(project, "-n", "--configfile", "config/megatron-h200.yaml")
    assert proc.returncode == 0, proc.stdout
    assert job_stats(proc.stdout)["run_scenario"] == 3


def test_user_scenario_is_added(project):
    write_yaml(project / "extra.yaml", {"scenarios": {"kill_rank0": {"fault": "kill", "rank": 0}}})
    proc = run_snakemake(project, "-n", "--configfile", "extra.yaml")
    assert proc.returncode == 0, proc.stdout
    assert sorted(scenario_jobs(proc.stdout, "run_scenario")) == ["baseline", "hang", "kill", "kill_rank0"]


def test_disabled_scenario_is_left_out(project):
    write_yaml(project / "less.yaml", {"scenarios": {"hang": {"fault": "hang", "enabled": False}}})
    proc = run_snakemake(project, "-n", "--configfile", "less.yaml")
    assert proc.returncode == 0, proc.stdout
    assert sorted(scenario_jobs(proc.stdout, "run_scenario")) == ["baseline", "kill"]


SNAKEMAKE_PREAMBLE = ("Using profiles ", "Using workflow specific profile", "Config file ")


def printed(proc) -> list[str]:
    """The lines a refusal printed, without Snakemake's two lines about the profile and the config files."""
    return [
        line for line in proc.stdout.splitlines() if line.strip() and not line.startswith(SNAKEMAKE_PREAMBLE)
    ]


@pytest.mark.parametrize(
    ("config", "lines"),
    [
        (
            "save_intervall: 5\n",
            [
                "ftqual: bad.yaml: invalid config at "
                "save_intervall: unknown setting; did you mean save_interval?"
            ],
        ),
        (
            "scenarios:\n  kill:\n    fault: kill\n    rnak: 1\n",
            ["ftqual: bad.yaml: invalid config at scenarios.kill.rnak: unknown setting; did you mean rank?"],
        ),
        (
            "scenarios:\n  kill:\n    fault: sigkill\n",
            [
                "ftqual: bad.yaml: invalid config at "
                "scenarios.kill.fault: 'sigkill' is not a choice; did you mean kill?"
            ],
        ),
        (
            "timeouts:\n  step: -5\n",
            [
                "ftqual: bad.yaml: invalid config at "
                "timeouts.step: -5 is less than or equal to the minimum of 0"
            ],
        ),
        (
            "save_intervall: 5\ntimeouts:\n  step: -5\n",
            [
                "ftqual: bad.yaml: invalid config at "
                "save_intervall: unknown setting; did you mean save_interval?",
                "ftqual: bad.yaml: invalid config at "
                "timeouts.step: -5 is less than or equal to the minimum of 0",
            ],
        ),
        (
            "checkpoint_dir: /nonexistent/ckpt\n",
            [
                "ftqual: invalid config: checkpoint_dir /nonexistent/ckpt does not exist "
                "(its nearest existing parent is /): create it on the filesystem you want qualified "
                "(ftqual makes only each run's folder below "
                "it), or fix the path"
            ],
        ),
        (
            "checkpoint_dir: /proc\n",
            ["ftqual: invalid config: checkpoint_dir /proc "],
        ),  # not writable, even as root
        (
            "megatron_args: [--ckpt-format, torch, --micro-batch-size, two]\n",
            [
                "ftqual: invalid config: megatron_args[0]: --ckpt-format torch: ftqual verifies torch_dist "
                "checkpoints only",
                "ftqual: invalid config: megatron_args[2]: --micro-batch-size must be a positive integer",
            ],
        ),
    ],
    ids=[
        "top-level typo",
        "nested typo",
        "unknown fault",
        "negative timeout",
        "two mistakes",
        "missing checkpoint_dir",
        "read-only checkpoint_dir",
        "team flags that cannot stand",
    ],
)
def test_a_config_mistake_is_a_line_each_and_nothing_runs(project, config, lines):
    """A line per mistake (file, key's path, what is wrong, a suggestion), all at once, exit 2: no schema
    dump, no traceback, nothing planned or launched; a real run refuses it the same way."""
    (project / "bad.yaml").write_text(config)
    for args in (("-n",), ("--profile", "profiles/local")):
        proc = run_snakemake(project, *args, "--configfile", "bad.yaml")
        assert proc.returncode == 2, proc.stdout
        shown = printed(proc)
        assert len(shown) == len(lines), proc.stdout
        for line, expected in zip(shown, lines, strict=True):
            assert line.startswith(expected), proc.stdout
        assert "Traceback" not in proc.stdout and 'File "' not in proc.stdout
        assert not (project / "results").exists() and not (project / "runs").exists()


TEAM_SCRIPT = """\
#!/bin/bash
CHECKPOINT_PATH=$1
MODEL_ARGS=(
    --num-layers 4 --hidden-size 256 --num-attention-heads 8
    --seq-length 128 --max-position-embeddings 128
)
TRAINING_ARGS=(
    --micro-batch-size 2
    --global-batch-size 6
    --tensor-model-parallel-size 2
    --ckpt-format torch
    --tokenizer-model $TOKENIZER_DIR
    --save $CHECKPOINT_PATH
)
torchrun --nproc_per_node 2 pretrain_gpt.py ${MODEL_ARGS[@]} ${TRAINING_ARGS[@]}
"""


def test_a_team_script_is_refused_in_one_message_naming_every_line(project):
    """A launch script with several mistakes: every one at once, each naming its file:line, exit 2, no
    traceback, nothing run; `--save $CHECKPOINT_PATH` ($1) is no mistake: ftqual replaces that flag."""
    (project / "team.sh").write_text(TEAM_SCRIPT)
    write_yaml(project / "bad.yaml", {"megatron_args_file": "team.sh", "tp": 4, "gpus_per_node": 4})
    proc = run_snakemake(project, "-n", "--configfile", "bad.yaml")
    assert proc.returncode == 2, proc.stdout
    shown = printed(proc)
    assert "Traceback" not in proc.stdout and 'File "' not in proc.stdout
    expected = {
        "team.sh:11: --ckpt-format torch": "torch_dist",
        "team.sh:12: '$TOKENIZER_DIR' in --tokenizer-model": "not set",
        "team.sh:10: --tensor-model-parallel-size 2 contradicts the config's tp: 4": "make them agree",
    }
    for where, why in expected.items():
        assert any(where in line and why in line for line in shown), (where, shown)
    assert not any("CHECKPOINT_PATH" in line for line in shown), shown
    assert not (project / "results").exists() and not (project / "runs").exists()


def test_multinode_scenario_is_rejected_on_the_local_profile(project):
    write_yaml(project / "multi.yaml", {"scenarios": {"kill": {"fault": "kill", "nnodes": 2}}})
    dry = run_snakemake(project, "-n", "--configfile", "multi.yaml", "--profile", "profiles/slurm")
    assert dry.returncode == 0, dry.stdout  # the plan is fine; it needs Slurm to run
    proc = run_snakemake(project, "--configfile", "multi.yaml", "--profile", "profiles/local")
    assert proc.returncode != 0
    assert "the local executor cannot run multi-node scenarios" in proc.stdout, proc.stdout
    assert not (project / "runs").exists()  # rejected while building the DAG: nothing ran


def local_rules(project, *configfiles):
    """The rules Snakemake runs on the submitting host under a cluster executor (its `localrules`)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

    with SnakemakeApi(OutputSettings(quiet=set())) as api:
        workflow_api = api.workflow(
            resource_settings=ResourceSettings(cores=1),
            config_settings=ConfigSettings(configfiles=[project / "config/config.yaml", *configfiles]),
            snakefile=project / "Snakefile",
            workdir=project,
        )
        return set(workflow_api._workflow._localrules)


def test_preflight_runs_on_a_training_node_for_megatron(project, tmp_path):
    """Under Slurm a Megatron preflight must probe a training node (its GPUs, CUDA, NCCL, compilers), so it
    is a job with a node's GPUs, not a login-node step; the smoke workload's preflight stays local."""
    megatron = tmp_path / "mlm"
    megatron.mkdir()
    (megatron / "pretrain_gpt.py").write_text("")
    overrides = write_yaml(
        tmp_path / "megatron.yaml", {"workload": "megatron", "megatron_path": str(megatron)}
    )

    assert "preflight" in local_rules(project)
    assert "preflight" not in local_rules(project, overrides)
    assert {"verify", "summary"} <= local_rules(project, overrides)

    proc = run_snakemake(project, "-n", "--profile", "profiles/slurm", "--configfile", str(overrides))
    assert proc.returncode == 0, proc.stdout
    preflight = next(j for j in jobs(proc.stdout) if j["rule"] == "preflight")
    assert "gpu=2" in preflight["resources"]


def test_summary_runs_our_cli_where_ftqual_is_not_a_command(project):
    """A node that uses the checkout from PYTHONPATH has no `ftqual` command (seen on the GPU machine: the
    summary rule failed with `ftqual: command not found`); the rule then runs the package with the
    interpreter that runs Snakemake, and that command works."""
    import os
    import subprocess
    import sys

    bare_path = os.pathsep.join(p for p in ("/usr/bin", "/bin") if os.path.isdir(p))
    proc = run_snakemake(project, "-n", "-p", env={"PATH": bare_path})
    assert proc.returncode == 0, proc.stdout
    [command] = summary_commands(proc.stdout)
    command = command.removeprefix("Shell command:").strip()
    assert not command.startswith("ftqual "), command
    prefix = command.split(" report ", 1)[0]
    assert f"{sys.executable} -m ftqual" in prefix and str(project) in prefix
    check = subprocess.run(
        f"{prefix} --version",
        shell=True,
        cwd="/",
        env={"PATH": bare_path},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0 and "ftqual" in check.stdout + check.stderr, check


def test_summary_uses_the_ftqual_command_where_it_is_installed(default_plan):
    proc = default_plan
    assert proc.returncode == 0, proc.stdout
    [command] = summary_commands(proc.stdout)
    assert command.removeprefix("Shell command:").strip().startswith("ftqual report "), command


def summary_commands(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln.startswith("Shell command:") and " report " in ln]


def test_a_flag_ftqual_controls_plans_and_one_that_cannot_stand_fails_the_dry_run_in_one_line(project):
    """The team's arguments come whole: a flag ftqual controls (--save-interval) is replaced, so they plan;
    a value no qualification can run with (--ckpt-format torch) is refused while planning, in one line,
    nothing planned."""
    replaced = write_yaml(project / "job-ok.yaml", {"megatron_args": ["--seed=3", "--save-interval=7"]})
    ok = run_snakemake(project, "-n", "--configfile", str(replaced))
    assert ok.returncode == 0, ok.stdout
    bad = write_yaml(project / "job.yaml", {"megatron_args": ["--seed=3", "--ckpt-format=torch"]})
    proc = run_snakemake(project, "-n", "--configfile", str(bad))
    assert proc.returncode != 0
    lines = [ln for ln in proc.stdout.splitlines() if "--ckpt-format torch: ftqual verifies torch_dist" in ln]
    assert len(lines) == 1, proc.stdout
    assert "Job stats" not in proc.stdout


def test_a_mistake_names_its_origin_on_the_command_line(project):
    """What Snakemake reads itself, through the CLI: a --config value is the command line's mistake, a
    --config mapping is read as YAML (scale works with numbers), and a YAML syntax error in
    config/config.yaml is file:line:column, exit 2 (was: "not valid JSON or YAML", no line, exit 1)."""
    proc = run_snakemake(project, "-n", "--config", "train_iters=ten")
    assert proc.returncode == 2, proc.stdout
    assert printed(proc) == ["ftqual: --config: invalid config at train_iters: 'ten' is not a whole number"]
    proc = run_snakemake(project, "-n", "--config", "scale={gpus: 4096, days: 30}")
    assert proc.returncode == 0, proc.stdout
    config = project / "config" / "config.yaml"
    lines = config.read_text().splitlines()
    config.write_text("\n".join([*lines, "\tkill: 1", ""]))
    proc = run_snakemake(project, "-n")
    assert proc.returncode == 2, proc.stdout
    assert printed(proc) == [
        f"ftqual: config/config.yaml:{len(lines) + 1}:1: not valid YAML: found character '\\t' that "
        "cannot start any token; indent with spaces (no tabs), put ': ' after each key and close every "
        "bracket and quote"
    ], proc.stdout
