"""The at-scale model against hand-computed cases, its inputs read from recorded qualifications, the campaign
cross-check, and `ftqual at-scale`'s refusals."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from ftqual.report import at_scale as M
from ftqual.report import at_scale_cli as cli
from ftqual.report.at_scale_inputs import read_inputs
from ftqual.report.markdown import render_markdown

DATA = Path(__file__).resolve().parents[2] / "data"
QUALIFIED_13B = DATA / "megatron-h200-1.3b-1gpu" / "results" / "summary.json"
CAMPAIGN = DATA / "megatron-h200-campaign-1gpu" / "results" / "summary.json"


def fig(value: float) -> M.Figure:
    return M.Figure(value, "hand")


def inputs(**over) -> M.Inputs:
    base = dict(
        crash_detect=fig(2.0), step_timeout=fig(60.0), monitor_interval_s=5.0, worker_stop=fig(1.0),
        gpu_reclaim=fig(2.0), process_start=fig(3.0), init=fig(4.0), first_step=fig(5.0), load_gbps=fig(1.0),
        checkpoint_bytes=fig(1e9), save_blocked=fig(5.0), save_durable=fig(10.0), step_s=fig(1.0),
        save_interval_iters=100, max_restarts=10_000,
    )  # fmt: skip
    return M.Inputs(**{**base, **over})


PLAIN = M.Assumptions(failures_per_gpu_hour=1e-4, hang_share=0.0, node_share=0.0, gpus_per_node=8)


def test_young_daly_and_its_floor():
    assert M.young_daly(10.0, 7200.0, 0.0) == pytest.approx(math.sqrt(2 * 10 * 7200))  # 379.47 s
    assert M.young_daly(10.0, 7200.0, 500.0) == 500.0  # never shorter than a save takes to be durable


def test_a_projection_by_hand():
    p = M.project(inputs(), gpus=1000, days=30, a=PLAIN)
    lam = 1e-4 * 1000 / 3600  # failures per second: one every 36,000 s
    assert p.mtbf_s == pytest.approx(36000.0)
    assert p.interval_s == 100.0 and p.lost_s == pytest.approx(50.0 + 10.0)
    assert p.restart_s == pytest.approx(1 + 2 + 3 + 4 + 5)
    assert p.load_s == pytest.approx(1e9 / (1.0e9 * 125))  # 125 nodes of 8 reading at 1 GB/s each
    b = p.breakdown
    assert b.saves == pytest.approx(5.0 / 100.0)
    assert b.detection == pytest.approx(lam * 2.0) and b.lost_work == pytest.approx(lam * 60.0)
    resubmissions = lam * 30 * 86400 / 10_001 * 1800 / (30 * 86400)  # out of restarts: queue again
    assert p.goodput == pytest.approx(1 - (0.05 + lam * (2 + 15 + 0.008 + 60) + resubmissions), abs=1e-9)
    assert p.failures == pytest.approx(lam * 30 * 86400)  # 72 failures in 30 days


def test_when_saves_dominate_the_best_interval_is_longer_and_says_so():
    i = inputs(save_blocked=fig(30.0), save_interval_iters=60)
    p = M.project(i, 1000, 30, PLAIN)
    assert p.breakdown.saves == pytest.approx(0.5)
    assert M.gain_of_a_point(p).startswith("saves (blocked time)")
    best = M.project(i, 1000, 30, PLAIN, interval_iters=0)
    assert best.interval_s == pytest.approx(math.sqrt(2 * 30 * 36000), abs=1.0)  # 1,470 iterations of 1 s
    assert best.goodput > p.goodput


def test_when_lost_work_dominates_a_shorter_interval_gains():
    i = inputs(save_blocked=fig(0.1), save_interval_iters=20_000)
    p = M.project(i, 1000, 30, PLAIN)
    assert M.gain_of_a_point(p).startswith("lost work")
    assert M.project(i, 1000, 30, PLAIN, interval_iters=0).goodput > p.goodput


def test_the_knobs():
    a = replace(PLAIN, hang_share=0.5, node_share=0.78)
    knobs = {(k.name, k.setting): k for k in M.knobs(inputs(max_restarts=3), 4096, 30, a)}
    assert ("step timeout", "60 s") not in knobs  # the timeout in force is the configured row
    assert knobs[("step timeout", "120 s")].gain < 0  # a hang then costs 60 s more
    assert next(k for (n, _), k in knobs.items() if n == "hot spare").gain > 0
    assert next(k for (n, _), k in knobs.items() if n == "max restarts").gain > 0


def test_inputs_from_a_qualified_summary_are_cited():
    read = read_inputs(json.loads(QUALIFIED_13B.read_text()))
    assert not read.problems, read.problems
    i = read.inputs
    assert i.worker_stop.value == pytest.approx(5.436) and "worker_stop_s" in i.worker_stop.source
    assert i.save_interval_iters == 200 and i.step_timeout.value == 60.0
    assert i.crash_detect.source.startswith("assumed: no crash ran")  # only a hang ran there
    assert i.step_s.value == pytest.approx(1 / 4.383, abs=1e-3)


def test_the_model_reproduces_a_campaigns_measured_goodput():
    part = json.loads(CAMPAIGN.read_text())["campaigns"]["campaign"]["goodput"]
    check = M.campaign_check(part)
    assert check is not None and check.measured == pytest.approx(0.2835)
    assert check.within, check  # modelled 27.8 % against measured 28.4 %
    # negative control: a campaign whose measured goodput the model does not explain is outside
    assert not M.campaign_check({**part, "measured": 0.6}).within


def run_cli(capsys, *argv) -> tuple[int, list[str], str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, [line for line in err.splitlines() if line], out


def test_the_command_projects_a_qualified_summary(capsys, tmp_path):
    outputs = ("--json", str(tmp_path / "p.json"), "--plot", str(tmp_path / "p.png"))
    code, err, out = run_cli(capsys, str(QUALIFIED_13B.parent), "--gpus", "16384", "--days", "30", *outputs)
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    assert code == 0 and not err
    assert "**16,384 GPUs for 30 days**" in out and "save_interval:" in out
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["best"]["goodput"] >= doc["configured"]["goodput"]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--gpus", "-5", "--days", "30"], "--gpus must be a whole number"),
        (["--gpus", "1024", "--days", "100000"], "--days must be more than 0 and at most 3650"),
        (["--gpus", "1024", "--days", "30", "--hang-share", "2"], "--hang-share must be between 0 and 1"),
        (["--days", "30"], "required: --gpus"),
    ],
)
def test_bad_input_is_one_line_each_and_exit_2(capsys, argv, words):
    code, err, _ = run_cli(capsys, str(QUALIFIED_13B.parent), *argv)
    assert code == 2 and len(err) == 1 and words in err[0], err


def test_no_qualified_results_are_refused(capsys, tmp_path):
    code, err, _ = run_cli(capsys, str(tmp_path), "--gpus", "8", "--days", "1")
    missing = tmp_path / "summary.json"
    assert code == 2
    expected = f"no qualified results: {missing} does not exist (run the workflow first)"
    assert err == [f"ftqual at-scale: {expected}"]
    summary = json.loads(QUALIFIED_13B.read_text())
    failed = {**summary, "verdict": "fail", "headline": "ftqual: FAIL — kill"}
    mixed = {**summary, "job": {**summary["job"], "digest": None}}
    for doc, words in ((failed, "did not pass"), (mixed, "different job shapes")):
        (tmp_path / "summary.json").write_text(json.dumps(doc))
        code, err, _ = run_cli(capsys, str(tmp_path), "--gpus", "8", "--days", "1")
        assert code == 2 and any(words in line for line in err), err


# --- one goodput model and one prior; the smoke refusal, the wording, units and the settings ---

LONG_FLOAT = re.compile(r"\d\.\d{5,}|\d{5,}\.\d")  # more digits than a reader needs (1.9732816719714506e-05)


def smoke_of(summary: dict) -> dict:
    """The same results as if the smoke workload had produced them (summary.json resolved.workload)."""
    return {**summary, "resolved": {**(summary.get("resolved") or {}), "workload": "smoke"}}


def test_the_smoke_workload_is_refused_in_one_line_that_says_how_to_override(capsys, tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps(smoke_of(json.loads(QUALIFIED_13B.read_text()))))
    code, err, out = run_cli(capsys, str(tmp_path), "--gpus", "4096", "--days", "30")
    assert code != 0 and not out
    assert len(err) == 1 and "smoke workload" in err[0] and "--allow-smoke" in err[0], err
    # negative control: the same results from Megatron-LM are projected
    code, err, out = run_cli(capsys, str(QUALIFIED_13B.parent), "--gpus", "4096", "--days", "30")
    assert code == 0 and not err and "SMOKE" not in out


def test_allow_smoke_projects_it_and_says_so_first(capsys, tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps(smoke_of(json.loads(QUALIFIED_13B.read_text()))))
    code, err, out = run_cli(capsys, str(tmp_path), "--gpus", "4096", "--days", "30", "--allow-smoke")
    assert code == 0 and not err
    first = out.splitlines()[0]
    assert "SMOKE WORKLOAD" in first and "NOT YOUR JOB" in first and "trains no model" in first


def test_fewer_than_one_failure_is_said_in_words(capsys):
    code, _, out = run_cli(capsys, str(QUALIFIED_13B.parent), "--gpus", "8", "--days", "30")
    assert code == 0
    assert "Fewer than one failure expected in 30 days (one every ~6,330 h)." in out
    assert "About 0 failures" not in out and "6334.6" not in out
    # negative control: at 4,096 GPUs the failures are counted
    _, _, out = run_cli(capsys, str(QUALIFIED_13B.parent), "--gpus", "4096", "--days", "30")
    assert "About 58 failures expected in 30 days, one every ~12.4 h." in out


@pytest.mark.parametrize("gpus", ["8", "4096", "16384"])
def test_measured_values_have_units_and_no_none_or_long_floats(capsys, tmp_path, gpus):
    summary = json.loads(QUALIFIED_13B.read_text())
    for part in summary["checkpoints"]["by_scenario"].values():  # a load too small to rate: no rate
        for r in part.get("restarts") or []:
            r["load_gbps"] = None
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    code, _, out = run_cli(capsys, str(tmp_path), "--gpus", gpus, "--days", "30")
    assert code == 0
    assert "None" not in out and not LONG_FLOAT.search(out), LONG_FLOAT.search(out)
    measured = out[out.index("Measured (median") : out.index("Assumed (")].splitlines()[2:-1]
    units = (" s", " GB/s", " GB", " iterations", "not measured")
    for line in measured:
        value = line.split(": ", 1)[1].split(" (", 1)[0]
        assert value.endswith(units) or line.startswith("- the configured max restarts"), line
    assert "- checkpoint load rate of one node: not measured" in measured
    assert "- one checkpoint: 18.4 GB (" in out and "- a save's blocked time: 9.39 s (" in out
    assert (
        "fs_read_gbps: not set" in out and "1.97e-05 failures per GPU-hour" in out and "| 1.24e-04 |" in out
    )


def snippet_keys(snippet: str) -> dict[str, float]:
    out = {}
    for line in snippet.splitlines():
        if line.startswith("#"):
            continue
        key, _, rest = line.partition(":")
        if key == "timeouts":
            out["timeouts.step"] = float(rest.split("step:")[1].split("}")[0])
        else:
            out[key] = float(rest.split("#")[0])
    return out


@pytest.mark.parametrize("recommended", [30.0, 120.0])
def test_the_settings_snippet_takes_only_what_the_knob_table_shows_gains(recommended):
    """Recommended 120 s over a configured 60 s costs goodput in the table: never in the snippet; 30 s gains:
    in the snippet, with the value of its row."""
    i = inputs(recommended_step_timeout_s=recommended, max_restarts=3)
    a = replace(PLAIN, hang_share=0.5)
    rows = M.knobs(i, 4096, 30, a)
    snippet = snippet_keys(cli.snippet(rows, M.project(i, 4096, 30, a, interval_iters=0), 4096))
    for key, value in snippet.items():
        (row,) = [k for k in rows if k.key == key and k.value == value]
        assert row.gain > 0, row
    timeout_rows = {k.value: k.gain for k in rows if k.key == "timeouts.step"}
    if timeout_rows[recommended] < 0:
        assert "timeouts.step" not in snippet  # the table shows it costs goodput
    else:
        assert snippet["timeouts.step"] == max(timeout_rows, key=timeout_rows.get)


def test_nothing_to_gain_says_so():
    i = inputs(save_interval_iters=0)  # a save interval Young/Daly picks itself, then nothing gains
    a = replace(PLAIN, hang_share=0.0, hot_spare=True)
    rows = [k for k in M.knobs(i, 8, 1, a) if k.key != "save_interval"]
    assert cli.snippet(rows, M.project(i, 8, 1, a), 8).startswith("# the configured settings cost least")


@pytest.mark.parametrize("gpus", [1, 8, 64, 1024, 16384])
@pytest.mark.parametrize("configured", [0, 3, 50])
def test_max_restarts_is_never_below_the_configured(gpus, configured):
    i = inputs(max_restarts=configured)
    assert M.enough_restarts(i, gpus, 30, PLAIN) >= configured
    (row,) = [k for k in M.knobs(i, gpus, 30, PLAIN) if k.key == "max_restarts"]
    assert row.value >= configured and row.gain >= 0


def test_the_command_at_8_gpus_suggests_no_restart_limit_below_the_configured(capsys):
    code, _, out = run_cli(capsys, str(QUALIFIED_13B.parent), "--gpus", "8", "--days", "30")
    assert code == 0 and "max restarts 3" in out
    assert "max_restarts: 1" not in out and "max_restarts: 2" not in out
    assert "| max restarts | 3 (as configured: covers every expected failure) |" in out


def test_the_priors_are_the_published_figures_and_one_is_the_default():
    assert M.DEFAULT_PRIOR == "llama3" and set(M.PRIORS) == {"llama3", "rsc-1024", "rsc-16k"}
    assert 1 / (M.PRIORS["llama3"].failures_per_gpu_hour * 16384) == pytest.approx(3.09, abs=0.01)
    assert 1 / (M.PRIORS["rsc-1024"].failures_per_gpu_hour * 1024) == pytest.approx(7.9)
    assert 1 / (M.PRIORS["rsc-16k"].failures_per_gpu_hour * 16384) == pytest.approx(1.8)
    schema = yaml.safe_load((Path(__file__).resolve().parents[3] / "config" / "schema.yaml").read_text())
    scale = next(x for x in schema["properties"]["scale"]["anyOf"] if x.get("type") == "object")
    assert scale["properties"]["prior"]["enum"] == list(M.PRIORS)


def test_the_output_names_its_prior_and_shows_the_answer_under_each(capsys):
    code, _, out = run_cli(capsys, str(QUALIFIED_13B.parent), "--gpus", "1024", "--days", "30")
    assert code == 0 and "Failure prior: **llama3**, Llama 3 405B pre-training" in out
    rows = [line for line in out.splitlines() if line.startswith(("| **llama3**", "| rsc-"))]
    assert [r.split(" | ")[2] for r in rows] == ["49.5 h", "7.90 h", "28.8 h"]  # MTBF at 1,024 GPUs
    code, _, out = run_cli(capsys, str(QUALIFIED_13B.parent), "--gpus", "1024", "--days", "30",
                           "--prior", "rsc-1024")  # fmt: skip
    assert code == 0 and "one every ~7.90 h" in out and "| **rsc-1024** (in use) | 1.24e-04 | 7.90 h |" in out
    code, err, _ = run_cli(capsys, str(QUALIFIED_13B.parent), "--gpus", "8", "--days", "1", "--prior", "x")
    assert code == 2 and len(err) == 1 and "--prior must be one of llama3, rsc-1024, rsc-16k" in err[0]


def test_the_config_picks_the_prior_of_the_report():
    assert cli.report_argv({"scale": {"gpus": 4096, "days": 30}}) == ["--scale", "4096:30"]
    assert cli.report_argv({"scale": {"gpus": 4096, "days": 30, "prior": "rsc-16k"}})[-2:] == [
        "--prior", "rsc-16k"]  # fmt: skip


def test_a_summary_with_scale_and_a_campaign_gives_one_goodput_answer():
    """The report of a qualification with `scale:` and a campaign: At your scale is the one goodput answer
    (its prior named, the others in a table); no second projection with another prior, nor a campaign's."""
    summary = json.loads(QUALIFIED_13B.read_text())
    summary["campaigns"] = json.loads(CAMPAIGN.read_text())["campaigns"]
    summary["at_scale"] = cli.section(summary, (4096, 30))
    md = render_markdown(summary)
    headings = [line for line in md.splitlines() if line in ("## Goodput projection", "## At your scale")]
    assert headings == ["## At your scale"]
    assert md.count("expected goodput") == 1 and "Young/Daly projected" not in md
    assert "| **llama3** (in use) |" in md and "| rsc-1024 |" in md and "| rsc-16k |" in md
    assert "Check of the goodput model" in md and md.count("Model check on campaign") == 0
    # without scale: each scenario's projection, under the same prior, named
    del summary["at_scale"]
    summary["goodput"] = {**summary["goodput"], "prior": "llama3"}
    md = render_markdown(summary)
    assert "## Goodput projection" in md and "## At your scale" not in md and "failure prior **llama3**" in md


