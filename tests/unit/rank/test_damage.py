"""workloads/megatron_gpt_worker.py --checkpoint-damage: each damage on a checkpoint directory, its record,
the injection that carries it (or is refused without it), and the replacement that meets it."""

from __future__ import annotations

import json
import os
import signal
import sys

import pytest

from ftqual.rank import damage as damage_module
from ftqual.rank import ids
from ftqual.rank.damage import DAMAGE_FUNCTIONS, DamageError, damage_checkpoint, damage_tracker_not_a_number
from ftqual.rank.ids import EXIT_BAD_TRACKER, EXIT_FAULT_NEVER_INJECTED
from ftqual.rank.injector import Injector
from ftqual.rank.markers import marker_damage
from ftqual.rank.tracker import TrackerError, poll_tracker, read_tracker_baseline
from ftqual.rank.worker import main, parse_args

TRACKER = "latest_checkpointed_iteration.txt"
RECORD_KEYS = {
    "kind",
    "iteration",
    "path",
    "moved_to",
    "size_before",
    "size_after",
    "tracker_before",
    "tracker_after",
    "at",
}


@pytest.fixture
def ckpt(tmp_path):
    """A checkpoint directory as Megatron leaves it: the tracker naming 40, iter_0000020 and iter_0000040,
    each with two torch_dist shards (rank 1's the larger) and torch's .metadata."""
    root = tmp_path / "ckpt"
    for iteration in (20, 40):
        directory = root / f"iter_{iteration:07d}"
        directory.mkdir(parents=True)
        (directory / "__0_0.distcp").write_bytes(b"a" * 100)
        (directory / "__1_0.distcp").write_bytes(b"b" * 301)
        (directory / ".metadata").write_bytes(b"m" * 500)  # larger, but not a shard
    (root / TRACKER).write_text("40")
    return root


