"""Build the one ft_launcher command of a run: launcher flags, the worker wrapper, the workload's arguments.

Pure functions of (Settings, StackChoice, port, executable): the dry run prints exactly what the real run
executes. Flags use the `--name=value` form so the command reads the same in logs and in command.txt.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from ftqual.contract import launcher_prepares
from ftqual.launch import restart_agent
from ftqual.launch.compat import Adaptation, Compat
from ftqual.launch.settings import Settings
from ftqual.scenario import job as jobshape
from ftqual.stack.facts import DUMP_TOOL_ENV as DUMP_TOOL_ENV  # re-exported
from ftqual.stack.facts import ft_launcher_executable as ft_launcher_executable  # re-exported
from ftqual.stack.facts import stack_dump_tool as stack_dump_tool  # re-exported
from ftqual.stack.resolve import StackChoice

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKLOADS_DIR = REPO_ROOT / "workloads"
WORKER = WORKLOADS_DIR / "megatron_gpt_worker.py"
SMOKE = WORKLOADS_DIR / "smoke_train.py"

# Megatron core_v0.19 needs an eval interval whenever --eval-iters=0; never reached in these runs.
MIN_EVAL_INTERVAL = 1000


@dataclass(frozen=True)
class LaunchPlan:
    launcher: list[str]  # ft_launcher and its flags
    workload: list[str]  # wrapper, its flags, `--`, the workload's arguments, extra argv
    megatron_flags: list[str]  # the stack-dependent flags chosen (empty for the smoke workload)
    log_server_port: int
    adaptations: tuple[Adaptation, ...] = ()  # flags changed for this Megatron version (ftqual.launch.compat)
    dump_tool: str | None = None  # py-spy for the rank sentinels' stack dumps (None: faulthandler only)
    replaced: tuple[dict[str, str], ...] = ()  # the team's flags ftqual replaced (replacements)

    @property
    def argv(self) -> list[str]:
        return [*self.launcher, *self.workload]

    @property
    def shell(self) -> str:
        return shlex.join(self.argv)


# After a failure ft_launcher waits until the GPUs' memory is released before the next rendezvous, polling
# NVML every 2 s by default: on 2 x H200 that poll was 2 of the 4.5 s a restart took (docs/benchmarks.md).
# Polling every 0.25 s for the second or so the wait lasts costs nothing measurable.
GPU_MEMORY_POLL_INTERVAL_S = 0.25


def launcher_args(s: Settings, port: int, executable: str) -> list[str]:
    run = s.run_dir
    return [
        executable,
        f"--nnodes={s.nnodes_arg}",
        f"--nproc-per-node={s.gpus_per_node}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={s.rdzv_endpoint}",
        f"--rdzv-id={s.run_id}",
        f"--max-restarts={s.max_restarts}",
        f"--term-timeout={s.term_timeout}",
        f"--workers-stop-timeout={s.workers_stop_timeout}",
        f"--ft-rank-section-timeouts={s.timeouts.sections_arg()}",
        f"--ft-rank-out-of-section-timeout={s.timeouts.out_of_section_arg()}",
        f"--ft-checkpoint-iteration-file={s.tracker_path}",
        f"--ft-cycle-info-dir={run / 'cycle_infos'}",
        f"--ft-per-cycle-applog-prefix={run / 'logs' / 'train.log'}",
        f"--ft-nvrx-logfile={run / 'logs' / 'launcher.log'}",
        f"--ft-log-server-port={port}",
        f"--ft-gpu-memory-poll-interval={GPU_MEMORY_POLL_INTERVAL_S}",
        *([f"--rdzv-conf=join_timeout={s.join_timeout}"] if s.join_timeout is not None else []),
        *no_progress_args(s),
        *restart_agent.attribution_args(s.restart_agent, run),
    ]


def no_progress_args(s: Settings) -> list[str]:
    """NVRx's no-progress stop, when the scenario sets it (unset: NVRx's default, 3 cycles, the flag left out
    so that every earlier run's command stays as it was)."""
    if s.max_no_progress_cycles is None:
        return []
    return [f"--ft-max-no-progress-cycles={s.max_no_progress_cycles}"]


