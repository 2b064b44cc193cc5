rule run_scenario:
    """One attempt of one scenario: a fresh run ID and runs/<run-id>/ (never an output, never deleted).
    Succeeds whenever the attempt is over, whatever its outcome: attempt.json records the launcher's exit and
    cause, or why nothing was launched (preflight failed, baseline did not pass). Fails only when
    interrupted, so that the slot is redone."""
    input:
        unpack(run_scenario_input),
    output:
        run="results/{scenario}/{slot}/attempt.json",
    log:
        "logs/run_scenario/{scenario}/{slot}.log",
    retries: 0
    # Trains in the site's training environment (README, "Software environments").
    conda:
        site_training_env
    resources:
        gpu=run_resource("gpu"),
        gres=run_resource("gres"),
        nodes=run_resource("nodes"),
        mpi=run_resource("mpi"),
        tasks_per_node=run_resource("tasks_per_node"),
    params:
        # The stack this attempt is keyed by (ftqual.stack.current) and why this slot (shown in the report).
        stack=PLAN.stack.to_json(),
        slot_reason=lambda wildcards: PLAN.slots[wildcards.scenario].reason,
        # The reports it waits for, also when a rerun of an existing record names no inputs.
        preflight=preflight_report(),
        baseline=lambda wildcards: PLAN.current_verify_reports()[BASELINE],
    script:
        "../scripts/rule_run_scenario.py"
