"""Tuning of the `ftqual verify` process: the allocator's reuse, an exit without the teardown.

Tuning of the `ftqual` process itself, for `ftqual verify` (cli.py applies it): the allocator keeps freed
memory for the next block, and the process leaves without the interpreter's teardown. Neither changes what
is computed or written, only how long it takes.
"""

from __future__ import annotations

import os
import sys

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def reuse_freed_memory() -> None:
    """Let glibc keep freed memory for the next allocation instead of handing it back to the kernel.

    `verify` reads logs in 4 MB blocks and frees each block's buffers (the bytes read, numpy temporaries of
    up to a few MB) before the next: by default every one above the mmap threshold is a fresh mapping and
    the heap's top is trimmed, so each block faults in its pages anew (about a third of the faults of a
    50 MB run, 5-10 % of its time). Below 64 MB an allocation now comes from the heap and reuses the pages
    freed by the previous block; the peak RSS stays what the largest block needs. Nothing on a libc
    without mallopt.
    """
    try:
        import ctypes  # already imported by numpy, which verify imports anyway

        mallopt = ctypes.CDLL(None).mallopt
    except (ImportError, OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, 64 << 20)
    mallopt(_M_TRIM_THRESHOLD, 128 << 20)


def exit_without_teardown(code: int) -> None:
    """Flush what Python still buffers and leave with `code`, without the interpreter's teardown (freeing
    every module and object numpy and the parsers made costs about 50 ms, 5 % of verifying 50 MB of logs).
    Only once the command's output is written and closed, and only for a command that leaves no thread to
    join or atexit handler to run."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe: the report is what counts, and it is written
        pass
    os._exit(code)
