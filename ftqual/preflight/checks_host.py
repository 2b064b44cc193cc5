"""Checks of this host and the planned runs: work dir, disk, stale state, TMPDIR, ports, scenarios."""

from __future__ import annotations

from ftqual.contract import FAULT_ACTIONS, family_of, is_fault
from ftqual.preflight import applicability
from ftqual.preflight.check_base import FAIL, PASS, SKIP, WARN, CheckResult, Context, gib
from ftqual.scenario import job as jobshape
from ftqual.scenario.job import MODEL, ModelShape
from ftqual.scenario.model import Scenario, WorkflowConfig

HANG_PLACEMENTS = ("step", "immediate")
SUN_PATH_MAX = 107  # sockaddr_un.sun_path is 108 bytes including the terminating NUL
# Filesystems every node of a cluster sees at the same path; node-local ones break multi-node runs.
SHARED_FS = {
    "nfs",
    "nfs4",
    "lustre",
    "gpfs",
    "beegfs",
    "ceph",
    "cephfs",
    "wekafs",
    "glusterfs",
    "fuse.glusterfs",
    "panfs",
    "fuse.weka",
    "fuse.cephfs",
    "orangefs",
    "smb3",
    "cifs",
    "virtiofs",
}
LOCAL_FS = {
    "tmpfs",
    "overlay",
    "overlayfs",
    "ext2",
    "ext3",
    "ext4",
    "xfs",
    "btrfs",
    "zfs",
    "f2fs",
    "ramfs",
    "devtmpfs",
    "squashfs",
}
SMOKE_CHECKPOINT_BYTES = 8 * 2**20  # the CPU smoke model is a few hundred KiB; generous on purpose
# The estimate counts every byte of a checkpoint with its optimizer state (ftqual.scenario.job); the margin
# covers what it does not: the logs, the filesystem's own overhead, a save whose files are rewritten.
DISK_MARGIN = 1.25


def check_work_dir(ctx: Context) -> CheckResult:
    w, raw = ctx.facts.work_dir, ctx.cfg.work_dir
    if w is None:
        return CheckResult(
            "work_dir",
            FAIL,
            "work_dir could not be resolved",
            "set work_dir to an absolute directory every node sees at the same path",
        )
    if not w.absolute:
        return CheckResult(
            "work_dir", FAIL, f"work_dir {w.path!r} is not absolute", "give an absolute work_dir"
        )
    if w.error and w.free_bytes is None:
        return CheckResult("work_dir", FAIL, f"{w.path}: {w.error}", "choose an existing, writable location")
    if not w.writable:
        what = "is not writable" if w.exists else f"cannot be created ({w.probe_path} is not writable)"
        return CheckResult(
            "work_dir", FAIL, f"{w.path} {what}", "choose a writable work_dir or fix permissions"
        )
    origin = (
        "empty: the workflow's working directory"
        if not raw
        else "relative: resolved against the working directory"
        if not raw.startswith(("/", "~"))
        else ""
    )
    where = f"{w.path}" + (f" ({origin})" if origin else "")
    fs = f"{w.fs_type or 'unknown fs'} at {w.mount_point or '?'}"
    return CheckResult(
        "work_dir", PASS, f"{where} on {fs}, writable" + ("" if w.exists else ", will be created")
    )


def filesystem_words(
    fs_type: str | None, mount_point: str | None, device: str | None, free_bytes: int | None
) -> str:
    """A filesystem in words, as the storage lines name it: `xfs at /lus (device /dev/md0), 1.20 TiB free`."""
    words = f"{fs_type or 'unknown fs'} at {mount_point or '?'}"
    if device:
        words += f" (device {device})"
    return words + (f", {gib(free_bytes)} free" if free_bytes is not None else ", free space unknown")


def check_checkpoint_dir(ctx: Context) -> CheckResult:
    """The config's checkpoint_dir is an existing, writable directory (ftqual.scenario.checkpoint_dir), and
    the filesystem holding it is named: a mistyped root must not qualify whatever disk is above it."""
    root = ctx.cfg.defaults.checkpoint_root
    if not root:
        return CheckResult(
            "checkpoint_dir", SKIP, "not set: each run keeps its checkpoints in its run directory (work_dir)"
        )
    problems = ctx.facts.checkpoint_dir_problems
    if problems:
        return CheckResult(
            "checkpoint_dir",
            FAIL,
            "; ".join(problems),
            "checkpoint_dir must be an existing, writable directory on the filesystem to qualify",
        )
    d = ctx.facts.checkpoint_dir
    where = (
        "filesystem unknown"
        if d is None
        else filesystem_words(d.fs_type, d.mount_point, d.device, d.free_bytes)
    )
    return CheckResult("checkpoint_dir", PASS, f"{root}: an existing, writable directory on {where}")


