"""Configuration of an MTP (multi-token prediction) module, saved as config.json next to its weights.

The module's decoder layer is "of the target's kind": its Hugging Face config is stored whole
(`layer_config`) and the layer class is the target's own decoder-layer class, so the same code runs
a Llama layer trained here and the MLA + MoE layer shipped inside a DeepSeek-V3 checkpoint. The
target it belongs to is recorded (name + fingerprint): loading it against another target is refused.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from draftsmith.drafters.checkpoint import check_draft_vocab, read_config, write_config
from draftsmith.errors import DraftsmithError

FORMAT = "draftsmith-mtp/1"
CHAINS = ("normed", "raw")


@dataclass
class MTPConfig:
    """One MTP block: [enorm(embed(x_(t+1))) ; hnorm(h_t)] -> eh_proj -> decoder layer -> norm -> head.

    chain: the state handed to the next recursive step, the block's output after its final norm
    ("normed": Qwen3-Next, and draftsmith's own heads, whose first step also reads the target's
    final-norm state) or before it ("raw": DeepSeek-V3 / vLLM's deepseek_mtp).
    """

    hidden_size: int
    target_vocab_size: int
    model_type: str
    layer_config: dict  # the HF config the decoder layer is built from (the target's, see model.py)
    layer_idx: int  # the decoder layer's index (DeepSeek picks MoE vs dense by it)
    rms_norm_eps: float = 1e-6
    chain: str = "normed"
    order: str = "eh"  # concatenation order of eh_proj's input: embedding first (DeepSeek), or "he" (MiMo)
    draft_vocab_size: int | None = None  # None: the target's whole vocabulary
    own_head: bool = False  # a shipped module with its own lm_head copy (DeepSeek's shared_head.head)
    source: str = "trained"  # "trained", or the shipped layout it was read from ("deepseek", "mtp")
    method: str = "mtp"
    target_name: str = ""
    target_fingerprint: str = ""
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.chain not in CHAINS:
            raise DraftsmithError(f"chain must be one of {', '.join(CHAINS)}, got {self.chain!r}")
        if self.order not in ("eh", "he"):
            raise DraftsmithError(f"order must be 'eh' or 'he', got {self.order!r}")
        check_draft_vocab(self.draft_vocab_size, self.target_vocab_size)

    def save(self, directory: str | Path, tmp_suffix: str = "") -> None:
        write_config(directory, FORMAT, asdict(self), tmp_suffix)

    @classmethod
    def load(cls, directory: str | Path) -> MTPConfig:
        return read_config(directory, FORMAT, "MTP", cls)
