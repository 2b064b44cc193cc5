"""Dropping a verified run's checkpoint payloads (ftqual.launch.payloads): the manifest first, only payloads,
sizes kept, links refused, idempotent, and a re-verification of a recorded run gives the same verdict."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ftqual.launch import payloads
from ftqual.scenario import job as jobshape
from ftqual.scenario import model
from ftqual.verification.verify import build_report

DATA = Path(__file__).resolve().parents[2] / "data" / "megatron-h200-1gpu"
MIB = 1 << 20


def sparse(path: Path, size: int) -> None:
    """A file of `size` bytes that costs no disk (what counts is st_size)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.truncate(size)


def make_run(tmp_path: Path, checkpoint_dir: str = "checkpoints", run_id: str = "kill-1") -> Path:
    run = tmp_path / run_id
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"run_id": run_id, "checkpoint_dir": checkpoint_dir}))
    ckpt = Path(checkpoint_dir) if Path(checkpoint_dir).is_absolute() else run / checkpoint_dir
    for k in (5, 10):
        folder = ckpt / f"iter_{k:07d}"
        sparse(folder / "__0_0.distcp", 3 * MIB)
        sparse(folder / "smoke_payload.bin", 2 * MIB)
        (folder / ".metadata").write_bytes(b"x" * 10)
        (folder / "metadata.json").write_text("{}")
        (folder / "common.pt").write_bytes(b"small")  # under the size bound: stays
    sparse(ckpt / "iter_0000010" / ".metadata", 2 * MIB)  # a large completion record: stays all the same
    (ckpt / payloads.TRACKER).write_text("10")
    return run


def test_drop_removes_only_payloads_and_keeps_their_sizes(tmp_path):
    run = make_run(tmp_path)
    done = payloads.drop(run, "drop")
    ckpt = run / "checkpoints"
    assert {f["path"] for f in done.files} == {
        f"iter_{k:07d}/{n}" for k in (5, 10) for n in ("__0_0.distcp", "smoke_payload.bin")
    }
    for k in (5, 10):
        folder = ckpt / f"iter_{k:07d}"
        assert not (folder / "__0_0.distcp").exists() and not (folder / "smoke_payload.bin").exists()
        assert (folder / ".metadata").is_file() and (folder / "metadata.json").is_file()
        assert (folder / "common.pt").read_bytes() == b"small"
    assert (ckpt / payloads.TRACKER).read_text() == "10"
    manifest = json.loads((ckpt / payloads.MANIFEST).read_text())
    assert manifest["schema"] == "ftqual.payloads/v1" and manifest["run_id"] == "kill-1"
    assert manifest["bytes_total"] == 2 * (3 + 2) * MIB
    assert {f["path"]: f["bytes"] for f in manifest["files"]}["iter_0000005/__0_0.distcp"] == 3 * MIB
    assert manifest["dropped_at"].endswith("Z")


def test_the_manifest_is_written_before_anything_is_deleted(tmp_path, monkeypatch):
    run = make_run(tmp_path)
    seen = []

    def unlink(path):
        seen.append((run / "checkpoints" / payloads.MANIFEST).is_file())
        raise OSError("crash mid-way")

    monkeypatch.setattr(payloads.os, "unlink", unlink)
    with pytest.raises(OSError):
        payloads.drop(run, "drop")
    assert seen == [True]
    monkeypatch.undo()
    # The crashed drop's list stands; the rerun deletes what is left and keeps every entry.
    again = payloads.drop(run, "drop")
    assert len(again.files) == 4 and again.bytes_total == 10 * MIB


def test_a_second_drop_is_idempotent(tmp_path):
    run = make_run(tmp_path)
    first = payloads.drop(run, "drop")
    text = (run / "checkpoints" / payloads.MANIFEST).read_text()
    second = payloads.drop(run, "drop")
    assert second.files == [] and second.bytes_total == first.bytes_total
    assert (run / "checkpoints" / payloads.MANIFEST).read_text() == text


