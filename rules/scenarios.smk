rule scenario_settings:
    """One scenario's resolved settings and launcher environment, as a file: changing a scenario's settings
    reruns that scenario (params trigger) and the preflight, and nothing else."""
    output:
        "results/{scenario}/settings.json",
    log:
        "logs/scenario_settings/{scenario}.log",
    retries: 0
    params:
        record=scenario_record,
    script:
        "../scripts/rule_scenario_settings.py"


rule run_scenario:
    """One attempt of one scenario: a fresh run ID and runs/<run-id>/ (never an output, never deleted);
    succeeds when the launcher exits 0."""
    input:
        unpack(run_scenario_input),
    output:
        run="results/{scenario}/run.json",
    log:
        "logs/run_scenario/{scenario}.log",
    resources:
        gpu=gpu_resource,
        gres=gres_resource,
        nodes=nodes_resource,
        mpi=mpi_resource,
        tasks_per_node=tasks_per_node_resource,
        attempt=lambda wildcards, attempt: attempt,
    script:
        "../scripts/rule_run_scenario.py"
