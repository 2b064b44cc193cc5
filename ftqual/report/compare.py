"""`ftqual compare OLD NEW`: two qualifications side by side, each change judged against the spread.

`ftqual compare OLD NEW`: two qualifications side by side (two results directories or two summary.json),
for a platform team that requalifies after every upgrade: the settings that differ first (each with the
figures that follow it, ftqual.report.compare_settings), the stack parts that differ, every verdict that
changed, and the measured figures side by side, each change judged against the spread of its own repeated
measurements where there are several, then a one-line conclusion (only a change beyond its spread is
headlined; a summary against itself is `identical`). Markdown on stdout, `--json PATH`;
`--fail-on-regression PCT` exits 1 when a figure under the same settings got worse by more than PCT percent
(and not within its spread), so a platform's CI can gate an upgrade on it. Bad input: one line each, exit 2.

Figures: per scenario present in both, its verify metrics (detection, restart, checkpoint load, failure to
first step, start-up, wall time, iterations per second, saves); over every scenario, the restart phases, the
load and save rates and a save's blocked and durable time (summary.json `checkpoints`). A time is worse when
it grows, a rate when it falls. Only scenarios both sides ran are compared; a run without a model (the smoke
workload, ftqual.report.ran) has no rate to compare.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from ftqual.report import compare_settings as settings_mod
from ftqual.report.compare_settings import SettingChange
from ftqual.report.inputs import load_summary
from ftqual.report.ran import what_ran

# verify metrics compared per scenario: key -> (label, unit, higher is better)
SCENARIO_METRICS = {
    "detection_s": ("detection", "s", False),
    "restart_s": ("restart", "s", False),
    "checkpoint_load_s": ("checkpoint load", "s", False),
    "failure_to_first_step_s": ("failure to first step", "s", False),
    "time_to_first_step_s": ("start to first step", "s", False),
    "iterations_per_s": ("iterations per second", "/s", True),
    "wall_time_s": ("time to verdict (the run's wall time)", "s", False),
}
# summary.json checkpoints.by_scenario.*.restarts[] and saves[]: key -> (label, unit, higher is better)
RESTART_FIGURES = {
    "detection_s": ("restart: detection", "s", False),
    "worker_stop_s": ("restart: worker stop", "s", False),
    "gpu_reclaim_s": ("restart: GPU memory reclaim", "s", False),
    "process_start_s": ("restart: process start", "s", False),
    "init_s": ("restart: initialisation", "s", False),
    "load_s": ("restart: checkpoint load", "s", False),
    "first_step_s": ("restart: first step", "s", False),
    "load_gbps": ("load rate", "GB/s", True),
}
SAVE_FIGURES = {
    "blocked_s": ("save: training blocked", "s", False),
    "durable_s": ("save: until durable", "s", False),
    "gbps": ("save rate", "GB/s", True),
}
# A checkpoint's GB/s: shown only where both sides saved a model (the smoke workload's few bytes say nothing).
RATES = ("load_gbps", "gbps")


@dataclass(frozen=True)
class Figure:
    name: str
    unit: str
    higher_is_better: bool
    old: tuple[float, ...]
    new: tuple[float, ...]
    # the changed settings this figure depends on (`step timeout 10 -> 20 s`): it follows them, so it is
    # shown with them and never judged as a regression
    follows: tuple[str, ...] = ()

    @property
    def old_median(self) -> float:
        return statistics.median(self.old)

    @property
    def new_median(self) -> float:
        return statistics.median(self.new)

    @property
    def change(self) -> float | None:
        """The relative change of the median (0.94: +94 %); None from a zero."""
        return None if self.old_median == 0 else (self.new_median - self.old_median) / abs(self.old_median)

    @property
    def spread(self) -> float | None:
        """The larger range of the two sides' repeated measurements; None where either has one."""
        if len(self.old) < 2 or len(self.new) < 2:
            return None
        return max(max(self.old) - min(self.old), max(self.new) - min(self.new))

    @property
    def judged(self) -> str:
        """`within spread`, `beyond spread` or `single measurement` (a change not judged against a spread)."""
        if self.spread is None:
            return "single measurement"
        return "beyond spread" if abs(self.new_median - self.old_median) > self.spread else "within spread"

    @property
    def worse(self) -> bool:
        delta = self.new_median - self.old_median
        return delta < 0 if self.higher_is_better else delta > 0

    def regression(self, pct: float) -> bool:
        """Worse by more than `pct` percent, not within the spread of its repeated measurements, and under
        the same settings (a figure that follows a changed setting is that setting's, not a regression)."""
        return (
            not self.follows and self.worse and self.change is not None and abs(self.change) * 100 > pct
            and self.judged != "within spread"
        )  # fmt: skip

    def said(self) -> str:
        """`hang: detection 11.2 s -> 20.3 s`"""
        return f"{self.name} {_value(self.old_median, self.unit)} -> {_value(self.new_median, self.unit)}"


