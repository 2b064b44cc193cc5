"""`ftqual compare`: the recorded requalification (core_v0.19.0 -> core_v0.16.0 on one H200) side by side, a
forged regression caught by --fail-on-regression, a change within its own spread not called one, the settings
that differ shown first with the figures that follow them (never a regression), only a change beyond its
spread headlined, no rate of a run without a model, a folder against itself identical, bad input."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from ftqual.report import compare as C
from ftqual.report import main as report_main

DATA = Path(__file__).resolve().parents[2] / "data"
REQUALIFY = DATA / "megatron-h200-requalify" / "results"
QUALIFIED_13B = DATA / "megatron-h200-1.3b-1gpu" / "results" / "summary.json"


@pytest.fixture(scope="module")
def requalified(tmp_path_factory):
    """The two stacks' summaries, made by `ftqual report` from the recorded verify reports."""
    out = tmp_path_factory.mktemp("requalify")
    old = ["--verify", f"baseline={REQUALIFY / 'baseline/b6be74abf843-1/verify.json'}",
           "--verify", f"kill={REQUALIFY / 'kill/50bfe18db278-1/verify.json'}"]  # fmt: skip
    new = ["--verify", f"baseline={REQUALIFY / 'baseline/6e961af280cb-1/verify.json'}"]
    assert report_main([*old, "--baseline", "baseline", "--out", str(out / "v019")]) == 0
    assert report_main([*new, "--baseline", "baseline", "--out", str(out / "v016")]) == 0
    return out / "v019", out / "v016"


def run(capsys, *argv) -> tuple[int, str, list[str]]:
    code = C.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, [line for line in err.splitlines() if line]


def test_the_recorded_requalification(capsys, requalified):
    old, new = requalified
    code, out, err = run(capsys, old, new)
    assert code == 0 and not err
    first = out.splitlines()[0]
    assert first.startswith(
        "# ftqual compare: same settings; Megatron-LM 0.19.1 at /tmp/mlm -> 0.16.0 at /tmp/mlm"
    )
    assert "kill: pass -> not run" in first  # the upgrade's kill was never recorded
    # one measurement a side is shown, never headlined
    assert ": no change beyond its spread, verdicts changed" in first
    assert (
        "| baseline: iterations per second | 2.02/s | 0.385/s | -81.0 % | 1 / 1 | single measurement | — |"
        in out
    )


def forged(factor: float) -> dict:
    """The recorded 1.3b qualification with every restart phase of its hang `factor` times as long."""
    doc = json.loads(QUALIFIED_13B.read_text())
    slower = copy.deepcopy(doc)
    for r in slower["checkpoints"]["by_scenario"]["hang"]["restarts"]:
        for key in ("worker_stop_s", "process_start_s", "init_s", "load_s"):
            r[key] *= factor
    hang = next(sc for sc in slower["scenarios"] if sc["name"] == "hang")
    hang["metrics"]["restart_s"] *= factor
    return slower


def test_a_forged_regression_fails_the_gate_and_the_same_summary_does_not(capsys, tmp_path):
    (tmp_path / "old.json").write_text(QUALIFIED_13B.read_text())
    (tmp_path / "new.json").write_text(json.dumps(forged(2.0)))
    code, out, _ = run(capsys, tmp_path / "old.json", tmp_path / "new.json", "--fail-on-regression", "20")
    assert code == 1  # single measurements still gate, under the same settings
    assert "same stack: no change beyond its spread, every verdict unchanged" in out.splitlines()[0]
    doc = C.compare(json.loads(QUALIFIED_13B.read_text()), forged(2.0), 20)
    assert "hang: restart" in doc["regressions"] and "restart: process start" in doc["regressions"]
    assert doc["verdict_changes"] == [] and "every verdict unchanged" in doc["conclusion"]
    # negative controls: the same summary, and a change below the threshold, pass the gate
    code, out, _ = run(capsys, tmp_path / "old.json", tmp_path / "old.json", "--fail-on-regression", "20")
    assert (
        code == 0
        and out.splitlines()[0] == "# ftqual compare: identical: the same qualification on both sides"
    )
    assert "+0 %" not in out.splitlines()[0]
    assert not C.compare(json.loads(QUALIFIED_13B.read_text()), forged(1.1), 20)["regressions"]


