# Scenario table, wildcard constraints and every helper the rules use (the only place for helpers).

import copy

from snakemake.exceptions import WorkflowError

# Run settings a scenario may override; everything else in the config is workflow-wide.
RUN_SETTINGS = (
    "nnodes",
    "gpus_per_node",
    "tp",
    "pp",
    "train_iters",
    "save_interval",
    "timeouts",
    "max_restarts",
    "term_timeout",
    "transformer_impl",
    "dist_optimizer",
    "hang_placement",
    "smoke",
)
DEFAULT_FAULT_RANK = 1  # the seed's NVRX_FAULT_RANK default
# The seed's GPT: PP must divide its layers, TP its attention heads.
MODEL_LAYERS = 4
MODEL_HEADS = 8


def _merged(base, override):
    """`base` updated by `override`, recursing into mappings (timeouts, smoke)."""
    if not isinstance(base, dict) or not isinstance(override, dict):
        return copy.deepcopy(override)
    out = copy.deepcopy(base)
    for key, value in override.items():
        out[key] = _merged(out.get(key), value)
    return out


def _on_off(value):
    """dist_optimizer as auto|on|off (YAML 1.1 reads a bare on/off as a boolean)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return value


def _resolve_scenario(raw):
    settings = {
        key: (
            _merged(config[key], raw[key]) if key in raw else copy.deepcopy(config[key])
        )
        for key in RUN_SETTINGS
    }
    settings["dist_optimizer"] = _on_off(settings["dist_optimizer"])
    settings["fault"] = raw["fault"]
    settings["rank"] = (
        None if raw["fault"] == "none" else raw.get("rank", DEFAULT_FAULT_RANK)
    )
    settings["world_size"] = settings["nnodes"] * settings["gpus_per_node"]
    return settings


def _check_scenarios(scenarios, baseline):
    """Cross-field rules the schema cannot express; one clear message per problem."""
    problems = []
    if baseline not in scenarios:
        problems.append(
            f"baseline_scenario {baseline!r} is not an enabled scenario "
            f"(enabled: {', '.join(scenarios) or 'none'})"
        )
    elif scenarios[baseline]["fault"] != "none":
        problems.append(f"baseline_scenario {baseline!r} must have fault: none")
    for name, s in scenarios.items():
        where = f"scenarios.{name}"
        if s["rank"] is not None and s["rank"] >= s["world_size"]:
            problems.append(
                f"{where}: rank {s['rank']} is outside the world of {s['world_size']} rank(s) "
                f"(nnodes*gpus_per_node); use 0..{s['world_size'] - 1}"
            )
        if s["world_size"] % (s["tp"] * s["pp"]):
            problems.append(
                f"{where}: world size {s['world_size']} is not divisible by tp*pp={s['tp'] * s['pp']}"
            )
        if MODEL_LAYERS % s["pp"] or MODEL_HEADS % s["tp"]:
            problems.append(
                f"{where}: pp must divide {MODEL_LAYERS} layers and tp {MODEL_HEADS} heads"
            )
    if problems:
        raise WorkflowError("invalid config:\n  " + "\n  ".join(problems))


SCENARIOS = {
    name: _resolve_scenario(raw)
    for name, raw in config["scenarios"].items()
    if raw.get("enabled", True)
}
BASELINE = config["baseline_scenario"]
_check_scenarios(SCENARIOS, BASELINE)


wildcard_constraints:
    scenario="|".join(SCENARIOS),


# ---------------------------------------------------------------------------------------------
# targets


def all_verify_reports():
    return expand("results/{scenario}/verify.json", scenario=SCENARIOS)


def preflight_on_node():
    """True when preflight must run where training runs (see preflight_on_node in the schema)."""
    setting = config.get("preflight_on_node", "auto")
    return config["workload"] == "megatron" if setting == "auto" else bool(setting)


def preflight_gpus():
    """GPUs a node-side preflight asks for: those of the largest enabled scenario's node."""
    if not preflight_on_node():
        return None
    return max(s["gpus_per_node"] for s in SCENARIOS.values())


def resolved_config():
    """The config with defaults filled and each enabled scenario expanded: preflight's --config."""
    resolved = {key: value for key, value in config.items() if key != "scenarios"}
    resolved["dist_optimizer"] = _on_off(resolved["dist_optimizer"])
    resolved["scenarios"] = SCENARIOS
    return resolved


# ---------------------------------------------------------------------------------------------
# scenario_settings, run_scenario


def scenario_settings_files():
    return expand("results/{scenario}/settings.json", scenario=SCENARIOS)


def scenario_record(wildcards):
    """Everything one scenario's run depends on; scenario_settings writes it to results/<s>/settings.json.

    It is that rule's param, so Snakemake's params trigger reruns exactly the scenarios whose settings
    changed. The trigger sits on a rule of its own because Snakemake does not look at the params of a job
    that hangs below a rerunning job through ancient() inputs only (run_scenario below preflight).
    """
    return {
        "scenario": wildcards.scenario,
        "settings": SCENARIOS[wildcards.scenario],
        "env": launcher_env(wildcards),
        "workload_args": workload_args(wildcards),
        "work_dir": config["work_dir"],
    }