def check_shared_fs(ctx: Context) -> CheckResult:
    w = ctx.facts.work_dir
    if w is None or w.fs_type is None:
        status = WARN if ctx.max_nnodes > 1 else SKIP
        return CheckResult(
            "shared_fs",
            status,
            "filesystem type of work_dir unknown",
            "make sure every node sees work_dir at the same path" if status == WARN else "",
        )
    fs = w.fs_type
    nnodes = ctx.max_nnodes
    if nnodes == 1:
        return CheckResult("shared_fs", PASS, f"single node; work_dir on {fs}")
    if fs in SHARED_FS or fs.startswith("nfs"):
        return CheckResult("shared_fs", PASS, f"work_dir on {fs}, a shared filesystem")
    if fs in LOCAL_FS:
        return CheckResult(
            "shared_fs",
            WARN,
            f"nnodes={nnodes} but work_dir is on {fs} "
            f"({w.mount_point}), usually node-local: other nodes will not see checkpoints or markers",
            "put work_dir on a filesystem shared by all nodes (NFS, Lustre, GPFS, ...)",
        )
    return CheckResult(
        "shared_fs",
        WARN,
        f"nnodes={nnodes}; cannot tell whether {fs} is shared",
        "make sure every node sees work_dir at the same path",
    )


def megatron_params(model: ModelShape = MODEL, tp: int = 1) -> int:
    """The job's parameters (ftqual.scenario.job.params): embeddings padded to 128*tp, GQA, SwiGLU, untied."""
    return jobshape.params(model, tp)


def checkpoints_per_run(s: Scenario) -> int:
    return jobshape.checkpoints_written(s.train_iters, s.save_interval)


def run_checkpoint_bytes(s: Scenario, workload: str) -> tuple[int, str]:
    """One checkpoint of `s`'s job, and how that was estimated."""
    if workload != "megatron":
        per = SMOKE_CHECKPOINT_BYTES + s.checkpoint_payload_mb * 2**20
        return per, f"smoke checkpoints of {gib(per)}"
    job = jobshape.resolve_job(s.model, s.megatron_args)
    n = jobshape.params(job.shape, s.tp, job.null_tokenizer)
    per = n * jobshape.CHECKPOINT_BYTES_PER_PARAM
    return per, (
        f"{job.model}: {jobshape.human(n)} params x {jobshape.CHECKPOINT_BYTES_PER_PARAM} B (bf16 weights + "
        f"fp32 main + 2 fp32 Adam moments) = {gib(per)} per checkpoint"
    )


def disk_estimate(cfg: WorkflowConfig) -> tuple[int, str]:
    """(bytes the runs' checkpoints need at once, how that was estimated). Megatron keeps every checkpoint it
    writes (train_iters // save_interval a run); once a run is verified its payloads are dropped or kept
    (config checkpoint_payloads, ftqual.launch.jobshape.peak_checkpoints): dropped, only the run in flight
    holds its checkpoints (runs on one box take turns on its GPUs); kept, every run's stay."""
    runs = cfg.scenarios or (cfg.defaults,)
    sized = [run_checkpoint_bytes(s, cfg.workload) for s in runs]
    per, how = max(sized, key=lambda item: item[0])
    written = [per_run * checkpoints_per_run(s) for (per_run, _), s in zip(sized, runs, strict=True)]
    large = any(total >= jobshape.AUTO_DROP_BYTES for total in written)
    peak = jobshape.peak_checkpoints(runs, cfg.checkpoint_payloads, parallel=1, large=large)
    dropped = cfg.checkpoint_payloads == "drop" or (cfg.checkpoint_payloads == "auto" and large)
    when = "payloads dropped once each run is verified" if dropped else "every run's kept"
    return peak * per, f"{how} x {peak} checkpoints on the disk at once ({len(runs)} runs, {when})"


