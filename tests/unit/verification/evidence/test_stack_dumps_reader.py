"""ftqual.verification.evidence.dumps: one reader for both formats a dump holds, and what held the rank in one
line."""

from __future__ import annotations

import json

import pytest

from ftqual.verification.evidence.dumps import held_by, holder_of, parse_dump


def frame(name, file, line=1):
    return {"name": name, "filename": f"/x/{file}", "short_filename": file, "line": line}


def thread(name, frames, gil=False, main=False, pid=10):
    return {
        "pid": pid,
        "thread_name": name,
        "os_thread_id": pid if main else pid + 1,
        "owns_gil": gil,
        "frames": frames,
    }


def dump(processes, pid=10):
    record = {
        "schema": "ftqual.stackdump/v1",
        "pid": pid,
        "taken_at": "2026-12-03T10:00:00Z",
        "processes": [],
    }
    for p in processes:
        record["processes"].append({"format": "py-spy-json", "errors": [], "ppid": pid, **p})
    return parse_dump(json.dumps(record), "dumps/node1.cycle2.rank3.4.json")


def test_the_name_says_host_cycle_rank_and_number():
    d = dump([{"pid": 10, "state": "S", "output": []}])
    assert (d.host, d.cycle, d.rank, d.number) == ("node1", 2, 3, 4)


def test_a_thread_that_holds_the_gil_is_the_holder():
    main = thread("MainThread", [frame("wait", "threading.py"), frame("step", "train.py")], main=True)
    hog = thread(
        "hog",
        [{"name": "sleep", "short_filename": "libc.so.6", "line": 0}, frame("spin", "hog.py")],
        gil=True,
    )
    d = dump([{"pid": 10, "state": "S", "output": [hog, main]}])
    assert held_by(d) == "thread hog holds the GIL in hog.py `spin` (native: `sleep` in libc.so.6)"


def test_waiting_primitives_are_skipped_to_their_caller_and_children_grouped():
    main = thread(
        "MainThread",
        [
            {"name": "poll", "short_filename": "libc.so.6", "line": 0},
            frame("Popen.wait", "multiprocessing/popen_fork.py"),
            frame("BaseProcess.join", "multiprocessing/process.py"),
            frame("_clean_up_worker", "torch/utils/data/dataloader.py"),
            frame("<module>", "pretrain_gpt.py"),
        ],
        main=True,
    )
    worker = lambda pid: {  # noqa: E731
        "pid": pid,
        "state": "S",
        "output": [
            thread(
                "MainThread", [frame("_worker_loop", "torch/utils/data/_utils/worker.py")], main=True, pid=pid
            )
        ],
    }
    zombie = {"pid": 40, "state": "Z", "format": None, "output": None}
    d = dump([{"pid": 10, "state": "S", "output": [main]}, worker(20), worker(21), worker(22), zombie])
    assert (
        holder_of(d)
        == "main thread in torch/utils/data/dataloader.py `_clean_up_worker` -> `BaseProcess.join`"
    )
    assert held_by(d) == (
        "main thread in torch/utils/data/dataloader.py `_clean_up_worker` -> `BaseProcess.join` "
        "(native: `poll` in libc.so.6), waiting on 4 child processes: "
        "3 in torch/utils/data/_utils/worker.py `_worker_loop`, "
        "pid 40 exited, not yet reaped"
    )


def test_a_rank_with_no_python_frame_says_native_code_only():
    main = thread(
        "MainThread",
        [{"name": "gc_collect_main", "short_filename": "libpython3.12.so", "line": 0}],
        main=True,
    )
    d = dump([{"pid": 10, "state": "S", "output": [main]}])
    assert held_by(d) == "main thread in native code only (`gc_collect_main` in libpython3.12.so)"


def test_faulthandler_text_is_read_the_same_way():
    text = (
        "Thread 0x00007f1 (most recent call first):\n"
        '  File "/usr/lib/python3.12/threading.py", line 331 in wait\n'
        '  File "/opt/w.py", line 9 in poll_forever\n\n'
        "Current thread 0x00007f2 (most recent call first):\n"
        '  File "/opt/site-packages/torch/distributed/distributed_c10d.py", line 3252 in all_reduce\n'
        '  File "/opt/train.py", line 40 in <module>\n'
    )
    d = dump([{"pid": 10, "state": "S", "format": "faulthandler", "output": text}])
    assert held_by(d) == "main thread in torch/distributed/distributed_c10d.py `all_reduce`"


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"schema": "other", "pid": 1, "processes": []}, "schema"),
        ({"schema": "ftqual.stackdump/v1", "processes": []}, "no pid"),
        (
            {"schema": "ftqual.stackdump/v1", "pid": 1, "processes": [{"pid": 1, "format": "gdb"}]},
            "unknown dump format",
        ),
        (
            {
                "schema": "ftqual.stackdump/v1",
                "pid": 1,
                "processes": [{"pid": 1, "format": "py-spy-json", "output": 3}],
            },
            "not a list",
        ),
    ],
)
def test_a_record_that_is_not_a_dump_is_refused_in_one_line(record, message):
    with pytest.raises(ValueError, match=message):
        parse_dump(json.dumps(record), "dumps/h.cycle0.rank0.1.json")
