"""The restart agent's preflight check: skipped unless a scenario turns it on; where one does, it passes on
this stack (NVRx 0.7.0's service resolves ftqual's settings to the deterministic Restart Agent, no model
route), fails in one line where the service cannot run, and notes a port held by another run."""

from __future__ import annotations

from ftqual.preflight import checks_agent
from ftqual.preflight.checks import CHECKS, run_checks

SCENARIOS = {
    "exception": {"fault": "exception", "rank": 1, "restart_agent": "stop"},
    "kill": {"fault": "kill"},
}


def test_registered_and_skipped_when_off(make_ctx):
    assert checks_agent.check_restart_agent in CHECKS
    result = checks_agent.check_restart_agent(make_ctx({"scenarios": {"kill": {"fault": "kill"}}}))
    assert result.status == "skip"


def test_passes_here_naming_the_scenarios(make_ctx, monkeypatch):
    monkeypatch.setattr(checks_agent, "port_busy", lambda port=0: False)
    result = checks_agent.check_restart_agent(make_ctx({"scenarios": SCENARIOS}))
    assert result.status == "pass", result.detail
    assert "without an LLM" in result.detail and "exception" in result.detail and "kill" not in result.detail
    assert [r for r in run_checks(make_ctx({"scenarios": SCENARIOS})) if r.id == "restart_agent"]


def test_a_service_that_cannot_run_fails_in_one_line(make_ctx, monkeypatch):
    monkeypatch.setattr(
        checks_agent, "deterministic_config_problem", lambda: "NVRx's service does not import (x)"
    )
    result = checks_agent.check_restart_agent(make_ctx({"scenarios": SCENARIOS}))
    assert result.status == "fail" and "\n" not in result.detail and result.fix


def test_a_busy_port_is_a_note(make_ctx, monkeypatch):
    monkeypatch.setattr(checks_agent, "port_busy", lambda port=0: True)
    result = checks_agent.check_restart_agent(make_ctx({"scenarios": SCENARIOS}))
    assert result.status == "pass" and "port 50050 is in use" in result.detail


def test_the_real_service_settings_resolve_deterministic():
    assert checks_agent.deterministic_config_problem() is None


def test_the_port_is_the_launchers():
    from ftqual.launch import restart_agent

    assert checks_agent.SERVICE_PORT == restart_agent.SERVICE_PORT


def test_a_missing_dependency_of_the_services_app_is_a_problem(monkeypatch):
    """The service's app must import, not only its settings: an absent dependency ended a GPU run's launcher
    at start (`No module named 'opentelemetry'`)."""
    import sys

    from ftqual.preflight import checks_agent

    monkeypatch.setitem(sys.modules, "nvidia_resiliency_ext.services.attrsvc.app", None)
    problem = checks_agent.deterministic_config_problem()
    assert problem is not None and "does not import" in problem
