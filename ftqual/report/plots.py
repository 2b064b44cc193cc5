"""The report's figures (matplotlib, Agg backend; the only module that imports matplotlib).

`timeline_figure_data` and `loss_series` are pure; `render_*` draw and save one PNG each (about 1200x600 px).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ftqual.report.at_scale import campaign_check
from ftqual.report.timeline import Timeline, build_timeline, recovery_marks

FIGSIZE = (12, 6)
DPI = 100
MARK_STYLE = {  # kind -> (label, colour, line style)
    "injection": ("fault injected", "#d62728", "-"),
    "detection": ("failure detected", "#ff7f0e", "--"),
    "restart": ("restart (new cycle)", "#2ca02c", "-."),
    "first_step": ("first committed step", "#1f77b4", ":"),
}
PHASES = (  # (from mark, to mark, label, colour) shaded between the markers
    ("injection", "detection", "detection", "#d62728"),
    ("detection", "restart", "teardown + rendezvous", "#ff7f0e"),
    ("restart", "first_step", "startup + checkpoint load", "#1f77b4"),
)
CYCLE_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")
SCENARIO_COLOURS = {"baseline": "#222222", "kill": "#d62728", "hang": "#1f77b4"}
OTHER_COLOURS = ("#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf")
CYCLE_STYLES = ("-", "--", ":", "-.")


@dataclass(frozen=True)
class LossSeries:
    label: str
    scenario: str
    cycle: int
    iterations: tuple[int, ...]
    losses: tuple[float, ...]


def loss_series(docs: dict[str, dict | None]) -> list[LossSeries]:
    """One series per scenario and cycle: (iteration, loss) in iteration order."""
    out = []
    for name, doc in docs.items():
        tl = build_timeline(doc)
        for cycle in tl.cycles():
            pts = sorted((p.iteration, p.loss) for p in tl.points if p.cycle == cycle and p.loss is not None)
            if pts:
                label = name if len(tl.cycles()) == 1 else f"{name}, cycle {cycle}"
                out.append(LossSeries(label, name, cycle, tuple(i for i, _ in pts), tuple(v for _, v in pts)))
    return out


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def render_placeholder(path: Path, title: str, message: str) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    ax.set_axis_off()
    ax.set_title(title, fontsize=14)
    ax.text(
        0.5,
        0.5,
        message,
        ha="center",
        va="center",
        fontsize=13,
        wrap=True,
        bbox={"boxstyle": "round", "facecolor": "#fff3cd", "edgecolor": "#d4a017"},
    )
    _save(fig, path)


SUB_PHASES = {  # a phase split in two by the verifier's measurement of its first part
    "teardown + rendezvous": (
        "teardown_s",
        "teardown: workers exit",
        "GPU-memory check + rendezvous",
        "#ffbb78",
    ),
}


def recovery_spans(marks: dict, metrics: dict) -> list[tuple[float, float, str, str]]:
    """(start, end, label, colour) of each part of the recovery: detection, then teardown and the GPU-memory
    check with the rendezvous, then the replacement's start-up and its checkpoint load, as far as measured."""
    spans = []
    for start, end, label, colour in PHASES:
        if start not in marks or end not in marks or marks[end].s <= marks[start].s:
            continue
        begin, finish = marks[start].s, marks[end].s
        split = SUB_PHASES.get(label)
        first = metrics.get(split[0]) if split else None
        if split and isinstance(first, int | float) and 0 < first < finish - begin:
            spans.append((begin, begin + first, split[1], colour))
            spans.append((begin + first, finish, split[2], split[3]))
        else:
            load = metrics.get("checkpoint_load_s")
            if label.startswith("startup") and isinstance(load, int | float):
                label = f"worker start-up, of which checkpoint load {load:.2f} s,"
            spans.append((begin, finish, label, colour))
    return spans