def test_keep_and_auto_below_the_bound_keep_everything(tmp_path):
    run = make_run(tmp_path)
    assert payloads.drop(run, "keep").skipped == "checkpoint_payloads: keep"
    auto = payloads.drop(run, "auto")
    assert auto.skipped and "auto keeps" in auto.skipped
    assert (run / "checkpoints" / "iter_0000005" / "__0_0.distcp").exists()
    assert not (run / "checkpoints" / payloads.MANIFEST).exists()


def test_auto_drops_a_large_run(tmp_path, monkeypatch):
    run = make_run(tmp_path)
    monkeypatch.setattr(payloads, "AUTO_DROP_BYTES", 10 * MIB)
    assert len(payloads.drop(run, "auto").files) == 4


def test_keep_last_leaves_the_trackers_checkpoint_whole(tmp_path):
    run = make_run(tmp_path)
    done = payloads.drop(run, "drop", keep_last=True)
    assert {f["path"].split("/")[0] for f in done.files} == {"iter_0000005"}
    assert (run / "checkpoints" / "iter_0000010" / "__0_0.distcp").exists()


def test_a_link_leading_out_refuses_the_drop_and_deletes_nothing(tmp_path):
    run = make_run(tmp_path)
    outside = tmp_path / "elsewhere.distcp"
    sparse(outside, 2 * MIB)
    (run / "checkpoints" / "iter_0000005" / "link.distcp").symlink_to(outside)
    with pytest.raises(payloads.PayloadError, match="leading out of the checkpoint directory"):
        payloads.drop(run, "drop")
    assert outside.exists() and (run / "checkpoints" / "iter_0000005" / "__0_0.distcp").exists()
    assert not (run / "checkpoints" / payloads.MANIFEST).exists()


def test_a_linked_checkpoint_directory_is_refused(tmp_path):
    run = make_run(tmp_path)
    real = tmp_path / "real-ckpt"
    shutil.move(run / "checkpoints", real)
    (run / "checkpoints").symlink_to(real)
    with pytest.raises(payloads.PayloadError):
        payloads.drop(run, "drop")
    assert (real / "iter_0000005" / "__0_0.distcp").exists()


def test_a_checkpoint_directory_the_user_gave_is_never_dropped(tmp_path):
    given = tmp_path / "team-ckpts"
    run = make_run(tmp_path, checkpoint_dir=str(given))
    with pytest.raises(payloads.PayloadError, match="Megatron may still need it"):
        payloads.drop(run, "drop")
    assert (given / "iter_0000005" / "__0_0.distcp").exists()


def test_a_per_run_checkpoint_directory_elsewhere_is_the_runs_own(tmp_path):
    own = tmp_path / "shared-fs" / "kill-1"
    run = make_run(tmp_path, checkpoint_dir=str(own))
    assert len(payloads.drop(run, "drop").files) == 4


def test_a_checkpoint_directory_leaving_the_run_is_refused(tmp_path):
    run = make_run(tmp_path)
    (run / "run.json").write_text(json.dumps({"run_id": "kill-1", "checkpoint_dir": "../other"}))
    with pytest.raises(payloads.PayloadError, match="leaves the run directory"):
        payloads.drop(run, "drop")


def test_listed_files_never_stand_in_for_a_completion_record():
    doc = {
        "schema": payloads.SCHEMA,
        "files": [
            {"path": "iter_0000005/.metadata", "bytes": 10},
            {"path": "iter_0000005/metadata.json", "bytes": 2},
            {"path": "../escape.distcp", "bytes": 1},
            {"path": "/abs/iter_0000005/x.distcp", "bytes": 1},
            {"path": "iter_0000005/x.distcp", "bytes": -1},
            {"path": "iter_0000005/x.distcp", "bytes": True},
            {"path": "iter_0000005/y.distcp", "bytes": 7},
        ],
    }
    assert payloads.listed_files(doc) == [{"path": "iter_0000005/y.distcp", "bytes": 7}]


# ---------------------------------------------------------------------------------------------
# the re-verification of a recorded run: same verdict, same statuses


def statuses(report: dict) -> dict:
    return {c["id"]: c["status"] for c in report["checks"]}


