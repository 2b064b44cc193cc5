rule verify:
    """Verify one attempt from its artifacts. Always writes the verdict (pass, fail or inconclusive, with
    the cause); a copy of every verification stays in results/<scenario>/attempts/."""
    input:
        unpack(verify_input),
    output:
        report(
            "results/{scenario}/{slot}/verify.json",
            caption="../report/verify.rst",
            category="Verification",
            subcategory="{scenario}",
        ),
    log:
        "logs/verify/{scenario}/{slot}.log",
    retries: 0
    conda:
        "../envs/ftqual.yaml"
    params:
        expectation=expectation_param,
        payloads=payloads_param,
    script:
        "../scripts/rule_verify.py"