def test_a_scenarios_projection_is_the_same_breakdown_as_at_scale():
    """One goodput function: a scenario's point is a Breakdown with only the terms one scenario measures."""
    p = M.scenario_point(1.0, 29.0, 2.0, 3600.0)
    assert p.interval_s == pytest.approx(120.0) and p.goodput == pytest.approx(1 - 150.0 / 3600.0)
    # the at-scale projection with the same terms (no load, node loss, resubmission or durable lag) agrees
    i = inputs(crash_detect=fig(1.0), worker_stop=fig(29.0), gpu_reclaim=fig(0.0), process_start=fig(0.0),
               init=fig(0.0), first_step=fig(0.0), load_gbps=None, load_s=fig(0.0), save_blocked=fig(2.0),
               save_durable=fig(0.0), save_interval_iters=120)  # fmt: skip
    a = replace(PLAIN, failures_per_gpu_hour=1.0 / 1000, hang_share=0.0)  # 1,000 GPUs: one an hour
    assert M.project(i, 1000, 30, a).goodput == pytest.approx(p.goodput, abs=1e-4)  # resubmission ~ 0


def test_the_reports_prior_sets_each_scenarios_projection_and_a_bad_one_is_refused(capsys, tmp_path):
    from ftqual.report import main as report_main
    from ftqual.report.summary import ReportOptions, mtbf_points

    assert [(p.hours, p.gpus) for p in mtbf_points(ReportOptions())] == [(49.4893, 1024), (3.0931, 16384)]
    assert [(p.hours, p.gpus) for p in mtbf_points(ReportOptions(prior="rsc-1024"))] == [
        (7.9, 1024), (0.4938, 16384)]  # fmt: skip
    verify = tmp_path / "kill.json"
    verify.write_text("{}")
    code = report_main(["--verify", f"kill={verify}", "--out", str(tmp_path / "out"), "--prior", "kokolis"])
    err = [line for line in capsys.readouterr().err.splitlines() if line]
    expected = "ftqual report: --prior must be one of llama3, rsc-1024, rsc-16k (got 'kokolis')"
    assert code == 2 and err == [expected]


def test_restart_means_one_thing_across_the_tables():
    """The goodput model's once-per-failure cost runs from detection to the first step (t_recover); the
    report's "restart" (the Faults table, the budgets) is ft_launcher's, detection to the new cycle: neither
    goodput table calls the longer span "restart"."""
    summary = json.loads(QUALIFIED_13B.read_text())
    from ftqual.verification.campaign import goodput

    md = render_markdown(summary)
    header = next(line for line in md.splitlines() if line.startswith("| scenario | MTBF |"))
    assert "| t_recover |" in header and "restart" not in header
    assert "t_restart" not in goodput.FORMULA + " ".join(goodput.FORMULA_TERMS)
    summary["at_scale"] = cli.section(summary, (4096, 30))
    md = render_markdown(summary)
    assert "| recovery (detection → first step) |" in md and "| restart |" not in md
