"""workloads/megatron_gpt_worker.py: kills timed to a phase of a checkpoint save (rank.ids.SAVE_PHASES), seen
on disk by the fault rank's poller; the phase predicate on built trees, the injector on a fake tree, and the
wrapper around the smoke workload killed in each phase of a real sync and async torch_dist save."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ftqual.rank.freeze import (
    TRIGGER_HELPER_POLL,
    TRIGGER_INOTIFY,
    WAKEUP_OFF_RANK_CPU,
    WAKEUP_REALTIME,
    freeze_helper,
    metadata_written,
    wait_for_metadata,
)
from ftqual.rank.ids import MARKER_SCHEMA, SAVE_PHASES, TIMINGS
from ftqual.rank.injector import Injector
from ftqual.rank.save_phases import PHASE_POLL_SECONDS, STABLE_POLLS, PhaseWatch, look_at_save
from ftqual.rank.worker import parse_args
from tests.support.wait import stays, wait_until

SHARD = "__0_0.distcp"
SHARD_BYTES = 4096


# --- a checkpoint directory as a save leaves it ------------------------------------------------------------


def write_tracker(ckpt, value: int) -> None:
    (ckpt / "latest_checkpointed_iteration.txt").write_text(str(value))


def completed(ckpt, iteration: int, shards: dict[str, int] | None = None) -> None:
    """iter_<iteration> as a finished save leaves it, and the tracker naming it."""
    folder = ckpt / f"iter_{iteration:07d}"
    folder.mkdir(parents=True, exist_ok=True)
    for name, size in (shards or {SHARD: SHARD_BYTES}).items():
        (folder / name).write_bytes(b"x" * size)
    (folder / ".metadata").write_bytes(b"m" * 100)
    (folder / "metadata.json").write_text("{}")
    write_tracker(ckpt, iteration)


def in_flight(ckpt, iteration: int, shards: dict[str, int] = (), metadata: bytes | None = None):
    """iter_<iteration> of a save under way: its shard files at these sizes, `.metadata` if given."""
    folder = ckpt / f"iter_{iteration:07d}"
    folder.mkdir(exist_ok=True)
    for name, size in dict(shards).items():
        (folder / name).write_bytes(b"x" * size)
    if metadata is not None:
        (folder / ".metadata").write_bytes(metadata)
    return folder


def reached(ckpt, phase: str, tracker: int, looks: int = 1):
    """What a PhaseWatch says at its `looks`-th look at an unchanged tree."""
    watch = PhaseWatch(phase, ckpt)
    seen = None
    for _ in range(looks):
        seen = watch.look(tracker)
    return seen


# --- the phase predicate -----------------------------------------------------------------------------------


def test_the_worker_offers_every_save_phase_of_the_contract():
    assert set(SAVE_PHASES) <= set(TIMINGS)


@pytest.mark.parametrize("phase", SAVE_PHASES)
def test_no_phase_without_a_save_newer_than_the_tracker(tmp_path, phase):
    completed(tmp_path, 4)
    assert reached(tmp_path, phase, 4, looks=STABLE_POLLS + 1) is None
    assert reached(tmp_path / "missing", phase, 4) is None


def test_staged_is_a_newer_save_with_no_shard_yet(tmp_path):
    completed(tmp_path, 4)
    in_flight(tmp_path, 8)
    seen = reached(tmp_path, "save_staged", 4)
    assert seen is not None and seen[0] == 8
    assert seen[1].record() == {"shards": 0, "bytes": 0, "metadata": False, "metadata_json": False}
    for phase in ("save_shards_partial", "save_shards_complete", "save_finalized"):
        assert reached(tmp_path, phase, 4, looks=STABLE_POLLS) is None, phase
    in_flight(tmp_path, 8, {SHARD: 0})  # a shard file opened, even empty: no longer staged
    assert reached(tmp_path, "save_staged", 4) is None


def test_partial_is_shards_without_metadata(tmp_path):
    completed(tmp_path, 4)
    in_flight(tmp_path, 8, {SHARD: 10})
    seen = reached(tmp_path, "save_shards_partial", 4)
    assert seen is not None and seen[0] == 8
    assert seen[1].record() == {"shards": 1, "bytes": 10, "metadata": False, "metadata_json": False}
    assert reached(tmp_path, "save_staged", 4) is None
    assert reached(tmp_path, "save_finalized", 4) is None
    in_flight(tmp_path, 8, metadata=b"m")  # `.metadata` already written: past the shards
    assert reached(tmp_path, "save_shards_partial", 4) is None


def test_complete_needs_stable_shards_as_large_as_the_completed_checkpoints(tmp_path):
    completed(tmp_path, 4)
    in_flight(tmp_path, 8, {SHARD: SHARD_BYTES})
    stable = STABLE_POLLS
    assert reached(tmp_path, "save_shards_complete", 4, looks=stable - 1) is None  # not stable long enough
    seen = reached(tmp_path, "save_shards_complete", 4, looks=stable)
    assert seen is not None and seen[0] == 8
    assert seen[1].record() == {"shards": 1, "bytes": SHARD_BYTES, "metadata": False, "metadata_json": False}
    assert reached(tmp_path, "save_finalized", 4, looks=stable) is None
    in_flight(tmp_path, 8, metadata=b"m")  # the window was missed for this save
    assert reached(tmp_path, "save_shards_complete", 4, looks=stable) is None


def test_complete_is_not_a_writer_that_paused_mid_shard(tmp_path):
    completed(tmp_path, 4)
    in_flight(tmp_path, 8, {SHARD: SHARD_BYTES // 2})  # stable, but half the size the shard has in iter_4
    assert reached(tmp_path, "save_shards_complete", 4, looks=3 * STABLE_POLLS) is None
    in_flight(tmp_path, 8, {SHARD: 0})  # opened, nothing written
    assert reached(tmp_path, "save_shards_complete", 4, looks=3 * STABLE_POLLS) is None


def test_complete_waits_for_every_shard_file_of_the_completed_checkpoint(tmp_path):
    completed(tmp_path, 4, {"__0_0.distcp": SHARD_BYTES, "__1_0.distcp": SHARD_BYTES})
    in_flight(tmp_path, 8, {"__0_0.distcp": SHARD_BYTES})  # rank 1 has not opened its shard yet
    assert reached(tmp_path, "save_shards_complete", 4, looks=3 * STABLE_POLLS) is None
    in_flight(tmp_path, 8, {"__1_0.distcp": SHARD_BYTES})
    assert reached(tmp_path, "save_shards_complete", 4, looks=STABLE_POLLS) is not None


def test_a_growing_shard_is_never_complete(tmp_path):
    completed(tmp_path, 4)
    folder = in_flight(tmp_path, 8, {SHARD: SHARD_BYTES})
    watch = PhaseWatch("save_shards_complete", tmp_path)
    for extra in range(1, 3 * STABLE_POLLS):
        (folder / SHARD).write_bytes(b"x" * (SHARD_BYTES + extra))
        assert watch.look(4) is None
    for _ in range(STABLE_POLLS - 2):
        assert watch.look(4) is None  # it stopped growing at the last write's look
    assert watch.look(4) is not None


def test_stability_starts_afresh_for_each_save(tmp_path):
    completed(tmp_path, 4)
    in_flight(tmp_path, 8, {SHARD: SHARD_BYTES})
    watch = PhaseWatch("save_shards_complete", tmp_path)
    for _ in range(STABLE_POLLS - 1):
        assert watch.look(4) is None
    in_flight(tmp_path, 12, {SHARD: SHARD_BYTES})  # a newer save with the same shard signature
    assert watch.look(4) is None  # its first look
    for _ in range(STABLE_POLLS - 2):
        assert watch.look(4) is None
    seen = watch.look(4)
    assert seen is not None and seen[0] == 12


def test_finalized_is_metadata_written_while_the_tracker_names_an_older_save(tmp_path):
    completed(tmp_path, 4)
    in_flight(tmp_path, 8, {SHARD: SHARD_BYTES}, metadata=b"")  # torch's rename not yet: empty
    assert reached(tmp_path, "save_finalized", 4) is None
    in_flight(tmp_path, 8, metadata=b"m" * 50)
    seen = reached(tmp_path, "save_finalized", 4)
    assert seen is not None and seen[0] == 8
    assert seen[1].record() == {"shards": 1, "bytes": SHARD_BYTES, "metadata": True, "metadata_json": False}
    (tmp_path / "iter_0000008" / "metadata.json").write_text("{}")
    assert reached(tmp_path, "save_finalized", 4)[1].record()["metadata_json"] is True
    for phase in ("save_staged", "save_shards_partial", "save_shards_complete"):
        assert reached(tmp_path, phase, 4, looks=STABLE_POLLS) is None, phase
    write_tracker(tmp_path, 8)  # the tracker names it: finalized and tracked, no save in flight
    assert reached(tmp_path, "save_finalized", 8) is None


def test_an_unknown_phase_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown save phase"):
        PhaseWatch("in_save", tmp_path)


# --- the injector ------------------------------------------------------------------------------------------


def make_injector(tmp_path, phase: str, baseline: int = 0, freeze_helper: bool = False):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir(exist_ok=True)
    kills = []
    injector = Injector(
        fault="kill",
        placement="step",
        tracker=ckpt / "latest_checkpointed_iteration.txt",
        marker=tmp_path / "marker.json",
        baseline=baseline,
        identity={"run_id": "r1", "rank": 0, "local_rank": 0, "host": "h", "cycle": 0},
        watch=None,
        kill=lambda pid, sig: kills.append((pid, sig)),
        timing=phase,
        freeze_helper=freeze_helper,  # the helper signals a real pid: tested on a child process below
    )
    return injector, kills, ckpt


def test_injector_arms_only_past_the_baseline_and_kills_once(tmp_path):
    injector, kills, ckpt = make_injector(tmp_path, "save_shards_partial", baseline=4)
    assert injector.poll_seconds == PHASE_POLL_SECONDS and injector.placement == "save_shards_partial"
    phases = PhaseWatch("save_shards_partial", ckpt)
    assert injector.on_phase_poll(phases) is False  # no tracker
    completed(ckpt, 4)
    in_flight(ckpt, 8, {SHARD: 10})
    assert injector.on_phase_poll(phases) is False  # the tracker is the cycle's baseline: nothing to resume
    assert kills == [] and not (tmp_path / "marker.json").exists()
    completed(ckpt, 8)
    in_flight(ckpt, 12, {SHARD: 20, "__1_0.distcp": 5})
    assert injector.on_phase_poll(phases) is True
    assert kills == [(os.getpid(), signal.SIGKILL)]
    marker = json.loads((tmp_path / "marker.json").read_text())
    assert (marker["timing"], marker["placement"], marker["section"]) == (
        "save_shards_partial",
        "save_shards_partial",
        None,
    )
    assert (marker["baseline_iteration"], marker["checkpoint_iteration"], marker["save_iteration"]) == (
        4,
        8,
        12,
    )
    assert marker["on_disk"] == {"shards": 2, "bytes": 25, "metadata": False, "metadata_json": False}
    assert marker["method"] == "os.kill(own pid, SIGKILL)"
    assert injector.on_phase_poll(phases) is True and len(kills) == 1  # once only
    assert injector.claimed


def test_injector_never_fires_after_the_workload_ended(tmp_path):
    injector, kills, ckpt = make_injector(tmp_path, "save_staged")
    completed(ckpt, 4)
    in_flight(ckpt, 8)
    injector.finish()
    assert injector.on_phase_poll(PhaseWatch("save_staged", ckpt)) is True
    assert kills == [] and not injector.claimed and not (tmp_path / "marker.json").exists()


def test_the_poller_thread_injects_from_a_fake_tree(tmp_path):
    injector, kills, ckpt = make_injector(tmp_path, "save_finalized")
    completed(ckpt, 4)
    thread = injector.start()
    assert thread is not None and thread.daemon
    in_flight(ckpt, 8, {SHARD: SHARD_BYTES}, metadata=b"m")
    wait_until(lambda: kills, 10, what="the poller to see save_finalized")
    thread.join(5)
    assert not thread.is_alive() and kills == [(os.getpid(), signal.SIGKILL)]
    marker = json.loads((tmp_path / "marker.json").read_text())
    assert (marker["checkpoint_iteration"], marker["save_iteration"]) == (4, 8)
    assert marker["on_disk"] == {"shards": 1, "bytes": SHARD_BYTES, "metadata": True, "metadata_json": False}


def test_in_save_keeps_its_marker_without_on_disk(tmp_path):
    injector, _, _ = make_injector(tmp_path, "in_save")
    assert injector.start() is None
    assert "on_disk" not in injector.record(None) and "save_iteration" in injector.record(None)


# --- arguments ---------------------------------------------------------------------------------------------


def phase_argv(fault: str, phase: str) -> list[str]:
    return ["--entrypoint", "e.py", "--checkpoint-dir", "/c", "--fault-marker", "/f"] + [
        "--fault-rank",
        "0",
        "--fault",
        fault,
        "--fault-timing",
        phase,
    ]


@pytest.mark.parametrize("phase", SAVE_PHASES)
@pytest.mark.parametrize("fault", ["hang", "sigterm", "exception"])
def test_a_save_phase_needs_a_kill(capsys, phase, fault):
    with pytest.raises(SystemExit) as exc:
        parse_args(phase_argv(fault, phase))
    assert exc.value.code != 0
    assert f"--fault-timing {phase} needs --fault kill" in capsys.readouterr().err


@pytest.mark.parametrize("phase", SAVE_PHASES)
def test_a_save_phase_with_a_kill_is_accepted(phase):
    args, _ = parse_args(phase_argv("kill", phase))
    assert args.fault_timing == phase


# --- the freeze helper: the rank stopped while the phase is seen again, then killed -------------------------


@pytest.fixture
def rank():
    """A process standing in for the rank: the helper stops, continues or kills it."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


