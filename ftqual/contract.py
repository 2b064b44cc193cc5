"""Constants that several stages must agree on, in one place.

The walkthrough's GPT (its shape decides which TP/PP a run may use), the checkpoint tracker's name and the
fault kinds. The stdlib-only worker wrapper (scripts/megatron_gpt_worker.py) keeps its own copy of the
tracker name and fault kinds; tests/test_contract.py pins that copy to this one.
"""

from __future__ import annotations

from dataclasses import dataclass

FAULTS = ("none", "kill", "hang", "node_loss")
# Faults of one rank (the others take a whole node: its ft_launcher and every process below it).
RANK_FAULTS = ("kill", "hang")
TRACKER_NAME = "latest_checkpointed_iteration.txt"


@dataclass(frozen=True)
class ModelShape:
    """The walkthrough's tiny GPT: PP must divide its layers, TP its attention heads."""

    num_layers: int = 4
    hidden_size: int = 512
    num_attention_heads: int = 8
    seq_length: int = 256
    vocab_size: int = 1024

    def parallelism_problem(self, tp: int, pp: int) -> str | None:
        """Why this TP/PP cannot split the model, or None."""
        if pp < 1 or self.num_layers % pp:
            return f"PP={pp} must divide the model's {self.num_layers} layers"
        if tp < 1 or self.num_attention_heads % tp:
            return f"TP={tp} must divide the model's {self.num_attention_heads} attention heads"
        return None


MODEL = ModelShape()
