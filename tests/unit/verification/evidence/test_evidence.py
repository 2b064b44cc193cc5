"""Unit tests of the evidence parsers on small synthetic inputs."""

# ruff: noqa: E501  (sample log lines are quoted verbatim)

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

import pytest

from ftqual.verification.evidence.checkpoints import read_checkpoints
from ftqual.verification.evidence.clock import Clock, clock_from_meta, iso_z, parse_utc
from ftqual.verification.evidence.cycles import read_cycle_infos
from ftqual.verification.evidence.launcher_log import parse_launcher_log, read_launcher_log
from ftqual.verification.evidence.run_meta import RunMetaError, read_marker, read_run_meta
from ftqual.verification.evidence.snapshot import build_snapshot
from ftqual.verification.evidence.train_log import parse_train_log

UTC_CLOCK = Clock()
RUN = {
    "schema": "ftqual.run/v1",
    "run_id": "r1",
    "scenario": "kill",
    "fault": "kill",
    "fault_rank": 1,
    "world_size": 2,
    "train_iters": 30,
    "save_interval": 5,
    "checkpoint_dir": "checkpoints",
    "max_restarts": 3,
    "timeouts": {"setup": 900, "step": 120, "checkpointing": 600, "out_of_section": 180},
    "started_at": "2026-11-29T14:18:36Z",
    "finished_at": None,
    "exit_code": None,
}