def render_timeline(doc: dict | None, path: Path, scenario: str, verdict: str) -> None:
    """Committed iterations over wall time, one colour per cycle, with the recovery's markers."""
    tl: Timeline = build_timeline(doc)
    title = f"{scenario}: {verdict.upper()}"
    if not tl.points:
        render_placeholder(path, f"Recovery timeline — {title}", "No timeline in the verify report.")
        return
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    for idx, cycle in enumerate(tl.cycles()):
        pts = [p for p in tl.points if p.cycle == cycle]
        colour = CYCLE_COLOURS[idx % len(CYCLE_COLOURS)]
        ax.plot(
            [p.s for p in pts],
            [p.iteration for p in pts],
            marker="o",
            markersize=3.5,
            linewidth=1.4,
            color=colour,
            label=f"cycle {cycle}: iterations {pts[0].iteration}–{pts[-1].iteration}",
        )
    saved = [
        m for m in tl.marks if m.kind == "checkpoint_saved" and m.s is not None and m.iteration is not None
    ]
    if saved:
        ax.scatter(
            [m.s for m in saved],
            [m.iteration for m in saved],
            marker="*",
            s=170,
            color="#f2b701",
            edgecolors="black",
            linewidths=0.6,
            zorder=5,
            label="checkpoint completed",
        )
    marks = recovery_marks(tl)
    for begin, end, label, colour in recovery_spans(marks, (doc or {}).get("metrics") or {}):
        ax.axvspan(begin, end, color=colour, alpha=0.10, label=f"{label} ({end - begin:.1f} s)")
    first_points = [p for p in tl.points if p.cycle == tl.cycles()[0]]
    if first_points and first_points[0].s > 0:
        ax.axvspan(
            0,
            first_points[0].s,
            color="#7f7f7f",
            alpha=0.08,
            label=f"initial startup ({first_points[0].s:.1f} s)",
        )
    top = max(p.iteration for p in tl.points)
    x_max = max([p.s for p in tl.points] + [m.s for m in marks.values()])
    heights = (0.97, 0.85, 0.73, 0.61)
    for (kind, mark), height in zip(((k, marks[k]) for k in MARK_STYLE if k in marks), heights, strict=False):
        label, colour, style = MARK_STYLE[kind]
        ax.axvline(mark.s, color=colour, linestyle=style, linewidth=1.8)
        text = f"{label}\n{mark.s:.1f} s"
        if kind == "first_step" and mark.iteration is not None:
            text += f", iteration {mark.iteration}"
        ax.annotate(
            text,
            xy=(mark.s, height),
            xycoords=("data", "axes fraction"),
            xytext=(6, 0) if mark.s < 0.7 * x_max else (-6, 0),
            textcoords="offset points",
            ha="left" if mark.s < 0.7 * x_max else "right",
            va="top",
            fontsize=9,
            color=colour,
            bbox={"boxstyle": "round,pad=0.25", "facecolor": "white", "edgecolor": colour, "alpha": 0.9},
        )
    if "injection" in marks and "first_step" in marks:
        lost = marks["first_step"].s - marks["injection"].s
        ax.annotate(
            f"fault → first committed step: {lost:.1f} s",
            xy=(0.01, 0.02),
            xycoords="axes fraction",
            fontsize=10,
            fontweight="bold",
            color="#333333",
        )
    ax.set_ylim(0, top * 1.08 + 1)
    ax.set_xlim(left=min(0.0, min(p.s for p in tl.points)))
    ax.set_xlabel("seconds since run start")
    ax.set_ylabel("committed iteration")
    run_id = (doc or {}).get("run_id")
    ax.set_title(
        f"Recovery timeline — {title}" + (f"  (run {run_id})" if run_id else ""),
        fontsize=14,
        color={"pass": "#1a7f37", "fail": "#cf222e"}.get(verdict, "#9a6700"),
    )
    ax.grid(True, alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9, frameon=False)
    _save(fig, path)


CAMPAIGN_SPANS = (  # (from, to, label, colour) of each fault's row in the campaign plot
    ("injected_s", "detected_s", "detection", "#d62728"),
    ("detected_s", "restarted_s", "teardown + rendezvous", "#ff7f0e"),
    ("restarted_s", "resumed_s", "start-up + load to the first step", "#1f77b4"),
)
VERDICT_COLOURS = {"pass": "#1a7f37", "fail": "#cf222e"}


def render_campaign(entry: dict, path: Path, scenario: str, verdict: str) -> None:
    """Every fault of a campaign on one time axis: a row per fault, its detection, restart and resume as
    spans, the row's label in its verdict's colour."""
    timeline = entry["timeline"]
    if not timeline:
        render_placeholder(path, f"Campaign — {scenario}: {verdict.upper()}", "No fault was injected.")
        return
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    seen = set()
    for y, t in enumerate(timeline):
        for start, end, label, colour in CAMPAIGN_SPANS:
            if t[start] is None or t[end] is None or t[end] < t[start]:
                continue
            ax.barh(y, t[end] - t[start], left=t[start], height=0.6, color=colour,
                    label=None if label in seen else label)  # fmt: skip
            seen.add(label)
        if t["injected_s"] is not None:
            ax.plot(t["injected_s"], y, marker="x", color="black", markersize=7)
    verdicts = {f["fault_index"]: f["verdict"] for f in entry["faults"]}
    ax.set_yticks(range(len(timeline)))
    labels = ax.set_yticklabels([f"{t['fault_index']}: {t['fault']} rank {t['rank']}" for t in timeline])
    for label, t in zip(labels, timeline, strict=True):
        label.set_color(VERDICT_COLOURS.get(verdicts.get(t["fault_index"]), "#9a6700"))
    ax.invert_yaxis()
    good = entry["goodput"]
    note = "goodput not measured"
    if good["measured"] is not None:
        note = f"goodput measured {good['measured']:.1%}"
    check = campaign_check(good)  # the report's one goodput model on the campaign's own means
    if check is not None:
        note += f", goodput model {check.modelled:.1%}"
    ax.set_xlabel(f"seconds since the first fault ({note})")
    ax.set_title(
        f"Campaign — {scenario}: {verdict.upper()}  (seed {entry['seed']}, {entry['injected']} faults)",
        fontsize=14,
        color=VERDICT_COLOURS.get(verdict, "#9a6700"),
    )
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(loc="upper right", fontsize=9)  # the faults march down to the right: that corner is free
    _save(fig, path)