def _numbers(values: Iterable[object]) -> tuple[float, ...]:
    return tuple(float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool))


def _scenarios(summary: Mapping) -> dict[str, Mapping]:
    return {sc.get("name"): sc for sc in summary.get("scenarios") or [] if isinstance(sc, Mapping)}


def _pooled(summary: Mapping, part: str, key: str, names: set[str]) -> tuple[float, ...]:
    """`key` of every save or restart of the scenarios `names` (those both sides ran: a kill's restart is
    never compared with a hang's)."""
    by_scenario = (summary.get("checkpoints") or {}).get("by_scenario") or {}
    return _numbers(
        item.get(key)
        for name, entry in by_scenario.items()
        if name in names and isinstance(entry, Mapping)
        for item in entry.get(part) or []
        if isinstance(item, Mapping)
    )


def figures(old: Mapping, new: Mapping, changed: list[SettingChange] | None = None) -> list[Figure]:
    """Every figure both sides measured, each with the changed settings it follows (`changed`)."""
    changed = changed or []
    out: list[Figure] = []
    old_sc, new_sc = _scenarios(old), _scenarios(new)
    for name in [n for n in old_sc if n in new_sc]:
        a, b = old_sc[name].get("metrics") or {}, new_sc[name].get("metrics") or {}
        paths = (a.get("detected_by"), b.get("detected_by"))
        for key, (label, unit, up) in SCENARIO_METRICS.items():
            x, y = _numbers([a.get(key)]), _numbers([b.get(key)])
            if x and y:
                why = settings_mod.follows(changed, settings_mod.depends_on(key, paths), {name})
                out.append(Figure(f"{name}: {label}", unit, up, x, y, why))
        saves = [_numbers(s.get("save_s") for s in m.get("checkpoint_saves") or []) for m in (a, b)]
        if saves[0] and saves[1]:
            why = settings_mod.follows(changed, settings_mod.depends_on("save_s"), {name})
            out.append(Figure(f"{name}: save (start to completed)", "s", False, saves[0], saves[1], why))
    no_model = what_ran(old).no_model or what_ran(new).no_model
    common = set(old_sc) & set(new_sc)
    # the scenarios' detection paths (a baseline detects nothing; none recorded: every timeout, below)
    pooled_paths = tuple(
        path
        for side in (old_sc, new_sc)
        for name in common
        if (path := (side[name].get("metrics") or {}).get("detected_by")) is not None
    )
    for part, table in (("restarts", RESTART_FIGURES), ("saves", SAVE_FIGURES)):
        for key, (label, unit, up) in table.items():
            if no_model and key in RATES:
                continue
            x, y = _pooled(old, part, key, common), _pooled(new, part, key, common)
            if x and y:
                depends = settings_mod.pooled_depends_on(key, pooled_paths)
                why = settings_mod.follows(changed, depends, common)
                out.append(Figure(label, unit, up, x, y, why))
    return out


def stack_changes(old: Mapping, new: Mapping) -> list[str]:
    """`<label> <old> -> <new>` for each part of the stack identity that differs."""
    a = (old.get("stack_identity") or {}).get("parts") or {}
    b = (new.get("stack_identity") or {}).get("parts") or {}
    labels = {**((old.get("stack_identity") or {}).get("labels") or {}),
              **((new.get("stack_identity") or {}).get("labels") or {})}  # fmt: skip
    return [
        f"{labels.get(k, k)} {a.get(k, 'absent')} -> {b.get(k, 'absent')}"
        for k in sorted({*a, *b}, key=lambda k: list({**a, **b}).index(k))
        if a.get(k) != b.get(k) and k != "host"
    ]