def state_of(pid: int) -> str:
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]


def freeze_request(tmp_path, ckpt, phase: str, save: int, **changes) -> str:
    on_disk = look_at_save(ckpt / f"iter_{save:07d}")
    names, total = on_disk.signature()
    request = {
        "record": {"schema": MARKER_SCHEMA, "fault": "kill", "timing": phase, "save_iteration": save},
        "marker": str(tmp_path / "marker.json"),
        "checkpoint_dir": str(ckpt),
        "phase": phase,
        "save_iteration": save,
        "signature": [list(names), total],
        "stable": 1,
        "reference": {},
        "polled_on_disk": on_disk.record(),
        "missed_before": 0,
        **changes,
    }
    return json.dumps(request) + "\n"


def test_the_helper_kills_the_rank_stopped_in_the_phase_and_records_what_the_disk_showed(tmp_path, rank):
    import io

    ckpt = tmp_path / "ckpt"
    completed(ckpt, 4)
    in_flight(ckpt, 8, {SHARD: 10})
    replies = io.StringIO()
    assert (
        freeze_helper(
            rank.pid, io.StringIO(freeze_request(tmp_path, ckpt, "save_shards_partial", 8)), replies
        )
        == 0
    )
    assert rank.wait(10) == -signal.SIGKILL and replies.getvalue() == ""
    marker = json.loads((tmp_path / "marker.json").read_text())
    assert marker["on_disk"] == {"shards": 1, "bytes": 10, "metadata": False, "metadata_json": False}
    assert marker["method"].startswith("SIGSTOP of the rank by its injector's helper")
    freeze = marker["freeze"]
    assert freeze["threads_stopped"] is True and freeze["polled_on_disk"] == marker["on_disk"]
    assert freeze["helper_pid"] == os.getpid() and freeze["stop_wait_ms"] >= 0 and "injected_at" in marker