def wrapper_args(s: Settings, dump_tool: str | None = None) -> list[str]:
    entrypoint = s.entrypoint if s.workload == "megatron" else SMOKE
    args = [
        str(WORKER),
        "--entrypoint",
        str(entrypoint),
        "--checkpoint-dir",
        str(s.checkpoint_dir),
        "--fault-marker",
        str(s.marker_path),
        "--fault",
        s.fault,
    ]
    if s.fault_rank is not None:
        args += ["--fault-rank", str(s.fault_rank)]
    args += ["--run-id", s.run_id, "--hang-placement", s.hang_placement, "--pid-dir", str(s.run_dir / "pids")]
    args += [
        "--injections",
        str(s.injections),
        "--fault-timing",
        s.fault_timing,
        "--leftovers-dir",
        str(s.leftovers_dir),
    ]
    if s.checkpoint_damage != "none":
        args += ["--checkpoint-damage", s.checkpoint_damage]
    if s.campaign is not None:
        args += ["--campaign-plan", str(s.campaign_plan_path)]
    # every rank's sentinel dumps its stacks before a timeout's kill or while a fault keeps it alive
    args += ["--dump-dir", str(s.run_dir / "dumps"), "--dump-timeouts", json.dumps(s.timeouts_record())]
    if dump_tool:
        args += ["--dump-tool", dump_tool]
    return args


def load_args(s: Settings) -> list[str]:
    """`--load` unless NVRX_LOAD_CHECKPOINTS=0 (the no-resume control: every cycle starts from iteration 0;
    saves still go to the checkpoint directory)."""
    return [f"--load={s.checkpoint_dir}"] if s.checkpoint_load else []


def model_args(job: jobshape.Job | None = None) -> list[str]:
    """The model's shape arguments: the job's (ftqual.scenario.job), the walkthrough's tiny GPT by default,
    from the one shape the launcher's TP/PP checks also use."""
    return list((job or jobshape.resolve_job()).shape_args)


def batch_args(s: Settings) -> list[str]:
    """The team's micro and global batch (gradient accumulation as they set it); without them, the
    walkthrough's: a micro batch of 1 on every rank."""
    return [f"--micro-batch-size={s.micro_batch_size}", f"--global-batch-size={s.global_batch_size}"]


def eval_args(s: Settings) -> list[str]:
    """The team's evaluation; without one, none (Megatron core_v0.19 needs an interval even then)."""
    evaluation = s.job.evaluation
    if evaluation is None:
        return ["--eval-iters=0", f"--eval-interval={max(MIN_EVAL_INTERVAL, s.train_iters + 1)}"]
    return [f"--eval-interval={evaluation[0]}", f"--eval-iters={evaluation[1]}"]


def replacements(s: Settings, body: list[str]) -> list[dict[str, str]]:
    """run.json's `job.replaced`: each flag of the team's that ftqual replaced, with what the run uses
    instead (read from the command it runs: what it says is what ran) and why."""
    out = []
    for replaced in s.job.sorted.replaced:
        used = [t for t in body if jobshape.flag_name(t) == replaced.flag]
        out.append(replaced.record(" ".join(used) if used else "(not set)"))
    return out


