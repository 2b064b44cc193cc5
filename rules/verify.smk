rule verify:
    """Verify one run from its artifacts. A failed or inconclusive verdict fails the job (its output is
    removed) and discards the scenario's run.json, so the next plain run redoes the scenario itself.
    """
    input:
        unpack(verify_input),
    output:
        report(
            "results/{scenario}/verify.json",
            caption="../report/verify.rst",
            category="Verification",
            subcategory="{scenario}",
        ),
    log:
        "logs/verify/{scenario}.log",
    retries: 0
    params:
        discard_failed_run=config["rerun_failed_verification"],
    script:
        "../scripts/rule_verify.py"
