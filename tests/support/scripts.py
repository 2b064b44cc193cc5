"""The project's scripts/ and workloads/ imported as modules by file path (neither is a package; no sys.path
edits)."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = (ROOT / "workloads", ROOT / "scripts")


@functools.cache
def load_script(name: str) -> ModuleType:
    """workloads/<name>.py or scripts/<name>.py as the module `name` (registered in sys.modules, so
    dataclasses and pickling work), loaded once per session."""
    path = next(folder / f"{name}.py" for folder in FOLDERS if (folder / f"{name}.py").exists())
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