def check_disk_space(ctx: Context) -> CheckResult:
    if (
        ctx.facts.checkpoint_dir_problems
    ):  # its nearest parent's free space is not the runs' (a mistyped root)
        return CheckResult(
            "disk_space", SKIP, "not judged: checkpoint_dir is not usable (the check checkpoint_dir says why)"
        )
    w = ctx.facts.checkpoint_dir or ctx.facts.work_dir
    where = "checkpoint_dir" if ctx.facts.checkpoint_dir else "work_dir"
    need, how = disk_estimate(ctx.cfg)
    required = int(need * DISK_MARGIN)
    if w is None or w.free_bytes is None:
        return CheckResult(
            "disk_space",
            WARN,
            f"free space unknown; need about {gib(required)} ({how}, {DISK_MARGIN:g}x margin)",
            "make sure the checkpoint filesystem has that much room",
        )
    detail = (
        f"{gib(w.free_bytes)} free at {w.probe_path} ({where}); need {gib(required)} ({how}, "
        f"{DISK_MARGIN:g}x margin)"
    )
    if w.free_bytes < required:
        return CheckResult(
            "disk_space",
            FAIL,
            detail,
            f"free space, move {where}, or keep fewer checkpoints (a larger save_interval or fewer "
            "train_iters); old runs' checkpoints can be deleted once their verify.json is written",
        )
    return CheckResult("disk_space", PASS, detail)


