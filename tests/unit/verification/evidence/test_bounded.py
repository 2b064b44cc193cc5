"""The bounded structures behind flat-memory verification: the same answers as the unbounded ones."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from ftqual.verification import metrics
from ftqual.verification.checks import resume
from ftqual.verification.checks.replay import _spans, relative_difference
from ftqual.verification.checks.series import Spans, relative
from ftqual.verification.evidence import derive
from ftqual.verification.evidence.snapshot import build_snapshot
from ftqual.verification.evidence.train_log import _Seen
from ftqual.verification.verify import build_report
from tests.support.synthetic.runs import Spec, generate
from tests.unit.verification.conftest import RunEditor


@pytest.mark.parametrize("seed", range(6))
def test_seen_numbers_match_a_set(seed):
    rng = random.Random(seed)
    seen, plain = _Seen(), set()
    value = 0
    for _ in range(400):
        if rng.random() < 0.5:  # a bulk block: increasing numbers at one or more steps
            step = rng.choice((1, 1, 2, 10))
            numbers = [value + step * (i + 1) for i in range(rng.randint(1, 30))]
            if rng.random() < 0.3:
                numbers += [numbers[-1] + rng.randint(1, 7) for _ in range(3)]
                numbers = sorted(set(numbers))
            if numbers[0] > max(plain, default=-1):
                seen.add_increasing(np.array(numbers, dtype=np.int64))
                plain.update(numbers)
                value = numbers[-1]
                continue
        number = rng.randint(0, value + 20)  # a line at a time, now and then out of order
        if number not in plain:
            assert number not in seen
            seen.add(number)
            plain.add(number)
        value = max(value, number)
    for number in range(value + 30):
        assert (number in seen) == (number in plain), number


@pytest.mark.parametrize("seed", range(4))
def test_spans_fed_in_batches(seed):
    rng = random.Random(seed)
    numbers = sorted(rng.sample(range(500), 200))
    spans, at = Spans(), 0
    while at < len(numbers):
        step = rng.randint(1, 40)
        spans.feed(np.array(numbers[at : at + step], dtype=np.int64))
        at += step
    assert spans.text() == _spans(numbers)
    assert Spans().text() == _spans([]) == "none"


def test_relative_matches_the_scalar():
    values = [0.0, -0.0, 1.0, 1.0 + 1e-12, 5.023312, 6.1e-13, float("nan"), float("inf"), -2.5, 1e308]
    a = np.array([x for x in values for _ in values])
    b = np.array([y for _ in values for y in values])
    want = [relative_difference(x, y) for x in values for y in values]
    assert relative(a, b).tolist() == want


def test_timeline_is_bounded_and_keeps_the_events(tmp_path, monkeypatch):
    run = tmp_path / "run"
    generate(Spec(ranks=2, iters=600, seed=5, chatter_per_rank=0), run)
    snap = build_snapshot(run)
    full = metrics.timeline_points(snap)
    monkeypatch.setattr(metrics, "ALL_POINTS", 100)
    monkeypatch.setattr(metrics, "STRIDED_POINTS", 50)
    kept = metrics.timeline_points(snap)
    assert len(kept) < 250 < len(full)
    assert all(point in full for point in kept)
    k = derive.restore(snap).iteration
    fault = derive.fault_iteration(snap).iteration
    for cycle in (0, 1):
        have = {p["iteration"] for p in kept if p["cycle"] == cycle}
        assert {k, k + 1, fault} & have, cycle
        last = max(p["iteration"] for p in full if p["cycle"] == cycle)
        assert last in have
    assert {p["iteration"] for p in kept if p["cycle"] == 1} >= set(range(k + 1, fault + 1))


def _progress(run) -> dict:
    report = build_report(run)
    return next(check for check in report["checks"] if check["id"] == "progress_after_resume")


def test_gaps_after_the_restore_are_counted_the_same_in_windows(tmp_path, monkeypatch):
    """The gap count of progress_after_resume walks windows of wanted iterations: any window size gives the
    count and the first gap a single window gives; more wanted iterations than it checks is inconclusive,
    never a silent pass."""
    run = tmp_path / "run"
    generate(Spec(ranks=2, iters=300, chatter_per_rank=0), run)
    whole = _progress(run)
    assert whole["status"] == "pass", whole["detail"]
    gaps = re.compile(r"\] iteration +(150|151|152|233)/")
    RunEditor(run).delete_lines("logs/train_cycle1.log", lambda line: bool(gaps.search(line)))
    one = _progress(run)
    assert one["status"] == "fail"
    assert "4 iteration(s) after the restore never logged at log interval 1 (first: 150)" in one["detail"]
    monkeypatch.setattr(resume, "WANTED_WINDOW", 7)  # 180 wanted after the restore at 120: 26 windows
    assert _progress(run) == one
    monkeypatch.setattr(resume, "MAX_WANTED_WINDOWS", 25)
    beyond = _progress(run)
    assert beyond["status"] == "inconclusive"
    assert "180 iterations wanted after the restore at log interval 1 (up to 300)" in beyond["detail"]
    assert "more than the 175 this verifier checks for gaps" in beyond["detail"]


def test_saves_beyond_the_listed_bound_are_counted_and_the_named_ones_kept(tmp_path, monkeypatch):
    """A long run's thousands of saves: all enter the save-time figures, only a bounded selection is
    listed (each log's first and last, the injection's and the restore's checkpoint), and the total says
    how many there were; the checks do not change."""
    run = tmp_path / "run"
    generate(Spec(ranks=2, iters=3_000, save_interval=10, chatter_per_rank=0), run)
    whole = build_report(run)
    saves = whole["metrics"]["checkpoint_saves"]
    assert len(saves) == 300 and "checkpoint_saves_total" not in whole["metrics"]
    monkeypatch.setattr(metrics, "MAX_SAVES_LISTED", 40)
    monkeypatch.setattr(metrics, "ALL_POINTS", 100)  # so that the timeline keeps points near saves only
    bounded = build_report(run)
    m = bounded["metrics"]
    assert bounded["checks"] == whole["checks"] and bounded["verdict"] == whole["verdict"] == "pass"
    assert m["checkpoint_saves_total"] == 300 and 20 <= len(m["checkpoint_saves"]) <= 45
    assert all(save in saves for save in m["checkpoint_saves"])  # the same records, in the same order
    assert [s for s in saves if s in m["checkpoint_saves"]] == m["checkpoint_saves"]
    for key in ("checkpoint_save_s_max", "checkpoint_save_s_mean"):  # figures of every save
        assert m[key] == whole["metrics"][key]
    listed = {(s["cycle"], s["iteration"]) for s in m["checkpoint_saves"]}
    k = whole["metrics"]["restored_iteration"]
    assert (0, k) in listed  # the checkpoint the injection followed, which the replacement restored
    for cycle in (0, 1):
        of_cycle = [s["iteration"] for s in saves if s["cycle"] == cycle]
        assert {(cycle, of_cycle[0]), (cycle, of_cycle[-1])} <= listed
    events = [e for e in bounded["timeline"]["events"] if e["kind"] == "checkpoint_saved"]
    assert {(e["cycle"], e["iteration"]) for e in events} == listed
    near = {p["iteration"] for p in bounded["timeline"]["iterations"]}
    unlisted = sorted({s["iteration"] for s in saves} - {i for _, i in listed})
    assert all(i in near for _, i in listed if i <= 3_000)
    assert sum(i in near for i in unlisted) < len(unlisted) // 2  # points near unlisted saves not kept


def test_a_baseline_that_saved_hundreds_of_times_is_named_in_one_line(tmp_path):
    run = tmp_path / "run"
    generate(Spec(ranks=2, iters=3_000, restarts=0, save_interval=10, chatter_per_rank=0), run)
    check = build_report(run)["checks"][0]
    assert check["id"] == "uninterrupted_completion" and check["status"] == "pass", check["detail"]
    assert (
        "checkpoints [10, 20, 30, 40, 50, 60, 70, 80, 90, 100, ..., 2980, 2990, 3000] (300 in all) completed"
        in (check["detail"])
    )
    dropped = re.compile(r"successfully saved checkpoint .* iteration +(1[0-9][0-9]0)\b")
    assert (
        RunEditor(run).delete_lines("logs/train_cycle0.log", lambda line: bool(dropped.search(line))) == 100
    )
    check = build_report(run)["checks"][0]
    assert check["status"] == "fail"
    assert (
        "no 'successfully saved checkpoint' line for iteration(s) "
        "[1000, 1010, 1020, 1030, 1040, 1050, 1060, 1070, 1080, 1090, ..., 1970, 1980, 1990] (100 in all)"
    ) in check["detail"]
    assert len(check["detail"]) < 1000
