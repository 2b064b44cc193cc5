"""Waiting in tests for something another process does: a condition with a deadline, never a fixed sleep or
a single look (on a busy machine a process dies, a file appears or a child forks later than on a quiet one;
`make test LOAD=2` runs the suite beside busy loops to show it).

- `wait_until(predicate, timeout, what=...)`: polls until the predicate returns a true value and returns
  that value; at the deadline an AssertionError names what it waited for, how long, and the last value.
- `stays(predicate, seconds, what=...)`: the opposite claim, "nothing happens", which only a window can
  show: the predicate is polled for the whole window and must hold at every look (an innocent process that
  must not be killed, a run that must not start while the GPUs are taken).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def _show(value: object, limit: int = 400) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def wait_until(
    predicate: Callable[[], T],
    timeout: float,
    interval: float = 0.1,
    what: str = "",
    detail: Callable[[], object] | None = None,
) -> T:
    """The predicate's first true value, polled every `interval` s for up to `timeout` s; AssertionError
    naming `what`, the time waited and the last value (and `detail()`, e.g. a log's tail) otherwise. The
    predicate is looked at once more at the deadline, so a slow look never costs the last chance."""
    started = time.monotonic()
    deadline = started + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            break
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
    name = what or repr(predicate)
    message = f"waited {time.monotonic() - started:.1f} s (deadline {timeout:g} s) for {name}"
    message += f"; last value: {_show(value)}"
    if detail is not None:
        message += f"\n{detail()}"
    raise AssertionError(message)


def gone_within(alive: Callable[[], object], timeout: float, what: str, interval: float = 0.1) -> None:
    """`alive()` turns false within `timeout` s (a process that must die, a job that must leave the queue);
    AssertionError with its last true value otherwise."""
    last: list[object] = []

    def dead() -> bool:
        value = alive()
        last[:] = [value]
        return not value

    try:
        wait_until(dead, timeout, interval, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc} (still there: {_show(last[0] if last else None)})") from None


def stays(predicate: Callable[[], object], seconds: float, what: str, interval: float = 0.1) -> None:
    """The predicate holds at every look for `seconds` s; AssertionError at the first look where it does not,
    naming `what` and when."""
    started = time.monotonic()
    deadline = started + seconds
    while True:
        value = predicate()
        if not value:
            took = time.monotonic() - started
            raise AssertionError(f"{what}: no longer true {took:.1f} s into {seconds:g} s ({_show(value)})")
        if time.monotonic() >= deadline:
            return
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
