"""What a timeouts recommendation holds for (ftqual.report.scope, ftqual.report.recommend): the snippet
records the job shape, stack and storage; another job shape is refused before launch (unless allowed) and
marked by the report; a summary without `job` says "job shape unknown"; a section resting on a floor says
so; verify.json carries run.json's `job`."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ftqual.report import recommend, scope
from ftqual.report import timeouts as tm
from ftqual.report.markdown import fixed_timeouts_lines
from ftqual.scenario import model as scenarios

TIMEOUTS = {"setup": 120, "step": 10, "checkpointing": 60, "out_of_section": 30}
JOB = {"model": "gpt-1.3b", "describe": "GPT 1.3B, TP1 PP1", "digest": "0123456789ab", "params": 1.3e9}


def _doc(job: dict | None = JOB, **observed) -> dict:
    doc = {
        "expected": {"fault": "none", "timeouts": TIMEOUTS},
        "sections": {"overall": {k: {"s": v, "evidence": []} for k, v in observed.items()}},
        "checks": [{"id": "timeouts_not_exceeded", "status": "pass"}],
    }
    if job is not None:
        doc["job"] = dict(job)
    return doc


def _results(tmp_path: Path, summary: dict) -> Path:
    results = tmp_path / "results"
    results.mkdir()
    (results / "summary.json").write_text(json.dumps(summary))
    return results


def _summary(job: dict | None = JOB, storage: dict | None = None, **observed) -> dict:
    docs = [("baseline", _doc(job, **observed))]
    out = {
        "verdict": "pass",
        "timeouts": tm.build_timeouts(docs),
        "stack_identity": {"digest": "stack0000001"},
    }
    if (jobs := scope.jobs_of(docs)) is not None:
        out["job"] = jobs
    if storage is not None:
        out["storage"] = storage
    return out


def test_the_snippet_says_what_it_holds_for(tmp_path):
    storage = {"path": "/lustre/ckpt", "filesystem": "lustre", "write_gbps": 2.5, "read_gbps": 4.0}
    results = _results(
        tmp_path, _summary(storage=storage, setup=100.0, step=20.0, checkpointing=240.0, out_of_section=30.0)
    )
    assert recommend.main([str(results)]) == 0
    text = (results / recommend.SNIPPET_NAME).read_text()
    snippet = yaml.safe_load(text)
    assert snippet["timeouts_for"] == {
        "job": "0123456789ab",
        "stack": "stack0000001",
        "storage": "/lustre/ckpt, lustre, write 2.5 GB/s, read 4 GB/s",
    }
    assert snippet["timeouts"]["checkpointing"] == 1200  # 5 x a 4-minute save, not the floor
    assert "Rests on ftqual's floor" not in text
    assert "job shape 0123456789ab (GPT 1.3B, TP1 PP1)" in text
    cfg = scenarios.resolve(snippet, env={})  # the snippet is a config the schema accepts
    assert cfg.scenarios


def test_a_recommendation_on_floors_says_so(tmp_path):
    results = _results(tmp_path, _summary(setup=3.1, step=0.4, checkpointing=1.2, out_of_section=0.5))
    assert recommend.main([str(results)]) == 0
    text = (results / recommend.SNIPPET_NAME).read_text()
    assert "Rests on ftqual's floor, not the measurement: setup, step, checkpointing, out_of_section" in text
    rows = {r["section"]: r for r in _summary(setup=3.1, step=20.0)["timeouts"]["rows"]}
    assert rows["setup"]["recommended_basis"] == "floor" and rows["step"]["recommended_basis"] == "measured"
    assert rows["checkpointing"]["recommended_basis"] == "configured"


def test_an_old_summary_without_job_says_job_shape_unknown(tmp_path):
    results = _results(tmp_path, _summary(job=None, setup=3.1, step=0.4))
    assert recommend.main([str(results)]) == 0
    text = (results / recommend.SNIPPET_NAME).read_text()
    assert "job shape unknown" in text
    assert yaml.safe_load(text)["timeouts_for"]["job"] is None


def test_the_report_scope_same_other_unknown():
    ran = scope.jobs_of([("baseline", _doc()), ("kill", _doc())])
    assert ran["digest"] == "0123456789ab"
    same = scope.scope({"job": "0123456789ab", "stack": "s1"}, ran, "s1")
    assert same["status"] == scope.SAME
    other = scope.scope({"job": "ffffffffffff", "stack": "s0"}, ran, "s1")
    assert other["status"] == scope.OTHER and "another job shape (ffffffffffff)" in other["line"]
    assert "measured on stack s0, run on s1" in other["line"]
    unknown = scope.scope({"job": "ffffffffffff"}, scope.jobs_of([("baseline", _doc(job=None))]), None)
    assert unknown["status"] == scope.UNKNOWN
    assert scope.scope(None, ran, "s1") is None  # configured timeouts: nothing to scope
    mixed = scope.jobs_of([("baseline", _doc()), ("kill", _doc(job={**JOB, "digest": "aaaaaaaaaaaa"}))])
    assert mixed["digest"] is None


def test_the_report_marks_timeouts_for_another_job_shape():
    table = tm.build_timeouts([("baseline", _doc(setup=3.1))])
    table["scope"] = scope.scope({"job": "ffffffffffff"}, scope.jobs_of([("b", _doc())]), None)
    text = "\n".join(fixed_timeouts_lines(table))
    assert "**Timeouts recommended for another job shape**" in text


def test_another_job_shape_is_refused_before_launch_in_one_line(tmp_path):
    preflight = tmp_path / "preflight.json"
    preflight.write_text(json.dumps({"job": {"digest": "0123456789ab"}}))
    config = {"timeouts_for": {"job": "ffffffffffff", "stack": None, "storage": None}}
    line = scope.launch_problem(config, preflight, None)
    assert line and "\n" not in line and "allow_timeouts_for_other_job" in line
    assert scope.launch_problem({**config, "allow_timeouts_for_other_job": True}, preflight, None) is None
    same = {"timeouts_for": {"job": "0123456789ab"}}
    assert scope.launch_problem(same, preflight, None) is None


def test_the_baselines_verify_report_names_the_job_for_a_fault_scenario(tmp_path):
    baseline = tmp_path / "verify.json"
    baseline.write_text(json.dumps({"job": {"digest": "0123456789ab"}}))
    config = {"timeouts_for": {"job": "ffffffffffff"}}
    assert scope.launch_problem(config, tmp_path / "absent.json", baseline) is not None
    # nothing names the job: nothing to compare (the report says "job shape unknown")
    assert scope.launch_problem(config, tmp_path / "absent.json", None) is None


def test_the_report_command_takes_the_configs_timeouts_for():
    argv = scope.report_argv({"timeouts_for": {"job": "0123456789ab", "stack": None}})
    assert argv[0] == "--timeouts-for" and json.loads(argv[1])["job"] == "0123456789ab"
    assert scope.report_argv({}) == []


def test_verify_carries_the_runs_job(tmp_path):
    import shutil

    from ftqual.verification.verify import build_report

    data = Path(__file__).resolve().parents[2] / "data" / "megatron-h200-1gpu" / "baseline"
    run = tmp_path / "baseline"
    shutil.copytree(data, run, symlinks=True)
    assert "job" not in build_report(run)  # a run.json without `job`: none carried
    record = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**record, "job": JOB}))
    assert build_report(run)["job"] == JOB


def test_the_report_shows_the_job_and_every_argument_that_ran():
    """summary.md's Job section: the shape, the estimates and the arguments of run.json's `job`, carried
    through the verify reports (here the 1.3b fixture's), and a plain line where no report carries one."""
    import glob
    from pathlib import Path

    from ftqual.report.markdown import job_section

    data = Path(__file__).resolve().parents[2] / "data" / "megatron-h200-1.3b-1gpu" / "results"
    docs = [
        (Path(p).parts[-3], json.loads(Path(p).read_text())) for p in glob.glob(f"{data}/*/*/verify.json")
    ]
    job = scope.jobs_of(docs)
    text = "\n".join(job_section({"job": job}))
    assert "1.32B params" in text and "`4f7df2631416`" in text and "17.2 GiB" in text
    assert "--num-layers=24 --hidden-size=2048" in text and "--mock-data" in text
    # two shapes: the digest is not shared, each scenario's is named
    changed = [
        (name, {**doc, "job": {**doc["job"], "digest": "0123456789ab"}} if name == "kill" else doc)
        for name, doc in docs
    ]
    mixed = scope.jobs_of(changed)
    assert mixed["digest"] is None and "Job shape by scenario" in "\n".join(job_section({"job": mixed}))
    assert job_section({}) == ["No job record in the verify reports."]