def check_gpu_memory(ctx: Context) -> CheckResult:
    """The job's estimated memory on its busiest GPU (ftqual.scenario.job.gpu_memory) against the GPUs'."""
    if not ctx.megatron:
        return CheckResult("gpu_memory", SKIP, f"not needed by the {ctx.cfg.workload} workload")
    have = ctx.facts.stack.gpu_memory_bytes
    worst: tuple[int, str] | None = None
    for s in ctx.runs:
        job = jobshape.resolve_job(s.model, s.megatron_args)
        dp = max(1, s.world_size // (s.tp * s.pp * job.context_parallel))
        flash = ctx.resolved.transformer_impl == "transformer_engine"
        memory = jobshape.gpu_memory(
            job.shape, s.tp, s.pp, dp, ctx.resolved.dist_optimizer, job.null_tokenizer, flash,
            job.bytes_per_weight, job.micro_batch_size,
        )  # fmt: skip
        said = (
            f"{jobshape.describe(job, s.tp)} with TP={s.tp} PP={s.pp} DP={dp}, micro batch "
            f"{job.micro_batch_size}"
            f"{' (distributed optimizer)' if ctx.resolved.dist_optimizer else ''} needs about "
            f"{gib(memory.total)} per GPU (weights {gib(memory.weights)}, gradients {gib(memory.grads)}, "
            f"optimizer {gib(memory.optimizer)}, activations {gib(memory.activations)}; an estimate)"
        )
        if worst is None or memory.total > worst[0]:
            worst = (memory.total, said)
    assert worst is not None
    if have is None:
        # no GPU seen (check_gpus says so) or a torch too old to say: nothing to judge against
        return CheckResult("gpu_memory", SKIP, f"GPU memory unknown; {worst[1]}")
    if worst[0] > have:
        return CheckResult(
            "gpu_memory",
            FAIL,
            f"the job does not fit the GPUs' {gib(have)}: {worst[1]}",
            "raise tp or pp, use more GPUs with dist_optimizer on, a smaller micro batch or a smaller model",
        )
    return CheckResult("gpu_memory", PASS, f"{worst[1]}; the GPUs have {gib(have)}")


# ------------------------------------------------------------------------------------------------ host


def socket_path_len(tmpdir: str, pid_max: int, nproc: int) -> tuple[int, str]:
    """Longest AF_UNIX path NVRx will bind: `$TMPDIR/_ft_launcher<pid>_rmon<n>.socket` and `..._to_rmon`."""
    pid = "9" * len(str(max(pid_max - 1, 1)))
    names = [f"_ft_launcher{pid}_rmon{max(nproc - 1, 0)}.socket", f"_ft_launcher{pid}_to_rmon.socket"]
    path = max((f"{tmpdir.rstrip('/')}/{n}" for n in names), key=lambda p: len(p.encode()))
    return len(path.encode()), path


def check_tmpdir(ctx: Context) -> CheckResult:
    f = ctx.facts
    n, path = socket_path_len(f.tmpdir, f.pid_max, ctx.max_gpus_per_node)
    if n > SUN_PATH_MAX:
        return CheckResult(
            "tmpdir",
            FAIL,
            f"TMPDIR {f.tmpdir} makes NVRx's socket paths {n} bytes "
            f"(max {SUN_PATH_MAX}): rank monitors cannot bind",
            "export TMPDIR=/tmp",
        )
    return CheckResult(
        "tmpdir", PASS, f"NVRx socket paths up to {n} bytes (max {SUN_PATH_MAX}) in {f.tmpdir}"
    )


def check_log_server_port(ctx: Context) -> CheckResult:
    p = ctx.facts.ports
    if not p.ephemeral_ok:
        return CheckResult(
            "log_server_port",
            FAIL,
            f"cannot bind any TCP port on 0.0.0.0 ({p.error})",
            "allow the gRPC log server to listen (firewall/sandbox)",
        )
    note = (
        "; NVRx's default 50051 is taken (a run without its own port would fail)" if p.default_in_use else ""
    )
    return CheckResult(
        "log_server_port",
        PASS,
        f"free ports available; the launcher gives each run its own --ft-log-server-port{note}",
    )


# ------------------------------------------------------------------------------------------------ scenarios

NOT_APPLICABLE = "not applicable on this stack"  # a scenario the stack cannot run (preflight.applicability)


def hang_budget(s: Scenario) -> str:
    t = s.timeouts
    worst = max(t.step, t.checkpointing, t.out_of_section)
    likely = t.step if s.hang_placement == "step" else worst
    return (
        f"hang detection ~{likely:.0f} s (placement {s.hang_placement}), up to {worst:.0f} s if the stop "
        f"lands in checkpointing/out of section"
    )


def check_scenario(s: Scenario, cfg: WorkflowConfig) -> CheckResult:
    cid = f"scenario:{s.name}"
    bad: list[str] = []
    fixes: list[str] = []
    # Types, ranges and the rank's place in the world are the config's rules (ftqual.scenario.model); these
    # are
    # the ones about whether the run can show a recovery at all.
    if family_of(s.fault) != "none":
        if s.train_iters < 2 * s.save_interval:
            bad.append(
                f"train_iters {s.train_iters} < 2 x save_interval {s.save_interval}: no checkpoint after "
                "the resume"
            )
            fixes.append(f"set train_iters >= {2 * s.save_interval}")
        if s.max_restarts < 1:
            bad.append("max_restarts 0 leaves no restart for the fault")
            fixes.append("set max_restarts >= 1")
    elif s.train_iters < s.save_interval:
        bad.append(f"train_iters {s.train_iters} < save_interval {s.save_interval}: no checkpoint at all")
        fixes.append(f"set train_iters >= {s.save_interval}")
    if bad:
        return CheckResult(cid, FAIL, "; ".join(bad), "; ".join(fixes))
    what = {
        "none": "baseline",
        "kill": f"SIGKILL rank {s.rank}",
        "hang": f"SIGSTOP rank {s.rank}",
        "node_loss": f"SIGKILL the node of rank {s.rank} (its ft_launcher and every process below it)",
    }.get(s.fault) or f"{FAULT_ACTIONS.get(s.fault, s.fault)} to rank {s.rank}"
    detail = f"{what}, {s.train_iters} iterations, checkpoint every {s.save_interval}"
    if is_fault(s.fault, lambda f: f.lives_on and not f.catalog):  # the walkthrough's hang
        detail += f"; {hang_budget(s)}"
    return CheckResult(cid, PASS, detail)


def check_scenarios(ctx: Context) -> list[CheckResult]:
    if not ctx.cfg.scenarios:
        return [
            CheckResult("scenarios", FAIL, "no scenarios configured", "add scenarios (baseline, kill, hang)")
        ]
    gaps = applicability.judge(ctx)
    return [
        CheckResult(f"scenario:{s.name}", SKIP, f"{NOT_APPLICABLE}: {gaps[s.name]}")
        if s.name in gaps
        else check_scenario(s, ctx.cfg)
        for s in ctx.cfg.scenarios
    ]


def check_storage_floor(ctx: Context) -> CheckResult:
    """The checkpoint directory's measured write and read rate (ftqual/preflight/storage.py): the floor every
    save and load is set against. Informative: a slow disk is the team's, not a failure; a probe that could
    not write warns, since the runs will write there too."""
    floor = ctx.facts.storage
    if floor is None:
        return CheckResult("storage_floor", SKIP, "not measured")
    # the filesystem measured, named wherever it is known (a root that is not usable has none)
    words = filesystem_words(floor.filesystem, floor.mount_point, floor.device, floor.free_bytes)
    where = f" ({words})" if floor.mount_point or floor.filesystem else ""
    if floor.method == "skipped":
        return CheckResult("storage_floor", SKIP, f"not measured at {floor.path}{where}: {floor.error}")
    if floor.method == "failed":
        return CheckResult(
            "storage_floor",
            WARN,
            f"could not measure {floor.path}{where}: {floor.error}",
            "make the checkpoint directory writable, or set storage_probe_mb: 0 to skip the measurement",
        )
    return CheckResult(
        "storage_floor",
        PASS,
        f"{floor.path} ({words}): write {floor.write_gbps} GB/s, read {floor.read_gbps} GB/s over "
        f"{gib(floor.bytes)} (fsync'd; read {floor.method})",
    )
