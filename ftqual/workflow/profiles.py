"""`ftqual install-profiles`: make `snakemake --profile local|slurm` find the project's profiles by name.

Snakemake 9 resolves a bare profile name (cli.py `get_profile_dir`) in this order: the current directory,
then `platformdirs.AppDirs("snakemake", "snakemake").user_config_dir` ($XDG_CONFIG_HOME/snakemake, else
~/.config/snakemake), then its `site_config_dir` (first of $XDG_CONFIG_DIRS, else /etc/xdg, + /snakemake).
It never looks in `profiles/`. So each `profiles/<name>/` holding a profile file gets a symlink
`<user_config_dir>/<prefix><name>` -> the absolute path of `profiles/<name>`.

Idempotent: a link that already points at our profile is left as it is. Anything else of that name (a
directory, a file, a link elsewhere) is refused and left untouched (exit 2), unless it is a dead link or a
link to another checkout's ftqual profile and `--force-ours` is given. `--uninstall` removes only links
that point at our profiles.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Snakemake's accepted profile file names (cli.py get_profile_dir): config.yaml, profile.yaml, *.vN+.yaml.
PROFILE_FILE = re.compile(r"(profile|config)(\.v\d+\+)?\.yaml")


@dataclass(frozen=True)
class Action:
    kind: str  # install | unchanged | replace | conflict | remove | absent | foreign
    link: Path
    source: Path
    note: str = ""


def snakemake_user_config_dir() -> Path:
    """Where Snakemake looks for profiles by name after the current directory (same call as Snakemake)."""
    try:
        from platformdirs import AppDirs
    except ImportError:  # Snakemake depends on platformdirs; this is the XDG rule it implements on Linux
        base = os.environ.get("XDG_CONFIG_HOME", "").strip() or os.path.expanduser("~/.config")
        return Path(base) / "snakemake"
    return Path(AppDirs("snakemake", "snakemake").user_config_dir)


# Snakemake's default --workflow-profile: never installed as a user profile.
WORKFLOW_PROFILE = "default"


def project_profiles(profiles_dir: Path) -> dict[str, Path]:
    """name -> absolute profile directory, for every folder holding a Snakemake profile file, except the
    workflow's own profile (profiles/default), which Snakemake reads beside the Snakefile by itself."""
    found = {}
    if profiles_dir.is_dir():
        for d in sorted(profiles_dir.iterdir()):
            if d.name == WORKFLOW_PROFILE:
                continue
            if d.is_dir() and any(PROFILE_FILE.fullmatch(f.name) for f in d.iterdir()):
                found[d.name] = d.resolve()
    return found


def points_at(link: Path, source: Path) -> bool:
    """Whether `link` is a symlink whose target is `source`."""
    if not link.is_symlink():
        return False
    target = Path(os.readlink(link))
    target = target if target.is_absolute() else link.parent / target
    try:
        return target.resolve() == source.resolve()
    except OSError:
        return False


CHECKOUT_MARKS = ("ftqual/workflow/profiles.py", "ftqual/profiles.py")


def replaceable_link(link: Path) -> bool:
    """A dead link, or a link to `<checkout>/profiles/<name>` of another ftqual checkout."""
    if not link.is_symlink():
        return False
    target = Path(os.readlink(link))
    target = target if target.is_absolute() else link.parent / target
    if not target.exists():
        return True
    checkout = target.parent.parent
    # where this module lives in a checkout, now and before the package's restructuring
    return target.parent.name == "profiles" and any((checkout / path).is_file() for path in CHECKOUT_MARKS)


def plan_install(profiles: dict[str, Path], config_dir: Path, prefix: str, force_ours: bool) -> list[Action]:
    actions = []
    for name, source in profiles.items():
        link = config_dir / f"{prefix}{name}"
        if points_at(link, source):
            actions.append(Action("unchanged", link, source))
        elif link.is_symlink() and force_ours and replaceable_link(link):
            actions.append(Action("replace", link, source, f"was -> {os.readlink(link)}"))
        elif link.is_symlink() or link.exists():
            what = (
                f"a link to {os.readlink(link)}"
                if link.is_symlink()
                else ("a directory" if link.is_dir() else "a file")
            )
            actions.append(Action("conflict", link, source, what))
        else:
            actions.append(Action("install", link, source))
    return actions


