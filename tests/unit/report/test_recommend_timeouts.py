"""`ftqual recommend-timeouts` (ftqual.report.recommend) and the proof of a recommendation in the report: the
snippet
it writes is a config the workflow accepts, whose scenarios run under the recommendation and record where it
came from; a summary that did not pass, or measured nothing, is refused in one line; the report's proof is
`proven` only when the baseline raised no false alarm and each hang was caught within its bound, `disproved`
when either failed."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ftqual.launch import settings as launch_settings
from ftqual.report import recommend
from ftqual.report import timeouts as tm
from ftqual.report.markdown import proof_lines
from ftqual.scenario import model as scenarios

TIMEOUTS = {"setup": 120, "step": 10, "checkpointing": 60, "out_of_section": 30}
RECOMMENDED = {"setup": 10.0, "step": 10.0, "checkpointing": 10.0, "out_of_section": 10.0}


def _doc(fault: str = "none", source: str | None = None, quiet="pass", bound=None, **observed) -> dict:
    overall = {name: {"s": value, "evidence": []} for name, value in observed.items()}
    expected: dict = {"fault": fault, "timeouts": TIMEOUTS}
    if source == "recommended":
        expected.update(timeouts=RECOMMENDED, timeouts_source="recommended", timeouts_from=TIMEOUTS)
    checks = [{"id": "timeouts_not_exceeded", "status": quiet}]
    if bound is not None:
        checks.append(
            {
                "id": "detected_within_timeout",
                "status": bound,
                "values": {"section": "step", "detection_s": 12.3, "bound_s": 15.0},
            }
        )
    return {"expected": expected, "sections": {"overall": overall}, "checks": checks}


def _summary(tmp_path: Path, verdict: str = "pass", **observed) -> Path:
    table = tm.build_timeouts([("baseline", _doc(**observed))])
    results = tmp_path / "results"
    results.mkdir()
    (results / "summary.json").write_text(json.dumps({"verdict": verdict, "timeouts": table}))
    return results


def test_the_snippet_is_a_config_whose_scenarios_run_under_the_recommendation(tmp_path, capsys):
    results = _summary(tmp_path, setup=3.1, step=0.4, checkpointing=1.2, out_of_section=0.5)
    assert recommend.main([str(results)]) == 0
    out = capsys.readouterr().out
    assert "--ft-rank-section-timeouts=setup:300,step:60,checkpointing:120" in out
    snippet = yaml.safe_load((results / recommend.SNIPPET_NAME).read_text())
    assert snippet["timeouts"] == {"setup": 300, "step": 60, "checkpointing": 120, "out_of_section": 120}
    assert snippet["timeouts_from"] == TIMEOUTS
    config = {**snippet, "scenarios": {"baseline": {"fault": "none"}, "hang": {"fault": "hang"},
                                       "own": {"fault": "hang", "timeouts": {"step": 30}}}}  # fmt: skip
    cfg = scenarios.resolve(config, env={})
    hang, own = cfg.by_name["hang"], cfg.by_name["own"]
    assert hang.timeouts.step == 60 and hang.timeouts_from is not None
    assert own.timeouts_from is None  # its own timeouts: not run under the recommendation
    env = scenarios.launcher_env(cfg, hang)
    assert env["NVRX_TIMEOUTS_FROM"] == "setup:120,step:10,checkpointing:60,out_of_section:30"
    assert "NVRX_TIMEOUTS_FROM" not in scenarios.launcher_env(cfg, own)
    assert launch_settings.parse_timeouts_from(env["NVRX_TIMEOUTS_FROM"])["out_of_section"] == 30
    # the same scenario under the configured timeouts is another attempt (another fingerprint)
    plain = scenarios.resolve({"scenarios": config["scenarios"]}, env={})
    assert plain.fingerprint(plain.by_name["hang"]) != cfg.fingerprint(hang)
    # the resolved form the preflight writes stays JSON, and megatron_path's source stays a source (the
    # first GPU run with a recommendation broke here: the preflight could not write its config)
    cfg = scenarios.resolve({**config, "megatron_path": "/opt/mlm"}, env={})
    assert json.loads(json.dumps(cfg.to_json()))["megatron_path_source"] == "config"


def test_without_an_argument_it_reads_results_and_prints_the_whole_next_command(
    tmp_path, capsys, monkeypatch
):
    """`ftqual recommend-timeouts` alone exited 2 (RESULTS was required), and its hint left
    `--configfile ...` for the user to fill in."""
    from ftqual import cli

    _summary(tmp_path, setup=3.1, step=0.4, checkpointing=1.2, out_of_section=0.5)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["recommend-timeouts"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "results" / recommend.SNIPPET_NAME).is_file()
    assert "..." not in out
    assert "\n  snakemake --profile profiles/local --configfile results/timeouts-recommended.yaml\n" in out


def test_the_next_command_takes_the_slurm_profile_where_each_attempt_was_a_slurm_job():
    def doc(*jobs):
        return {"scenarios": [{"attempt": {"machine": {"slurm_job_id": j}}} for j in jobs]}

    path = Path("results/timeouts-recommended.yaml")
    local = "snakemake --profile profiles/local --configfile results/timeouts-recommended.yaml"
    assert recommend.next_command({}, path) == local
    assert recommend.next_command(doc(None, None), path) == local
    assert recommend.next_command(doc("41", "41"), path) == local  # the local profile inside one allocation
    assert recommend.next_command(doc("41", "42", None), path) == local.replace("local", "slurm")
    assert recommend.next_command({}, Path("my results/t.yaml")).endswith("--configfile 'my results/t.yaml'")


def test_nvrx_rule_without_floors(tmp_path, capsys):
    results = _summary(tmp_path, setup=3.1, step=0.4, checkpointing=1.2, out_of_section=0.5)
    assert recommend.main([str(results), "--no-floors", "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert "timeouts: {setup: 20, step: 10, checkpointing: 10, out_of_section: 10}" in out


def test_refusals_are_one_line(tmp_path, capsys):
    assert recommend.main([str(tmp_path)]) == 2
    assert "no summary at" in capsys.readouterr().err
    failed = _summary(tmp_path, verdict="fail", step=0.4)
    assert recommend.main([str(failed)]) == 2
    err = capsys.readouterr().err
    assert "not 'pass'" in err and len(err.strip().splitlines()) == 1
    (failed / "summary.json").write_text(json.dumps({"verdict": "pass", "timeouts": tm.build_timeouts([])}))
    assert recommend.main([str(failed)]) == 2
    assert "no section was measured" in capsys.readouterr().err
    assert not (failed / recommend.SNIPPET_NAME).exists()


def test_the_launcher_refuses_a_partial_source():
    for raw in ("setup:120,step:10,checkpointing:60", "setup:120,step:10,checkpointing:60,out_of_section:-1"):
        try:
            launch_settings.parse_timeouts_from(raw)
        except launch_settings.SettingsError as exc:
            assert "NVRX_TIMEOUTS_FROM" in str(exc)
        else:
            raise AssertionError(raw)


def _proof(*docs: tuple[str, dict]) -> dict:
    return tm.build_timeouts(list(docs))["proof"]


def test_proof_proven_disproved_unproven():
    base = ("baseline", _doc(source="recommended", step=0.4))
    hang = ("hang", _doc("hang", source="recommended", bound="pass", step=0.4))
    proof = _proof(base, hang)
    assert proof["verdict"] == "proven"
    lines = "\n".join(proof_lines(proof))
    assert "**proven**" in lines and "step hang detected after 12.3 s (bound 15.0 s) `pass`" in lines
    # a healthy section met a recommended timeout, or a hang took longer than its bound: disproved
    assert _proof(("baseline", _doc(source="recommended", quiet="fail")), hang)["verdict"] == "disproved"
    assert _proof(base, ("hang", _doc("hang", source="recommended", bound="fail")))["verdict"] == "disproved"
    assert _proof(base)["verdict"] == "unproven"  # no hang under it
    assert _proof(("baseline", _doc(step=0.4)))["verdict"] is None  # configured: nothing to prove


def test_table_shows_configured_next_to_ran_under():
    table = tm.build_timeouts([("baseline", _doc(source="recommended", step=0.4))])
    step = next(r for r in table["rows"] if r["section"] == "step")
    assert (step["configured_s"], step["ran_under_s"], table["ran_under"]) == (10, 10.0, "recommended")
    setup = next(r for r in table["rows"] if r["section"] == "setup")
    assert (setup["configured_s"], setup["ran_under_s"]) == (120, 10.0)
