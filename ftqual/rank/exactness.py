"""Faults that break exactness silently (family `exactness`): the hooks the workload's save and restore call.

Each of these faults is a kill after a checkpoint, as `kill` is, and a change to the state that crosses it
(the registry entry's `tampers`, ftqual.contract.TAMPERS): the job recovers and trains on, from a wrong
state, and only the checkpoint the recovered run writes shows it
(ftqual.verification.checks.checkpoint_equal).
The worker arms the change in every rank's process (`arm`), since a whole job's save or restore is wrong,
not one rank's; the workload, which runs in that process, asks at its save and its restore:

- `stale_save` (armed before the first injection): the first save of this process (after its second
  iteration) writes the previous iteration's model and optimizer under the new iteration's name, as an async
  save that wrote stale state while logging success; the kill follows that checkpoint, so the replacement
  restores it. The workload hands its state after every step (`after_step`, a deep copy of the last two,
  only while armed);
- `weights_only`, `fresh_rng`, `data_from_start` (armed in a replacement, once the first injection is
  claimed): the restore loads the model's weights without the optimizer's state, leaves the RNG as the
  fresh process seeded it, or restarts the data at sample 0.

The standard library only, as everything in ftqual.rank: the workload's tensors are only kept (copy.deepcopy),
never looked into. A workload that calls none of these hooks is refused by the launcher's settings
(ftqual.contract.TAMPER_WORKLOADS) before any run.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from ftqual.contract import FAULT_KINDS, TAMPERS
from ftqual.rank.markers import log

STALE_SAVE, WEIGHTS_ONLY, FRESH_RNG, DATA_FROM_START = TAMPERS
RESTORE_TAMPERS = (WEIGHTS_ONLY, FRESH_RNG, DATA_FROM_START)


class _State:
    """The change in force in this process, and what the stale save keeps."""

    def __init__(self) -> None:
        self.tamper: str | None = None
        self.previous: object = None  # stale_save: the state after the iteration before the last, and
        self.current: object = None  # after the last, kept by deep copy
        self.stale_written = False


_state = _State()


def tampers_of(fault: str) -> str | None:
    kind = FAULT_KINDS.get(fault)
    return kind.tampers if kind is not None else None


def arms_now(tamper: str | None, made: int) -> bool:
    """Whether a process arms `tamper`, `made` injection markers existing at its start: a stale save before
    the injection (it is the checkpoint the kill follows), a restore's change after it (the replacement's)."""
    if tamper is None:
        return False
    return made == 0 if tamper == STALE_SAVE else made >= 1


def arm(tamper: str | None) -> None:
    """Put `tamper` in force in this process (None: nothing)."""
    _state.tamper, _state.previous, _state.current, _state.stale_written = tamper, None, None, False
    if tamper is not None:
        log(f"exactness fault armed in this process: {tamper}")


def in_force() -> str | None:
    return _state.tamper


# --- the restore's hooks ----------------------------------------------------------------------------------


def restores_optimizer() -> bool:
    if _state.tamper == WEIGHTS_ONLY:
        log("weights_only: the restore loads the model's weights only, not the optimizer's state")
        return False
    return True


def restores_rng() -> bool:
    if _state.tamper == FRESH_RNG:
        log("fresh_rng: the restore leaves the RNG as this process seeded it")
        return False
    return True


def data_position(consumed: int) -> int:
    """The samples consumed the data continues after: the restored count, or 0 (data_from_start)."""
    if _state.tamper == DATA_FROM_START:
        log(f"data_from_start: the data restarts at sample 0 (the checkpoint says {consumed} consumed)")
        return 0
    return consumed


# --- the save's hooks -------------------------------------------------------------------------------------


def after_step(make: Callable[[], object]) -> None:
    """An iteration ended: under stale_save, until its save was written, keep `make()` (the state now) and
    the one before it. `make` is called only then (no cost otherwise)."""
    if _state.tamper == STALE_SAVE and not _state.stale_written:
        _state.previous, _state.current = _state.current, copy.deepcopy(make())


def state_to_save(state: object, iteration: int) -> object:
    """What the save of `iteration` writes: `state`, or under stale_save (once) the previous iteration's."""
    if _state.tamper != STALE_SAVE or _state.stale_written or _state.previous is None:
        return state
    _state.stale_written = True
    previous, _state.previous, _state.current = _state.previous, None, None
    log(f"stale_save: the save of iteration {iteration} writes iteration {iteration - 1}'s state instead")
    return previous
