"""Megatron-LM versions: the launcher's adaptation (ftqual.launch.compat) and the checkout's own argument
parser in the preflight (ftqual.preflight.megatron_args), on small fake checkouts of several "versions".

Each fake has a real argparse parser in megatron/training/arguments.py, built from the options our own
command builder emits, then changed the way Megatron releases differ: a flag missing, a flag renamed, a
flag with another type, a fixed fault-tolerance warm-up.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ftqual import launch
from ftqual.launch import compat
from ftqual.preflight.megatron_args import parse_with_megatron, workload_args

REPO = Path(__file__).resolve().parents[3]

ARGUMENTS_PY = """
import argparse
OPTIONS = {options!r}

def parse_args(extra_args_provider=None, ignore_unknown_args=False):
    parser = argparse.ArgumentParser(description="Megatron-LM Arguments", allow_abbrev=False)
    for option, kind in OPTIONS.items():
        if kind == "flag":
            parser.add_argument(option, action="store_true")
        else:
            parser.add_argument(option, type={{"int": int, "float": float, "str": str}}[kind])
    if extra_args_provider is not None:
        parser = extra_args_provider(parser)
    if ignore_unknown_args:
        return parser.parse_known_args()[0]
    return parser.parse_args()


def validate_args(args, defaults={{}}):
    # like Megatron-LM core_v0.18.2's: a pair it refuses, and the world its parallel sizes must divide
    if getattr(args, "step_batch_size_schedule", None) and getattr(args, "global_batch_size", None):
        raise ValueError("Cannot specify both --step-batch-size-schedule and --global-batch-size")
    import os
    world, tp = int(os.environ["WORLD_SIZE"]), int(getattr(args, "tensor_model_parallel_size", None) or 1)
    assert world % tp == 0, f"world size ({{world}}) is not divisible by total_model_size ({{tp}})"
"""

READS_WARMUP_FLAG = "_NUM_WARMUP_ITERS = 1  # set from args.ft_num_warmup_iters\n"


def dry_run_workload(tmp_path: Path, tree: Path, **env: str) -> tuple[int, list[str], str]:
    """The workload arguments (after `--`) of a launcher dry run against `tree`, and its stderr."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    base = {
        "NVRX_WORK_DIR": str(work),
        "NVRX_WORKLOAD": "megatron",
        "MEGATRON_PATH": str(tree),
        "NVRX_RUN_ID": f"r{len(list(work.iterdir()))}",
        "NVRX_DRY_RUN": "1",
        "NVRX_DEMO_FAULT": "kill",
        "NVRX_FAULT_RANK": "0",
        **env,
    }
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = launch.main([], env=base)
    lines = [ln for ln in out.getvalue().splitlines() if "ft_launcher" in ln]
    import shlex

    argv = shlex.split(lines[-1]) if lines else []
    return rc, workload_args(argv), err.getvalue()


def option_kinds(args: list[str]) -> dict[str, str]:
    """Every option in `args` as the fake parser should define it: valueless ones as flags."""
    kinds: dict[str, str] = {}
    for i, arg in enumerate(args):
        if not arg.startswith("--"):
            continue
        if "=" in arg:
            kinds[arg.split("=", 1)[0]] = "str"
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            kinds[arg] = "str"
        else:
            kinds[arg] = "flag"
    return kinds


def fake_tree(
    root: Path,
    version: tuple[int, int, int],
    options: dict[str, str],
    ft_integration: str = READS_WARMUP_FLAG,
    arguments_py: str | None = None,
) -> Path:
    tree = root / f"mlm-{'.'.join(map(str, version))}-{len(list(root.glob('mlm-*')))}"
    (tree / "megatron" / "training").mkdir(parents=True)
    (tree / "megatron" / "core").mkdir(parents=True)
    (tree / "pretrain_gpt.py").write_text("raise SystemExit('never run in tests')\n")
    (tree / "megatron" / "__init__.py").write_text("")
    (tree / "megatron" / "training" / "__init__.py").write_text("")
    (tree / "megatron" / "core" / "package_info.py").write_text(
        f"MAJOR = {version[0]}\nMINOR = {version[1]}\nPATCH = {version[2]}\n"
    )
    (tree / "megatron" / "training" / "arguments.py").write_text(
        arguments_py if arguments_py is not None else ARGUMENTS_PY.format(options=options)
    )
    (tree / "megatron" / "training" / "ft_integration.py").write_text(ft_integration)
    return tree