def test_only_scenarios_both_sides_ran_are_compared():
    """A kill's restart is never compared with a hang's: the pooled figures cover the common scenarios."""
    doc = json.loads(QUALIFIED_13B.read_text())
    other = copy.deepcopy(doc)
    other["checkpoints"]["by_scenario"]["kill"] = other["checkpoints"]["by_scenario"].pop("hang")
    for sc in other["scenarios"]:
        sc["name"] = "kill" if sc["name"] == "hang" else sc["name"]
    names = {f["name"] for f in C.compare(doc, other)["figures"]}
    assert not any(name.startswith("restart:") for name in names), names


def test_a_change_within_the_spread_of_repeated_measurements_is_no_regression():
    noisy = C.Figure("save", "s", False, (1.0, 2.0, 3.0), (1.5, 2.5, 3.5))  # +25 % of the median, range 2 s
    assert noisy.judged == "within spread" and not noisy.regression(10)
    clear = C.Figure("save", "s", False, (1.0, 1.1, 1.2), (2.0, 2.1, 2.2))
    assert clear.judged == "beyond spread" and clear.regression(10)
    rate = C.Figure("load rate", "GB/s", True, (2.0,), (1.0,))  # a rate that halves is worse
    assert rate.worse and rate.regression(10) and rate.judged == "single measurement"


def test_bad_input_is_one_line_each_and_exit_2(capsys, tmp_path):
    (tmp_path / "other.json").write_text('{"schema": "something/v1"}')
    code, _, err = run(capsys, tmp_path / "missing", tmp_path / "other.json", "--fail-on-regression", "-5")
    assert code == 2 and len(err) == 3, err
    assert (
        "must be a percentage" in err[0] and "does not exist" in err[1] and "not an ftqual summary" in err[2]
    )


def retimed(step: float) -> dict:
    """The recorded 1.3b qualification run again with the step timeout `step` s (it was 60): the hang, held in
    `step`, is detected that much later; its checkpoint load, a single measurement, 3.6 times as long."""
    doc = json.loads(QUALIFIED_13B.read_text())
    for sc in doc["scenarios"]:
        sc["expected"]["timeouts"]["step"] = step
    hang = next(sc for sc in doc["scenarios"] if sc["name"] == "hang")["metrics"]
    hang["detection_s"] += step - 60
    hang["failure_to_first_step_s"] += step - 60
    hang["wall_time_s"] += step - 60
    hang["checkpoint_load_s"] *= 3.6
    doc["checkpoints"]["by_scenario"]["hang"]["restarts"][0]["detection_s"] += step - 60
    return doc


def test_the_settings_that_differ_come_first_and_the_figures_that_follow_them_never_fail(capsys, tmp_path):
    (tmp_path / "old.json").write_text(QUALIFIED_13B.read_text())
    (tmp_path / "new.json").write_text(json.dumps(retimed(120.0)))
    code, out, _ = run(capsys, tmp_path / "old.json", tmp_path / "new.json", "--fail-on-regression", "20")
    first = out.splitlines()[0]
    assert first == (
        "# ftqual compare: step timeout 60 -> 120 s; same stack: no change beyond its spread, "
        "every verdict unchanged"
    )
    assert out.index("## Settings") < out.index("## Stack") < out.index("## Figures")
    assert (
        "- step timeout 60 -> 120 s\n  - hang: detection 61 s -> 121 s: follows step timeout 60 -> 120 s"
        in out
    )
    doc = C.compare(json.loads(QUALIFIED_13B.read_text()), retimed(120.0), 20)
    follows = {f["name"]: f["follows"] for f in doc["figures"]}
    for name in ("hang: detection", "hang: failure to first step", "restart: detection"):
        assert follows[name] == ("step timeout 60 -> 120 s",) and name not in doc["regressions"], name
    # a kill's or a load's figure does not depend on the step timeout: judged as before, and here it fails
    assert follows["hang: checkpoint load"] == () and follows["hang: restart"] == ()
    assert doc["regressions"] == ["hang: checkpoint load"] and code == 1
    # negative control: the same later detection under the same settings is a regression
    same = retimed(120.0)
    for sc in same["scenarios"]:
        sc["expected"]["timeouts"]["step"] = 60.0
    doc = C.compare(json.loads(QUALIFIED_13B.read_text()), same, 20)
    assert doc["setting_changes"] == [] and "hang: detection" in doc["regressions"]
    assert doc["conclusion"].startswith("same settings; same stack")


