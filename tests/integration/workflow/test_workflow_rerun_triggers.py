"""Only file times may rerun a job (profiles/default, the workflow's own profile): ftqual's attempts decide
what reruns. A command line that asks for other rerun triggers is refused before any job starts, with one line
saying why; the workflow profile is in effect whatever user profile is named."""

from __future__ import annotations

from tests.support.workflow import run_snakemake


def test_the_workflow_profile_is_read_with_every_profile(project):
    for args in ((), ("--profile", "profiles/local")):
        proc = run_snakemake(project, "-n", *args)
        assert proc.returncode == 0, proc.stdout
        assert "workflow specific profile profiles/default" in proc.stdout, proc.stdout


def test_other_rerun_triggers_are_refused_before_any_job(project):
    proc = run_snakemake(
        project, "--profile", "profiles/local", "--rerun-triggers", "mtime", "code", "params"
    )
    assert proc.returncode != 0, proc.stdout
    assert "ftqual: --rerun-triggers code params would rerun attempts that passed" in proc.stdout, proc.stdout
    assert not (project / "runs").exists()  # nothing was launched
    assert not (project / "results" / "preflight").exists()


def test_mtime_alone_is_accepted(project):
    proc = run_snakemake(project, "-n", "--rerun-triggers", "mtime")
    assert proc.returncode == 0, proc.stdout