@pytest.fixture(scope="module")
def our_options(tmp_path_factory) -> dict[str, str]:
    """The options our launcher hands to pretrain_gpt.py on a current Megatron (warm-up flag known)."""
    root = tmp_path_factory.mktemp("probe")
    permissive = fake_tree(root, (0, 19, 1), {compat.WARMUP_FLAG: "int"})
    rc, args, err = dry_run_workload(root, permissive)
    assert rc == 0, err
    kinds = option_kinds(args)
    kinds[compat.WARMUP_FLAG] = "int"
    return kinds


def versions(our_options: dict[str, str]) -> dict[str, dict[str, str]]:
    without_warmup = {k: v for k, v in our_options.items() if k != compat.WARMUP_FLAG}
    renamed = {k: v for k, v in our_options.items() if k != "--use-persistent-ckpt-worker"}
    renamed["--persistent-ckpt-worker"] = "flag"
    retyped = {**our_options, "--lr": "int"}
    return {"current": our_options, "old": without_warmup, "renamed": renamed, "retyped": retyped}


# ------------------------------------------------------------------------------------------ the launcher


def test_current_version_keeps_the_warmup_flag(tmp_path, our_options):
    tree = fake_tree(tmp_path, (0, 19, 1), our_options)
    assert compat.resolve(tree, 5, "0.19.1") == compat.Compat()
    rc, args, err = dry_run_workload(tmp_path, tree)
    assert rc == 0 and "--ft-num-warmup-iters=0" in args and "adapted" not in err


def test_old_version_with_a_short_fixed_warmup_leaves_the_flag_out_and_says_why(tmp_path, our_options):
    tree = fake_tree(tmp_path, (0, 14, 0), versions(our_options)["old"], "_NUM_WARMUP_ITERS = 1\n")
    resolved = compat.resolve(tree, 5, "0.14.0")
    assert resolved.omitted == (compat.WARMUP_FLAG,)
    (a,) = resolved.adaptations
    assert a.action == "omitted" and "0.14.0" in a.reason and "fixed warm-up of 1" in a.reason
    rc, args, err = dry_run_workload(tmp_path, tree)
    assert rc == 0
    assert not any(x.startswith(compat.WARMUP_FLAG) for x in args)
    assert "--enable-ft-package" in args  # only the one flag goes
    assert f"adapted: {compat.WARMUP_FLAG} omitted" in err


def test_old_version_records_the_adaptation_in_run_json(tmp_path, our_options):
    tree = fake_tree(tmp_path, (0, 14, 0), versions(our_options)["old"], "_NUM_WARMUP_ITERS = 1\n")
    from ftqual.launch import command, run, settings
    from ftqual.stack import resolve as stack

    env = {
        "NVRX_WORK_DIR": str(tmp_path),
        "NVRX_WORKLOAD": "megatron",
        "MEGATRON_PATH": str(tree),
        "NVRX_RUN_ID": "rec",
    }
    s = settings.load_settings(env, [], pid=os.getpid())
    choice = stack.resolve(s.transformer_impl, s.dist_optimizer, stack.probe())
    plan = command.build_plan(s, choice, 40000, "ft_launcher", launch.megatron_compat(s))
    record = run.run_record(s, plan, choice, {}, "h").to_json()
    assert [a["flag"] for a in record["adaptations"]] == [compat.WARMUP_FLAG]
    assert json.loads(json.dumps(record))["adaptations"][0]["action"] == "omitted"