def plan_uninstall(profiles: dict[str, Path], config_dir: Path, prefix: str) -> list[Action]:
    actions = []
    for name, source in profiles.items():
        link = config_dir / f"{prefix}{name}"
        if points_at(link, source):
            actions.append(Action("remove", link, source))
        elif link.is_symlink() or link.exists():
            actions.append(Action("foreign", link, source, "not our link"))
        else:
            actions.append(Action("absent", link, source))
    return actions


def apply(actions: list[Action]) -> None:
    for a in actions:
        if a.kind in ("install", "replace"):
            a.link.parent.mkdir(parents=True, exist_ok=True)
            tmp = a.link.with_name(f".{a.link.name}.ftqual-tmp")
            if tmp.is_symlink():
                tmp.unlink()
            tmp.symlink_to(a.source, target_is_directory=True)
            os.replace(tmp, a.link)  # atomic: the name never points nowhere
        elif a.kind == "remove":
            a.link.unlink()


def _apply_or_report(actions: list[Action]) -> bool:
    try:
        apply(actions)
    except OSError as exc:
        print(f"ftqual install-profiles: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return False
    return True


def describe(a: Action) -> str:
    verbs = {
        "install": "installed",
        "unchanged": "unchanged",
        "replace": "re-pointed",
        "remove": "removed",
        "absent": "not installed",
        "foreign": "left alone",
        "conflict": "REFUSED",
    }
    line = f"{verbs[a.kind]:<13} {a.link} -> {a.source}"
    return f"{line} ({a.note})" if a.note else line


def parse_argv(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="ftqual install-profiles", description=__doc__.splitlines()[0])
    p.add_argument(
        "--name-prefix", default="", help="install as <prefix><name>, e.g. ftqual- -> ftqual-slurm"
    )
    p.add_argument(
        "--force-ours",
        action="store_true",
        help="re-point dead links and links to another ftqual checkout's profiles",
    )
    p.add_argument("--config-dir", type=Path, help="install here instead of Snakemake's user config dir")
    p.add_argument("--profiles-dir", type=Path, default=PROJECT_ROOT / "profiles", help=argparse.SUPPRESS)
    p.add_argument("--uninstall", action="store_true", help="remove our links (and nothing else)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_argv(sys.argv[1:] if argv is None else argv)
    if "/" in args.name_prefix or args.name_prefix in (".", ".."):
        print(
            f"ftqual install-profiles: --name-prefix {args.name_prefix!r} must not contain '/'",
            file=sys.stderr,
        )
        return 2
    profiles = project_profiles(args.profiles_dir)
    if not profiles:
        print(
            f"ftqual install-profiles: no profile (a folder with config.yaml) under {args.profiles_dir}",
            file=sys.stderr,
        )
        return 2
    config_dir = (args.config_dir or snakemake_user_config_dir()).expanduser().absolute()
    if args.uninstall:
        actions = plan_uninstall(profiles, config_dir, args.name_prefix)
        if not _apply_or_report(actions):
            return 2
        print("\n".join(describe(a) for a in actions))
        return 0
    actions = plan_install(profiles, config_dir, args.name_prefix, args.force_ours)
    conflicts = [a for a in actions if a.kind == "conflict"]
    if conflicts:
        # Nothing is changed when any name is taken, so a partial install never mixes two projects' profiles.
        for a in conflicts:
            name = a.link.name
            print(
                f"ftqual install-profiles: {a.link} already holds a different profile {name!r} ({a.note}); "
                f"left untouched. Choose another name, e.g. --name-prefix ftqual- (installs ftqual-{name})",
                file=sys.stderr,
            )
        return 2
    if not _apply_or_report(actions):
        return 2
    print("\n".join(describe(a) for a in actions))
    names = ", ".join(a.link.name for a in actions)
    print(f"from the project root: snakemake --profile NAME  (NAME: {names})")
    shadow = [a.link.name for a in actions if Path(a.link.name).exists()]
    if shadow:
        print(
            f"note: {', '.join(shadow)} also exist(s) in the current directory; Snakemake looks there first"
        )
    return 0
