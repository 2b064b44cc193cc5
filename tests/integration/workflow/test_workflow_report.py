"""`snakemake --report` after a smoke run (CPU, real ft_launcher): the report opens on the verdict and holds
summary.html, junit.xml and every plot among its results.

The landing text is report/workflow.rst, which includes the summary rule's landing.html (the headline and
what needs attention, ftqual.report.html); the zip form of the report keeps the page (report/report.html,
the landing text inside its data) and each result as a file, which the test reads.
"""

from __future__ import annotations

import json
import zipfile

import pytest

from tests.support.workflow import read_json, run_snakemake, write_yaml

SMALL = {"smoke": {"step_seconds": 0.1, "save_seconds": 0.0}}


@pytest.mark.timeout(500)
def test_the_snakemake_report_opens_on_the_verdict_and_holds_every_result(project):
    write_yaml(project / "config" / "small.yaml", SMALL)
    env = {"PYTHONPATH": str(project)}  # the summary rule's `ftqual` runs the copy's package
    run = run_snakemake(project, "--profile", "profiles/local", "--configfile", "config/small.yaml", env=env)
    summary = read_json(project / "results" / "summary.json")
    assert run.returncode == (0 if summary["verdict"] == "pass" else 1), run.stdout[-6000:]
    assert (project / "results" / "summary.html").is_file()

    made = run_snakemake(
        project, "--profile", "profiles/local", "--configfile", "config/small.yaml", "--report", "report.zip",
        env=env, timeout=300,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout[-6000:]
    with zipfile.ZipFile(project / "report.zip") as archive:
        names = archive.namelist()
        pages = {n: archive.read(n).decode("utf-8", "replace") for n in names if n.endswith(".html")}
    landing = next(text for name, text in pages.items() if name.endswith("report.html"))
    # the landing text is a JSON string in the page's data: the headline as JSON writes it
    headline = json.dumps(summary["headline"])[1:-1]
    assert headline in landing and 'id=\\"verdict\\"' in landing, landing[-3000:]
    # the verdict first, before the workflow's own description
    assert landing.index(headline) < landing.index("qualifies checkpoint-based fault recovery")
    results = {name.rsplit("/", 1)[-1] for name in names}
    assert {"summary.html", "summary.md", "summary.json", "junit.xml"} <= results, sorted(results)
    plots = {f"{name}.png" for name in summary["plots"]} | {"checkpoints.png"}
    assert plots <= results, (sorted(plots - results), sorted(results))