@pytest.mark.parametrize("passed", ["tracker", "metadata"])
def test_a_phase_that_passed_before_the_stop_lets_the_rank_go_on(tmp_path, rank, passed):
    import io

    ckpt = tmp_path / "ckpt"
    completed(ckpt, 4)
    folder = in_flight(ckpt, 8, {SHARD: 10})
    request = freeze_request(tmp_path, ckpt, "save_shards_partial", 8)
    if passed == "tracker":
        completed(ckpt, 8, {SHARD: 10})  # the save finalized between the poll and the stop
    else:
        (folder / ".metadata").write_bytes(b"m")  # the next phase began
    replies = io.StringIO()
    assert freeze_helper(rank.pid, io.StringIO(request), replies) == 0
    answer = json.loads(replies.getvalue())
    assert answer["result"] == "missed"
    assert ("the tracker reads 8" if passed == "tracker" else "past save_shards_partial") in answer["why"]
    assert rank.poll() is None and state_of(rank.pid) != "T"  # continued, alive
    assert not (tmp_path / "marker.json").exists()


def test_a_marker_another_process_claimed_lets_the_rank_go_on(tmp_path, rank):
    import io

    ckpt = tmp_path / "ckpt"
    completed(ckpt, 4)
    in_flight(ckpt, 8)
    (tmp_path / "marker.json").write_text("{}")
    replies = io.StringIO()
    assert (
        freeze_helper(rank.pid, io.StringIO(freeze_request(tmp_path, ckpt, "save_staged", 8)), replies) == 0
    )
    assert json.loads(replies.getvalue()) == {"result": "taken"}
    assert rank.poll() is None and state_of(rank.pid) != "T"
    assert (tmp_path / "marker.json").read_text() == "{}"


