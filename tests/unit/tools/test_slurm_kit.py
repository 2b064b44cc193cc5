"""tools/gpu/slurm_kit.sh writes the one-node Slurm configuration that the GPU machine runs the workflow on:
its `conf` and `gres-conf` modes print the text `start` writes, here for a fixed host, CPUs, memory, GPUs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
KIT = ROOT / "tools" / "gpu" / "slurm_kit.sh"


def kit(mode: str, **env: str) -> str:
    fixed = {
        "FTQUAL_SLURM_KIT_HOST": "gpunode",
        "FTQUAL_SLURM_KIT_CPUS": "16",
        "FTQUAL_SLURM_KIT_MEM_MB": "120000",
        "FTQUAL_SLURM_KIT_GPUS": "2",
        "FTQUAL_SLURM_KIT_PREFIX": "/opt/kit",
        "FTQUAL_SLURM_KIT_STATE": "/tmp/kitstate",
    }
    proc = subprocess.run(
        ["bash", str(KIT), mode],
        env={"PATH": os.environ["PATH"], **fixed, **env},
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    return proc.stdout


def settings(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_slurm_conf_is_one_gpu_node_in_partition_gpu():
    conf = kit("conf")
    s = settings(conf)
    assert "NodeName=gpunode NodeAddr=127.0.0.1 CPUs=16 RealMemory=120000 Gres=gpu:2 State=UNKNOWN" in conf
    assert "PartitionName=gpu Nodes=gpunode Default=YES MaxTime=INFINITE State=UP" in conf
    assert s["SlurmctldHost"] == "gpunode(127.0.0.1)"
    assert s["GresTypes"] == "gpu"
    assert s["SelectType"] == "select/cons_tres"
    assert (s["ProctrackType"], s["TaskPlugin"]) == ("proctrack/linuxproc", "task/none")
    assert (s["MpiDefault"], s["ReturnToService"]) == ("none", "2")
    # squeue is the status command (no accounting): finished jobs must outlive the plugin's 180 s poll
    assert int(s["MinJobAge"]) > 180
    assert s["AccountingStorageType"] == "accounting_storage/none"


def test_slurm_conf_keeps_off_a_system_slurm():
    s = settings(kit("conf"))
    assert (s["SlurmctldPort"], s["SlurmdPort"]) == ("6917", "6918")
    assert s["PluginDir"] == "/opt/kit/usr/lib/x86_64-linux-gnu/slurm-wlm"
    assert s["AuthInfo"] == "socket=/tmp/kitstate/munge/munge.socket.2"
    for key in ("StateSaveLocation", "SlurmdSpoolDir", "SlurmctldPidFile", "SlurmdLogFile"):
        assert s[key].startswith("/tmp/kitstate/"), key


def test_cgroup_is_asked_for_explicitly():
    s = settings(kit("conf", FTQUAL_SLURM_KIT_CGROUP="1"))
    assert (s["ProctrackType"], s["TaskPlugin"]) == ("proctrack/cgroup", "task/cgroup")


def test_gres_conf_lists_each_gpu_device():
    assert kit("gres-conf").splitlines() == [
        "AutoDetect=off",
        "NodeName=gpunode Name=gpu File=/dev/nvidia0",
        "NodeName=gpunode Name=gpu File=/dev/nvidia1",
    ]
    fake = kit("gres-conf", FTQUAL_SLURM_KIT_GPUS="", FTQUAL_SLURM_KIT_FAKE_GPUS="1").splitlines()
    assert fake == ["AutoDetect=off", "NodeName=gpunode Name=gpu File=/tmp/kitstate/fakegpu/nvidia0"]
