#!/usr/bin/env python3
"""ft_launcher's entrypoint on every rank: ftqual.rank.worker (the wrapper that runs the workload and injects
its faults; `--help` says how). ftqual is imported from where it is installed, else from the checkout that
holds this file. NVRx's persistent checkpoint worker is started with `spawn`, which re-imports this script:
nothing runs outside the __main__ guard."""

if __name__ == "__main__":
    import sys
    from pathlib import Path

    try:
        import ftqual.rank  # noqa: F401 - installed (pip install -e .), or on PYTHONPATH
    except ImportError:
        sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # a source checkout, not installed
    from ftqual.rank.worker import main

    sys.exit(main(sys.argv[1:]))