def test_save_complete_needs_the_poll_s_stable_shards_unchanged_at_the_stop(tmp_path, rank):
    import io

    ckpt = tmp_path / "ckpt"
    completed(ckpt, 4)
    folder = in_flight(ckpt, 8, {SHARD: SHARD_BYTES})
    stable = STABLE_POLLS - 1  # the stop is the poll that makes it stable
    request = freeze_request(tmp_path, ckpt, "save_shards_complete", 8, stable=stable)
    (folder / SHARD).write_bytes(b"x" * (SHARD_BYTES + 1))  # still growing at the stop
    replies = io.StringIO()
    freeze_helper(rank.pid, io.StringIO(request), replies)
    assert json.loads(replies.getvalue())["result"] == "missed" and rank.poll() is None
    request = freeze_request(tmp_path, ckpt, "save_shards_complete", 8, stable=stable)
    freeze_helper(rank.pid, io.StringIO(request), io.StringIO())
    assert rank.wait(10) == -signal.SIGKILL


def test_a_helper_that_fails_once_the_rank_is_stopped_lets_it_go_on(tmp_path, rank):
    import io

    request = json.dumps({"record": {}, "marker": str(tmp_path / "marker.json")}) + "\n"  # no phase to see
    replies = io.StringIO()
    assert freeze_helper(rank.pid, io.StringIO(request), replies) == 1
    answer = json.loads(replies.getvalue())
    assert answer["result"] == "error" and "KeyError" in answer["why"]
    assert rank.poll() is None and state_of(rank.pid) != "T"  # never left stopped: that would be a hang
    assert not (tmp_path / "marker.json").exists()


