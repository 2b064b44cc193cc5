"""Stack dumps on one H200 (tests/data/megatron-h200-dumps-1gpu): what held a Megatron rank after an uncaught
exception or a SIGINT (torch's DataLoader joining its workers, then torch inductor's compile-worker pool), a
GIL lock's holder, a stopped rank, a GPU hang's synchronize, and the verdicts, which a run without its dumps
keeps."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ftqual.verification.verify import build_report

DATA = Path(__file__).resolve().parents[3] / "data" / "megatron-h200-dumps-1gpu"
RUNS = {p.name.split("-2026")[0]: p for p in (DATA / "runs").iterdir()}
# the second device call: the faults that keep the rank alive until a timeout, and SIGINT
LIVE = {p.name.split("-2026")[0]: p for p in (DATA / "live" / "runs").iterdir()}
DATALOADER = (
    "main thread in torch/utils/data/dataloader.py `_MultiProcessingDataLoaderIter._clean_up_worker` "
    "-> `BaseProcess.join`"
)


def report(name: str) -> dict:
    return build_report(RUNS[name])


def held(doc: dict) -> dict:
    return next(c for c in doc["checks"] if c["id"] == "what_held_the_rank")


def test_every_run_passes_and_its_dumps_are_listed():
    for name in RUNS:
        doc = report(name)
        assert doc["verdict"] == "pass", name
        assert doc["sources"]["stack_dumps"]["ok"] and doc["sources"]["stack_dumps"]["complete"]
        dumps = sorted(p.name for p in (RUNS[name] / "dumps").glob("*.json"))
        assert [d["path"] for d in doc["stack_dumps"]] == [f"dumps/{n}" for n in dumps] or name == "baseline"


def test_the_exception_s_linger_went_through_the_dataloader_then_inductor():
    doc = report("exception")
    m = doc["metrics"]
    assert (m["detected_by"], m["linger_ended_by"], m["linger_cut_by_timeout"]) == ("exit", "exit", False)
    assert m["linger_s"] == pytest.approx(38.2, abs=0.1)
    assert m["held_by"].startswith(
        f"first {DATALOADER} (2.0-8.0 s after the injection), then main thread in "
    )
    assert (
        "torch/_inductor/compile_worker/subproc_pool.py `SubprocPool.shutdown` -> `Popen.wait`"
        in m["held_by"]
    )
    assert m["held_by"].endswith("(30.0 s after the injection)")
    assert held(doc)["status"] == "pass" and held(doc)["evidence"][0]["path"] == m["stack_dump"]


def test_the_cut_exception_was_held_by_the_dataloader_joining_its_six_workers():
    doc = report("exception_cut")
    m = doc["metrics"]
    assert (m["detected_by"], m["linger_cut_by_timeout"]) == ("section:step", True)
    assert (
        m["held_by"].startswith(DATALOADER)
        and "in torch/utils/data/_utils/worker.py `_worker_loop`" in (m["held_by"])
    )
    first = next(d for d in doc["stack_dumps"] if d["path"].endswith(".1.json"))
    assert (
        "waiting on 10 child processes: 6 in torch/utils/data/_utils/worker.py `_worker_loop`"
        in (first["held_by"])
    )


def test_the_gil_lock_names_the_thread_that_holds_the_gil():
    m = report("gil_lock")["metrics"]
    assert m["held_by"] == (
        "thread ftqual-gil-lock holds the GIL in megatron_gpt_worker.py `hold_gil_forever` "
        "(native: `clock_nanosleep` in libc.so.6)"
    )


def test_the_baseline_has_nothing_to_answer():
    doc = report("baseline")
    assert held(doc)["status"] == "skip" and doc["metrics"]["held_by"] is None


@pytest.mark.parametrize("name", ["exception", "gil_lock"])
def test_without_its_dumps_a_run_keeps_its_verdict(tmp_path, name):
    """Negative control of the informative check: the dumps removed (or one of them corrupt), the verdict
    and every gating check are what they were; only what held the rank is unknown."""
    full = report(name)
    gone = tmp_path / "gone"
    shutil.copytree(RUNS[name], gone, symlinks=True)
    shutil.rmtree(gone / "dumps")
    broken = tmp_path / "broken"
    shutil.copytree(RUNS[name], broken, symlinks=True)
    for path in (broken / "dumps").glob("*.json"):
        path.write_text("{cut")
    for copy in (gone, broken):
        doc = build_report(copy)
        assert doc["verdict"] == full["verdict"] == "pass"
        gating = [(c["id"], c["status"]) for c in doc["checks"] if c["gates"]]
        assert gating == [(c["id"], c["status"]) for c in full["checks"] if c["gates"]]
        assert held(doc)["status"] == "skip" and doc["metrics"]["held_by"] is None
    assert not build_report(broken)["sources"]["stack_dumps"]["complete"]
    assert json.loads(json.dumps(build_report(gone)["stack_dumps"])) == []


def test_a_sigint_lingers_like_an_exception():
    m = build_report(LIVE["sigint"])["metrics"]
    assert (m["detected_by"], m["linger_ended_by"]) == ("exit", "exit")
    assert m["linger_s"] == pytest.approx(38.6, abs=0.1)
    assert m["held_by"].startswith(f"first {DATALOADER} (2.0-8.0 s after the injection), then ")
    assert "`SubprocPool.shutdown` -> `Popen.wait`" in m["held_by"]


def test_a_stopped_rank_is_read_where_it_stopped():
    doc = build_report(LIVE["hang"])
    assert doc["verdict"] == "pass" and doc["metrics"]["detected_by"] == "section:step"
    assert doc["metrics"]["held_by"] == (
        "main thread in megatron_gpt_worker.py `Injector.action.<locals>.<lambda>` "
        "in a stopped process (SIGSTOP)"
    )


def test_a_gpu_hang_waits_in_the_cuda_driver_s_synchronize():
    doc = build_report(LIVE["gpu_hang"])
    assert doc["verdict"] == "pass" and doc["metrics"]["detected_by"] == "section:step"
    held_by = doc["metrics"]["held_by"]
    assert held_by.startswith(
        "main thread in core/rerun_state_machine.py `RerunStateMachine.validate_result`"
    )
    assert "(native: `cuStreamSynchronize` in libcuda.so" in held_by


def test_the_second_call_passes_every_run():
    assert {name: build_report(run)["verdict"] for name, run in LIVE.items()} == dict.fromkeys(
        ("baseline", "gpu_hang", "hang", "sigint"), "pass"
    )
