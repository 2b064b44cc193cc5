rule preflight:
    """Check the stack before any run; a failed preflight stops the workflow (the rule exits non-zero)."""
    input:
        scenario_settings_files(),
    output:
        report(
            "results/preflight.json",
            caption="../report/preflight.rst",
            category="Preflight",
        ),
    log:
        "logs/preflight.log",
    retries: 0
    params:
        config=lambda wildcards: resolved_config(),
    script:
        "../scripts/rule_preflight.py"