# --- save_finalized: the helper's own watch for `.metadata` ------------------------------------------------


def watch_request(tmp_path, ckpt, save: int) -> dict:
    return json.loads(freeze_request(tmp_path, ckpt, "save_finalized", save, watch=True))


def write_metadata(folder, rename: bool) -> None:
    """`.metadata` written in place, or as torch writes it (`.metadata.tmp`, then renamed)."""
    if rename:
        (folder / ".metadata.tmp").write_bytes(b"m" * 64)
        os.rename(folder / ".metadata.tmp", folder / ".metadata")
    else:
        (folder / ".metadata").write_bytes(b"m" * 64)


def metadata_on_disk(folder) -> bool:
    """The test's own look (wait_for_metadata's may be stubbed): `.metadata` written, not empty."""
    try:
        return (folder / ".metadata").stat().st_size > 0
    except OSError:
        return False


def watch_while(request: dict, writer, timeout: float = 30, **kwargs) -> tuple[tuple, list[bool]]:
    """wait_for_metadata on a thread of this process, as the helper runs it, while `writer(seen)` runs on
    another: the watch's outcome, and `seen`, for each call of on_seen (the rank's stop), whether `.metadata`
    was on disk at that moment. A watch still waiting at `timeout` fails the test; closing the pipe that
    stands for the rank's requests then ends it. An exception of the writer or of the watch fails the test
    too."""
    folder = Path(request["checkpoint_dir"]) / f"iter_{int(request['save_iteration']):07d}"
    read_end, write_end = os.pipe()
    seen: list[bool] = []
    outcome: list[tuple] = []
    errors: list[BaseException] = []

    def on_seen() -> None:
        seen.append(metadata_on_disk(folder))

    def caught(work) -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - said by the test, not lost on the thread
            errors.append(exc)

    def watch() -> None:
        outcome.append(wait_for_metadata(request, read_end, on_seen=on_seen, **kwargs))

    threads = [threading.Thread(target=caught, args=(job,)) for job in (watch, lambda: writer(seen))]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: outcome or errors, timeout, 0.01, "the watch to end")
    finally:
        os.close(write_end)  # a watch still waiting ends (the rank closed its requests)
        for thread in threads:
            thread.join(timeout)
        os.close(read_end)
    assert not errors, errors
    return outcome[0], seen


@pytest.mark.parametrize("rename", [False, True], ids=["in_place", "renamed"])
def test_the_watch_ends_once_metadata_is_written_and_not_before(tmp_path, rename):
    """Whichever of the watch's event and its look comes first: the rank is stopped once, with `.metadata`
    on disk; another file written in the save's folder does not end the watch."""
    ckpt = tmp_path / "ckpt"
    completed(ckpt, 4)
    folder = in_flight(ckpt, 8, {SHARD: SHARD_BYTES})
    request = watch_request(tmp_path, ckpt, 8)

    def writer(seen: list[bool]) -> None:
        wait_until(lambda: watching(os.getpid(), folder), 30, 0.005, "the watch on the save's folder")
        (folder / "metadata.json").write_text("{}")  # its event and the looks after it: nothing to stop
        stays(lambda: not seen, 0.3, "no stop while only metadata.json is written")
        write_metadata(folder, rename)

    outcome, seen = watch_while(request, writer)
    assert outcome in ((TRIGGER_INOTIFY, None), (TRIGGER_HELPER_POLL, None))
    assert seen == [True]  # stopped once, `.metadata` already there