def test_a_setting_changed_in_one_scenario_is_attributed_there_only():
    new = json.loads(QUALIFIED_13B.read_text())
    next(sc for sc in new["scenarios"] if sc["name"] == "hang")["expected"]["save_interval"] = 100
    doc = C.compare(json.loads(QUALIFIED_13B.read_text()), new)
    assert [c["text"] for c in doc["setting_changes"]] == ["save_interval 200 -> 100 (hang)"]
    follows = {f["name"]: f["follows"] for f in doc["figures"]}
    assert follows["hang: time to verdict (the run's wall time)"] == ("save_interval 200 -> 100 (hang)",)
    assert follows["baseline: time to verdict (the run's wall time)"] == ()


def test_only_a_change_beyond_its_spread_with_several_measurements_is_headlined():
    old = json.loads(QUALIFIED_13B.read_text())
    new = copy.deepcopy(old)
    hang = next(sc for sc in new["scenarios"] if sc["name"] == "hang")["metrics"]
    hang["checkpoint_load_s"] *= 4  # +300 %, one measurement a side: shown, not headlined
    doc = C.compare(old, new)
    assert "no change beyond its spread" in doc["conclusion"]
    restarts = {"old": [10.0, 10.5, 11.0], "new": [20.0, 20.5, 21.0]}  # three restarts a side, range 1 s
    for side, values in ((old, restarts["old"]), (new, restarts["new"])):
        template = side["checkpoints"]["by_scenario"]["hang"]["restarts"][0]
        side["checkpoints"]["by_scenario"]["hang"]["restarts"] = [
            {**template, "process_start_s": v} for v in values
        ]
    doc = C.compare(old, new)
    assert "restart: process start 10.5 s -> 20.5 s (+95 %)" in doc["conclusion"]


def test_no_rate_of_a_run_without_a_model(tmp_path):
    """The smoke workload saves a few bytes of no model: its GB/s (0.0005 -> 0) is never shown; a Megatron
    run's load rate is (the negative control)."""
    smoke = json.loads(QUALIFIED_13B.read_text())
    smoke["resolved"]["workload"] = "smoke"
    fast, slow = copy.deepcopy(smoke), copy.deepcopy(smoke)
    fast["checkpoints"]["by_scenario"]["hang"]["restarts"][0]["load_gbps"] = 0.0005
    slow["checkpoints"]["by_scenario"]["hang"]["restarts"][0]["load_gbps"] = 0.0
    names = {f["name"] for f in C.compare(fast, slow, 20)["figures"]}
    assert "load rate" not in names and "save rate" not in names and "restart: checkpoint load" in names
    gpu = json.loads(QUALIFIED_13B.read_text())
    assert {"load rate", "save rate"} <= {f["name"] for f in C.compare(gpu, gpu)["figures"]}


def test_a_detection_by_exit_follows_no_timeout():
    """A kill-like fault is seen by the rank's exit: its detection, pooled or not, is judged under a changed
    step timeout; a hang's (section:step) follows it."""
    old = json.loads(QUALIFIED_13B.read_text())
    next(sc for sc in old["scenarios"] if sc["name"] == "hang")["metrics"]["detected_by"] = "exit"
    new = copy.deepcopy(old)
    for sc in new["scenarios"]:
        sc["expected"]["timeouts"]["step"] = 120.0
    follows = {f["name"]: f["follows"] for f in C.compare(old, new)["figures"]}
    assert follows["hang: detection"] == () and follows["restart: detection"] == ()
    assert follows["hang: time to verdict (the run's wall time)"] == ("step timeout 60 -> 120 s",)


def test_exact_recovery_is_shown_per_scenario_and_its_change_named():
    """Each scenario's "Exact recovery" line, both sides, where either ran `replay: exact`; a bitwise
    recovery that now differs is shown old -> new; summaries without it show no section."""
    old = forged(1.0)
    assert C.compare(old, old)["exact_recovery"] == [] and "## Exact recovery" not in C.markdown(
        C.compare(old, old), "a", "b"
    )
    new = copy.deepcopy(old)
    name = next(s["name"] for s in new["scenarios"] if s.get("fault") not in (None, "none"))
    for side, line in ((old, "bitwise"), (new, "first difference: grad norm at K+1")):
        sc = next(s for s in side["scenarios"] if s["name"] == name)
        sc["replay"] = {**(sc.get("replay") or {}), "exact": {"status": "pass", "line": line}}
    doc = C.compare(old, new)
    assert doc["exact_recovery"] == [
        {"scenario": name, "old": "bitwise", "new": "first difference: grad norm at K+1", "same": False}
    ]
    assert f"- {name}: bitwise -> first difference: grad norm at K+1" in C.markdown(doc, "a", "b")
    same = C.compare(old, old)
    assert f"- {name}: bitwise" in C.markdown(same, "a", "b")
