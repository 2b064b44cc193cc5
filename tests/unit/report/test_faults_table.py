"""The report's fault table (ftqual.report.faults_table): every fault side by side, the path NVRx had to see
against the one the verifier saw, and a summary with catalog faults valid against its own schema."""

from __future__ import annotations

import jsonschema

from ftqual.report.faults_table import build_fault_table, fault_table_section
from ftqual.report.schema import SUMMARY_SCHEMA


def scenario(name, fault, detected_by, verdict="pass", **metrics):
    measured = {"detected_by": detected_by, "detection_s": 0.2, "restart_s": 2.6, **metrics}
    return {"name": name, "fault": fault, "verdict": verdict, "metrics": measured}


def test_each_fault_with_its_own_path_and_the_wrong_one_marked():
    rows = build_fault_table(
        [
            scenario("baseline", "none", None),
            scenario("segfault", "segfault", "exit", lost_iterations=5),
            scenario("gil_lock", "gil_lock", "section:step"),
            scenario("sigterm", "sigterm", "section:step", verdict="fail"),  # a timeout where an exit must be
        ]
    )
    assert [r["scenario"] for r in rows] == ["segfault", "gil_lock", "sigterm"]  # no row for the baseline
    by = {r["scenario"]: r for r in rows}
    assert by["segfault"]["expected_path"] == "exit" and by["segfault"]["path_as_expected"] is True
    assert by["gil_lock"]["expected_path"] == "timeout" and by["gil_lock"]["path_as_expected"] is True
    assert by["sigterm"]["path_as_expected"] is False
    text = "\n".join(fault_table_section(rows))
    assert (
        "| segfault | `segfault` | a segmentation fault (SIGSEGV) | exit | exit "
        "| no dump recorded | 0.20 s | 2.60 s |" in text
    )
    assert "**section:step** (not the fault's path)" in text


def test_a_lingering_exception_caught_by_the_open_section_s_timeout_is_on_its_path():
    rows = build_fault_table([scenario("exception", "exception", "section:step")])
    assert rows[0]["path_as_expected"] is True
    assert "not the fault's path" not in "\n".join(fault_table_section(rows))


def test_what_held_the_rank_is_shown_from_its_dump_or_said_missing():
    held = "main thread in multiprocessing/util.py `_exit_function` -> `BaseProcess.join`"
    rows = build_fault_table(
        [
            scenario("hang", "hang", "section:step", held_by=held, stack_dump="dumps/h.cycle0.rank1.2.json"),
            scenario("kill", "kill", "exit", held_by=None, stack_dump=None),
            scenario("old", "hang", "section:step"),
        ]
    )
    cells = [line.split(" | ")[5] for line in fault_table_section(rows)[2 : 2 + len(rows)]]
    assert cells == [
        f"{held} (`dumps/h.cycle0.rank1.2.json`)",
        "— (no dump)",
        "no dump recorded",  # nothing says why: never a guess at the run's age
    ]


def test_no_fault_scenario_says_so():
    assert fault_table_section(build_fault_table([scenario("baseline", "none", None)])) == [
        "No fault scenario ran."
    ]


def test_the_schema_takes_every_fault():
    fault_enum = SUMMARY_SCHEMA["properties"]["faults"]["items"]["properties"]["fault"]["enum"]
    scenario_enum = SUMMARY_SCHEMA["properties"]["scenarios"]["items"]["properties"]["fault"]["enum"]
    for fault in ("segfault", "gil_lock", "gpu_hang", "node_loss"):
        assert fault in fault_enum and fault in scenario_enum
    jsonschema.validate(
        {"faults": build_fault_table([scenario("abort", "abort", "exit")])},
        {"type": "object", "properties": {"faults": SUMMARY_SCHEMA["properties"]["faults"]}},
    )


def test_a_scenario_without_a_report_is_named_by_the_longest_fault_in_its_name():
    """A scenario whose verify report is missing (a run cut short) is guessed from its name: gpu_hang is a
    gpu_hang, never a SIGSTOP hang (seen in a GPU run cut by its time limit)."""
    from ftqual.report.summary import scenario_fault

    assert scenario_fault("gpu_hang", None) == "gpu_hang"
    assert scenario_fault("hang_in_save", None) == "hang"
    assert scenario_fault("kill-rank0", None) == "kill"
    assert scenario_fault("double_fault", None) == "none"
    assert scenario_fault("gpu_hang", {"fault": "gpu_hang"}) == "gpu_hang"


def test_each_injection_shows_the_section_it_held_and_the_timeout_that_fired():
    """From verify.json's detected_within_timeout values: a hang held in setup caught by the setup timeout
    reads plainly; caught by another section's timeout, in bold."""
    from ftqual.report.faults_table import held_sections

    def doc(fired: str) -> dict:
        values = {"injections": [{"injection": 1, "section": "step", "fired": "step"},
                                 {"injection": 2, "section": "setup", "fired": fired}]}  # fmt: skip
        return {"checks": [{"id": "detected_within_timeout", "values": values}]}

    held = held_sections(doc("setup"))
    assert [h["as_held"] for h in held] == [True, True]
    sc = scenario("hang_in_setup", "hang", "section:step")
    text = "\n".join(fault_table_section(build_fault_table([{**sc, "held": held}])))
    assert "#2 in setup, setup timeout fired" in text and "**#2" not in text
    wrong = held_sections(doc("step"))
    assert wrong[1]["as_held"] is False
    text = "\n".join(fault_table_section(build_fault_table([{**sc, "held": wrong}])))
    assert "**#2 in setup, step timeout fired**" in text
    assert held_sections({"checks": []}) == []