@pytest.mark.parametrize(
    "ft_integration, words",
    [
        ("_NUM_WARMUP_ITERS = 10\n", ["fixed fault-tolerance warm-up of 10", "save_interval 5"]),
        ("def setup(args):\n    pass\n", ["cannot be read", "core_v0.16.0"]),
    ],
)
def test_old_version_whose_warmup_would_change_the_meaning_is_refused(
    tmp_path, our_options, ft_integration, words
):
    tree = fake_tree(tmp_path, (0, 13, 1), versions(our_options)["old"], ft_integration)
    with pytest.raises(compat.IncompatibleStack) as exc:
        compat.resolve(tree, 5, "0.13.1")
    assert all(w in str(exc.value) for w in words)
    rc, args, err = dry_run_workload(tmp_path, tree)
    assert rc == 2 and args == [] and len(err.strip().splitlines()) == 1 and words[0] in err
    assert not any((tmp_path / "work").rglob("run.json"))  # nothing created or launched


def test_a_longer_save_interval_makes_a_long_fixed_warmup_acceptable(tmp_path, our_options):
    tree = fake_tree(tmp_path, (0, 13, 1), versions(our_options)["old"], "_NUM_WARMUP_ITERS = 10\n")
    assert compat.resolve(tree, 10, None).omitted == (compat.WARMUP_FLAG,)


def test_apply_drops_both_forms_and_nothing_else():
    c = compat.Compat(omitted=("--x",))
    assert c.apply(["--a", "--x=0", "--b", "1", "--x", "3", "--xy=2"]) == ["--a", "--b", "1", "--xy=2"]


def test_apply_changes_values_of_the_named_option_only():
    c = compat.Compat(values=(("--v", "9"),))
    assert c.apply(["--v=1", "--vv=1", "--w=1"]) == ["--v=9", "--vv=1", "--w=1"]


MOCK_NO_WRAP = """
class MockGPTLowLevelDataset:
    max_sequence_length: int = 4096

    def __getitem__(self, idx):
        return numpy.concatenate([numpy.arange(length - 1) + 1, [self.tokenizer.eod]])


class Other:
    x = "% self.vocab_size"
"""
MOCK_WRAPS = MOCK_NO_WRAP.replace(
    "numpy.arange(length - 1) + 1", "(numpy.arange(length - 1) + 1) % self.vocab_size"
)


def with_mock_dataset(tree: Path, source: str) -> Path:
    (tree / "megatron" / "core" / "datasets").mkdir(parents=True, exist_ok=True)
    (tree / "megatron" / "core" / "datasets" / "gpt_dataset.py").write_text(source)
    return tree


def test_mock_data_that_does_not_wrap_token_ids_gets_a_vocabulary_that_holds_them(tmp_path, our_options):
    tree = with_mock_dataset(fake_tree(tmp_path, (0, 14, 0), our_options), MOCK_NO_WRAP)
    resolved = compat.resolve(tree, 5, "0.14.0", vocab_size=1024)
    assert resolved.values == ((compat.VOCAB_FLAG, "4096"),) and resolved.omitted == ()
    (a,) = resolved.adaptations
    assert a.action == "set to 4096" and "up to 4095" in a.reason
    assert compat.resolve(tree, 5, "0.14.0", vocab_size=4096) == compat.Compat()  # already large enough
    rc, args, err = dry_run_workload(tmp_path, tree)
    assert rc == 0 and "--vocab-size=4096" in args and "--vocab-size=1024" not in args
    assert "adapted: --vocab-size set to 4096" in err


def test_mock_data_that_wraps_token_ids_changes_nothing(tmp_path, our_options):
    tree = with_mock_dataset(fake_tree(tmp_path, (0, 19, 1), our_options), MOCK_WRAPS)
    assert compat.resolve(tree, 5, "0.19.1", vocab_size=1024) == compat.Compat()


