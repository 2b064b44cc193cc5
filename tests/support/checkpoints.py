"""A torch_dist checkpoint directory built on disk, for the checkpoint record's tests (writer and reader)."""

from __future__ import annotations

from pathlib import Path

TRACKER = "latest_checkpointed_iteration.txt"


def make_checkpoints(root: Path, iterations=(4, 8), shard_bytes: int = 64) -> Path:
    """A checkpoint directory as Megatron leaves it: the tracker at the last iteration, each iter folder with
    `.metadata` (100 B), `metadata.json` (33 B), `common.pt` (200 B) and two shards, and `ft_state.json`."""
    root.mkdir(parents=True)
    (root / TRACKER).write_text(str(iterations[-1]))
    (root / "ft_state.json").write_text("{}")
    for iteration in iterations:
        folder = root / f"iter_{iteration:07d}"
        folder.mkdir()
        (folder / ".metadata").write_bytes(b"M" * 100)
        (folder / "metadata.json").write_text('{"sharded_backend": "torch_dist"}')
        (folder / "common.pt").write_bytes(b"C" * 200)
        for rank in range(2):
            (folder / f"__{rank}_0.distcp").write_bytes(bytes([rank]) * shard_bytes)
    return root
