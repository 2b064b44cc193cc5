"""JSON Schema of `ftqual.summary/v1` (structure only; the tests validate the summaries they build)."""

from __future__ import annotations

from ftqual.contract import FAULTS

_STATUS = {"enum": ["pass", "fail", "inconclusive", "skip"]}
_VERDICT = {"enum": ["pass", "fail", "inconclusive"]}
# a scenario's verdict may also be not_applicable (the stack cannot run it); the summary's never is
_SCENARIO_VERDICT = {"enum": ["pass", "fail", "inconclusive", "not_applicable"]}
_NUM = {"type": ["number", "null"]}
_STR = {"type": ["string", "null"]}

_EVIDENCE = {
    "type": "object",
    "required": ["path", "line"],
    "properties": {"path": _STR, "line": {"type": ["integer", "null"]}, "text": {"type": "string"}},
}
_CHECK = {
    "type": "object",
    "required": ["id", "status", "detail", "evidence"],
    "properties": {
        "id": {"type": "string"},
        "status": _STATUS,
        "detail": {"type": "string"},
        "evidence": {"type": "array", "items": _EVIDENCE},
    },
}
_BUDGET = {
    "type": "object",
    "required": ["measure", "label", "unit", "measured", "budget", "formula", "within"],
    "properties": {
        "measure": {"type": "string"},
        "label": {"type": "string"},
        "unit": {"enum": ["s", "iterations"]},
        "measured": _NUM,
        "budget": _NUM,
        "formula": {"type": "string"},
        "within": {"type": ["boolean", "null"]},
    },
}
_GOODPUT_POINT = {
    "type": "object",
    "required": [
        "mtbf_hours",
        "gpus",
        "mtbf_s",
        "ckpt_interval_s",
        "ckpt_interval_source",
        "t_detect_s",
        "t_restart_s",
        "t_lost_s",
        "t_ckpt_s",
        "waste_s",
        "goodput",
    ],
    "properties": {"goodput": {"type": "number", "minimum": 0, "maximum": 1}},
}
_SCENARIO_GOODPUT = {
    "type": ["object", "null"],
    "required": ["computed", "reason", "points"],
    "properties": {
        "computed": {"type": "boolean"},
        "reason": _STR,
        "points": {"type": "array", "items": _GOODPUT_POINT},
    },
}
_SCENARIO = {
    "type": "object",
    "required": [
        "name",
        "verdict",
        "reason",
        "source",
        "run_id",
        "fault",
        "verify_verdict",
        "raw_verdict",
        "expect",
        "expect_failing",
        "expectation",
        "expected",
        "checks",
        "metrics",
        "derived",
        "budgets",
        "replay",
        "goodput",
    ],
    "properties": {
        "name": {"type": "string"},
        "verdict": _SCENARIO_VERDICT,
        # what the verify report tells of the run (ftqual.report.summary.RUN_STATES); older summaries lack it
        "run_state": {
            "enum": [
                "verified",
                "interrupted",
                "not verified",
                "not launched",
                "no verify report",
                "not applicable",
            ]
        },
        "not_applicable": {"type": "string"},  # with verdict not_applicable: why the stack cannot run it
        "reason": _STR,
        "source": {"type": "string"},
        "run_id": _STR,
        "fault": {"enum": list(FAULTS)},
        "raw_verdict": _SCENARIO_VERDICT,
        "expect": {"enum": ["pass", "fail"]},
        "expect_failing": {"type": "array", "items": {"type": "string"}},
        "expectation": {"type": "string"},
        "checks": {"type": "array", "items": _CHECK},
        "metrics": {"type": "object"},
        "budgets": {"type": "array", "items": _BUDGET},
        "replay": {"type": ["object", "null"]},
        "goodput": _SCENARIO_GOODPUT,
        "stack": {
            "type": ["object", "null"],
            "required": ["digest", "parts", "reason"],
            "properties": {"digest": _STR, "parts": {"type": "object"}},
        },
    },
}
_VALUES = {
    "type": "object",
    "required": ["setup", "step", "checkpointing", "out_of_section"],
    "additionalProperties": _NUM,
}
_BOOL = {"type": ["boolean", "null"]}
_CALCULATED = {
    "type": "object",
    "required": ["scenarios"],
    "properties": {
        "scenarios": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["scenario", "status", "reason", "rank_monitor_interval_s", "cycles", "sections"],
                "properties": {
                    "scenario": {"type": "string"},
                    "status": {"enum": [*_STATUS["enum"], None]},
                    "reason": _STR,
                    "rank_monitor_interval_s": {"type": "number"},
                    "cycles": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["cycle", "source", "start", "calculated"],
                            "properties": {
                                "cycle": {"type": "integer"},
                                "source": {"enum": ["initial", "loaded from ft_state.json"]},
                                "start": _VALUES,
                                "calculated": {"type": "array", "items": _VALUES},
                            },
                        },
                    },
                    "sections": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": [
                                "section",
                                "final_s",
                                "set_by",
                                "hang_caught_within_s",
                                "hang_detected_s",
                                "catches_hang",
                                "healthy_max_s",
                                "healthy_bound",
                                "fires_on_healthy",
                                "verdict",
                            ],
                            "properties": {
                                "section": {"enum": ["setup", "step", "checkpointing", "out_of_section"]},
                                "final_s": _NUM,
                                "set_by": _STR,
                                "hang_caught_within_s": _NUM,
                                "hang_detected_s": _NUM,
                                "catches_hang": _BOOL,
                                "healthy_max_s": _NUM,
                                "healthy_bound": _STR,
                                "fires_on_healthy": _BOOL,
                                "verdict": {
                                    "enum": [
                                        "ok",
                                        "would fire",
                                        "missed its bound",
                                        "cannot tell",
                                        "not measured",
                                        "no value",
                                    ]
                                },
                            },
                        },
                    },
                },
            },
        }
    },
}
_CAMPAIGN_FAULT = {
    "type": "object",
    "required": ["fault_index", "fault", "rank", "verdict", "detail", "checks"],
    "properties": {"fault_index": {"type": "integer"}, "verdict": _VERDICT, "detail": {"type": "string"}},
}
_CAMPAIGN_CHECK = {
    "type": "object",
    "required": ["status", "detail"],
    "properties": {"status": _STATUS, "detail": {"type": "string"}},
}
_CAMPAIGN = {
    "type": "object",
    "required": [
        "run_id",
        "seed",
        "planned",
        "injected",
        "mtti_iterations",
        "plan",
        "plan_followed",
        "faults",
        "cycles",
        "timeline",
        "goodput",
        "accumulation",
    ],
    "properties": {
        "seed": {"type": ["integer", "null"]},
        "planned": {"type": ["integer", "null"]},
        "injected": {"type": "integer", "minimum": 0},
        "plan": {"type": "array", "items": {"type": "object", "required": ["index", "fault", "rank"]}},
        "plan_followed": _CAMPAIGN_CHECK,
        "faults": {"type": "array", "items": _CAMPAIGN_FAULT},
        "cycles": {"type": "array", "items": {"type": "object", "required": ["fault_index"]}},
        "timeline": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["fault_index", "injected_s", "detected_s", "restarted_s", "resumed_s"],
                "properties": {k: _NUM for k in ("injected_s", "detected_s", "restarted_s", "resumed_s")},
            },
        },
        "goodput": {
            "type": "object",
            "required": ["measured", "projected", "gap", "gap_parts_s"],
            "properties": {
                "measured": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
                "projected": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
                "gap": _NUM,
                "gap_parts_s": {"type": "object", "additionalProperties": _NUM},
            },
        },
        "accumulation": _CAMPAIGN_CHECK,
    },
}
_STACK_KEYS = [
    "gpu_model",
    "gpu_count",
    "driver",
    "cuda",
    "nccl",
    "torch",
    "transformer_engine",
    "apex",
    "megatron",
    "nvrx",
    "python",
    "host",
]