def render_losses(series: list[LossSeries], path: Path, baseline: str | None = None) -> None:
    """Loss by iteration, one line per scenario and cycle; below it, each series minus the baseline.

    The baseline is drawn as a wide grey band under the others, so series that agree with it stay visible.
    """
    if not series:
        render_placeholder(path, "Loss by iteration", "No losses in the verify reports.")
        return
    plt = _pyplot()
    base = next((s for s in series if s.scenario == baseline), None)
    if base is None:
        fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
        diff_ax = None
    else:
        fig, (ax, diff_ax) = plt.subplots(
            2, 1, figsize=FIGSIZE, dpi=DPI, sharex=True, gridspec_kw={"height_ratios": [3, 1.3]}
        )
    others = iter(OTHER_COLOURS * 4)
    colours: dict[str, str] = {}
    base_loss = dict(zip(base.iterations, base.losses, strict=True)) if base else {}
    order = list(dict.fromkeys(s.scenario for s in series if s is not base))  # loss_style tells them apart
    for s in series:
        if s is base:
            ax.plot(
                s.iterations,
                s.losses,
                color="#7f7f7f",
                linewidth=7,
                alpha=0.35,
                solid_capstyle="round",
                label=s.label if s.label == "baseline" else f"{s.label} (baseline)",
                zorder=1,
            )
            continue
        if s.scenario not in colours:
            colours[s.scenario] = SCENARIO_COLOURS.get(s.scenario) or next(others)
        style = {**loss_style(order.index(s.scenario), len(order), s.cycle), "color": colours[s.scenario]}
        ax.plot(s.iterations, s.losses, label=s.label, zorder=2, **style)
        if diff_ax is not None:
            pts = [
                (i, v - base_loss[i]) for i, v in zip(s.iterations, s.losses, strict=True) if i in base_loss
            ]
            if pts:
                diff_ax.plot([i for i, _ in pts], [d for _, d in pts], **style)
    ax.set_ylabel("lm loss")
    ax.set_title("Loss by iteration: baseline and fault scenarios, per cycle", fontsize=14)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9, frameon=False)
    if diff_ax is not None:
        diff_ax.axhline(0, color="#7f7f7f", linewidth=1)
        diff_ax.set_ylabel("minus baseline")
        diff_ax.grid(True, alpha=0.3)
        diff_ax.set_xlabel("iteration")
    else:
        ax.set_xlabel("iteration")
    _save(fig, path)


def _save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


PHASE_COLOURS = ("#d62728", "#ff7f0e", "#bcbd22", "#9467bd", "#8c564b", "#1f77b4", "#2ca02c")


