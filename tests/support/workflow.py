"""Helpers for tests that run the Snakemake workflow through its CLI in a copy of the project.

A copy, not the checkout: the workflow writes results/, logs/, runs/ and .snakemake/ into its working
directory, and each test wants its own. The copy holds everything a user's checkout has that the
workflow reads (the Snakefile, rules, scripts, conda envs, config, profiles, report captions and the ftqual
package).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
PROJECT_ITEMS = (
    "Snakefile",
    "rules",
    "scripts",
    "workloads",
    "envs",
    "config",
    "profiles",
    "report",
    "ftqual",
)
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


def copy_project(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in PROJECT_ITEMS:
        src = REPO_ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=IGNORE)
        else:
            shutil.copy2(src, dest / name)
    return dest


def ci_slurm_profile(project: Path) -> None:
    """The project's Slurm profile with the adjustments a site makes, for the CI cluster: squeue as status
    command (no accounting database), small memory and CPU requests."""
    path = project / "profiles" / "slurm" / "config.yaml"
    profile = yaml.safe_load(path.read_text())
    profile["slurm-status-command"] = "squeue"
    profile["latency-wait"] = 5
    # The plugin polls this long after a submission, then 10 s longer each time no job finished: 1, 12, 33,
    # 64 s ... (the profile's 5 s gives 5, 20, 45, 80 s ..., and a job of these tests was noticed ~20 s
    # after it ended).
    profile["slurm-init-seconds-before-status-checks"] = 1
    profile["jobs"] = 4
    profile["default-resources"] = {**profile["default-resources"], "mem_mb": 1000, "runtime": 20}
    profile["set-resources"] = {"run_scenario": {"cpus_per_gpu": 1, "runtime": 20}}
    write_yaml(path, profile)


# Short runs of the baseline and the kill (hang off): for tests whose subject is the workflow's state rules,
# not training.
FAST_KILL = {
    "train_iters": 12,
    "save_interval": 4,
    "smoke": {"step_seconds": 0.1, "save_seconds": 0.0},
    "scenarios": {
        "baseline": {"fault": "none"},
        "kill": {"fault": "kill", "rank": 1},
        "hang": {"fault": "hang", "rank": 1, "enabled": False},
    },
}


def project_with(dest: Path, overrides: dict) -> Path:
    """copy_project, with `overrides` merged into its config/config.yaml (top-level keys replaced)."""
    project = copy_project(dest)
    config_path = project / "config" / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config.update(overrides)
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return project


def requalified(stdout: str, names: tuple[str, ...], change: str) -> bool:
    """Whether the plan gave each scenario its first attempt on a changed stack, naming `change` (a regex)."""
    return all(
        re.search(
            rf"ftqual: {name}: attempt \w+-1 \(the stack changed since attempt \w+-1 \(same settings\): "
            rf".*{change}",
            stdout,
        )  # fmt: skip
        for name in names
    )


def write_yaml(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# Every Snakemake start imports the Slurm executor plugin, whose settings class runs `scontrol show config`
# when `sinfo` is on PATH (to pick a default status command). Where a slurm.conf exists and no controller
# answers (a workstation with the Slurm client, CI before or after its daemons run), that call waits ~9 s
# per start, and a local-executor run starts Snakemake once more per script job. An empty SLURM_CONF makes
# scontrol give up at once (a missing file is retried for up to 60 s); runs that use the Slurm executor keep
# the real configuration.
NO_SLURM_CONF = os.devnull


def uses_slurm(args: tuple[str, ...] | list[str]) -> bool:
    """Whether a snakemake command line names the Slurm profile (by path or by name) or executor."""
    return any(
        arg == "slurm" or arg.endswith("/slurm") or arg.startswith(("--executor=slurm", "--profile=slurm"))
        for arg in args
    )


def snakemake_env(slurm: bool = False) -> dict[str, str]:
    """This interpreter's bin directory first on PATH (snakemake, ft_launcher), unbuffered output; for a
    run without the Slurm executor (`slurm` false), no Slurm configuration (see NO_SLURM_CONF)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONPATH", None)
    if not slurm:
        env["SLURM_CONF"] = NO_SLURM_CONF
    return env


def snakemake_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", *args]


