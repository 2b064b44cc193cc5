"""The restart agent's preflight check: NVRx's attribution service, its settings and its fixed port.

The restart agent's preflight: where a scenario turns `restart_agent` on, NVRx's attribution service
must be able to start here and decide without an LLM (docs/faults.md, "The restart agent"): its packages
import, the settings ftqual gives it (ftqual.launch.restart_agent) resolve to the deterministic Restart Agent
(no model route: no network, no key read), and its fixed port is free or held by another ftqual run (the
runs take turns on it)."""

from __future__ import annotations

import socket

from ftqual.preflight.check_base import FAIL, PASS, SKIP, CheckResult, Context

CHECK_ID = "restart_agent"
# NVRx's attribution_manager.DEFAULT_ATTRIBUTION_PORT, as ftqual.launch.restart_agent.SERVICE_PORT (the launch
# layer is above this one: tests/unit/test_layers.py)
SERVICE_PORT = 50050


def deterministic_config_problem() -> str | None:
    """None when nvrx-attrsvc, given ftqual's settings, runs the Restart Agent with no model route."""
    try:
        # the module the service runs (its web app: fastapi and what fastapi needs), not only its settings:
        # a missing dependency of the app ends the launcher at start (seen on a GPU machine: opentelemetry)
        import nvidia_resiliency_ext.services.attrsvc.app  # noqa: F401
        from nvidia_resiliency_ext.services.attrsvc.config import Settings
        from nvidia_resiliency_ext.services.attrsvc.restart_agent_config import (
            restart_agent_config_from_settings,
        )
    except Exception as exc:  # an absent or broken extra: the service cannot start
        return f"NVRx's attribution service does not import ({type(exc).__name__}: {exc})"
    try:
        settings = Settings(ALLOWED_ROOT="/", RESTART_AGENT_ENRICHMENT_ENABLED=False)
        config = restart_agent_config_from_settings(settings, environ={})
    except Exception as exc:
        return f"NVRx's restart agent refuses the deterministic settings ({type(exc).__name__}: {exc})"
    if config.enrichment_enabled or config.model_route_specs:
        return "NVRx's restart agent would still call an LLM with enrichment off"
    return None


def port_busy(port: int = SERVICE_PORT) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def check_restart_agent(ctx: Context) -> CheckResult:
    on = sorted({s.name for s in ctx.runs if s.restart_agent != "off"})
    if not on:
        return CheckResult(CHECK_ID, SKIP, "no scenario turns restart_agent on")
    problem = deterministic_config_problem()
    if problem is not None:
        return CheckResult(
            CHECK_ID, FAIL, problem, "install nvidia-resiliency-ext 0.7.0 whole, or set restart_agent: off"
        )
    note = ""
    if port_busy():
        note = f"; port {SERVICE_PORT} is in use now (another run's service: ours wait their turn)"
    return CheckResult(
        CHECK_ID,
        PASS,
        f"NVRx's restart agent decides here without an LLM (deterministic, no network) for {', '.join(on)}"
        + note,
    )
