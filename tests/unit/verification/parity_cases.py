"""The recorded runs the parity test verifies, and how (with the sibling baseline as --baseline where there
is one): every run directory under tests/data (the repository holds every recorded run), named by its path."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
ROOTS = (REPO / "tests" / "data",)
RECORDED = Path(__file__).resolve().parent / "parity"
VOLATILE = ("verifier",)  # generated_at: the only field that differs between two verifications


def cases() -> list[tuple[str, Path, Path | None]]:
    """(name, run directory, baseline or None) for every recorded run, sorted by name."""
    out: list[tuple[str, Path, Path | None]] = []
    for root in ROOTS:
        if not root.is_dir():
            continue
        for meta in sorted(root.rglob("run.json")):
            run = meta.parent
            if not (run / "logs").is_dir():
                continue  # a workflow's attempt record (results/<scenario>/<slot>/run.json), not a run
            name = f"{root.parent.name}/{run.relative_to(root)}".replace("/", "__")
            out.append((name, run, None))
            sibling = run.parent / "baseline"
            if sibling != run and (sibling / "run.json").is_file():
                out.append((name + "__with_baseline", run, sibling))
    return out


def normalized(report: dict) -> dict:
    return {key: value for key, value in report.items() if key not in VOLATILE}


# Generated runs (bench/make_run.py, deterministic): longer than the recordings, with every planted defect,
# several restarts and a hang, so that the windows and chunks of the bounded evidence are crossed.
GENERATED = {
    "kill": dict(ranks=8, iters=400, seed=1, chatter_per_rank=2),
    "kill_restarts3": dict(ranks=4, iters=600, restarts=3, seed=2, chatter_per_rank=1),
    "hang": dict(ranks=8, iters=300, fault="hang", seed=3, chatter_per_rank=1),
    "baseline": dict(ranks=8, iters=400, restarts=0, seed=1, chatter_per_rank=2),
    "resumed_from_zero": dict(ranks=4, iters=300, seed=4, defect="resumed_from_zero_on_one_rank"),
    "no_later_checkpoint": dict(ranks=4, iters=300, seed=5, defect="no_later_checkpoint"),
    "final_iteration_missing": dict(ranks=4, iters=300, seed=6, defect="final_iteration_missing"),
    "loss_divergence": dict(ranks=4, iters=300, seed=7, defect="loss_divergence"),
}