def run_snakemake(
    workdir: Path, *args: str, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`python -m snakemake ARGS` in `workdir`; stdout and stderr together in `.stdout`; without a Slurm
    configuration unless ARGS name the Slurm profile or executor (snakemake_env). A run that fails is
    remembered for the session's closing digest (failed_runs_digest)."""
    proc = subprocess.run(
        snakemake_cmd(*args),
        cwd=workdir,
        env={**snakemake_env(slurm=uses_slurm(args)), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        FAILED_RUNS.append(Path(workdir))
    return proc


FAILED_RUNS: list[Path] = []
TELLING_LINE = re.compile(r"interrupted|Traceback|Error|FAILED|refus|not launched|exited [1-9]")


def failed_runs_digest(limit: int = 12) -> list[str]:
    """For every failed workflow run of the session, the telling lines of its rule logs: on CI only the
    end of the output is kept, and the Snakemake output in an assertion says that a job failed, not why.
    Some of these runs fail on purpose (tests of failures); the digest only says where to look."""
    lines = []
    for workdir in dict.fromkeys(FAILED_RUNS):
        lines.append(f"workflow run failed in {workdir}")
        for log in sorted((workdir / "logs").glob("**/*.log")):
            telling = [ln for ln in log.read_text(errors="replace").splitlines() if TELLING_LINE.search(ln)]
            if telling:
                lines += [f"  {log.relative_to(workdir)}:"] + [f"    {ln[:240]}" for ln in telling[-limit:]]
    return lines


def job_stats(output: str) -> dict[str, int]:
    """The `Job stats` table of a snakemake run or dry run: rule -> job count (total left out)."""
    match = re.search(r"Job stats:\n.*?\n-+\s+-+\n(.*?)\n\s*\n", output + "\n\n", re.S)
    if not match:
        return {}
    stats = {}
    for line in match.group(1).splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] != "total":
            stats[parts[0]] = int(parts[1])
    return stats


def jobs(output: str) -> list[dict[str, str]]:
    """The job blocks snakemake prints (`rule X:` / `localrule X:` then indented `key: value` lines)."""
    found = []
    current = None
    for line in output.splitlines():
        head = re.match(r"^(?:local)?rule (\w+):$", line)
        if head:
            current = {"rule": head.group(1)}
            found.append(current)
            continue
        item = re.match(r"^    (\w+): (.*)$", line)
        if current is not None and item:
            current[item.group(1)] = item.group(2)
        elif not line.startswith("    "):
            current = None
    return found


def scenario_jobs(output: str, rule: str) -> list[str]:
    """Scenarios of the `rule` jobs in a snakemake output, in the order printed."""
    found = []
    for job in jobs(output):
        if job["rule"] == rule and "wildcards" in job:
            values = dict(part.split("=", 1) for part in job["wildcards"].split(", "))
            found.append(values["scenario"])
    return found


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def run_dirs(workdir: Path, scenario: str) -> list[Path]:
    return sorted((workdir / "runs").glob(f"{scenario}-*"))


def start_time(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat, None when the process is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return None if fields[0] == "Z" else int(fields[19])


def terminal_signals() -> None:
    """preexec_fn of a workflow an interrupt test signals as a terminal would: SIGINT and SIGHUP at their
    defaults, as in a terminal's foreground job. A suite started in the background (`cmd &` in a script, a
    CI harness) or under nohup hands its children SIGINT or SIGHUP ignored, and the workflow rightly
    honours that by running on: seen, a Ctrl-C test whose Snakemake ignored SIGINT and ran the baseline to
    its end (run.json `interrupted_by` None)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


ITERATION_LINE = re.compile(r"iteration\s+(\d+)/\s*(\d+) \|")


def last_iteration(run_dir: Path) -> int:
    """The highest iteration a training log of the run directory printed so far (0: none yet): proof that a
    run is training, not still setting up."""
    found = 0
    for log in (run_dir / "logs").glob("train_cycle*.log"):
        try:
            text = log.read_text(errors="replace")
        except OSError:
            continue
        found = max([found, *(int(m.group(1)) for m in ITERATION_LINE.finditer(text))])
    return found


def utc_now() -> str:
    """Now, as run.json's started_at and finished_at write it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def finished_unsignalled(run_dir: Path, signalled_at: str, what: str) -> None:
    """An interrupt test's check that the run it signalled was still running when the signal landed. A run
    that finished by itself before the signal is the test's setup failing (it trained too short for this
    machine): pytest.fail says so, neither a pass nor the product's failure. One that finished by itself
    after the signal was never stopped: an AssertionError. `what`: where the test stood at the signal."""
    run = read_json(run_dir / "run.json")
    finished = run.get("finished_at")
    if run.get("interrupted_by") or run.get("exit_code") != 0 or not finished:
        return
    after_s = (_when(finished) - _when(signalled_at)).total_seconds()
    name, at = run_dir.name, f"the signal at {signalled_at} ({what})"
    if after_s < 0:
        pytest.fail(
            f"test setup: {name} finished by itself at {finished}, {-after_s:.1f} s before {at}: train longer"
            " or signal sooner",
            pytrace=False,
        )
    raise AssertionError(f"{name} ran to its end by itself {after_s:.1f} s after {at}")


def process_alive(record: dict) -> bool:
    """A pid record ({"pid", "start_time"}) names a live process (not a zombie, not a reused pid)."""
    return start_time(record["pid"]) == record["start_time"]


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line or environment contains `text` (a run ID: the launcher puts
    FTQUAL_RUN_ID=<run id> into the environment of everything it starts)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                environ = (entry / "environ").read_bytes().decode(errors="replace")
            except OSError:
                continue
            cmdline += " " + environ.replace("\0", " ")
            if text in cmdline and start_time(int(entry.name)) is not None:
                found.append(int(entry.name))
    return found


def current_attempt(workdir: Path, scenario: str) -> Path:
    """results/<scenario>/<slot>/ of the attempt the published summary reports."""
    slot = read_json(workdir / "results" / "summary.json")["attempts"][scenario]
    return workdir / "results" / scenario / slot
