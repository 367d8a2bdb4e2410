"""Configuration of an EAGLE-3 drafter, saved as config.json next to model.safetensors.

Field names follow the HF/SpecForge config that SGLang's `LlamaForCausalLMEagle3` and the
speculators format read (hidden_size, num_attention_heads -> num_heads, draft_vocab_size,
target_hidden_size, norm_before_residual), so an exporter only renames. `target_layers` are HF
`hidden_states` indices (= vLLM's `eagle_aux_hidden_state_layer_ids`; SGLang's ids are one less).
The target name and fingerprint make loading against another target a clear error.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from draftsmith.drafters.checkpoint import check_draft_vocab, read_config, write_config
from draftsmith.errors import DraftsmithError

FORMAT = "draftsmith-eagle3/1"


def vllm_default_layers(num_layers: int) -> list[int]:
    """vLLM's default aux layers for EAGLE-3, as HF hidden_states indices: [2, L//2, L-3]."""
    return sorted([2, num_layers // 2, num_layers - 3])


def pick_layers(num_layers: int, available: list[int], spec: str = "auto") -> list[int]:
    """The target layers (low, mid, high) the drafter fuses, chosen among `available` (the layers
    a target cache holds). "auto": each of vLLM's defaults mapped to the nearest available layer
    (ties to the lower one); otherwise a comma list of layers that must all be available. A cache
    with fewer than three layers repeats one (the fused width stays 3 * Ht, as servers expect)."""
    if not available:
        raise DraftsmithError("the training data holds no target layers")
    if spec == "auto":
        wanted = vllm_default_layers(num_layers)
        return sorted(min(available, key=lambda a: (abs(a - w), a)) for w in wanted)
    try:
        chosen = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError as e:
        raise DraftsmithError(f"target_layers must be 'auto' or a comma list of ints, got {spec!r}") from e
    missing = [x for x in chosen if x not in available]
    if not chosen or missing:
        raise DraftsmithError(
            f"target layers {missing or spec} are not in the training data (it holds {available})"
        )
    return chosen


@dataclass
class Eagle3Config:
    """Architecture of the one-layer EAGLE-3 drafter (H = hidden_size, Ht = target_hidden_size)."""

    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    target_hidden_size: int
    target_layers: list[int]
    target_vocab_size: int
    draft_vocab_size: int | None = None  # None: the full target vocabulary
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    # vLLM/speculators' flag: normalise the carried hidden state before taking the residual
    # (True) or after (False, SpecForge's and SGLang's layer); exporters must write it
    norm_before_residual: bool = False
    ttt_steps: int = 7  # unrolled steps it was trained with (the default draft length)
    method: str = "eagle3"
    target_name: str = ""
    target_fingerprint: str = ""
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.target_layers:
            raise DraftsmithError("an EAGLE-3 drafter needs at least one target layer")
        if self.num_heads % self.num_kv_heads:
            raise DraftsmithError("num_heads must be a multiple of num_kv_heads")
        if self.ttt_steps < 1:
            raise DraftsmithError(f"ttt_steps must be >= 1, got {self.ttt_steps}")
        check_draft_vocab(self.draft_vocab_size, self.target_vocab_size)

    @property
    def vocab(self) -> int:
        """Rows of lm_head: the draft vocabulary."""
        return self.draft_vocab_size or self.target_vocab_size

    def save(self, directory: str | Path, tmp_suffix: str = "") -> None:
        write_config(directory, FORMAT, asdict(self), tmp_suffix)

    @classmethod
    def load(cls, directory: str | Path) -> Eagle3Config:
        return read_config(directory, FORMAT, "EAGLE-3", cls)