@pytest.fixture
def recorded(tmp_path):
    """A copy of the H200 kill run and its baseline, with payload files put back into every checkpoint."""
    runs = {}
    for name in ("baseline", "kill"):
        dest = tmp_path / name
        shutil.copytree(DATA / name, dest, symlinks=True)
        for folder in (dest / "checkpoints").glob("iter_*"):
            sparse(folder / "__0_0.distcp", 2 * MIB)
            sparse(folder / "__0_1.distcp", 2 * MIB)
        runs[name] = dest
    return runs


def test_reverifying_a_dropped_run_gives_the_same_verdict(recorded):
    before = build_report(recorded["kill"], recorded["baseline"])
    assert before["verdict"] == "pass"
    payloads.drop(recorded["baseline"], "drop")
    payloads.drop(recorded["kill"], "drop")
    assert not list((recorded["kill"] / "checkpoints").glob("iter_*/*.distcp"))
    after = build_report(recorded["kill"], recorded["baseline"])
    assert after["verdict"] == before["verdict"] and statuses(after) == statuses(before)
    fault = next(c for c in after["checks"] if c["id"] == "checkpoint_before_failure")
    assert "payload not verified" not in json.dumps(fault)
    assert "2 payload files dropped after verification" in json.dumps(fault)


def test_a_manifest_does_not_turn_a_missing_metadata_into_a_pass(recorded):
    """Negative control: the fault's checkpoint folder lost its `.metadata`; a manifest naming it and
    payloads that never existed must leave the verdict a FAIL with the same statuses."""
    kill = recorded["kill"]
    k = json.loads((kill / "fault_injected.json").read_text())["checkpoint_iteration"]
    (kill / "checkpoints" / f"iter_{k:07d}" / ".metadata").unlink()
    broken = build_report(kill, recorded["baseline"])
    assert broken["verdict"] != "pass"
    (kill / "checkpoints" / payloads.MANIFEST).write_text(
        json.dumps(
            {
                "schema": payloads.SCHEMA,
                "run_id": "kill",
                "dropped_at": "2026-01-01T00:00:00Z",
                "files": [
                    {"path": f"iter_{k:07d}/.metadata", "bytes": 100},
                    {"path": f"iter_{k:07d}/never_there.distcp", "bytes": 5},
                ],
                "bytes_total": 105,
            }
        )
    )
    again = build_report(kill, recorded["baseline"])
    assert again["verdict"] == broken["verdict"] and statuses(again) == statuses(broken)


# ---------------------------------------------------------------------------------------------
# the verify rule's call, the CLI


def test_after_verify_drops_once_the_report_is_written(tmp_path):
    run = make_run(tmp_path)
    attempt = tmp_path / "attempt.json"
    attempt.write_text(json.dumps({"launched": True, "run_dir": str(run)}))
    out = tmp_path / "verify.json"
    log = tmp_path / "log.txt"
    with open(log, "w") as fh:
        assert payloads.after_verify(attempt, out, {"mode": "drop"}, fh) is None  # not verified yet
        out.write_text("{}")
        done = payloads.after_verify(attempt, out, {"mode": "drop", "keep_last": False}, fh)
    assert done is not None and len(done.files) == 4
    assert "dropped 4 payload files" in log.read_text()


def test_after_verify_never_fails_the_rule(tmp_path):
    given = tmp_path / "team-ckpts"
    run = make_run(tmp_path, checkpoint_dir=str(given))
    attempt = tmp_path / "attempt.json"
    attempt.write_text(json.dumps({"launched": True, "run_dir": str(run)}))
    (tmp_path / "verify.json").write_text("{}")
    with open(tmp_path / "log.txt", "w") as fh:
        assert payloads.after_verify(attempt, tmp_path / "verify.json", {"mode": "drop"}, fh) is None
    assert "checkpoint payloads kept:" in (tmp_path / "log.txt").read_text()
    assert (given / "iter_0000005" / "__0_0.distcp").exists()


