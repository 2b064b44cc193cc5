"""What is already on disk, read before anything is created: usable directories and no reused evidence.

`check_directories` proves that every directory the run writes into can be created (or exists and is
writable); `check_run_state` refuses an old injection marker, an earlier launch of the run ID, calculated
timeouts, and a checkpoint tracker that cannot be this run's (not a plain integer, no matching
`iter_XXXXXXX/`, past TRAIN_ITERS, too few save points left for the faults requested). A sane tracker is
accepted: resuming an existing run's checkpoints (NVRX_CHECKPOINT_DIR) is the walkthrough's path, and
run.json records its iteration as `initial_checkpoint_iteration`. Each problem is one SettingsError line;
nothing here writes.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from ftqual.contract import family_of
from ftqual.launch.settings import INT_RE, Settings, SettingsError, shown
from ftqual.scenario.checkpoint_dir import checkpoint_dir_problems

TRACKER_MAX_BYTES = 64  # Megatron writes a decimal iteration; anything longer is not its tracker
# ft_launcher (NVRx 0.7.0) puts its IPC sockets in tempfile.gettempdir(): the longest name it makes there
# (largest pid, two-digit local rank) must fit AF_UNIX's 107-byte path, or every rank monitor fails to bind
# and the run exits 1 within seconds with empty logs.
SUN_PATH_MAX = 107
LONGEST_SOCKET = "/_ft_launcher4194304_to_rmon.socket"
TEMP_DIR_MAX = SUN_PATH_MAX - len(LONGEST_SOCKET)


def _describe(path: Path, s: Settings) -> str:
    """Name a directory by the variable it comes from, for the message."""
    if path == s.work_dir:
        return f"NVRX_WORK_DIR {path}"
    if path == s.checkpoint_dir and s.checkpoint_from_root:
        return f"NVRX_CHECKPOINT_ROOT's run directory {path}"
    if path == s.checkpoint_dir and not s.checkpoint_dir_is_default:
        return f"NVRX_CHECKPOINT_DIR {path}"
    return str(path)


def _directory_problem(target: Path, s: Settings) -> str | None:
    """Why `target` cannot be created or written, or None. Reads only; creates nothing."""
    chain = [target, *target.parents]
    for path in reversed(chain):  # from / down, so the first thing in the way is named
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            parent = path.parent
            if not os.access(parent, os.W_OK | os.X_OK):
                return f"{_describe(path, s)} cannot be created: {parent} is not writable"
            return None  # the rest of the chain is ours to create
        except OSError as exc:
            return f"{_describe(path, s)} cannot be checked ({exc.strerror or exc.__class__.__name__})"
        if not stat.S_ISDIR(mode):
            kind = "a file, not a directory" if stat.S_ISREG(mode) else "not a directory"
            return f"{_describe(path, s)} is {kind}"
    if not os.access(target, os.W_OK | os.X_OK):
        return f"{_describe(target, s)} is not writable (read-only, immutable or not ours)"
    return None


def check_directories(s: Settings) -> None:
    """Every directory the run writes into can be created (or exists as a writable directory).

    `os.access` sees read-only mounts and immutable inodes even for root; what it cannot see (root on a
    directory that refuses creation, such as /proc) is caught when the directories are made, and undone.

    NVRX_CHECKPOINT_ROOT is the team's: it must already exist as a writable directory (proved with a
    probe file, ftqual.scenario.checkpoint_dir), as only the run's own folder is made below it; a mistyped
    root is refused, never created on the disk above it.
    """
    if s.checkpoint_from_root and s.checkpoint_root is not None:
        problems = checkpoint_dir_problems(s.checkpoint_root, "NVRX_CHECKPOINT_ROOT")
        if problems:
            raise SettingsError(problems[0])
    for target in (s.work_dir, *s.run_dirs):
        problem = _directory_problem(target, s)
        if problem:
            raise SettingsError(problem)


def read_tracker(path: Path) -> int | None:
    """The tracker's iteration, None when absent; SettingsError when it cannot be ours."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SettingsError(
            f"Checkpoint tracker {path} is unreadable ({exc.__class__.__name__}); fix it before launching"
        ) from exc
    if not stat.S_ISREG(mode):  # a FIFO would block the read forever, a directory cannot be read
        raise SettingsError(f"Checkpoint tracker {path} is not a regular file; fix it before launching")
    try:
        with open(path, "rb") as fh:
            data = fh.read(TRACKER_MAX_BYTES + 1)
        text = data.decode("ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(
            f"Checkpoint tracker {path} is unreadable ({exc.__class__.__name__}); fix it before launching"
        ) from exc
    if len(data) > TRACKER_MAX_BYTES:
        raise SettingsError(
            f"Checkpoint tracker {path} is larger than {TRACKER_MAX_BYTES} bytes: not Megatron's"
        )
    value = text.strip()
    if not value:
        raise SettingsError(f"Checkpoint tracker {path} is empty; fix it before launching")
    if not INT_RE.fullmatch(value):
        raise SettingsError(
            f"Checkpoint tracker {path} does not hold an integer iteration (got {shown(value)})"
        )
    return int(value)


