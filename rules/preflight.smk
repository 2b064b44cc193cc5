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
    # On a cluster, preflight must see the node that will train (its GPUs, CUDA, NCCL, make/g++), not
    # the login node: for Megatron it is a job of its own there; the smoke workload checks this host.
    localrule: not preflight_on_node()
    resources:
        gpu=lambda wildcards: preflight_gpus(),
        runtime=20,
    params:
        config=lambda wildcards: resolved_config(),
    script:
        "../scripts/rule_preflight.py"
