"""ftqual.rank.sentinel: when it dumps a rank, and the dumps it writes of real processes (py-spy, the
faulthandler fallback, a stopped process), read back by ftqual.verification.evidence.dumps."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import types
from pathlib import Path

import pytest

from ftqual.launch.command import stack_dump_tool
from ftqual.rank import sentinel
from ftqual.verification.evidence.dumps import held_by, parse_dump, read_dumps
from tests.support.wait import stays, wait_until

PY_SPY = stack_dump_tool({})


def args(tmp_path: Path, pid: int = 1, tool: str = "", timeouts=None, **extra) -> types.SimpleNamespace:
    base = dict(
        pid=pid,
        dump_dir=tmp_path / "dumps",
        prefix="host.cycle0.rank1",
        tool=tool,
        timeouts=timeouts or {"setup": 60, "step": 10, "checkpointing": 30, "out_of_section": 20},
        faulthandler_file=None,
        faulthandler_signal=None,
    )
    base.update(extra)
    return types.SimpleNamespace(**base)


# --- when --------------------------------------------------------------------------------------------------


def test_the_lead_is_three_seconds_or_less_for_short_timeouts():
    assert sentinel.lead_s(120) == 3.0
    assert sentinel.lead_s(5) == pytest.approx(1.5)


def test_an_open_section_is_dumped_its_lead_before_its_timeout(tmp_path):
    s = sentinel.Sentinel(args(tmp_path))
    s.on_event({"event": "start", "section": "step"})
    due, trigger = s.next_due()
    assert due == pytest.approx(s.open[-1][1] + 10 - 3)
    assert trigger["kind"] == "timeout_due" and trigger["section"] == "step" and trigger["timeout_s"] == 10


def test_timeouts_in_force_come_with_the_events(tmp_path):
    """A calculated timeout (the RankMonitorClient's) replaces the configured one."""
    s = sentinel.Sentinel(args(tmp_path))
    s.on_event({"event": "start", "section": "step", "timeouts": {"step": 4.0, "out_of_section": 8.0}})
    due, trigger = s.next_due()
    assert trigger["timeout_s"] == 4.0 and due == pytest.approx(s.open[-1][1] + 4.0 - 1.2)


def test_out_of_section_counts_from_the_last_section_end(tmp_path):
    s = sentinel.Sentinel(args(tmp_path))
    assert s.next_due() is None  # nothing opened yet: the rank monitor is not timing anything
    s.on_event({"event": "start", "section": "step"})
    s.on_event({"event": "end", "section": "step"})
    due, trigger = s.next_due()
    assert trigger["section"] is None and due == pytest.approx(s.last_end + 20 - 3)


def test_a_section_is_dumped_once_per_opening(tmp_path, monkeypatch):
    s = sentinel.Sentinel(args(tmp_path, pid=999_999_999))
    s.on_event({"event": "start", "section": "checkpointing"})
    monkeypatch.setattr(sentinel, "proc_state", lambda pid: None)  # the rank is gone: nothing is written
    s.fire(s.next_due()[1])
    assert s.next_due() is None and not (tmp_path / "dumps").exists()


def test_a_fault_that_keeps_the_rank_alive_is_dumped_at_2_8_and_30_s(tmp_path):
    s = sentinel.Sentinel(args(tmp_path))
    s.on_event({"event": "injected", "fault": "exception"})
    assert [round(due - s.injected_at, 3) for due, _ in s.planned] == [2.0, 8.0, 30.0]


@pytest.mark.parametrize("fault", ["kill", "segfault", "abort", "sigterm", "gpu_error"])
def test_a_fault_that_ends_the_rank_at_once_plans_no_dump(tmp_path, fault):
    s = sentinel.Sentinel(args(tmp_path))
    s.on_event({"event": "injected", "fault": fault})
    assert s.planned == []


# --- what: real processes -------------------------------------------------------------------------------

JOINING = """
import multiprocessing, sys, time
def child():
    time.sleep(60)
if __name__ == "__main__":
    multiprocessing.set_start_method("fork")
    p = multiprocessing.Process(target=child)
    p.start()
    print("ready", flush=True)
    p.join()
"""


def _start(tmp_path: Path, code: str) -> subprocess.Popen:
    script = tmp_path / "target.py"
    script.write_text(code)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _stop(proc: subprocess.Popen) -> None:
    subprocess.run(["pkill", "-KILL", "-P", str(proc.pid)], check=False)
    proc.kill()
    proc.wait()


@pytest.mark.skipif(PY_SPY is None, reason="py-spy is pinned in requirements.lock: CI has it")
def test_a_dump_of_a_process_joining_its_child_names_the_join_and_the_child(tmp_path):
    proc = _start(tmp_path, JOINING)
    try:
        a = args(tmp_path, pid=proc.pid, tool=PY_SPY)
        # the target is mid-join once its child exists and its main thread waits in it
        wait_until(lambda: sentinel.children_of(proc.pid, exclude=-1), 10, what="the target's child")
        path = wait_until(
            lambda: (
                (p := sentinel.write_dump(a, 1, {"kind": "fault", "fault": "exception"}))
                and "join" in (held_by(parse_dump(p.read_text(), f"dumps/{p.name}")) or "")
                and p
            ),
            15,
            interval=0.3,
            what="a dump showing the join",
        )
    finally:
        _stop(proc)
    record = json.loads(path.read_text())
    assert (
        record["schema"] == "ftqual.stackdump/v1" and record["pid"] == proc.pid and record["tool"] == PY_SPY
    )
    assert [p["pid"] for p in record["processes"]][0] == proc.pid and len(record["processes"]) == 2
    line = held_by(parse_dump(path.read_text(), f"dumps/{path.name}"))
    assert line.startswith("main thread in target.py `<module>` -> `BaseProcess.join`"), line
    assert "waiting on 1 child process: pid" in line and "`child`" in line


STOPPED = """
import time
def waiting_here():
    print("ready", flush=True)
    time.sleep(60)
waiting_here()
"""


@pytest.mark.skipif(PY_SPY is None, reason="py-spy is pinned in requirements.lock: CI has it")
def test_a_stopped_process_is_read_as_it_lies(tmp_path):
    proc = _start(tmp_path, STOPPED)
    try:
        proc.send_signal(signal.SIGSTOP)
        wait_until(lambda: sentinel.proc_state(proc.pid) == "T", 10, what="the target stopped")
        path = sentinel.write_dump(args(tmp_path, pid=proc.pid, tool=PY_SPY), 1, {"kind": "fault"})
    finally:
        _stop(proc)
    dump = parse_dump(path.read_text(), f"dumps/{path.name}")
    assert dump.rank_process.state == "T"
    assert "--nonblocking" in json.loads(path.read_text())["processes"][0]["command"]
    assert held_by(dump) == "main thread in target.py `waiting_here` in a stopped process (SIGSTOP)"


FAULTHANDLER = """
import faulthandler, signal, sys, time
faulthandler.register(signal.SIGRTMIN + 5, file=open(sys.argv[1], "a"), all_threads=True, chain=False)
def waiting_here():
    print("ready", flush=True)
    time.sleep(60)
waiting_here()
"""


def test_without_py_spy_the_rank_s_faulthandler_answers(tmp_path):
    text = tmp_path / "fh.txt"
    script = tmp_path / "target.py"
    script.write_text(FAULTHANDLER)
    proc = subprocess.Popen([sys.executable, str(script), str(text)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    signum = int(signal.SIGRTMIN + 5)
    try:
        wait_until(lambda: sentinel.caught(proc.pid, signum), 10, what="the handler registered")
        a = args(tmp_path, pid=proc.pid, faulthandler_file=text, faulthandler_signal=signum)
        path = sentinel.write_dump(a, 1, {"kind": "fault"})
    finally:
        _stop(proc)
    record = json.loads(path.read_text())
    assert record["tool"] is None and record["processes"][0]["format"] == "faulthandler"
    assert held_by(parse_dump(path.read_text(), f"dumps/{path.name}")).startswith(
        "main thread in target.py `waiting_here`"
    )


def test_a_signal_the_rank_does_not_catch_is_never_sent(tmp_path):
    """A signal without a handler would end the rank: the fallback says so and leaves it alone."""
    proc = _start(tmp_path, STOPPED)
    try:
        out = sentinel.faulthandler_dump(proc.pid, tmp_path / "fh.txt", int(signal.SIGRTMIN + 5))
        stays(lambda: proc.poll() is None, 1.0, what="the rank alive after the fallback declined")
    finally:
        _stop(proc)
    assert out["format"] is None and "does not catch" in out["errors"][0]


def test_the_sentinel_ends_with_its_rank(tmp_path):
    """A rank that dies takes its sentinel with it (PR_SET_PDEATHSIG, the end of its stdin)."""
    rank = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "p = subprocess.Popen([sys.executable, '-m', 'ftqual.rank.sentinel', "
            f"'--pid', str(__import__('os').getpid()), '--dump-dir', {str(tmp_path / 'd')!r}, "
            "'--prefix', 'h.cycle0.rank0'], stdin=subprocess.PIPE)\n"
            "print(p.pid, flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    pid = int(rank.stdout.readline())
    rank.kill()
    rank.wait()

    def alive() -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state != "Z"

    wait_until(lambda: not alive(), 10, what="the sentinel gone after its rank")


def test_dumps_of_a_run_are_read_in_the_order_they_were_taken(tmp_path):
    folder = tmp_path / "dumps"
    folder.mkdir()
    for n, at in ((1, "2026-12-03T10:00:02Z"), (2, "2026-12-03T10:00:01Z")):
        record = {"schema": "ftqual.stackdump/v1", "pid": 5, "taken_at": at, "processes": [], "trigger": {}}
        (folder / f"node.a.cycle0.rank1.{n}.json").write_text(json.dumps(record))
    (folder / "node.a.cycle0.rank1.3.json").write_text("{not json")
    dumps, status = read_dumps(tmp_path)
    assert [d.number for d in dumps.items] == [2, 1] and dumps.items[0].host == "node.a"
    assert not status.complete and "not JSON" in status.reason
