rule preflight:
    """Check the stack before any run. The report holds the verdict; a failed preflight launches nothing
    (each scenario's attempt records why) and reaches the summary like any failure."""
    output:
        report(
            preflight_report(),
            caption="../report/preflight.rst",
            category="Preflight",
        ),
    log:
        f"logs/preflight/{PLAN.preflight.name}.log",
    retries: 0
    # On a cluster, preflight must see the node that will train (its GPUs, CUDA, NCCL, make/g++), not
    # the login node: for Megatron it is a job of its own there; the smoke workload checks this host.
    localrule: not preflight_on_node()
    # The preflight judges the interpreter it runs in (its torch, NVRx, the ft_launcher beside it), so it
    # runs in the training environment, as run_scenario does (README, "Software environments").
    conda:
        site_training_env
    resources:
        gpu=lambda wildcards: preflight_gpus(),
        runtime=20,
    params:
        config=CFG.to_json(),
    # A script, not a shell command: the resolved config it is given lives only in this process.
    script:
        "../scripts/rule_preflight.py"