def test_rule_param_keeps_the_baselines_last_checkpoint_for_a_resume():
    cfg = model.resolve(
        {
            "checkpoint_payloads": "drop",
            "scenarios": {"baseline": {"fault": "none"}, "kill": {"fault": "kill"}},
        },
        env={},
    )
    assert payloads.rule_param({"checkpoint_payloads": "drop"}, cfg.by_name, "baseline", "baseline") == {
        "mode": "drop",
        "keep_last": False,
    }
    resumed = model.resolve(
        {
            "scenarios": {
                "baseline": {"fault": "none"},
                "resume": {"fault": "kill", "resume_from": "baseline"},
            }
        },
        env={},
    )
    assert payloads.rule_param({}, resumed.by_name, "baseline", "baseline") == {
        "mode": "auto",
        "keep_last": True,
    }
    assert payloads.rule_param({}, resumed.by_name, "resume", "baseline")["keep_last"] is False


def verified(run: Path, run_id: str = "kill-1") -> Path:
    report = run / "verify.json"
    report.write_text(json.dumps({"schema": "ftqual.verify/v1", "run_id": run_id, "verdict": "pass"}))
    return report


def test_cli_drops_a_verified_run(tmp_path, capsys):
    run = make_run(tmp_path)
    verified(run)
    assert payloads.main([str(run)]) == 0
    assert "dropped 4 payload files" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        (lambda run: None, "no verify report at"),
        (lambda run: (run / "verify.json").write_text("{"), "unreadable verify report"),
        (lambda run: (run / "verify.json").write_text("{}"), "is not a verify report"),
        (lambda run: verified(run, "other-run"), "verifies run 'other-run', not 'kill-1'"),
    ],
)
def test_cli_refuses_an_unverified_run_in_one_line(tmp_path, capsys, setup, expected):
    run = make_run(tmp_path)
    setup(run)
    assert payloads.main([str(run)]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1 and err.startswith("ftqual drop-payloads: ")
    assert (run / "checkpoints" / "iter_0000005" / "__0_0.distcp").exists()


def test_cli_refuses_a_directory_without_run_json(tmp_path, capsys):
    (tmp_path / "verify.json").write_text("{}")
    assert payloads.main([str(tmp_path), "--report", str(tmp_path / "verify.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_the_cli_knows_the_command():
    from ftqual.cli import COMMANDS

    assert COMMANDS["drop-payloads"][0] == "ftqual.launch.payloads"


# ---------------------------------------------------------------------------------------------
# how many checkpoints a scenario writes, how many coexist


@pytest.mark.parametrize(
    ("iters", "interval", "start", "written"),
    [(30, 5, 0, 6), (32, 5, 0, 7), (4, 5, 0, 1), (45, 5, 30, 3), (30, 5, 30, 0)],
)
def test_checkpoints_written(iters, interval, start, written):
    assert jobshape.checkpoints_written(iters, interval, start) == written


def test_peak_checkpoints_counts_what_coexists():
    cfg = model.resolve(
        {
            "train_iters": 30,
            "save_interval": 5,
            "scenarios": {
                "baseline": {"fault": "none"},
                "kill": {"fault": "kill"},
                "hang": {"fault": "hang"},
            },
        },
        env={},
    )
    assert jobshape.peak_checkpoints(cfg.scenarios, "keep") == 18
    assert jobshape.peak_checkpoints(cfg.scenarios, "drop") == 6
    assert jobshape.peak_checkpoints(cfg.scenarios, "drop", parallel=2) == 12
    assert jobshape.peak_checkpoints(cfg.scenarios, "auto", large=False) == 18
    assert jobshape.peak_checkpoints(cfg.scenarios, "auto", large=True) == 6
    assert jobshape.peak_checkpoints((), "drop") == 0


def test_peak_checkpoints_holds_the_baselines_last_for_a_resume():
    cfg = model.resolve(
        {
            "train_iters": 30,
            "save_interval": 5,
            "scenarios": {
                "baseline": {"fault": "none"},
                "resume": {"fault": "kill", "resume_from": "baseline"},
            },
        },
        env={},
    )
    resume = cfg.by_name["resume"]
    written = jobshape.checkpoints_written(resume.train_iters, resume.save_interval, 30) + 1  # + its seed
    assert jobshape.peak_checkpoints(cfg.scenarios, "drop") == max(6, written) + 1


def test_os_unlink_is_what_deletes():
    """The crash test above patches os.unlink: the module must delete through it."""
    assert payloads.os is os
