"""`checkpoint_payloads: drop` through Snakemake on CPU (real ft_launcher, smoke workload writing 4 MiB of
payload into every checkpoint, 2 MiB in each rank's torch_dist shard): once each run is verified its payload
files are gone, payloads_dropped.json lists them with their sizes, the completion records stay, and the
summary says PASS."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.workflow import copy_project, read_json, run_snakemake, write_yaml

SMALL = {
    "checkpoint_payloads": "drop",
    "checkpoint_payload_mb": 4,  # each rank's shard is over the 1 MiB a payload file needs
    "smoke": {"step_seconds": 0.1, "save_seconds": 0.0},
    "scenarios": {"baseline": {"fault": "none"}, "kill": {"fault": "kill"}, "hang": {"enabled": False}},
}


@pytest.mark.timeout(400)
def test_drop_leaves_manifests_and_a_pass(tmp_path):
    project = copy_project(tmp_path / "project")
    write_yaml(project / "config" / "payloads.yaml", SMALL)
    proc = run_snakemake(
        project,
        *("--profile", "profiles/local"),
        *("--configfile", "config/payloads.yaml"),
        timeout=360,
        env={"PYTHONPATH": str(project)},
    )
    assert proc.returncode == 0, proc.stdout[-6000:]
    summary = read_json(project / "results" / "summary.json")
    assert summary["verdict"] == "pass", summary["headline"]
    runs = [Path(p) for p in (project / "runs").iterdir() if (p / "run.json").is_file()]
    assert len(runs) == 2
    for run in runs:
        ckpt = run / "checkpoints"
        assert not list(ckpt.glob("iter_*/*.distcp"))
        manifest = json.loads((ckpt / "payloads_dropped.json").read_text())
        assert manifest["schema"] == "ftqual.payloads/v1" and manifest["files"]
        shards = {Path(f["path"]).name for f in manifest["files"]}
        assert shards == {"__0_0.distcp", "__1_0.distcp"}
        assert all(f["bytes"] >= 2 << 20 for f in manifest["files"])  # the share, plus the model's state
        assert all((ckpt / f["path"]).parent.joinpath(".metadata").is_file() for f in manifest["files"])