def verdict_changes(old: Mapping, new: Mapping) -> list[str]:
    a, b = _scenarios(old), _scenarios(new)
    out = []
    if old.get("verdict") != new.get("verdict"):
        out.append(f"overall: {old.get('verdict')} -> {new.get('verdict')}")
    for name in [*a, *[n for n in b if n not in a]]:
        va = (a.get(name) or {}).get("verdict", "not run")
        vb = (b.get(name) or {}).get("verdict", "not run")
        if va != vb:
            out.append(f"{name}: {va} -> {vb}")
    return out


def _exact_line(scenario: Mapping | None) -> str | None:
    exact = ((scenario or {}).get("replay") or {}).get("exact")
    return str(exact.get("line")) if isinstance(exact, Mapping) and exact.get("line") else None


def exact_recovery(old: Mapping, new: Mapping) -> list[dict]:
    """Each scenario's "Exact recovery" line on both sides, where either side ran `replay: exact`."""
    a, b = _scenarios(old), _scenarios(new)
    out = []
    for name in [*a, *[n for n in b if n not in a]]:
        x, y = _exact_line(a.get(name)), _exact_line(b.get(name))
        if x is not None or y is not None:
            out.append({"scenario": name, "old": x, "new": y, "same": x == y})
    return out


def _value(v: float, unit: str) -> str:
    return f"{v:.3g} {unit}" if unit != "/s" else f"{v:.3g}/s"


def _first(items: list[str], none: str) -> str:
    return "; ".join(items[:2]) + (f" (+{len(items) - 2} more)" if len(items) > 2 else "") or none


def conclusion(
    stack: list[str], verdicts: list[str], figs: list[Figure], changed: list[SettingChange] | None = None
) -> str:
    """The settings that differ, then the stack, then the largest change beyond its spread among the figures
    under the same settings (one measurement a side, or a change within the spread, is never headlined)."""
    settings = _first([c.text for c in changed or []], "same settings")
    what = f"{settings}; {_first(stack, 'same stack')}"
    judged = [f for f in figs if f.change is not None and f.judged == "beyond spread" and not f.follows]
    biggest = max(judged, key=lambda f: abs(f.change or 0), default=None)
    moved = "no figure measured on both sides" if not figs else "no change beyond its spread"
    if biggest is not None:
        moved = f"{biggest.said()} ({(biggest.change or 0) * 100:+.0f} %)"
    said = "every verdict unchanged" if not verdicts else f"verdicts changed: {', '.join(verdicts)}"
    return f"{what}: {moved}, {said}"


def _fingerprints(old: Mapping, new: Mapping, changed: list[SettingChange]) -> list[str]:
    """Scenarios whose settings fingerprint (the workflow's digest of the scenario's config) differs while
    no recorded setting does: said, not attributed (a new ftqual version may fingerprint the same settings
    differently, which must not silence the gate)."""
    out = []
    a, b = _scenarios(old), _scenarios(new)
    explained = {name for c in changed for name in c.scenarios}
    for name in [n for n in a if n in b and n not in explained]:
        x = (a[name].get("attempt") or {}).get("settings_fingerprint")
        y = (b[name].get("attempt") or {}).get("settings_fingerprint")
        if x and y and x != y:
            out.append(f"{name}: settings fingerprint {x} -> {y} (a setting the summary does not record)")
    return out


def compare(old: Mapping, new: Mapping, fail_on: float | None = None) -> dict:
    identical = old == new  # a folder against itself, or a copy of it
    changed, one_side = settings_mod.changes(old, new)
    figs = figures(old, new, changed)
    stack = stack_changes(old, new)
    verdicts = verdict_changes(old, new)
    regressions = [f.name for f in figs if fail_on is not None and f.regression(fail_on)]
    return {
        "identical": identical,
        "setting_changes": [{**asdict(c), "text": c.text} for c in changed],
        "settings_one_side": one_side,
        "settings_fingerprints": _fingerprints(old, new, changed),
        "stack_changes": stack,
        "verdict_changes": verdicts,
        "exact_recovery": exact_recovery(old, new),
        "figures": [
            {
                **asdict(f),
                "old_median": f.old_median,
                "new_median": f.new_median,
                "change": f.change,
                "spread": f.spread,
                "judged": f.judged,
                "worse": f.worse,
            }
            for f in figs
        ],  # fmt: skip
        "regressions": regressions,
        "fail_on_regression_pct": fail_on,
        "conclusion": (
            "identical: the same qualification on both sides"
            if identical
            else conclusion(stack, verdicts, figs, changed)
        ),
    }