def megatron_args(s: Settings, stack: StackChoice) -> list[str]:
    """ftqual's flags around the job's (its data, model and training arguments: ftqual.scenario.job): for
    the default tiny preset, the walkthrough's command unchanged."""
    ckpt = s.checkpoint_dir
    job = s.job
    return [
        "--enable-ft-package",
        "--ft-num-warmup-iters=0",
        *job.data,
        *model_args(job),
        f"--tensor-model-parallel-size={s.tp}",
        f"--pipeline-model-parallel-size={s.pp}",
        *batch_args(s),
        f"--train-iters={s.train_iters}",
        *job.training,
        *(["--use-distributed-optimizer"] if stack.dist_optimizer else []),
        *load_args(s),
        f"--save={ckpt}",
        f"--save-interval={s.save_interval}",
        "--ckpt-format=torch_dist",
        *(["--async-save", "--use-persistent-ckpt-worker"] if s.async_save else []),
        *(["--verify-integrity"] if s.verify_integrity else []),
        *eval_args(s),
        "--log-interval=1",
        *(["--calc-ft-timeouts"] if s.calc_ft_timeouts else []),
        # replay exact: deterministic kernels and reductions (its environment: launch.run.DETERMINISTIC_ENV)
        *(["--deterministic-mode"] if s.replay == "exact" else []),
        *stack.megatron_flags,
    ]


def smoke_args(s: Settings, stack: StackChoice) -> list[str]:
    ckpt = s.checkpoint_dir
    return [
        "--enable-ft-package",
        "--ft-num-warmup-iters=0",
        *batch_args(s),
        f"--train-iters={s.train_iters}",
        "--lr=0.0001",
        "--lr-decay-style=constant",
        *(["--use-distributed-optimizer"] if stack.dist_optimizer else []),
        *load_args(s),
        f"--save={ckpt}",
        f"--save-interval={s.save_interval}",
        "--ckpt-format=torch_dist",
        *(["--async-save"] if s.async_save else []),
        # a fault that stops a writer process needs one: the smoke workload writes from one only when asked
        *(
            ["--smoke-writer-process"]
            if s.async_save and launcher_prepares(s.fault) == "writer_process"
            else []
        ),
        *(["--verify-integrity"] if s.verify_integrity else []),
        *eval_args(s),
        "--log-interval=1",
        *(["--calc-ft-timeouts"] if s.calc_ft_timeouts else []),
        *([f"--smoke-checkpoint-mb={s.checkpoint_payload_mb}"] if s.checkpoint_payload_mb else []),
    ]


OVERRIDE_SCHEDULER = "--override-opt_param-scheduler"


def resume_adaptation(iteration: int) -> Adaptation:
    return Adaptation(
        component="megatron",
        flag=OVERRIDE_SCHEDULER,
        action="added",
        reason=f"the checkpoint directory already holds iteration {iteration}: Megatron asserts that the "
        "learning-rate schedule's total iterations equal the checkpoint's (OptimizerParamScheduler), which "
        "a run with more iterations changes; this run's constant schedule comes from its own arguments",
    )


def build_plan(
    s: Settings,
    stack: StackChoice,
    port: int,
    executable: str,
    compat: Compat | None = None,
    initial_iteration: int = 0,
    dump_tool: str | None = None,
) -> LaunchPlan:
    """`initial_iteration`: the tracker already in the checkpoint directory (a resumed run), 0 if none."""
    compat = compat or Compat()
    body = compat.apply(megatron_args(s, stack)) if s.workload == "megatron" else smoke_args(s, stack)
    adaptations = compat.adaptations if s.workload == "megatron" else ()
    if s.workload == "megatron" and initial_iteration > 0 and OVERRIDE_SCHEDULER not in s.extra_args:
        body.append(OVERRIDE_SCHEDULER)
        adaptations = (*adaptations, resume_adaptation(initial_iteration))
    workload = [*wrapper_args(s, dump_tool), "--", *body, *s.extra_args]
    flags = list(stack.megatron_flags) if s.workload == "megatron" else []
    return LaunchPlan(
        launcher=launcher_args(s, port, executable),
        workload=workload,
        megatron_flags=flags,
        log_server_port=port,
        adaptations=adaptations,
        dump_tool=dump_tool,
        replaced=tuple(replacements(s, body)),
    )