def tree(root):
    """Every file under `root` with its bytes (what a damage may change, and nothing else)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def without_at(record):
    assert set(record) == RECORD_KEYS
    assert record["at"].endswith("Z")
    return {k: v for k, v in record.items() if k != "at"}


def test_the_kinds_are_the_shared_ids():
    assert tuple(DAMAGE_FUNCTIONS) == ids.CHECKPOINT_DAMAGES
    assert damage_module.DAMAGE_SUFFIX == ".ftqual-moved"


# --- each damage -----------------------------------------------------------------------------------------


def test_tracker_not_a_number_overwrites_it_with_nuls_of_its_length(ckpt):
    before = tree(ckpt)
    record = damage_checkpoint("tracker_not_a_number", ckpt / TRACKER, 40)
    assert (ckpt / TRACKER).read_bytes() == b"\0\0"
    after = tree(ckpt)
    assert {k: v for k, v in after.items() if k != TRACKER} == {
        k: v for k, v in before.items() if k != TRACKER
    }
    assert without_at(record) == {
        "kind": "tracker_not_a_number",
        "iteration": 40,
        "path": TRACKER,
        "moved_to": None,
        "size_before": 2,
        "size_after": 2,
        "tracker_before": "40",
        "tracker_after": "\\x00\\x00",
    }
    json.dumps(record)  # the marker can carry it


def test_tracker_not_a_number_of_an_empty_tracker_writes_one_nul(ckpt):
    (ckpt / TRACKER).write_bytes(b"")
    record = damage_tracker_not_a_number(ckpt / TRACKER, 40)
    assert (ckpt / TRACKER).read_bytes() == b"\0"
    assert (record["size_before"], record["size_after"], record["tracker_after"]) == (0, 1, "\\x00")


def test_tracker_not_a_number_leaves_a_tracker_the_worker_refuses(ckpt):
    damage_checkpoint("tracker_not_a_number", ckpt / TRACKER, 40)
    with pytest.raises(TrackerError, match="does not hold an integer"):
        read_tracker_baseline(ckpt / TRACKER)
    assert poll_tracker(ckpt / TRACKER) is None


def test_tracker_missing_iteration_moves_the_directory_aside(ckpt):
    before = tree(ckpt / "iter_0000040")
    record = damage_checkpoint("tracker_missing_iteration", ckpt / TRACKER, 40)
    assert not (ckpt / "iter_0000040").exists()
    assert tree(ckpt / "iter_0000040.ftqual-moved") == before  # moved, nothing deleted
    assert (ckpt / TRACKER).read_text() == "40"  # the tracker still names it
    assert (ckpt / "iter_0000020").is_dir()
    assert without_at(record) == {
        "kind": "tracker_missing_iteration",
        "iteration": 40,
        "path": "iter_0000040",
        "moved_to": "iter_0000040.ftqual-moved",
        "size_before": None,
        "size_after": None,
        "tracker_before": "40",
        "tracker_after": "40",
    }


def test_tracker_removed_moves_the_tracker_aside(ckpt):
    record = damage_checkpoint("tracker_removed", ckpt / TRACKER, 40)
    assert not (ckpt / TRACKER).exists()
    assert (ckpt / (TRACKER + ".ftqual-moved")).read_text() == "40"
    assert (ckpt / "iter_0000040").is_dir() and (ckpt / "iter_0000020").is_dir()
    assert without_at(record) == {
        "kind": "tracker_removed",
        "iteration": 40,
        "path": TRACKER,
        "moved_to": TRACKER + ".ftqual-moved",
        "size_before": None,
        "size_after": None,
        "tracker_before": "40",
        "tracker_after": None,
    }
    assert read_tracker_baseline(ckpt / TRACKER) == 0  # what a replacement's wrapper sees: no tracker


def test_shard_truncated_cuts_the_largest_shard_to_half(ckpt):
    before = tree(ckpt)
    record = damage_checkpoint("shard_truncated", ckpt / TRACKER, 40)
    assert (ckpt / "iter_0000040" / "__1_0.distcp").read_bytes() == b"b" * 150  # floor(301 / 2)
    after = tree(ckpt)
    changed = {k for k in before if before[k] != after.get(k)}
    assert changed == {"iter_0000040/__1_0.distcp"} and set(after) == set(before)
    assert without_at(record) == {
        "kind": "shard_truncated",
        "iteration": 40,
        "path": "iter_0000040/__1_0.distcp",
        "moved_to": None,
        "size_before": 301,
        "size_after": 150,
        "tracker_before": "40",
        "tracker_after": "40",
    }


def test_shard_corrupted_inverts_bytes_in_the_middle_of_a_file_that_is_not_torch_s(ckpt):
    before = tree(ckpt)
    record = damage_checkpoint("shard_corrupted", ckpt / TRACKER, 40)
    after = tree(ckpt)
    changed = {k for k in before if before[k] != after.get(k)}
    assert changed == {"iter_0000040/__1_0.distcp"} and set(after) == set(before)
    # no torch.save record in it: the middle of the file, at most half of it
    assert after["iter_0000040/__1_0.distcp"] == b"b" * 75 + bytes([ord("b") ^ 0xFF]) * 150 + b"b" * 76
    assert record == {
        "kind": "shard_corrupted",
        "iteration": 40,
        "path": "iter_0000040/__1_0.distcp",
        "moved_to": None,
        "size_before": 301,
        "size_after": 301,
        "tracker_before": "40",
        "tracker_after": "40",
        "offset": 75,
        "length": 150,
        "xor": 255,
        "at": record["at"],
    }


def test_shard_corrupted_hits_the_largest_tensor_of_a_torch_dist_shard(tmp_path):
    """A real torch_dist save: the inverted bytes lie inside the largest tensor's bytes, so the load reads
    the archive as before and only that tensor's values change."""
    torch = pytest.importorskip("torch")
    dcp = pytest.importorskip("torch.distributed.checkpoint")
    small = torch.arange(10, dtype=torch.float32)
    state = {"small": small, "large": torch.ones(50_000), "mid": torch.ones(900)}
    root = tmp_path / "ckpt"
    with pytest.warns(UserWarning):  # no process group: torch says it saves in a single process
        dcp.save(state, checkpoint_id=str(root / "iter_0000004"))
    (root / TRACKER).write_text("4")
    record = damage_checkpoint("shard_corrupted", root / TRACKER, 4)
    assert record["length"] == 4096 and record["size_after"] == record["size_before"]
    loaded = {k: torch.zeros_like(v) for k, v in state.items()}
    with pytest.warns(UserWarning):
        dcp.load(loaded, checkpoint_id=str(root / "iter_0000004"))
    assert torch.equal(loaded["small"], state["small"]) and torch.equal(loaded["mid"], state["mid"])
    assert (loaded["large"] != state["large"]).sum().item() == 4096 // 4  # 1024 floats, each inverted