def check_tracker(s: Settings) -> None:
    """A tracker already in the checkpoint directory must belong to a run of this layout and length."""
    iteration = read_tracker(s.tracker_path)
    if iteration is None:
        return
    iter_dir = s.checkpoint_dir / f"iter_{iteration:07d}"
    if not iter_dir.is_dir():
        raise SettingsError(
            f"Checkpoint tracker {s.tracker_path} names iteration {iteration} but {iter_dir.name} is missing "
            "there: not a checkpoint of this layout; archive it or use another NVRX_CHECKPOINT_DIR"
        )
    if iteration > s.train_iters:
        raise SettingsError(
            f"Checkpoint tracker {s.tracker_path} is at iteration {iteration}, past "
            f"TRAIN_ITERS={s.train_iters}: a checkpoint of another run; use another NVRX_CHECKPOINT_DIR"
        )
    if family_of(s.fault) != "none" and iteration >= s.train_iters:
        raise SettingsError(
            f"Checkpoint tracker {s.tracker_path} is at iteration {iteration} = TRAIN_ITERS: nothing is "
            f"left to train, so fault {s.fault} could never be injected"
        )
    # Each injection follows a checkpoint newer than the tracker a cycle starts from (the baseline), saved
    # before the last iteration: a resumed run needs that many save points past its tracker.
    saves_left = (s.train_iters - 1) // s.save_interval - iteration // s.save_interval
    if family_of(s.fault) != "none" and saves_left < s.injections:
        raise SettingsError(
            f"Checkpoint tracker {s.tracker_path} is at iteration {iteration}: only {saves_left} "
            f"checkpoint(s) before TRAIN_ITERS={s.train_iters} follow it, too few for "
            f"NVRX_INJECTIONS={s.injections}"
        )


def _holds_anything(path: Path) -> bool:
    try:
        with os.scandir(path) as entries:
            return next(entries, None) is not None
    except (FileNotFoundError, NotADirectoryError):
        return False


def check_run_state(settings: Settings, host: str) -> None:
    """Refuse to reuse evidence: an old marker, an earlier launch, calculated timeouts, a foreign tracker."""
    run_dir = settings.run_dir
    if settings.marker_path.exists():
        raise SettingsError("This run ID already has an injection marker; use a new NVRX_RUN_ID")
    # Node 0 writes run.json; on the other nodes of a multi-node run it may already be there, so each of
    # them checks its own launcher record instead.
    if settings.node_rank == 0 and (run_dir / "run.json").exists():
        raise SettingsError(
            f"Run directory {run_dir} already holds run.json from an earlier launch; use a new NVRX_RUN_ID"
        )
    if settings.node_rank == 0 and settings.checkpoint_from_root and _holds_anything(settings.checkpoint_dir):
        raise SettingsError(
            f"Checkpoint directory {settings.checkpoint_dir} (NVRX_CHECKPOINT_ROOT/<run-id>) already holds "
            "files: a run's checkpoints are never reused; use a new NVRX_RUN_ID"
        )
    if (run_dir / "pids" / f"{host}.launcher.json").exists():
        raise SettingsError(f"Host {host} already launched run {settings.run_id}; use a new NVRX_RUN_ID")
    # Calculated timeouts keep ft_state.json on purpose (the workload loads it); fixed ones refuse it.
    if not settings.calc_ft_timeouts and (settings.checkpoint_dir / "ft_state.json").exists():
        raise SettingsError(
            "This fixed-timeout run requires a checkpoint directory without calculated "
            f"ft_state.json ({settings.checkpoint_dir}); archive it deliberately"
        )
    check_tracker(settings)


def temp_dir(env: Mapping[str, str]) -> tuple[str, str]:
    """(variable, directory) that Python's tempfile.gettempdir() will pick in ft_launcher's environment."""
    for name in ("TMPDIR", "TEMP", "TMP"):
        value = env.get(name)
        if value and os.path.isdir(value) and os.access(value, os.W_OK | os.X_OK):
            return name, value
    for value in ("/tmp", "/var/tmp", "/usr/tmp"):
        if os.path.isdir(value) and os.access(value, os.W_OK | os.X_OK):
            return "TMPDIR", value
    return "TMPDIR", os.getcwd()


def check_temp_dir(env: Mapping[str, str]) -> None:
    """ft_launcher's socket directory is short enough for AF_UNIX (a long TMPDIR breaks every rank)."""
    name, directory = temp_dir(env)
    length = len(os.path.abspath(directory).encode())
    if length > TEMP_DIR_MAX:
        raise SettingsError(
            f"{name} {shown(directory, 200)} is too long for ft_launcher's sockets ({length} bytes, at most "
            f"{TEMP_DIR_MAX}); set TMPDIR=/tmp"
        )
