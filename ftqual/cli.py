"""`ftqual <command> ...`: one entry point, each command implemented in its own module."""

from __future__ import annotations

import importlib
import os
import sys

# command -> (module, one-line help). Modules are imported only when their command runs, so
# `ftqual verify` never pays for matplotlib and `ftqual launch` never for the report code.
COMMANDS: dict[str, tuple[str, str]] = {
    "launch": ("ftqual.launch", "build and run one ft_launcher command from the walkthrough's environment"),
    "cleanup": ("ftqual.cleanup", "kill what a run left behind, by its recorded process groups"),
    "verify": ("ftqual.verify", "verify one run directory and write its report"),
    "preflight": ("ftqual.preflight", "check the stack before spending GPU time"),
    "report": ("ftqual.report", "build the summary report from verify reports"),
    "status": ("ftqual.progress", "the state of every scenario of a workflow, once or --follow"),
    "stack": ("ftqual.stackid", "the identity of the stack under test (what a verdict is earned on)"),
    "install-profiles": ("ftqual.profiles", "make `snakemake --profile local|slurm` find our profiles"),
}


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("ftqual")
    except PackageNotFoundError:
        return "unknown (not installed)"


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def _reuse_freed_memory() -> None:
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


def usage() -> str:
    lines = ["usage: ftqual [--version] <command> [args]", "", "commands:"]
    lines += [f"  {name:<17} {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    if args[0] == "--version":
        print(f"ftqual {version()}")
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"ftqual: unknown command {name!r}; run `ftqual --help` for the list", file=sys.stderr)
        return 2
    if name == "verify":
        _reuse_freed_memory()
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())


def entry() -> None:
    """The `ftqual` command and `python -m ftqual`: main(), then exit with its code."""
    code = main()
    if sys.argv[1:2] == ["verify"]:
        # Its report and summary are written and closed by now: flush what Python still buffers and leave
        # without the interpreter's teardown (freeing every module and object numpy and the parsers made
        # costs about 50 ms, 5 % of verifying 50 MB of logs). Only for verify: other commands may leave
        # threads to join or atexit handlers to run.
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:  # a closed pipe: the report is what counts, and it is written
            pass
        os._exit(code)
    sys.exit(code)