# --- damages that cannot be made: refused, nothing changed -------------------------------------------------


def test_shard_truncated_without_a_shard_is_refused(ckpt):
    for shard in (ckpt / "iter_0000040").glob("*.distcp"):
        shard.unlink()
    before = tree(ckpt)
    with pytest.raises(DamageError, match=r"holds no \*\.distcp shard"):
        damage_checkpoint("shard_truncated", ckpt / TRACKER, 40)
    assert tree(ckpt) == before


def test_a_missing_iteration_directory_is_refused(ckpt):
    (ckpt / TRACKER).write_text("60")
    before = tree(ckpt)
    with pytest.raises(DamageError, match="does not exist"):
        damage_checkpoint("tracker_missing_iteration", ckpt / TRACKER, 60)
    assert tree(ckpt) == before


def test_a_move_never_replaces_an_earlier_one(ckpt):
    (ckpt / (TRACKER + ".ftqual-moved")).write_text("20")
    with pytest.raises(DamageError, match="already exists"):
        damage_checkpoint("tracker_removed", ckpt / TRACKER, 40)
    assert (ckpt / TRACKER).read_text() == "40"
    assert (ckpt / (TRACKER + ".ftqual-moved")).read_text() == "20"


def test_a_tracker_that_moved_on_is_refused_for_the_directory_damages(ckpt):
    """The replacement would load the newer checkpoint and never meet a damage to the one that armed it."""
    before = tree(ckpt)
    for kind in ("tracker_missing_iteration", "shard_truncated"):
        with pytest.raises(DamageError, match="names 40, not iteration 20"):
            damage_checkpoint(kind, ckpt / TRACKER, 20)
    assert tree(ckpt) == before


def test_a_missing_tracker_cannot_be_overwritten(ckpt):
    (ckpt / TRACKER).unlink()
    with pytest.raises(DamageError, match="cannot open the tracker"):
        damage_checkpoint("tracker_not_a_number", ckpt / TRACKER, 40)
    assert not (ckpt / TRACKER).exists()


# --- the injection -----------------------------------------------------------------------------------------


def make_injector(ckpt, damage):
    kills = []
    injector = Injector(
        fault="kill",
        placement="immediate",
        tracker=ckpt / TRACKER,
        marker=ckpt.parent / "fault_injected.json",
        baseline=20,
        identity={"run_id": "r1", "rank": 1, "local_rank": 1, "host": "h", "cycle": 0},
        watch=None,
        kill=lambda pid, sig: kills.append((pid, sig)),
        damage=damage,
    )
    return injector, kills


@pytest.mark.parametrize("kind", ["tracker_not_a_number", "tracker_missing_iteration", "shard_truncated"])
def test_injection_damages_the_checkpoint_then_claims_and_kills(ckpt, kind, capsys):
    injector, kills = make_injector(ckpt, kind)
    assert injector.on_tracker(40) is True
    assert kills == [(os.getpid(), signal.SIGKILL)] and injector.claimed
    marker = json.loads((ckpt.parent / "fault_injected.json").read_text())
    assert marker["checkpoint_iteration"] == 40 and marker["fault"] == "kill"
    assert marker["damage"]["kind"] == kind and marker["damage"]["iteration"] == 40
    assert set(marker["damage"]) == RECORD_KEYS
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("[ftqual-inject] "))
    assert json.loads(line.split(" ", 1)[1])["damage"] == marker["damage"]


def test_injection_without_its_damage_is_not_made(ckpt, capsys):
    for shard in (ckpt / "iter_0000040").glob("*.distcp"):
        shard.unlink()
    injector, kills = make_injector(ckpt, "shard_truncated")
    injector.on_tracker(40)
    assert kills == [] and not injector.claimed
    assert not (ckpt.parent / "fault_injected.json").exists()
    assert "checkpoint damage shard_truncated of iteration 40 cannot be made" in capsys.readouterr().err