def write(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# clock ---------------------------------------------------------------------------------------------------------


def test_parse_utc_variants():
    assert parse_utc("2026-11-29T14:19:09.744182Z") == datetime(2026, 11, 29, 14, 19, 9, 744182, tzinfo=UTC)
    assert parse_utc("2026-11-29 14:19:09.847 UTC") == datetime(2026, 11, 29, 14, 19, 9, 847000, tzinfo=UTC)
    assert parse_utc("2026-11-29T15:19:09+01:00") == datetime(2026, 11, 29, 14, 19, 9, tzinfo=UTC)
    assert parse_utc("") is None and parse_utc("garbage") is None


def test_local_clock_applies_offset():
    clock = clock_from_meta(3600)
    assert not clock.assumed
    assert clock.parse_local("2026-11-29 15:19:08.761161") == datetime(
        2026, 11, 29, 14, 19, 8, 761161, tzinfo=UTC
    )
    assert clock.parse_local("2026-11-29 15:19:09,847") == datetime(
        2026, 11, 29, 14, 19, 9, 847000, tzinfo=UTC
    )
    assert clock.parse_glog("E1129 15:19:09.846000 19484 api.py:986] x", 2026).minute == 19
    assert clock_from_meta(None).assumed and "UTC" in clock_from_meta(None).describe()
    assert iso_z(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05.000000Z"


# run.json / marker ---------------------------------------------------------------------------------------------


def test_run_meta_reads_contract_fields(tmp_path):
    write(tmp_path / "run.json", json.dumps({**RUN, "tz_offset_s": 0, "global_batch_size": 2}))
    meta = read_run_meta(tmp_path)
    assert (meta.fault, meta.fault_rank, meta.train_iters, meta.global_batch_size) == ("kill", 1, 30, 2)
    assert meta.timeouts["out_of_section"] == 180.0 and meta.exit_code is None and meta.tz_offset_s == 0.0


@pytest.mark.parametrize("content", ['{"fault": "kill"', "[]", '{"fault": "boom"}', ""])
def test_run_meta_unusable_raises(tmp_path, content):
    write(tmp_path / "run.json", content)
    with pytest.raises(RunMetaError):
        read_run_meta(tmp_path)


def test_marker_absent_cut_and_valid(tmp_path):
    marker, status = read_marker(tmp_path)
    assert marker is None and status.ok
    write(tmp_path / "fault_injected.json", '{"fault": "kill", "rank"')
    marker, status = read_marker(tmp_path)
    assert marker is None and not status.ok and "unreadable" in status.reason
    write(
        tmp_path / "fault_injected.json",
        json.dumps(
            {
                "fault": "hang",
                "rank": 1,
                "local_rank": 1,
                "cycle": 0,
                "checkpoint_iteration": 5,
                "injected_at": "2026-11-29T14:19:09.744182Z",
            }
        ),
    )
    marker, status = read_marker(tmp_path)
    assert status.ok and marker.checkpoint_iteration == 5 and marker.injected_at.microsecond == 744182


# cycle_infos ---------------------------------------------------------------------------------------------------


def cycle(n: int, end: str = "", job: str = "", attempt: int = 0) -> str:
    return json.dumps(
        {
            "job_id": job,
            "attempt_index": attempt,
            "cycle_number": n,
            "cycle_start_time": f"2026-11-29T14:1{n}:00.000000Z",
            "cycle_end_time": end,
            "cycle_log_file": f"/x/logs/train_cycle{n}.log",
            "active_nodes": "n1",
            "standby_nodes": "",
            "generation": "2" if end else "0",
            "active_ranks": "0",
        },
        indent=2,
    )


def test_cycle_infos_outside_slurm_with_symlink_and_tmp(tmp_path):
    folder = tmp_path / "cycle_infos"
    write(folder / "cycle_info..0.0", cycle(0, "2026-11-29T14:10:30Z"))
    write(folder / "cycle_info..0.1", cycle(1))
    write(folder / "cycle_info..0.1.tmp", "{cut")
    os.symlink("cycle_info..0.1", folder / "cycle_info..current")
    infos, status = read_cycle_infos(tmp_path)
    assert status.ok and infos.cycle_numbers == (0, 1) and infos.current == "cycle_info..0.1"
    assert infos.by_cycle(0).generation == 2 and infos.by_cycle(0).end.second == 30
    assert infos.by_cycle(1).end is None


def test_cycle_infos_inside_slurm_and_current_as_json_file(tmp_path):
    folder = tmp_path / "cycle_infos"
    write(folder / "cycle_info.4711.1.0", cycle(0, job="4711", attempt=1))
    write(folder / "cycle_info.4711.current", cycle(0, job="4711", attempt=1))
    infos, status = read_cycle_infos(tmp_path)
    assert status.ok and infos.records[0].job_id == "4711" and infos.records[0].attempt == 1
    assert infos.current == "cycle_info.4711.1.0"


def test_cycle_infos_cut_json_marks_source_missing(tmp_path):
    write(tmp_path / "cycle_infos" / "cycle_info..0.0", cycle(0)[:50])
    infos, status = read_cycle_infos(tmp_path)
    assert infos is None and not status.ok and "cycle_info..0.0 unreadable" in status.reason


def test_cycle_infos_absent(tmp_path):
    infos, status = read_cycle_infos(tmp_path)
    assert infos is None and not status.ok


# launcher.log --------------------------------------------------------------------------------------------------

LAUNCHER = """\
2026-11-29 14:19:00,000 [INFO] [node17] [workload:?(?) infra:?(?)] launcher.py:655 [default] starting workers
E1129 14:19:09.846000 19484 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: -9) local_rank: 1 (pid: 19528) of binary: /usr/bin/python3
2026-11-29 14:19:09,847 [INFO] [node17] [workload:?(?) infra:?(?)] profiling.py:93   - Cycle: 1 Event: failure_detected Node: n_1_0 Rank: 0 Time: 2026-11-29 14:19:09.847 UTC
2026-11-29 14:19:09,847 [INFO] [node17] [workload:?(?) infra:?(?)] progress_tracker.py:215 Training cycle #0 made progress: 0 → 5 (5 iterations)
2026-11-29 14:19:09,848 [INFO] [node17] [workload:?(?) infra:?(?)] launcher.py:636 [default] Worker group FAILED. 2/3 attempts left; will restart worker group
2026-11-29 14:21:09,000 [WARNING] [node17] [workload:?(1) infra:?(?)] rank_monitor_server.py:522 [Cycle 1] Section 'checkpointing' has been open for 600.12 seconds. Timeout is 600.00 seconds.
2026-11-29 14:22:09,000 [WARNING] [node17] [workload:?(0) infra:?(?)] rank_monitor_server.py:539 [Cycle 2] Was out of section for 180.50 seconds. Timeout is 180.00 seconds.
2026-11-29 14:23:00,000 [INFO] [node17] [workload:?(?) infra:?(?)] progress_tracker.py:229 Training cycle #2 made NO progress: 5 → 5 (0 iterations, need 1). Consecutive cycles without progress: 1/3
2026-11-29 14:23:01,000 [INFO] [node17] [workload:?(?) infra:?(?)] launcher.py:619 [default] Progress tracker detected no progress across restarts. No more restarts will be attempted.
2026-11-29 14:23:01,500 [ERROR] [node17] [workload:?(?) infra:?(?)] launcher.py:3741 NVRx decided the job must not be restarted (no_progress): x. Agent's exit code = 93
2026-11-29 14:23:02,000 [ERROR] [node17] [workload:?(?) infra:?(?)] launcher.py:3745 Some rank(s) exited with non-zero exit code: {1: -9}. Agent's exit code = 1
2026-11-29 14:23:03,000 [INFO] [node17] [workload:?(?) infra:?(?)] launcher.py:672 [default] worker group successfully finished. Waiting 300 seconds"""


def test_launcher_log_facts(tmp_path):
    path = write(tmp_path / "launcher.log", LAUNCHER)  # last line without newline
    log = parse_launcher_log(path, "logs/launcher.log", UTC_CLOCK, 2026)
    (exit_,) = log.exits
    assert (exit_.exit_code, exit_.local_rank, exit_.pid, exit_.ref.line) == (-9, 1, 19528, 2)
    assert exit_.t == datetime(2026, 11, 29, 14, 19, 9, 846000, tzinfo=UTC)
    (restart,) = log.restarts
    assert (restart.state, restart.attempts_left, restart.attempts_max) == ("FAILED", 2, 3)
    section, oos = log.timeouts
    assert (section.cycle, section.section, section.local_rank, section.host) == (
        1,
        "checkpointing",
        1,
        "node17",
    )
    assert section.timeout_s == 600.0 and section.detected_by == "section:checkpointing"
    assert (oos.section, oos.local_rank, oos.detected_by, oos.elapsed_s) == (None, 0, "out_of_section", 180.5)
    assert [(p.cycle, p.progress, p.start, p.end) for p in log.progress] == [
        (0, True, 0, 5),
        (2, False, 5, 5),
    ]
    assert log.event("failure_detected").t == datetime(2026, 11, 29, 14, 19, 9, 847000, tzinfo=UTC)
    assert len(log.no_progress_stops) == 1 and len(log.nonzero_exits) == 1
    assert [a.code for a in log.agent_exit_codes] == [93, 1]
    assert len(log.successes) == 1 and log.lines == 12


def test_launcher_log_empty_is_incomplete(tmp_path):
    write(tmp_path / "logs" / "launcher.log", "")
    log, status = read_launcher_log(tmp_path, UTC_CLOCK, 2026)
    assert status.ok and not status.complete and log.lines == 0


# train_cycle<N>.log --------------------------------------------------------------------------------------------

TRAIN = """\
 0: ------------------------ arguments ------------------------
 0:   finetune ........................................ False
 0:   no_load_optim ................................... True
 0:   ddp_param_name_patterns_for_fp32_local_accumulation  []
11:   finetune ........................................ True
 0:   use_distributed_optimizer ....................... True
 0: -------------------- end of arguments ---------------------
 0: FT: initialized. Timeouts=SectionTimeouts(out_of_section=90.00, sections=[setup=900.00, step=60.00, checkpointing=300.00, ], calculated_sections={'step'}, is_out_of_section_calculated=True)
 0: FT: loaded timeouts from /lus/ckpt/ft_state.json. SectionTimeouts(...)
 0: sharded_state_dict metadata loaded from the checkpoint: {'distrib_optim_sharding_type': 'dp_reshardable'}
 0:  loading distributed checkpoint from /lus/ckpt at iteration 5
 0: Unable to load optimizer from checkpoint /lus/ckpt. Specify --no-load-optim or --finetune, exiting ...
 0:   successfully loaded checkpoint from /lus/ckpt [ t 1/1, p 1/1 ] at iteration 5
11:     load-checkpoint ................................: (279.54, 301.25)
 0: [after model, optimizer, and learning rate scheduler are built] datetime: 2026-11-29 14:19:39.787389
11:  [2026-11-29 14:19:41.329447] iteration        6/      30 | consumed samples:           96 | elapsed time per iteration (ms): 1262.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 6.185080E+00 | loss scale: 1.0 | grad norm: 5.995 | number of skipped iterations:   0 | number of nan iterations:   0 |
11:  [2026-11-29 14:19:41.329447] iteration        6/      30 | consumed samples:           96 | elapsed time per iteration (ms): 1262.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 9.0E+00 |
11:  [2026-11-29 14:19:41.4] iteration        7/      30 | consumed samples:          112 | global batch size:    16 | lm loss: nan |
 0: [2026-11-29 14:19:41.522104] saving checkpoint at iteration      10 to /lus/ckpt in torch_dist format
 0:   [2026-11-29 14:19:50.242415] scheduled an async checkpoint save at iteration      10 to /lus/ckpt
 0:   [2026-11-29 14:19:50.826343] successfully saved checkpoint from iteration      10 to /lus/ckpt [ t 1/1, gtp_remat 1/1, p 1/1 ]
 0: WARNING: could not find the metadata file /lus/ckpt/latest_checkpointed_iteration.txt
 0: [ftqual-inject] {"fault": "kill", "rank": 11, "checkpoint_iteration": 5}
11: [inject] {'fault': 'kill', 'rank': 1}
 0: Traceback (most recent call last):
 0: AssertionError
 0: torch.distributed.DistBackendError: NCCL error
 0: UserWarning: not an error
 0: Exception raised from recvBytes at Utils.hpp:682 (most recent call first):
 0: FT: closed.
 0: partial line without newline"""


def test_train_log_facts(tmp_path):
    path = write(tmp_path / "train_cycle1.log", TRAIN)
    log = parse_train_log(path, "logs/train_cycle1.log", 1, UTC_CLOCK)
    assert not log.complete and log.lines == 31
    assert log.arg_true("no_load_optim") and not log.arg_true("finetune")  # rank 11's args are not rank 0's
    assert log.arg_true("use_distributed_optimizer")
    (init,) = log.ft_inits
    assert init.sections == {"setup": 900.0, "step": 60.0, "checkpointing": 300.0}
    assert init.out_of_section == 90.0 and init.calculated
    assert len(log.ft_loaded) == 1 and len(log.optimizer_errors) == 1 and len(log.fresh_starts) == 1
    assert [(x.kind, x.iteration) for x in log.loads] == [("start", 5), ("done", 5)]
    assert [(t.name, t.max_ms) for t in log.timers] == [("load-checkpoint", 301.25)]
    first, second = log.iterations  # the duplicate iteration 6 is kept once
    assert (first.iteration, first.train_iters, first.consumed_samples, first.global_batch_size) == (
        6,
        30,
        96,
        16,
    )
    assert first.loss == 6.18508 and first.elapsed_ms == 1262.0 and first.ref.line == 16
    assert first.t == datetime(2026, 11, 29, 14, 19, 41, 329447, tzinfo=UTC)
    assert second.loss != second.loss  # nan
    assert [(s.kind, s.iteration) for s in log.saves] == [("start", 10), ("scheduled", 10), ("done", 10)]
    assert log.saves_of("done")[0].t.microsecond == 826343
    (inj,) = log.injections
    assert inj.payload["checkpoint_iteration"] == 5
    assert [e.line for e in log.errors] == [25, 26, 27]
    assert len(log.closed) == 1
    assert log.milestone("after model, optimizer, and learning rate scheduler are built").t.second == 39


# checkpoints ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "state", "value"),
    [(None, "absent", None), ("", "empty", None), ("abc", "invalid", None), ("15\n", "value", 15)],
)
def test_tracker_states(tmp_path, content, state, value):
    root = tmp_path / "checkpoints"
    root.mkdir()
    if content is not None:
        write(root / "latest_checkpointed_iteration.txt", content)
    ckpts, status = read_checkpoints(tmp_path, "checkpoints")
    assert status.ok and ckpts.tracker.state == state and ckpts.tracker.value == value


def test_checkpoint_dirs_and_ft_state(tmp_path):
    root = tmp_path / "ck"
    write(root / "iter_0000005" / ".metadata", "x")
    write(root / "iter_0000005" / "__0_0.distcp", "x")
    write(root / "iter_0000010" / "metadata.json", "{}")
    write(root / "ft_state.json", "{}")
    ckpts, status = read_checkpoints(tmp_path, str(root))  # absolute inside the run dir
    assert status.ok and ckpts.root == "ck"
    five, ten = ckpts.dirs
    assert five.complete and five.payload_files == 1 and not ten.complete and ten.has_metadata_json
    assert ckpts.ft_state.path == "ck/ft_state.json"
    assert ckpts.dir_for(10) is ten and ckpts.dir_for(15) is None


def test_checkpoint_dir_absent(tmp_path):
    ckpts, status = read_checkpoints(tmp_path, "checkpoints")
    assert ckpts is None and not status.ok


# snapshot ------------------------------------------------------------------------------------------------------


def test_snapshot_of_a_sparse_run_dir(tmp_path):
    write(tmp_path / "run.json", json.dumps(RUN))
    snap = build_snapshot(tmp_path)
    assert snap.ok("run_meta") and snap.ok("marker")
    for name in ("cycle_infos", "launcher_log", "train_logs", "checkpoints"):
        assert not snap.ok(name)
    assert "absent" in snap.reason("launcher_log")


def test_snapshot_rejects_a_missing_dir(tmp_path):
    with pytest.raises(RunMetaError):
        build_snapshot(tmp_path / "nope")
