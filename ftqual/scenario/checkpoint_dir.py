"""Whether a configured checkpoint root (config `checkpoint_dir`, launcher `NVRX_CHECKPOINT_ROOT`) is usable.

The root is the team's: it must already exist as a writable directory on the filesystem the team wants
qualified. ftqual never creates it (nor anything above it); it makes only each run's own folder,
`<checkpoint_dir>/<run-id>`, directly below it. A mistyped path to the shared filesystem would otherwise be
created on whatever disk holds its nearest existing parent (`/`, a container's overlay) and the runs would
qualify that disk instead.

`checkpoint_dir_problems` is the one statement of the rule, used by the config validation, the preflight
(ftqual/preflight/command.py) and the launcher (ftqual/launch/runstate.py). It reads the filesystem and, only
where every read says the directory is writable, proves it by creating and removing one empty probe file:
`os.access` answers from mode bits, which root bypasses, while a read-only mount, an ACL, a quota or a
server-side refusal shows only on a real creation. Nothing else is written, nothing is left behind.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat

PROBE_PREFIX = ".ftqual-write-probe-"
CREATED_ONLY_BELOW = "ftqual makes only each run's folder below it"

# How to fix a refused probe file, by errno; anything else gets the generic fix.
_FIXES: dict[int, str] = {
    errno.EROFS: "remount it read-write, or choose a directory on a writable filesystem",
    errno.EACCES: "give the user running ftqual write access to it, or choose another directory",
    errno.EPERM: "lift the restriction (an immutable flag, an ACL, the server's export), or choose another "
    "directory",
    errno.ENOSPC: "free space or inodes there, or choose another directory",
    errno.EDQUOT: "free space there or raise the quota, or choose another directory",
    errno.ENOENT: "it takes no new files (a virtual filesystem such as /proc, or it was removed meanwhile): "
    "choose a directory on the filesystem you want qualified",
}
GENERIC_FIX = "fix the filesystem, or choose another directory"


def checkpoint_dir_problems(path: str | os.PathLike[str], name: str = "checkpoint_dir") -> list[str]:
    """One line per problem with the checkpoint root `path` (what is wrong and how to fix it); [] when it
    is an existing, writable directory, or when `path` is empty (not configured).

    `path` is taken as the config takes it (`~` expanded, a relative path against the working directory);
    `name` is how the line names the setting (`checkpoint_dir` for the config, `NVRX_CHECKPOINT_ROOT` for
    the launcher). Never raises for a filesystem error: every error is a problem line. Its only write is
    the probe file, created in `path` and removed at once."""
    raw = os.fspath(path)
    if not raw:
        return []
    full = os.path.abspath(os.path.expanduser(raw))
    shown = f"{name} {raw}" + (f" ({full})" if full != raw else "")
    try:
        mode = os.stat(full).st_mode
    except FileNotFoundError:
        return [_missing(full, shown)]
    except NotADirectoryError:
        blocker = _first_non_directory(full)
        return [
            f"{shown} cannot exist: {blocker} is not a directory; fix the path"
            if blocker
            else f"{shown} cannot exist: a part of its path is not a directory; fix the path"
        ]
    except PermissionError:
        return [
            f"{shown} cannot be reached: permission denied on a directory above it; give the user running "
            "ftqual access to the whole path, or choose another directory"
        ]
    except OSError as exc:
        return [f"{shown} cannot be checked ({_strerror(exc)}); fix the path or the filesystem"]
    if not stat.S_ISDIR(mode):
        kind = (
            "a file, not a directory" if stat.S_ISREG(mode) else "not a directory (a device, socket or FIFO)"
        )
        return [
            f"{shown} is {kind}: point it at a directory on the filesystem you want qualified "
            f"({CREATED_ONLY_BELOW})"
        ]
    if _read_only_mount(full):
        return [f"{shown} is on a read-only mount: {_FIXES[errno.EROFS]}"]
    if not os.access(full, os.W_OK | os.X_OK):
        return [
            f"{shown} is not writable by this user (uid {os.geteuid()}): give it write access, or choose "
            "another directory (each run's folder is created in it)"
        ]
    refused = probe_write(full)
    if refused is not None:
        return [f"{shown} refused a test file {refused}"]
    return []


def probe_write(directory: str) -> str | None:
    """Create and remove one empty file in `directory`; None when both worked, else why and the fix, as
    `(Read-only file system, EROFS): remount it ...`. The file's name is unique (pid and random), created
    with O_EXCL: never someone else's."""
    probe = os.path.join(directory, f"{PROBE_PREFIX}{os.getpid()}-{secrets.token_hex(4)}")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        return f"({_strerror(exc)}): {_FIXES.get(exc.errno or 0, GENERIC_FIX)}"
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError as exc:
        return f"that could not be removed ({probe}: {_strerror(exc)}): remove it, then {GENERIC_FIX}"
    return None


def _missing(full: str, shown: str) -> str:
    if os.path.islink(full):
        return (
            f"{shown} is a symbolic link to {os.readlink(full)}, which does not exist: create the target "
            f"on the filesystem you want qualified ({CREATED_ONLY_BELOW}), or fix the path"
        )
    parent = _nearest_existing(full)
    where = f" (its nearest existing parent is {parent})" if parent else ""
    return (
        f"{shown} does not exist{where}: create it on the filesystem you want qualified "
        f"({CREATED_ONLY_BELOW}), or fix the path"
    )


def _nearest_existing(full: str) -> str | None:
    p = os.path.dirname(full)
    while True:
        if os.path.isdir(p):
            return p
        up = os.path.dirname(p)
        if up == p:
            return None
        p = up


def _first_non_directory(full: str) -> str | None:
    """The first component of `full`, from `/` down, that exists but is not a directory."""
    parts = full.split(os.sep)
    for i in range(2, len(parts) + 1):
        p = os.sep.join(parts[:i]) or os.sep
        try:
            if not stat.S_ISDIR(os.stat(p).st_mode):
                return p
        except OSError:
            return None
    return None


def _read_only_mount(full: str) -> bool:
    try:
        return bool(os.statvfs(full).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _strerror(exc: OSError) -> str:
    code = errno.errorcode.get(exc.errno or 0)
    return f"{exc.strerror or exc.__class__.__name__}" + (f", {code}" if code else "")