def test_no_damage_when_the_marker_was_claimed_elsewhere(ckpt):
    (ckpt.parent / "fault_injected.json").write_text("{}")
    before = tree(ckpt)
    injector, kills = make_injector(ckpt, "tracker_removed")
    injector.on_tracker(40)
    assert kills == [] and tree(ckpt) == before


def test_injection_without_damage_has_no_damage_key(ckpt):
    injector, kills = make_injector(ckpt, None)
    injector.on_tracker(40)
    assert len(kills) == 1
    assert "damage" not in json.loads((ckpt.parent / "fault_injected.json").read_text())
    assert (ckpt / TRACKER).read_text() == "40"


# --- arguments ---------------------------------------------------------------------------------------------

BASE = ["--entrypoint", "e.py", "--checkpoint-dir", "/c", "--fault-marker", "/f", "--fault-rank", "0"]


def test_damage_defaults_to_none():
    args, _ = parse_args([*BASE, "--fault", "kill"])
    assert args.checkpoint_damage == "none"


@pytest.mark.parametrize("kind", ["tracker_not_a_number", "shard_truncated"])
def test_damage_is_accepted_with_a_kill(kind):
    args, _ = parse_args([*BASE, "--fault", "kill", "--checkpoint-damage", kind])
    assert args.checkpoint_damage == kind


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--fault", "hang"], "--checkpoint-damage needs --fault kill"),
        (["--fault", "segfault"], "--checkpoint-damage needs --fault kill"),
        (["--fault", "none"], "--checkpoint-damage needs --fault kill"),
        (
            ["--fault", "kill", "--fault-timing", "in_save"],
            "--checkpoint-damage needs --fault-timing checkpoint",
        ),
    ],
)
def test_damage_with_another_fault_or_timing_is_refused(extra, said, capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args([*BASE, *extra, "--checkpoint-damage", "tracker_removed"])
    assert exc.value.code == 2
    assert said in capsys.readouterr().err


def test_an_unknown_damage_is_refused(capsys):
    with pytest.raises(SystemExit):
        parse_args([*BASE, "--fault", "kill", "--checkpoint-damage", "tracker_eaten"])
    assert "invalid choice" in capsys.readouterr().err


# --- the wrapper: the fault cycle and the replacement ------------------------------------------------------


@pytest.fixture
def entrypoint(tmp_path):
    """A stand-in workload: records that it ran, exits 0."""
    path = tmp_path / "ep" / "train.py"
    path.parent.mkdir()
    path.write_text(
        "import sys\n"
        "if __name__ == '__main__':\n"
        "    open(sys.argv[sys.argv.index('--out') + 1], 'w').write('ran')\n"
    )
    return path


@pytest.fixture
def rank_env(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    saved_argv, saved_path = list(sys.argv), list(sys.path)
    yield
    sys.argv[:], sys.path[:] = saved_argv, saved_path


def run_wrapper(entrypoint, tmp_path, ckpt, *extra):
    argv = ["--entrypoint", str(entrypoint), "--checkpoint-dir", str(ckpt)]
    argv += ["--fault-marker", str(tmp_path / "fault_injected.json"), "--fault", "kill", "--fault-rank", "1"]
    return main([*argv, *extra, "--", "--out", str(tmp_path / "ran.txt")])


def test_a_damage_that_cannot_be_made_fails_the_cycle(entrypoint, tmp_path, ckpt, rank_env, monkeypatch):
    """The fault cycle: no shard to cut, so no fault, no marker, and the wrapper's exit 3."""
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "0")
    monkeypatch.setattr("ftqual.rank.worker.install_section_hooks", lambda watch: False)
    for shard in (ckpt / "iter_0000040").glob("*.distcp"):
        shard.unlink()
    (ckpt / TRACKER).write_text("20")
    original = Injector.start
    kills = []

    def start(self):
        self.kill = lambda pid, sig: kills.append(sig)
        self.poll_seconds = 0.01
        (ckpt / TRACKER).write_text("40")  # the cycle's checkpoint completes
        thread = original(self)
        thread.join(5)
        return thread

    monkeypatch.setattr(Injector, "start", start)
    rc = run_wrapper(entrypoint, tmp_path, ckpt, "--checkpoint-damage", "shard_truncated")
    assert rc == EXIT_FAULT_NEVER_INJECTED and kills == []
    assert not (tmp_path / "fault_injected.json").exists()


def test_the_fault_cycle_damages_and_kills(entrypoint, tmp_path, ckpt, rank_env, monkeypatch):
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "0")
    monkeypatch.setattr("ftqual.rank.worker.install_section_hooks", lambda watch: False)
    (ckpt / TRACKER).write_text("20")
    original = Injector.start
    kills = []

    def start(self):
        self.kill = lambda pid, sig: kills.append(sig)
        self.poll_seconds = 0.01
        (ckpt / TRACKER).write_text("40")
        thread = original(self)
        thread.join(5)
        return thread

    monkeypatch.setattr(Injector, "start", start)
    rc = run_wrapper(entrypoint, tmp_path, ckpt, "--checkpoint-damage", "tracker_not_a_number")
    assert rc == 0 and kills == [signal.SIGKILL]
    marker = json.loads((tmp_path / "fault_injected.json").read_text())
    assert marker["damage"]["kind"] == "tracker_not_a_number" and marker["damage"]["iteration"] == 40
    assert (ckpt / TRACKER).read_bytes() == b"\0\0"