def run_scenario_input(wildcards):
    """Its settings; the preflight first; every other scenario after the baseline passed verification.

    ancient(): the preflight and the baseline are ordering dependencies only, so rerunning them never
    reruns a scenario that already passed.
    """
    s = SCENARIOS[wildcards.scenario]
    plugin = workflow.executor_plugin
    # Inside a Slurm job the job itself runs under the local executor: only the main process decides.
    if (
        s["nnodes"] > 1
        and plugin is not None
        and plugin.name == "local"
        and workflow.is_main_process
    ):
        raise WorkflowError(
            f"scenario {wildcards.scenario!r} has nnodes={s['nnodes']}: multi-node runs need the Slurm "
            "executor (--profile profiles/slurm), which starts one ft_launcher per node with srun; the "
            "local profile runs one node (set nnodes: 1 or disable the scenario)"
        )
    inputs = {
        "settings": f"results/{wildcards.scenario}/settings.json",
        "preflight": ancient("results/preflight.json"),
    }
    if wildcards.scenario != BASELINE:
        inputs["baseline"] = ancient(f"results/{BASELINE}/verify.json")
    return inputs


def launcher_env(wildcards):
    """The launcher's environment for one scenario (docs/architecture.md)."""
    s = SCENARIOS[wildcards.scenario]
    t = s["timeouts"]
    env = {
        "NVRX_WORKLOAD": config["workload"],
        "NVRX_SCENARIO": wildcards.scenario,
        "NNODES": s["nnodes"],
        "GPUS_PER_NODE": s["gpus_per_node"],
        "TP": s["tp"],
        "PP": s["pp"],
        "TRAIN_ITERS": s["train_iters"],
        "SAVE_INTERVAL": s["save_interval"],
        "NVRX_DEMO_FAULT": s["fault"],
        "NVRX_SECTION_TIMEOUTS": f"setup:{t['setup']},step:{t['step']},checkpointing:{t['checkpointing']}",
        "NVRX_OUT_OF_SECTION_TIMEOUT": t["out_of_section"],
        "NVRX_MAX_RESTARTS": s["max_restarts"],
        "NVRX_TERM_TIMEOUT": s["term_timeout"],
        "NVRX_TRANSFORMER_IMPL": s["transformer_impl"],
        "NVRX_DIST_OPTIMIZER": s["dist_optimizer"],
        "NVRX_HANG_PLACEMENT": s["hang_placement"],
    }
    if s["rank"] is not None:
        env["NVRX_FAULT_RANK"] = s["rank"]
    if config["workload"] == "megatron" and config["megatron_path"]:
        env["MEGATRON_PATH"] = config["megatron_path"]
    return {key: str(value) for key, value in env.items()}


def workload_args(wildcards):
    """Extra workload arguments, appended to the launcher's command line (smoke options only)."""
    if config["workload"] != "smoke":
        return []
    smoke = SCENARIOS[wildcards.scenario]["smoke"]
    flags = {
        "step_seconds": "--smoke-step-seconds",
        "save_seconds": "--smoke-save-seconds",
    }
    return [f"{flags[key]}={value}" for key, value in sorted(smoke.items())]


def _multinode(wildcards):
    return SCENARIOS[wildcards.scenario]["nnodes"] > 1


def gpu_resource(wildcards):
    """GPUs of a single-node run (the local scheduler's `gpu` budget, sbatch --gpus). Multi-node runs
    ask per node with `gres` instead: `gpu` would be a job total that Slurm may pack onto one node.
    """
    s = SCENARIOS[wildcards.scenario]
    return None if _multinode(wildcards) else s["gpus_per_node"]


def gres_resource(wildcards):
    s = SCENARIOS[wildcards.scenario]
    return f"gpu:{s['gpus_per_node']}" if _multinode(wildcards) else None


def nodes_resource(wildcards):
    return SCENARIOS[wildcards.scenario]["nnodes"]


def mpi_resource(wildcards):
    """`mpi` makes the Slurm jobstep leave the srun to the rule (one launcher per node)."""
    return "srun" if _multinode(wildcards) else None


def tasks_per_node_resource(wildcards):
    # Allocation geometry only (the plugin requires > 1 with `mpi`); the step itself runs one task per node.
    s = SCENARIOS[wildcards.scenario]
    return max(2, s["gpus_per_node"]) if _multinode(wildcards) else None


# ---------------------------------------------------------------------------------------------
# verify


def verify_input(wildcards):
    inputs = {"run": f"results/{wildcards.scenario}/run.json"}
    if wildcards.scenario != BASELINE:
        inputs["baseline"] = ancient(f"results/{BASELINE}/run.json")
    return inputs


# ---------------------------------------------------------------------------------------------
# summary


def summary_plots():
    """The plots `ftqual report` draws: a recovery timeline per fault scenario and the loss curves."""
    faulted = [name for name, s in SCENARIOS.items() if s["fault"] != "none"]
    return [f"timeline_{name}" for name in faulted] + ["loss_comparison"]