@pytest.mark.parametrize("rename", [False, True], ids=["in_place", "renamed"])
def test_the_metadata_event_alone_ends_the_watch(tmp_path, monkeypatch, rename):
    """The event path by itself: with the watch's looks made blind to `.metadata`, nothing races the
    event, so it is what ended the watch (a broken event path would leave it waiting to the deadline)."""
    monkeypatch.setattr("ftqual.rank.freeze.metadata_written", lambda iter_dir: False)
    ckpt = tmp_path / "ckpt"
    completed(ckpt, 4)
    folder = in_flight(ckpt, 8, {SHARD: SHARD_BYTES})
    request = watch_request(tmp_path, ckpt, 8)

    def writer(seen: list[bool]) -> None:
        # written after the watch is up: an event from before it never reaches the watch
        wait_until(lambda: watching(os.getpid(), folder), 30, 0.005, "the watch on the save's folder")
        write_metadata(folder, rename)

    outcome, seen = watch_while(request, writer)
    assert outcome == (TRIGGER_INOTIFY, None) and seen == [True]


def test_without_inotify_the_helper_looks_itself(tmp_path, monkeypatch):
    ckpt = tmp_path / "ckpt"
    completed(ckpt, 4)
    folder = in_flight(ckpt, 8, {SHARD: SHARD_BYTES})
    request = watch_request(tmp_path, ckpt, 8)
    looks: list[bool] = []
    real = metadata_written

    def looked(iter_dir) -> bool:
        looks.append(real(iter_dir))
        return looks[-1]

    monkeypatch.setattr("ftqual.rank.freeze.metadata_written", looked)

    def writer(seen: list[bool]) -> None:
        wait_until(lambda: looks, 30, 0.005, "the watch's first look")  # written after the watch began
        write_metadata(folder, rename=True)

    outcome, seen = watch_while(request, writer, use_inotify=False)
    assert outcome == (TRIGGER_HELPER_POLL, None) and seen == [True]  # the only way without inotify
    assert looks[0] is False and looks[-1] is True  # not there at its first look, found by a later one


def test_metadata_written_before_the_watch_is_found_at_once(tmp_path):
    ckpt = tmp_path / "ckpt"
    completed(ckpt, 4)
    in_flight(ckpt, 8, {SHARD: SHARD_BYTES}, metadata=b"m" * 64)
    assert wait_for_metadata(watch_request(tmp_path, ckpt, 8), None) == (TRIGGER_HELPER_POLL, None)


def test_a_save_finalized_unseen_ends_the_watch_as_a_miss(tmp_path):
    ckpt = tmp_path / "ckpt"
    completed(ckpt, 4)
    in_flight(ckpt, 8, {SHARD: SHARD_BYTES})
    request = watch_request(tmp_path, ckpt, 8)
    write_tracker(ckpt, 8)  # no `.metadata` (an empty one, a tree without it): the tracker moved on
    trigger, why = wait_for_metadata(request, None)
    assert trigger is None and "the tracker reads 8: the save of 8 was finalized unseen" in why


def test_the_watch_ends_when_the_rank_closes_its_requests(tmp_path):
    ckpt = tmp_path / "ckpt"
    completed(ckpt, 4)
    in_flight(ckpt, 8, {SHARD: SHARD_BYTES})
    read_end, write_end = os.pipe()
    os.close(write_end)  # the workload ended: finish() closed the helper's requests
    try:
        assert wait_for_metadata(watch_request(tmp_path, ckpt, 8), read_end) == (None, None)
    finally:
        os.close(read_end)


def run_in_child(repo_root, code: str) -> str:
    """Run `code` with the freeze helper's functions imported in a process of its own (its scheduling is
    changed)."""
    prelude = (
        "import os, sys, time, subprocess\nfrom ftqual.rank.freeze import avoid_cpu_of, prompt_wakeups\n"
    )
    done = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_helper_s_wakeups_preempt_where_allowed(repo_root):
    """prompt_wakeups says what it got: the real-time policy in force, or the fallback, nothing changed."""
    code = "print(prompt_wakeups(), os.sched_getscheduler(0) == os.SCHED_FIFO, sep='|')"
    said, policy = run_in_child(repo_root, code).split("|")
    assert (said, policy) in ((WAKEUP_REALTIME, "True"), (WAKEUP_OFF_RANK_CPU, "False"))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_the_fallback_keeps_the_watch_off_the_rank_s_cpu(repo_root):
    cpus = sorted(os.sched_getaffinity(0))[:2]
    out = run_in_child(
        repo_root,
        f"rank = subprocess.Popen([sys.executable, '-c', 'while True: pass'])\n"
        f"os.sched_setaffinity(rank.pid, {{{cpus[0]}}})\n"
        "deadline = time.monotonic() + 30\n"  # until the rank is seen on its CPU, however busy the machine
        f"while open(f'/proc/{{rank.pid}}/stat').read().rsplit(')', 1)[1].split()[36] != '{cpus[0]}':\n"
        "    assert time.monotonic() < deadline, 'the rank never ran on its CPU'; time.sleep(0.01)\n"
        f"avoid_cpu_of(rank.pid, {set(cpus)!r}); rank.kill()\n"
        "print(sorted(os.sched_getaffinity(0)))",
    )
    assert out == str([cpus[1]])