def test_mock_data_whose_bound_cannot_be_read_is_refused(tmp_path, our_options):
    source = MOCK_NO_WRAP.replace("max_sequence_length: int = 4096", "max_sequence_length = LIMIT")
    tree = with_mock_dataset(fake_tree(tmp_path, (0, 14, 0), our_options), source)
    with pytest.raises(compat.IncompatibleStack, match="largest id"):
        compat.resolve(tree, 5, "0.14.0", vocab_size=1024)


# ------------------------------------------------------------------------------- Megatron's own parser


def test_parser_accepts_what_each_version_defines_and_names_what_it_rejects(tmp_path, our_options):
    v = versions(our_options)
    args = [f"{k}=1" if kind in ("int", "str") else k for k, kind in our_options.items()]
    args = [a if not a.startswith("--lr=") else "--lr=0.0001" for a in args]
    current = fake_tree(tmp_path, (0, 19, 1), v["current"])
    (ok,) = parse_with_megatron(str(current), {"kill": args})
    assert ok.ok is True and ok.error is None

    renamed = fake_tree(tmp_path, (0, 20, 0), v["renamed"])
    (bad,) = parse_with_megatron(str(renamed), {"kill": args})
    assert bad.ok is False and "unrecognized arguments: --use-persistent-ckpt-worker" in bad.error

    retyped = fake_tree(tmp_path, (0, 20, 0), v["retyped"])
    (bad,) = parse_with_megatron(str(retyped), {"hang": args})
    assert bad.ok is False and "--lr" in bad.error and "invalid int value" in bad.error

    old = fake_tree(tmp_path, (0, 14, 0), v["old"], "_NUM_WARMUP_ITERS = 1\n")
    (bad,) = parse_with_megatron(str(old), {"kill": args})
    assert bad.ok is False and compat.WARMUP_FLAG in bad.error
    adapted = compat.resolve(old, 5, "0.14.0").apply(args)
    (ok,) = parse_with_megatron(str(old), {"kill": adapted})
    assert ok.ok is True


def test_a_checkout_that_cannot_be_imported_is_reported_not_judged(tmp_path):
    tree = fake_tree(tmp_path, (0, 19, 1), {}, arguments_py="import a_module_that_is_not_there\n")
    results = parse_with_megatron(str(tree), {"a": ["--x"], "b": ["--y"]})
    assert [r.ok for r in results] == [None, None]
    assert "a_module_that_is_not_there" in results[0].error


def test_workload_args_are_what_follows_the_first_separator():
    assert workload_args(["--nnodes=1", "w.py", "--fault", "kill", "--", "--a", "--", "--b"]) == [
        "--a",
        "--",
        "--b",
    ]
    assert workload_args(["--nnodes=1"]) == []


# ------------------------------------------------------------------------ Megatron's own validate_args

SCHEDULE = ["--step-batch-size-schedule", "0:16 2.4B:320"]  # Megatron's 175B example, with its batch


def job_args(options: dict[str, str]) -> list[str]:
    args = [f"{k}=1" if kind in ("int", "str") else k for k, kind in options.items()]
    return [a if not a.startswith("--lr=") else "--lr=0.0001" for a in args]


def test_validate_args_refuses_a_pair_the_parser_accepts(tmp_path, our_options):
    """Megatron-LM core_v0.18.2's example on one H100: the parser took `--step-batch-size-schedule` with
    `--global-batch-size`, every cycle died in validate_args. The preflight runs it, and says so."""
    options = {**our_options, SCHEDULE[0]: "str"}
    tree = fake_tree(tmp_path, (0, 18, 2), options)
    args = job_args(our_options)
    assert "--global-batch-size=1" in args
    refused, fine = parse_with_megatron(str(tree), {"baseline": [*args, *SCHEDULE], "kill": args})
    assert refused.ok is False and refused.stage == "validate_args"
    assert (
        refused.error == "ValueError: Cannot specify both --step-batch-size-schedule and --global-batch-size"
    )
    assert fine.ok is True and fine.error is None and fine.unvalidated is None
    # negative control: parsing alone (what the preflight did before) accepts it
    (parsed,) = parse_with_megatron(str(tree), {"baseline": [*args, *SCHEDULE]}, validate=False)
    assert parsed.ok is True


