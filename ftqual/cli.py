"""`ftqual <command> ...`: one entry point, each command implemented in its own module."""

from __future__ import annotations

import importlib
import sys

from ftqual.verification import proc_tuning

# command -> (module, one-line help). Modules are imported only when their command runs, so
# `ftqual verify` never pays for matplotlib and `ftqual launch` never for the report code.
COMMANDS: dict[str, tuple[str, str]] = {
    "launch": ("ftqual.launch", "build and run one ft_launcher command from the walkthrough's environment"),
    "cleanup": ("ftqual.launch.cleanup", "kill what a run left behind, by its recorded process groups"),
    "verify": ("ftqual.verification.verify", "verify one run directory and write its report"),
    "preflight": ("ftqual.preflight", "check the stack before spending GPU time"),
    "report": ("ftqual.report", "build the summary report from verify reports"),
    "recommend-timeouts": (
        "ftqual.report.recommend",
        "recommended timeouts of a passed summary: flags, config snippet",
    ),
    "compare": (
        "ftqual.report.compare",
        "two qualifications side by side: stack, verdicts, figures, regressions",
    ),
    "at-scale": (
        "ftqual.report.at_scale_cli",
        "what faults will cost the run at N GPUs for D days, and the settings that cost least",
    ),
    "drop-payloads": (
        "ftqual.launch.payloads",
        "drop a verified run's checkpoint payloads, keep sizes, metadata and evidence",
    ),
    "status": ("ftqual.workflow.progress", "the state of every scenario of a workflow, once or --follow"),
    "stack": ("ftqual.stack.identity", "the identity of the stack under test (what a verdict is earned on)"),
    "install-profiles": (
        "ftqual.workflow.profiles",
        "make `snakemake --profile local|slurm` find our profiles",
    ),
}


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("ftqual")
    except PackageNotFoundError:
        return "unknown (not installed)"


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
        proc_tuning.reuse_freed_memory()
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())


def entry() -> None:
    """The `ftqual` command and `python -m ftqual`: main(), then exit with its code."""
    code = main()
    if sys.argv[1:2] == ["verify"]:
        # Only for verify: other commands may leave threads to join or atexit handlers to run.
        proc_tuning.exit_without_teardown(code)
    sys.exit(code)