SUMMARY_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": [
        "schema",
        "created_at",
        "verdict",
        "headline",
        "scenario_counts",
        "stack",
        "preflight",
        "resolved",
        "baseline",
        "scenarios",
        "attention",
        "goodput",
        "legend",
        "plots",
    ],
    "properties": {
        "schema": {"const": "ftqual.summary/v1"},
        "created_at": {"type": "string", "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"},
        "verdict": _VERDICT,
        "headline": {"type": "string", "pattern": "^ftqual: (PASS|FAIL|INCONCLUSIVE) — "},
        "scenario_counts": {
            "type": "object",
            "required": ["pass", "fail", "inconclusive"],
            "additionalProperties": {"type": "integer", "minimum": 0},
        },
        "stack": {"type": "object", "required": _STACK_KEYS},
        "stack_identity": {
            "type": "object",
            "required": ["digest", "parts", "labels", "by_scenario", "requalified"],
        },
        "preflight": {"type": "object", "required": ["source", "verdict", "error"]},
        "resolved": {"type": "object"},
        "baseline": _STR,
        "scenarios": {"type": "array", "items": _SCENARIO},
        "attention": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["scenario", "check", "status", "detail", "evidence"],
                "properties": {"status": {"enum": ["fail", "inconclusive", "over_budget"]}},
            },
        },
        "goodput": {
            "type": "object",
            "required": ["formula", "terms", "assumptions", "mtbf_source", "mtbf", "by_scenario"],
            "properties": {"by_scenario": {"type": "object", "additionalProperties": _SCENARIO_GOODPUT}},
        },
        "legend": {"type": "object", "additionalProperties": {"type": "string"}},
        "plots": {"type": "object", "additionalProperties": {"type": "string"}},
        "faults": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "scenario",
                    "fault",
                    "expected_path",
                    "detected_by",
                    "path_as_expected",
                    "verdict",
                ],
                "properties": {"fault": {"enum": list(FAULTS)}, "verdict": _SCENARIO_VERDICT},
            },
        },
        # {scenario: why the stack cannot run it}; absent in summaries written before it
        "not_applicable": {"type": "object", "additionalProperties": {"type": "string"}},
        "campaigns": {"type": "object", "additionalProperties": _CAMPAIGN},
        "exit_codes": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["scenario", "launcher_exit_code", "rank_exit_codes", "meaning", "requeue"],
            },
        },
        # faults that come back (ftqual.report.recurring); absent where no verify report judged a stop
        "recurring": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "scenario",
                    "role",
                    "stopped_by",
                    "stop_exit_code",
                    "cycles",
                    "bound_cycles",
                    "burned_cycles",
                    "burned_gpu_s",
                    "verdict",
                ],
            },
        },
        "checkpoints": {
            "type": "object",
            "required": ["floor", "by_scenario"],
            "properties": {
                "floor": {"type": ["object", "null"]},
                "by_scenario": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "required": ["saves", "restarts"],
                        "properties": {
                            "saves": {"type": "array", "items": {"type": "object"}},
                            "restarts": {"type": "array", "items": {"type": "object"}},
                        },
                    },
                },
            },
        },
        "timeouts": {
            "type": "object",
            "required": ["rows", "margins", "rule", "recommended", "flags", "config"],
            "properties": {
                "rows": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": [
                            "section",
                            "timeout_s",
                            "observed_s",
                            "headroom",
                            "detection_s",
                            "verdict",
                        ],
                        "properties": {
                            "verdict": {"enum": ["too tight", "ok", "loose", "not measured", "no timeout"]}
                        },
                    },
                },
                "flags": {"type": "string"},
                "config": {"type": "string"},
                "calculated": _CALCULATED,
            },
        },
    },
}