def test_validate_args_judges_the_scenario_s_world_size(tmp_path, our_options):
    tree = fake_tree(tmp_path, (0, 19, 1), {**our_options, "--tensor-model-parallel-size": "int"})
    args = [*job_args(our_options), "--tensor-model-parallel-size=2"]
    one, two = parse_with_megatron(str(tree), {"one": args, "two": args}, worlds={"one": 1, "two": 2})
    assert one.ok is False and "world size (1) is not divisible" in one.error
    assert two.ok is True


CUDA_ONLY = (
    ARGUMENTS_PY
    + """
def validate_args(args, defaults={{}}):
    import torch_that_is_not_here  # what the training node has and this machine does not
"""
)
BARE_ASSERT = (
    ARGUMENTS_PY
    + """
def validate_args(args, defaults={{}}):
    assert args.lr is None
"""
)
CUDA_ASSERT = (
    ARGUMENTS_PY
    + """
def validate_args(args, defaults={{}}):
    raise AssertionError("CUDA is required for --fp8-format")
"""
)


@pytest.mark.parametrize("source, why", [(CUDA_ONLY, "torch_that_is_not_here"), (CUDA_ASSERT, "CUDA")])
def test_what_validate_args_cannot_judge_here_is_no_refusal(tmp_path, our_options, source, why):
    tree = fake_tree(tmp_path, (0, 19, 1), our_options, arguments_py=source.format(options=our_options))
    (result,) = parse_with_megatron(str(tree), {"kill": job_args(our_options)})
    assert result.ok is True and why in result.unvalidated


def test_a_bare_assertion_is_named_by_its_source_line(tmp_path, our_options):
    tree = fake_tree(tmp_path, (0, 19, 1), our_options, arguments_py=BARE_ASSERT.format(options=our_options))
    (result,) = parse_with_megatron(str(tree), {"kill": job_args(our_options)})
    assert result.ok is False and result.stage == "validate_args"
    assert result.error.startswith("AssertionError at megatron/training/arguments.py:")
    assert result.error.endswith(": assert args.lr is None")


def test_a_tree_without_validate_args_is_not_validated(tmp_path, our_options):
    source = ARGUMENTS_PY.split("\ndef validate_args")[0].format(options=our_options)
    tree = fake_tree(tmp_path, (0, 19, 1), our_options, arguments_py=source)
    (result,) = parse_with_megatron(str(tree), {"kill": job_args(our_options)})
    assert result.ok is True and "no validate_args" in result.unvalidated


def test_a_refusal_names_the_lines_of_the_flags_it_names():
    from ftqual.preflight.megatron_args import named_flags, origins

    error = "ValueError: Cannot specify both --step-batch-size-schedule and --global-batch-size"
    argv = ["--lr=0.1", "--global-batch-size", "16", "--step-batch-size-schedule", "0:16"]
    assert named_flags(error, argv) == ["--step-batch-size-schedule", "--global-batch-size"]
    assert named_flags("AssertionError: args.global_batch_size must be > 0", argv) == ["--global-batch-size"]
    assert named_flags("world size (1) is not divisible by total_model_size", argv) == []
    team = ["--global-batch-size", "16", "--step-batch-size-schedule", "0:16"]
    where = ("train.sh:38", "train.sh:38", "train.sh:39", "train.sh:39")
    flags = ["--step-batch-size-schedule", "--global-batch-size", "--lr"]
    assert origins(flags, team, where) == [
        "train.sh:39 --step-batch-size-schedule",
        "train.sh:38 --global-batch-size",
        "--lr (ftqual's)",
    ]
    assert origins(flags[:1], team, ()) == ["megatron_args[2] --step-batch-size-schedule"]
