"""A check's one look at iter_<k>'s folder: a completed checkpoint, or why not, said in the check's words."""

from __future__ import annotations

from ftqual.verification.checks.result import Findings, Scoped
from ftqual.verification.evidence.checkpoints import CheckpointDir
from ftqual.verification.evidence.snapshot import RunSnapshot

NOT_COMPLETED = "iter_{k:07d} is not a completed checkpoint ({why})"


def completed_folder(
    snap: RunSnapshot, f: Findings | Scoped, k: int, *, absent: str, unfinished: str
) -> CheckpointDir | None:
    """iter_<k>'s folder when it is a completed checkpoint (`.metadata` finalized), else None with why in `f`:
    the checkpoint directory unread (unknown, its reason), the folder absent (problem `absent`) or never
    finalized (problem `unfinished`, citing the folder). The texts are str.format templates: `absent` of {k}
    and {root} (the checkpoint directory), `unfinished` of {k}, {path} (the folder) and {why}."""
    if snap.checkpoints is None:
        f.unknown(snap.reason("checkpoints"))
        return None
    folder = snap.checkpoints.dir_for(k)
    if folder is None:
        f.problem(absent.format(k=k, root=snap.checkpoints.root))
    elif not folder.has_metadata:
        f.problem(unfinished.format(k=k, path=folder.ref.path, why=folder.why_incomplete), folder.ref)
    else:
        return folder
    return None
