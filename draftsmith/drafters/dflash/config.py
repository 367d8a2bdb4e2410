"""Configuration of a DFlash / DSpark drafter, saved as config.json next to model.safetensors.

The config records which target it was trained for (name + a fingerprint of the vocabulary and
architecture): a drafter conditions on that target's hidden states, so loading it against another
target is refused instead of silently giving tau ~ 1.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from draftsmith.drafters.checkpoint import read_config, write_config
from draftsmith.errors import DraftsmithError

FORMAT = "draftsmith-dflash/1"


def default_target_layers(num_layers: int, n: int = 5) -> list[int]:
    """Hidden-state keys (HF `hidden_states` indices: i = output of decoder layer i-1) of n layers
    spaced evenly over decoder layers 1..L-3, DeepSpec's and z-lab's rule: their ids [1, 9, 17, 25, 33]
    for 36 layers name layer outputs and are read as hidden_states[id + 1]."""
    lo, hi = 1, max(1, num_layers - 3)
    top = max(1, num_layers - 1)  # tiny models: stay below the last layer's output
    if n == 1:
        return [min(num_layers // 2 + 1, top)]
    return sorted({min(round(lo + i * (hi - lo) / (n - 1)) + 1, top) for i in range(n)})


@dataclass
class DFlashConfig:
    """Architecture of the block drafter. markov_rank > 0 and confidence make it DSpark."""

    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    target_layers: list[int]
    mask_token_id: int
    target_vocab_size: int
    num_layers: int = 1
    block_size: int = 7
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    draft_vocab_size: int | None = None  # None: the full target vocabulary
    markov_rank: int = 0  # DSpark: low-rank previous-token bias W2 W1[x_(k-1)]
    confidence: bool = False  # DSpark: per-slot acceptance predictor
    # DSpark: width of a serial state update from the previous token (0 = off: the paper's bias only).
    # Slot k's state gets W_out silu(W_in [s_k ; E[x_(k-1)]]) added before the head, so the previous
    # token can shift the whole distribution, depending on the context, not only by a bigram bias.
    markov_state: int = 0
    gamma: float = 4.0  # position-decay of the loss weights, w_k = exp(-(k-1)/gamma)
    anchor_context: bool = False  # add the fused context state at anchor - 1 to every block input
    # longest suffix match of a prompt lookup whose guess each slot reads (0 = off; lookup.py)
    lookup_input: int = 0
    # Options that public checkpoints need (draftsmith.export); the defaults are draftsmith's own layout.
    qk_norm: bool = False  # per-head RMSNorm of queries and keys (Qwen3 draft layers: z-lab, DeepSpec)
    sample_from_anchor: bool = True  # slot k predicts anchor+k+1; False: slot 0 is only the anchor (z-lab)
    markov_vocab: str = "draft"  # Markov rows: draft vocabulary + 1 shared row, or "target": one per id
    method: str = "dflash"
    target_name: str = ""
    target_fingerprint: str = ""
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.block_size < 2:
            raise DraftsmithError(f"block_size must be >= 2, got {self.block_size}")
        if not self.target_layers:
            raise DraftsmithError("a drafter needs at least one target layer")
        if self.num_heads % self.num_kv_heads:
            raise DraftsmithError("num_heads must be a multiple of num_kv_heads")
        if self.markov_state < 0 or (self.markov_state and not self.markov_rank):
            raise DraftsmithError("markov_state (a serial state update) needs DSpark's markov_rank > 0")
        if self.lookup_input < 0 or (self.lookup_input and not self.sample_from_anchor):
            raise DraftsmithError("lookup_input must be >= 0 and needs slots that predict from the anchor")
        if self.markov_vocab not in ("draft", "target"):
            raise DraftsmithError(f"markov_vocab must be 'draft' or 'target', got {self.markov_vocab!r}")

    @property
    def is_dspark(self) -> bool:
        return self.markov_rank > 0

    def save(self, directory: str | Path, tmp_suffix: str = "") -> None:
        write_config(directory, FORMAT, asdict(self), tmp_suffix)

    @classmethod
    def load(cls, directory: str | Path) -> DFlashConfig:
        return read_config(directory, FORMAT, "DFlash/DSpark", cls)