FINALIZE = """
import os, sys, time
from pathlib import Path
folder, tracker, gap = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
# Write once the helper (the test's own process) watches this folder: its fdinfo names the folder's inode.
fdinfo, wanted = f"/proc/{os.getppid()}/fdinfo", f"ino:{os.stat(folder).st_ino:x} "
deadline = time.monotonic() + 60
def watched():
    for name in os.listdir(fdinfo):
        try:
            text = open(os.path.join(fdinfo, name)).read()
        except OSError:
            continue
        if any(line.startswith("inotify wd:") and wanted in line for line in text.splitlines()):
            return True
    return False
while not watched():
    if time.monotonic() > deadline:
        sys.exit("the helper never watched the folder")
    time.sleep(0.005)
(folder / ".metadata.tmp").write_bytes(b"m" * 64)
os.rename(folder / ".metadata.tmp", folder / ".metadata")
time.sleep(gap)
tracker.write_text(folder.name[len("iter_"):].lstrip("0"))
time.sleep(60)
"""


def test_the_helper_kills_a_finalizing_rank_between_metadata_and_tracker(tmp_path):
    """A rank that writes `.metadata` and then the tracker, as Megatron's finalize does: stopped once the
    watch sees `.metadata` (by its event or by its look, whichever comes first: both are the helper's),
    seen in the phase, killed; the tracker it was about to write never comes."""
    ckpt = tmp_path / "ckpt"
    completed(ckpt, 4)
    folder = in_flight(ckpt, 8, {SHARD: SHARD_BYTES})
    tracker = ckpt / "latest_checkpointed_iteration.txt"
    rank = subprocess.Popen([sys.executable, "-c", FINALIZE, str(folder), str(tracker), "1.0"])
    try:
        request = json.dumps(watch_request(tmp_path, ckpt, 8)) + "\n"
        replies = io.StringIO()
        assert freeze_helper(rank.pid, io.StringIO(request), replies) == 0, replies.getvalue()
        assert replies.getvalue() == ""  # no miss, no error: it killed
        assert rank.wait(10) == -signal.SIGKILL
    finally:
        rank.kill()
        rank.wait()
    # killed between the two: `.metadata` written, the tracker still naming the completed save
    assert tracker.read_text() == "4" and metadata_on_disk(folder)
    marker = json.loads((tmp_path / "marker.json").read_text())
    assert (marker["timing"], marker["save_iteration"]) == ("save_finalized", 8)
    # the phase as the helper saw it with the rank stopped: every shard and `.metadata`, no metadata.json
    assert marker["on_disk"] == {"shards": 1, "bytes": SHARD_BYTES, "metadata": True, "metadata_json": False}
    freeze = marker["freeze"]
    assert freeze["threads_stopped"] is True
    assert freeze["trigger"] in (TRIGGER_INOTIFY, TRIGGER_HELPER_POLL)  # the watch's, either way
    assert freeze["polled_on_disk"]["metadata"] is False  # the poll that asked saw none yet


def test_a_watched_save_finalized_unseen_lets_the_rank_go_on(tmp_path, rank):
    ckpt = tmp_path / "ckpt"
    completed(ckpt, 4)
    in_flight(ckpt, 8, {SHARD: SHARD_BYTES})
    request = json.dumps(watch_request(tmp_path, ckpt, 8)) + "\n"
    write_tracker(ckpt, 8)
    replies = io.StringIO()
    assert freeze_helper(rank.pid, io.StringIO(request), replies) == 0
    answer = json.loads(replies.getvalue())
    assert answer["result"] == "missed" and "finalized unseen" in answer["why"]
    assert rank.poll() is None and state_of(rank.pid) != "T"
    assert not (tmp_path / "marker.json").exists()


def test_no_kill_once_the_workload_ended(tmp_path, rank):
    """The rank closed the requests (finish()) while the helper was about to stop it: it is continued and
    never killed, nothing claimed."""
    ckpt = tmp_path / "ckpt"
    completed(ckpt, 4)
    in_flight(ckpt, 8, {SHARD: SHARD_BYTES}, metadata=b"m" * 64)
    read_end, write_end = os.pipe()
    os.write(write_end, (json.dumps(watch_request(tmp_path, ckpt, 8)) + "\n").encode())
    os.close(write_end)
    with os.fdopen(read_end) as requests:
        replies = io.StringIO()
        assert freeze_helper(rank.pid, requests, replies) == 0
    assert replies.getvalue() == "" and rank.poll() is None and state_of(rank.pid) != "T"
    assert not (tmp_path / "marker.json").exists()


