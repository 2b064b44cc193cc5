"""The fault table: every fault scenario that ran, side by side (pure).

The fault table of the report: every fault scenario that ran, side by side (pure). Per fault: what it did
to the rank, the path by which NVRx had to learn of it (the rank's exit, a section timeout of a rank that
lives on, a surviving node's report), the path the verifier saw, what held the rank (its stack dump: a
hung, GIL-locked or lingering rank), detection, restart, failure to the first step after, lost iterations,
and the scenario's verdict; all from the verify reports' metrics, nothing measured again."""

from __future__ import annotations

from ftqual.contract import FAULT_ACTIONS, detection_path, detection_paths, family_of

COLUMNS = ("detection_s", "restart_s", "failure_to_first_step_s", "lost_iterations")


def _seen_path(detected_by: object) -> str | None:
    """The verifier's `detected_by` said as a path: `exit`, `timeout` (`section:<name>`, `out_of_section`)."""
    if not isinstance(detected_by, str) or not detected_by:
        return None
    if detected_by == "exit":
        return "exit"
    if detected_by.startswith("section:") or detected_by == "out_of_section":
        return "timeout"
    return detected_by


BOUND_CHECK = "detected_within_timeout"


def held_sections(doc: dict) -> list[dict]:
    """Per injection of a live fault, from verify.json's detected_within_timeout values: the section the
    rank held (the marker's placed section; with placement immediate, the fired one), the timeout that fired,
    and whether they agree (a peer's timeout catching it first disagrees: failure_detected_and_restarted
    says whose)."""
    check = next(
        (c for c in doc.get("checks") or [] if isinstance(c, dict) and c.get("id") == BOUND_CHECK), {}
    )
    values = check.get("values") if isinstance(check.get("values"), dict) else {}
    items = values.get("injections") if isinstance(values.get("injections"), list) else [values]
    out = []
    for number, item in enumerate(items, start=1):
        if not isinstance(item, dict) or not item.get("section") or not item.get("fired"):
            continue
        out.append(
            {
                "injection": item.get("injection", number),
                "held": item["section"],
                "fired": item["fired"],
                "as_held": item["section"] == item["fired"],
            }
        )
    return out


def _row(scenario: str, fault: str, measured: dict, verdict: str, run_state: str | None = None) -> dict:
    expected, seen = detection_path(fault), _seen_path(measured.get("detected_by"))
    row = {
        "scenario": scenario,
        "fault": fault,
        "action": FAULT_ACTIONS.get(fault, fault),
        "expected_path": expected,
        "detected_by": measured.get("detected_by"),
        # an exception's or SIGINT's lingering rank may be caught by the open section's timeout too
        "path_as_expected": None
        if seen is None or expected in (None, "node")
        else seen in detection_paths(fault),
        "verdict": verdict,
    }
    row.update({key: measured.get(key) for key in COLUMNS})
    # what held the rank: the dump's line; None with `dumped` False where the report records no dumps (why:
    # the scenario's run_state, ftqual.report.summary.run_state)
    row.update(held_by=measured.get("held_by"), stack_dump=measured.get("stack_dump"))
    row["dumped"] = "stack_dump" in measured
    row["run_state"] = run_state
    return row


def build_fault_table(scenarios: list[dict], campaigns: dict[str, dict] | None = None) -> list[dict]:
    """One row per fault scenario of the summary, in the summary's order; a campaign with a usable report
    gives one row per fault (`<scenario> #<k>`, from its cycle row, with the fault's own verdict), since its
    scenario-level metrics are only its first fault's."""
    rows = []
    for sc in scenarios:
        fault = sc.get("fault")
        if family_of(fault) == "none" or fault is None:
            continue
        entry = (campaigns or {}).get(sc["name"])
        campaign = family_of(fault) == "campaign"
        if campaign and entry is not None:
            cycles = {r["fault_index"]: r for r in entry["cycles"]}
            for f in entry["faults"]:
                kind = f["fault"] if f["fault"] in FAULT_ACTIONS else fault
                measured = cycles.get(f["fault_index"], {})
                name = f"{sc['name']} #{f['fault_index']}"
                rows.append(_row(name, kind, measured, f["verdict"], sc.get("run_state")))
            continue
        measured = {} if campaign else (sc.get("metrics") or {})  # no campaign part: no figures
        row = _row(sc["name"], fault, measured, sc["verdict"], sc.get("run_state"))
        if sc.get("held"):
            row["held"] = sc["held"]
        rows.append(row)
    return rows


def _cell(value: object, unit: str = " s") -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.2f}{unit}"
    return f"{value}{unit if unit != ' s' else ''}"


# Where the report records no dump, why, as far as the verify report tells (its run_state); otherwise the
# neutral fact: nothing says the run is older than the rank sentinels.
NO_DUMP_CELL = {
    "not applicable": "— (not applicable on this stack)",
    "not launched": "— (not launched)",
    "no verify report": "— (no verify report)",
    "not verified": "— (run not verified)",
}
NO_DUMP_RECORDED = "no dump recorded"


def _held_by_cell(r: dict) -> str:
    """The dump's line and file; where there is none, why (not launched, no report, none recorded, or the
    dumps show nothing that held the rank)."""
    if r.get("held_by"):
        return f"{r['held_by']} (`{r['stack_dump']}`)".replace("|", "\\|")
    if not r.get("dumped"):
        return NO_DUMP_CELL.get(r.get("run_state") or "", NO_DUMP_RECORDED)
    return "— (no dump)"


def _held_cell(h: dict) -> str:
    """`; #2 in setup, setup timeout fired`; another section's timeout in bold."""
    text = f"#{h['injection']} in {h['held']}, {h['fired']} timeout fired"
    return f"; {text}" if h["as_held"] else f"; **{text}**"


# The three times, each defined once. The Goodput table's t_recover runs from detection to the first step, a
# longer span than ft_launcher's restart (detection to the new cycle) shown here: the column says its span,
# never "restart" alone.
TIMES_DEFINED = (
    "detection: the fault to NVRx's detection; detected → new cycle: detection to the start of the "
    "replacement cycle (ft_launcher's restart: the old workers stopped, the rendezvous, the new ones "
    "launched); failure to first step: the fault to the first step after the restore (detection, the new "
    "cycle, start-up and checkpoint load)."
)


def fault_table_section(rows: list[dict]) -> list[str]:
    """The table in Markdown; a path that is not the fault's own is marked (its check fails the scenario).
    The line after the table defines its three times."""
    if not rows:
        return ["No fault scenario ran."]
    out = [
        "| scenario | fault | what it does | NVRx must see | seen | held by | detection "
        "| detected → new cycle | failure to first step | lost iterations | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        seen = r["detected_by"] or "—"
        if r["path_as_expected"] is False:
            seen = f"**{seen}** (not the fault's path)"
        seen += "".join(_held_cell(h) for h in r.get("held") or [])
        out.append(
            f"| {r['scenario']} | `{r['fault']}` | {r['action']} | {r['expected_path'] or '—'} | {seen} | "
            f"{_held_by_cell(r)} | "
            f"{_cell(r['detection_s'])} | {_cell(r['restart_s'])} | {_cell(r['failure_to_first_step_s'])} | "
            f"{_cell(r['lost_iterations'], '')} | {r['verdict'].replace('_', ' ').upper()} |"
        )
    return [*out, "", TIMES_DEFINED]