def render_checkpoints(section: dict, path: Path) -> None:
    """Left: one stacked bar per restart of its measured phases (a missing phase adds nothing); right: every
    save's and load's GB/s with the storage floor's write and read lines."""
    from ftqual.report.checkpoints import PHASES

    plt = _pyplot()
    fig, (bars, rates) = plt.subplots(1, 2, figsize=FIGSIZE, dpi=DPI)
    labels, save_points, load_points, sizes = [], [], [], []
    for name, entry in (section.get("by_scenario") or {}).items():
        for r in entry.get("restarts") or []:
            x = len(labels)
            labels.append(f"{name}\ncycle {r.get('cycle')}")
            bottom = 0.0
            for (key, label), colour in zip(PHASES, PHASE_COLOURS, strict=True):
                value = r.get(key)
                if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
                    bars.bar(x, value, bottom=bottom, color=colour, label=label if x == 0 else None)
                    bottom += value
            if isinstance(r.get("load_gbps"), int | float):
                load_points.append((f"{name} c{r.get('cycle')}", r["load_gbps"]))
        for s in entry.get("saves") or []:
            if isinstance(s.get("bytes"), int | float):
                sizes.append(s["bytes"])
            if isinstance(s.get("gbps"), int | float):
                save_points.append((f"{name} {s.get('iteration')}", s["gbps"]))
    if labels:
        bars.set_xticks(range(len(labels)), labels)
        bars.legend(fontsize=8)
    else:
        bars.text(0.5, 0.5, "no restart", ha="center", va="center", transform=bars.transAxes)
    bars.set_ylabel("seconds")
    bars.set_title("Restart phases")
    points = [*save_points, *load_points]
    note = too_small_to_rate(sizes)
    if note is not None:  # a rate over a few kB measures the calls, not the storage: say so, plot no ~0 GB/s
        rates.text(0.5, 0.5, note, ha="center", va="center", transform=rates.transAxes)
        rates.set_title("Save and load rate against the storage floor")
        fig.tight_layout()
        _save(fig, path)
        return
    rates.scatter(range(len(save_points)), [v for _, v in save_points], color="#1f77b4", label="save")
    rates.scatter(
        range(len(save_points), len(points)), [v for _, v in load_points], color="#2ca02c", label="load"
    )
    floor = section.get("floor") or {}
    for key, label, colour in (
        ("write_gbps", "write floor", "#1f77b4"),
        ("read_gbps", "read floor", "#2ca02c"),
    ):
        if isinstance(floor.get(key), int | float):
            rates.axhline(floor[key], color=colour, linestyle="--", label=label)
    if points:
        rates.set_xticks(range(len(points)), [p for p, _ in points], rotation=60, fontsize=7)
    else:
        rates.text(
            0.5, 0.5, "no save or load of known size", ha="center", va="center", transform=rates.transAxes
        )
    rates.set_ylabel("GB/s")
    rates.set_title("Save and load rate against the storage floor")
    rates.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)


RATE_MIN_BYTES = 1 << 20  # below this, a save's rate is its system calls' rate, not the storage's


def too_small_to_rate(sizes: list[float]) -> str | None:
    """Why the rates panel draws no rate: every save was too small to measure the storage (None: it draws)."""
    if not sizes or max(sizes) >= RATE_MIN_BYTES:
        return None
    return (
        f"saves of at most {max(sizes) / 1e3:.0f} kB: too small to rate the storage\n"
        "(the smoke workload writes no model; checkpoint_payload_mb sizes its saves)"
    )


def loss_style(k: int, count: int, cycle: int) -> dict:
    """Series that coincide (replayed runs train the same losses) told apart: each scenario its own marker,
    its markers offset from the others', and the earlier drawn, the wider its line underneath."""
    markers = ("o", "s", "^", "D", "v", "P", "X", "*")
    return dict(
        linestyle=CYCLE_STYLES[cycle % len(CYCLE_STYLES)],
        marker=markers[k % len(markers)] if cycle == 0 else "x",
        markersize=5 if cycle == 0 else 6,
        markevery=(k % count, count),
        linewidth=1.5 + 2.0 * (count - 1 - k),
        alpha=0.8,
    )


def render_at_scale(doc: dict, path: Path) -> None:
    """Left: the expected goodput against the GPUs, as configured and at Young/Daly's save interval; right:
    what each knob buys, in goodput points (summary.json `at_scale`). Without a projection, why not."""
    if not doc or doc.get("problems"):
        why = "; ".join(doc.get("problems") or []) if doc else "no projection"
        render_placeholder(path, "At your scale — no projection", why)
        return
    plt = _pyplot()
    fig, (lines, knobs) = plt.subplots(1, 2, figsize=FIGSIZE, dpi=DPI)
    rows = doc.get("by_gpus") or []
    gpus = [row["gpus"] for row in rows]
    lines.plot(gpus, [100 * row["configured"] for row in rows], marker="o", label="as configured")
    lines.plot(
        gpus, [100 * row["best"] for row in rows], marker="s", linestyle="--", label="Young/Daly interval"
    )
    lines.set_xscale("log", base=2)
    lines.set_xlabel("GPUs")
    lines.set_ylabel(f"expected goodput over {doc['days']:g} days (%)")
    lines.set_title("Goodput at scale")
    lines.legend(fontsize=8)
    entries = [k for k in doc.get("knobs") or [] if k["name"] != "as configured"]
    labels = [f"{k['name']}: {k['setting']}"[:60] for k in entries]
    gains = [100 * k["gain"] for k in entries]
    knobs.barh(range(len(entries)), gains, color=["#2ca02c" if g >= 0 else "#d62728" for g in gains])
    knobs.set_yticks(range(len(entries)), labels, fontsize=8)
    knobs.axvline(0, color="black", linewidth=0.8)
    knobs.set_xlabel(f"goodput points at {doc['gpus']:,} GPUs, against the configured settings")
    knobs.set_title("What each knob buys")
    fig.tight_layout()
    _save(fig, path)
