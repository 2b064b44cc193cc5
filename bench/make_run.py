"""Generate a large, realistic run directory (the recorded H200 formats, deterministic for a seed):
    .venv/bin/python bench/make_run.py --ranks N --iters M --out DIR [--restarts K] [--seed S]
The generator lives in tests/support/synthetic/ (the verifier's tests plant defects in the same runs)."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.synthetic.runs import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