class FakeHelper:
    def __init__(self, *answers: dict) -> None:
        self.answers = list(answers)
        self.requests: list[dict] = []

    def ask(self, request: dict) -> dict:
        self.requests.append(request)
        return self.answers.pop(0)


def test_the_injector_gives_up_when_the_helper_could_not_inject(tmp_path, capsys):
    injector, kills, ckpt = make_injector(tmp_path, "save_staged")
    injector.helper = FakeHelper({"result": "error", "why": "KeyError: 'phase'"})
    completed(ckpt, 4)
    in_flight(ckpt, 8)
    assert injector.on_phase_poll(PhaseWatch("save_staged", ckpt)) is True
    assert injector.finished and not injector.claimed and kills == []
    assert "the freeze helper could not inject (KeyError: 'phase')" in capsys.readouterr().err


def test_the_injector_polls_on_after_a_miss_and_stops_when_the_marker_is_taken(tmp_path):
    injector, kills, ckpt = make_injector(tmp_path, "save_shards_partial")
    injector.helper = FakeHelper({"result": "missed", "why": "x"}, {"result": "taken"})
    phases = PhaseWatch("save_shards_partial", ckpt)
    completed(ckpt, 4)
    in_flight(ckpt, 8, {SHARD: 10})
    assert injector.on_phase_poll(phases) is False and injector.missed == 1 and not injector.finished
    assert injector.on_phase_poll(phases) is True and injector.finished and kills == []
    first, second = injector.helper.requests
    assert (first["save_iteration"], first["phase"], first["missed_before"]) == (8, "save_shards_partial", 0)
    assert second["missed_before"] == 1 and second["record"]["checkpoint_iteration"] == 4
    assert second["polled_on_disk"] == {"shards": 1, "bytes": 10, "metadata": False, "metadata_json": False}


def test_save_finalized_asks_the_helper_to_watch_a_save_in_flight(tmp_path):
    injector, kills, ckpt = make_injector(tmp_path, "save_finalized")
    injector.helper = FakeHelper({"result": "missed", "why": "finalized unseen"}, {"result": "taken"})
    phases = PhaseWatch("save_finalized", ckpt)
    completed(ckpt, 4)
    in_flight(ckpt, 8, {SHARD: 10})  # no `.metadata` yet: the watch awaits it
    assert injector.on_phase_poll(phases) is False and injector.missed == 1
    assert injector.on_phase_poll(phases) is True and kills == []
    first = injector.helper.requests[0]
    assert first["watch"] is True and first["save_iteration"] == 8 and first["phase"] == "save_finalized"
    assert first["polled_on_disk"]["metadata"] is False


def test_other_phases_ask_for_the_kill_on_the_rank_s_poll(tmp_path):
    injector, _, ckpt = make_injector(tmp_path, "save_shards_partial")
    injector.helper = FakeHelper({"result": "taken"})
    completed(ckpt, 4)
    in_flight(ckpt, 8, {SHARD: 10})
    assert injector.on_phase_poll(PhaseWatch("save_shards_partial", ckpt)) is True
    assert injector.helper.requests[0]["watch"] is False


def watching(pid: int, folder=None) -> bool:
    """Whether `pid` holds an inotify watch (its fdinfo lists one), on `folder`'s inode when given: the
    helper's watch is up."""
    wanted = f"ino:{os.stat(folder).st_ino:x} " if folder is not None else ""
    for info in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            text = open(f"/proc/{pid}/fdinfo/{info}").read()
        except OSError:
            continue
        if any(line.startswith("inotify wd:") and wanted in line for line in text.splitlines()):
            return True
    return False


def test_the_workload_s_end_stops_a_real_watch_quietly(tmp_path, capsys):
    """finish() while the real helper watches a save that never writes `.metadata`: the poller and the
    helper end, nothing is stopped or claimed, nothing logged as a failure."""
    injector, _, ckpt = make_injector(tmp_path, "save_finalized", freeze_helper=True)
    completed(ckpt, 4)
    in_flight(ckpt, 8, {SHARD: 10})
    thread = injector.start()
    helper = injector.helper
    assert helper is not None
    wait_until(lambda: watching(helper.process.pid), 30, 0.02, "the helper's inotify watch")
    assert thread.is_alive()
    injector.finish()
    thread.join(10)
    assert not thread.is_alive() and helper.process.poll() == 0
    assert not (tmp_path / "marker.json").exists()
    assert "not injecting" not in capsys.readouterr().err
