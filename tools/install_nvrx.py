#!/usr/bin/env python3
"""Install nvidia-resiliency-ext's Python modules into the running interpreter's environment.

NVRx 0.7.0 publishes only CPython 3.12 / glibc 2.39 wheels. Its Python modules (ft_launcher, the rank
monitor, the async checkpoint core) run on 3.11 as well; only its CUPTI extension does not. pip refuses the
wheel on another interpreter, so we download it for 3.12, unpack it into site-packages (dist-info included,
so importlib.metadata reports the real version), write the console scripts, and install its dependencies
with pip. Standard library only.
"""

from __future__ import annotations

import argparse
import configparser
import re
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

NVRX_VERSION = "0.7.0"


def download_wheel(dest: Path) -> Path:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        "--platform",
        "manylinux_2_39_x86_64",
        "-d",
        str(dest),
        f"nvidia-resiliency-ext=={NVRX_VERSION}",
    ]
    subprocess.run(cmd, check=True)
    wheels = sorted(dest.glob("nvidia_resiliency_ext-*.whl"))
    if not wheels:
        raise SystemExit("install_nvrx: pip download produced no wheel")
    return wheels[0]


def requirements(metadata: str) -> list[str]:
    """Requires-Dist lines without extras-only entries, in pip's syntax."""
    deps = []
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:") or "extra ==" in line:
            continue
        spec = line.split(":", 1)[1].split(";")[0].strip()
        deps.append(re.sub(r"\s*\((.*)\)", r"\1", spec))
    return deps


def write_console_scripts(entry_points: str, bin_dir: Path) -> list[str]:
    parser = configparser.ConfigParser()
    parser.read_string(entry_points)
    written = []
    if not parser.has_section("console_scripts"):
        return written
    for name, target in parser.items("console_scripts"):
        module, _, func = target.partition(":")
        script = bin_dir / name
        script.write_text(
            f"#!{sys.executable}\n"
            "import re, sys\n"
            f"from {module} import {func}\n"
            "if __name__ == '__main__':\n"
            "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
            f"    sys.exit({func}())\n"
        )
        script.chmod(0o755)
        written.append(name)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, help="use this wheel instead of downloading it")
    parser.add_argument("--no-deps", action="store_true", help="skip installing the dependencies")
    args = parser.parse_args()

    site = Path(sysconfig.get_paths()["purelib"])
    bin_dir = Path(sysconfig.get_paths()["scripts"])
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or download_wheel(Path(tmp))
        with zipfile.ZipFile(wheel) as zf:
            if not args.no_deps:
                meta = next(m for m in zf.namelist() if m.endswith(".dist-info/METADATA"))
                deps = requirements(zf.read(meta).decode())
                subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *deps], check=True)
            # The compiled CUPTI extension targets CPython 3.12 and cannot load here; leave it out.
            members = [m for m in zf.namelist() if not re.search(r"\.cpython-3\d+-.*\.so$", m)]
            zf.extractall(site, members=members)
            ep_name = next(m for m in zf.namelist() if m.endswith(".dist-info/entry_points.txt"))
            entry_points = zf.read(ep_name).decode()
    scripts = write_console_scripts(entry_points, bin_dir)
    print(
        f"install_nvrx: nvidia-resiliency-ext {NVRX_VERSION} modules in {site}; scripts: {', '.join(scripts)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
