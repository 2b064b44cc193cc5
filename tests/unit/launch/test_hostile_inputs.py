"""A hostile-input corpus for the launcher: generated values for every variable it reads (empty, huge,
signs, Unicode digits, whitespace and newlines, shell metacharacters, path traversal, unprintables).

Every value must give exit 2, exactly one line on stderr, nothing on stdout, no traceback, nothing
created, and nothing executed: neither in a dry run nor in a real run, whose ft_launcher is a stand-in
that would leave a sentinel file (as would any shell that expanded a `$(touch ...)`). Validation runs
in-process for speed; a handful go through the real entry point (scripts/run_megatron_gpt.sh).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ftqual.launch import command, settings
from tests.support.launch import tree


def corpus(sentinel: Path, work: Path) -> dict[str, str]:
    """name -> hostile value; `sentinel` appears wherever a shell or an exec would create it."""
    touch = f"touch {sentinel}"
    return {
        "empty": "",
        "blank": " ",
        "digits-5000": "9" * 5000,
        "digits-4301": "1" + "0" * 4300,
        "digits-300": "1" * 300,
        "digits-200": "7" * 200,
        "plus": "+1",
        "minus": "-1",
        "minus-zero": "-0",
        "leading-zero": "01",
        "float": "1.5",
        "exponent": "1e3",
        "hex": "0x10",
        "underscore": "1_0",
        "nan": "nan",
        "infinity": "inf",
        "arabic-indic-3": "\u0663",
        "fullwidth-5": "\uff15",
        "superscript-2": "\u00b2",
        "devanagari-1": "\u0967",
        "leading-space": " 1",
        "trailing-space": "1 ",
        "tab": "1\t",
        "trailing-newline": "1\n",
        "carriage-return": "1\r",
        "inner-newline": "1\n2",
        "nul": "1\x00",
        "line-separator": "1\u2028",
        "no-break-space": "1\u00a0",
        "surrogate": "1\udcff",
        "subst": f"$({touch})",
        "backticks": f"`{touch}`",
        "semicolon": f"1;{touch}",
        "pipe": "1|id",
        "and": "1&&id",
        "redirect": f"1>{sentinel}",
        "glob": "*",
        "quotes": "1'\"",
        "traversal": "../../../etc",
        "absolute-traversal": f"{work}/../escape",
        "dot": ".",
        "dotdot": "..",
        "tilde": "~/x",
        "huge-path": "/" + "a" * 5000,
        "url": "http://example.com/x",
        "emoji": "\U0001f600",
        "path-with-subst": f"{work}/$({touch})",
        "path-with-newline": f"{work}/x\n",
    }


# Variables the launcher reads only in some configurations: the context that makes it read them.
CONTEXT = {
    "MEGATRON_PATH": {"NVRX_WORKLOAD": "megatron"},
    "SLURM_JOB_ID": {"NNODES": "2", "RDZV_ENDPOINT": "node1:29400", "NVRX_RUN_ID": None},
}
# Values that are legitimate for a variable (an empty optional variable means its default, as a shell's
# `${VAR:-default}` does; letters, digits, `_` and `-` make a valid run ID). Everything else must fail.
REQUIRED = {"NVRX_WORK_DIR", "MEGATRON_PATH", "SLURM_JOB_ID"}
ID_LIKE = {"exponent", "hex", "underscore", "nan", "infinity", "leading-zero"}
LEGIT = {
    "NVRX_RUN_ID": ID_LIKE,
    "NVRX_SCENARIO": ID_LIKE,
    "SLURM_JOB_ID": ID_LIKE,
    "NVRX_OUT_OF_SECTION_TIMEOUT": {"float"},  # seconds may have decimals
}


def cases(name: str) -> list[str]:
    skip = set(LEGIT.get(name, ()))
    if name not in REQUIRED:
        skip.add("empty")
    return [key for key in corpus(Path("/s"), Path("/w")) if key not in skip]


@pytest.fixture
def stand_in_launcher(tmp_path, monkeypatch) -> Path:
    """ft_launcher replaced by a script that leaves the sentinel: a real run must never reach it."""
    sentinel = tmp_path / "sentinel"
    fake = tmp_path / "bin" / "ft_launcher"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\ntouch {sentinel}\n")
    fake.chmod(0o755)
    monkeypatch.setattr(command, "ft_launcher_executable", lambda: str(fake))
    return sentinel


@pytest.fixture
def hostile_env(base_env, megatron_checkout, tmp_path):
    sentinel = tmp_path / "sentinel"
    (megatron_checkout / "pretrain_gpt.py").write_text(f"open({str(sentinel)!r}, 'w')\n")
    return {**base_env, "MEGATRON_PATH": str(megatron_checkout)}


def refusal_problems(result, created: list[str], executed: bool) -> list[str]:
    """What is wrong with a refusal: anything but exit 2, one stderr line, no traceback, no side effect."""
    lines = result.err.strip().splitlines()
    checks = [
        (result.rc != 2, f"exit {result.rc}"),
        (bool(result.out), f"stdout {result.out[:80]!r}"),
        (len(lines) != 1, f"{len(lines)} stderr lines"),
        ("Traceback" in result.err, "traceback"),
        (bool(created), f"created {created[:3]}"),
        (executed, "executed"),
    ]
    return [text for failed, text in checks if failed]


@pytest.mark.parametrize("dry_run", ["1", "0"], ids=["dry", "real"])
@pytest.mark.parametrize("name", settings.VARIABLES)
def test_every_hostile_value_is_refused(name, dry_run, hostile_env, stand_in_launcher, tmp_path, run_launch):
    sentinel = stand_in_launcher
    work = Path(hostile_env["NVRX_WORK_DIR"])
    values = corpus(sentinel, work)
    before = tree(tmp_path)
    failures = []
    for key in cases(name):
        env = {**hostile_env, "NVRX_DRY_RUN": dry_run}
        for var, value in CONTEXT.get(name, {}).items():
            if value is None:
                env.pop(var, None)
            else:
                env[var] = value
        env[name] = values[key]
        result = run_launch(env)
        created = sorted(tree(tmp_path) - before)
        problems = refusal_problems(result, created, sentinel.exists())
        if created:  # undo, so the next value is judged on its own
            shutil.rmtree(work / "runs", ignore_errors=True)
        if problems:
            failures.append(f"{name}={key}: {', '.join(problems)} | {result.err.strip()[:200]}")
    assert not failures, "\n".join(failures)


def test_corpus_covers_every_kind(tmp_path):
    """Every variable meets at least 40 hostile values, of every kind a broken caller or a hand edit makes."""
    for name in settings.VARIABLES:
        assert len(cases(name)) >= 40, name
    keys = corpus(tmp_path, tmp_path)
    for kind in ["empty", "digits-5000", "plus", "fullwidth-5", "trailing-newline", "subst", "traversal"]:
        assert kind in keys


# NVRX_DRY_RUN= is a real run (checked without launching one below); an empty NVRX_RUN_ID or
# NVRX_NODE_RANK is a generated ID or SLURM_NODEID, not a fixed default.
NOT_PLAIN_DEFAULT = {"NVRX_DRY_RUN", "NVRX_RUN_ID", "NVRX_NODE_RANK"}


def test_empty_dry_run_means_a_real_run(hostile_env):
    assert settings.load_settings({**hostile_env, "NVRX_DRY_RUN": ""}).dry_run is False


@pytest.mark.parametrize("name", [n for n in settings.VARIABLES if n not in REQUIRED | NOT_PLAIN_DEFAULT])
def test_empty_optional_variable_means_its_default(name, hostile_env, run_launch):
    """Documented, seed-compatible: VAR= is VAR unset (not a hostile value)."""
    unset = {k: v for k, v in hostile_env.items() if k != name}

    def masked(env: dict[str, str]) -> str:
        result = run_launch(env)
        assert result.rc == 0, result.err
        return re.sub(r"--ft-log-server-port=[0-9]+", "PORT", result.out)  # a free port, picked anew

    assert masked({**hostile_env, name: ""}) == masked(unset)


# Through the real entry point, with real ft_launcher beside the interpreter: (variable, value, message).
CLI_CASES = [
    ("NVRX_RUN_ID", "abc\n", "NVRX_RUN_ID holds a control or unprintable character (got 'abc\\n')"),
    ("NVRX_RUN_ID", "r" * 300, "NVRX_RUN_ID is too long (300 characters, at most 256)"),
    ("RDZV_ENDPOINT", "$(touch {sentinel}):29400", "RDZV_ENDPOINT must be host:port with a valid host name"),
    ("TRAIN_ITERS", "9" * 4301, "TRAIN_ITERS is too long (4301 characters, at most 256)"),
    ("GPUS_PER_NODE", "\uff12", "GPUS_PER_NODE must be a positive integer (got '\uff12')"),
    ("NVRX_WORK_DIR", "{work}/../escape", "NVRX_WORK_DIR must not hold '.' or '..' components"),
    (
        "NVRX_SCENARIO",
        "kill;touch {sentinel}",
        "Use letters, digits, underscores or hyphens in NVRX_SCENARIO",
    ),
]


@pytest.mark.parametrize(
    ("name", "value", "message"), CLI_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CLI_CASES)]
)
def test_hostile_values_through_the_entry_script(name, value, message, repo_root, work, tmp_path):
    sentinel = tmp_path / "sentinel"
    value = value.format(sentinel=sentinel, work=work)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "FTQUAL_PYTHON": sys.executable,
        "NVRX_WORK_DIR": str(work),
        "NVRX_WORKLOAD": "smoke",
        "NVRX_RUN_ID": "hostile-1",
        "NVRX_DRY_RUN": "0",
        name: value,
    }
    before = tree(tmp_path)
    result = subprocess.run(
        ["bash", str(repo_root / "scripts" / "run_megatron_gpt.sh")],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.splitlines() == [result.stderr.strip()] and message in result.stderr, result.stderr
    assert tree(tmp_path) == before and not sentinel.exists()