def damaged_run(tmp_path, ckpt, damage):
    """The replacement's view: the tracker overwritten with NULs, the first marker as the fault left it."""
    (ckpt / TRACKER).write_bytes(b"\0\0")
    marker = {"schema": "ftqual.fault/v1", "fault": "kill", "injection": 1, "injections": 1}
    if damage is not None:
        marker["damage"] = damage
    (tmp_path / "fault_injected.json").write_text(json.dumps(marker))


def test_replacement_meets_a_tracker_this_run_damaged(entrypoint, tmp_path, ckpt, rank_env, capsys):
    damaged_run(tmp_path, ckpt, {"kind": "tracker_not_a_number", "iteration": 40})
    rc = run_wrapper(entrypoint, tmp_path, ckpt, "--checkpoint-damage", "tracker_not_a_number")
    assert rc == 0
    assert (tmp_path / "ran.txt").read_text() == "ran"
    err = capsys.readouterr().err
    said = "the tracker was damaged by this run's injection (tracker_not_a_number); "
    said += "the workload meets it as it is"
    assert said in err
    assert "refusing" not in err and "not injecting again" in err


@pytest.mark.parametrize(
    "damage",
    [None, {"kind": "eaten_by_a_grue"}, "tracker_not_a_number"],
    ids=["no-damage", "unknown-kind", "not-a-record"],
)
def test_replacement_still_refuses_a_bad_tracker_it_did_not_break(
    entrypoint, tmp_path, ckpt, rank_env, damage, capsys
):
    damaged_run(tmp_path, ckpt, damage)
    rc = run_wrapper(entrypoint, tmp_path, ckpt)
    assert rc == EXIT_BAD_TRACKER
    assert not (tmp_path / "ran.txt").exists()
    assert "refusing to start the workload" in capsys.readouterr().err


def test_replacement_refuses_a_bad_tracker_without_any_marker(entrypoint, tmp_path, ckpt, rank_env):
    (ckpt / TRACKER).write_bytes(b"\0\0")
    assert run_wrapper(entrypoint, tmp_path, ckpt) == EXIT_BAD_TRACKER
    assert not (tmp_path / "ran.txt").exists()


def test_marker_damage_reads_only_a_damage_record(tmp_path):
    marker = tmp_path / "fault_injected.json"
    assert marker_damage(marker) is None
    marker.write_text("not json")
    assert marker_damage(marker) is None
    marker.write_text("[1]")
    assert marker_damage(marker) is None
    marker.write_text(json.dumps({"damage": {"kind": "shard_truncated", "iteration": 4}}))
    assert marker_damage(marker) == {"kind": "shard_truncated", "iteration": 4}