def markdown(doc: Mapping, old_name: str, new_name: str) -> str:
    lines = [f"# ftqual compare: {doc['conclusion']}", "", f"Old: `{old_name}`  ", f"New: `{new_name}`", ""]
    lines += ["## Settings", "", *settings_lines(doc), ""]
    lines += ["## Stack", ""] + ([f"- {c}" for c in doc["stack_changes"]] or ["The same stack."]) + [""]
    lines += ["## Verdicts", ""] + (
        [f"- {c}" for c in doc["verdict_changes"]] or ["Every verdict unchanged."]
    )
    if doc.get("exact_recovery"):
        lines += ["", "## Exact recovery", ""]
        for row in doc["exact_recovery"]:
            old, new = row["old"] or "not run exact", row["new"] or "not run exact"
            lines.append(
                f"- {row['scenario']}: {new}" if row["same"] else f"- {row['scenario']}: {old} -> {new}"
            )
    lines += [
        "",
        "## Figures",
        "",
        "| figure | old | new | change | n | judged | follows |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in doc["figures"]:
        change = "—" if f["change"] is None else f"{f['change'] * 100:+.1f} %"
        mark = " **worse**" if f["worse"] and f["name"] in doc["regressions"] else ""
        lines.append(
            f"| {f['name']} | {_value(f['old_median'], f['unit'])} | {_value(f['new_median'], f['unit'])} | "
            f"{change}{mark} | {len(f['old'])} / {len(f['new'])} | {f['judged']} | "
            f"{', '.join(f['follows']) or '—'} |"
        )
    lines += [
        "",
        "judged: a change beyond the spread of both sides' repeated measurements, within it, or a single "
        "measurement (not judged against a spread); only a change beyond its spread is headlined. follows: "
        "the changed setting a figure depends on; such a figure is never a regression.",
    ]
    if doc["fail_on_regression_pct"] is not None:
        pct = doc["fail_on_regression_pct"]
        lines += ["", f"Regressions beyond {pct:g} %: " + (", ".join(doc["regressions"]) or "none") + "."]
    return "\n".join(lines) + "\n"


def settings_lines(doc: Mapping) -> list[str]:
    """The settings that differ, each with the figures that follow it and moved; what only one side
    records."""
    changed = doc["setting_changes"]
    out = [f"- {c['text']}" for c in changed] or ["The same settings."]
    for c in changed:
        moved = [
            f for f in doc["figures"] if c["text"] in f["follows"] and f["old_median"] != f["new_median"]
        ]
        out += [
            f"  - {f['name']} {_value(f['old_median'], f['unit'])} -> {_value(f['new_median'], f['unit'])}: "
            f"follows {c['text']}"
            for f in moved
        ]
    if doc["settings_one_side"]:
        out.append(f"- recorded on one side only (not compared): {', '.join(doc['settings_one_side'])}")
    out += [f"- {line}" for line in doc["settings_fingerprints"]]
    return out


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2
        raise ValueError(message)


def main(argv: list[str] | None = None) -> int:
    p = _Parser(prog="ftqual compare", description=__doc__.split("\n\n")[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--json", help="write the comparison here as JSON")
    p.add_argument("--fail-on-regression", type=float, metavar="PCT")
    try:
        args = p.parse_args(argv)
    except ValueError as exc:
        print(f"ftqual compare: {exc}", file=sys.stderr)
        return 2
    problems = []
    if args.fail_on_regression is not None and not 0 <= args.fail_on_regression <= 1000:
        problems.append(
            f"--fail-on-regression must be a percentage from 0 to 1000 (got {args.fail_on_regression:g})"
        )
    missing = "{target} does not exist: give a results directory or its summary.json"
    old, old_problem = load_summary(args.old, missing)
    new, new_problem = load_summary(args.new, missing)
    problems += [p for p in (old_problem, new_problem) if p]
    if problems or old is None or new is None:
        for line in problems:
            print(f"ftqual compare: {line}", file=sys.stderr)
        return 2
    doc = compare(old, new, args.fail_on_regression)
    print(markdown(doc, args.old, args.new), end="")
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    return 1 if doc["regressions"] else 0
