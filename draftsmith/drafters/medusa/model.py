"""Medusa heads (Cai et al., 2024, Medusa-1): K residual blocks on the target's last state, each
reading it through the target's own frozen lm_head.

Head i at position t guesses the token at t + i + 1 from the target's final-norm state at t alone,
so all K drafts come from one parallel pass and no draft sees the tokens before it (the price of
being the cheapest learned drafter: a few H x H layers plus K rows of the head). Each head's blocks
start at zero, so before training every head repeats the target's next-token guess. The lm_head is
the target's, restricted to a draft vocabulary (d2t) and never saved here: Medusa-1's per-head
lm_head copies would hold K x V x H weights, K times the head of a small target like SmolLM2.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn

from draftsmith.drafters.checkpoint import check_draft_vocab, read_config, write_config
from draftsmith.engine.packing import read_head
from draftsmith.errors import DraftsmithError

FORMAT = "draftsmith-medusa/1"


@dataclass
class MedusaConfig:
    hidden_size: int
    target_vocab_size: int
    num_heads: int = 4
    num_layers: int = 1  # residual blocks per head
    draft_vocab_size: int | None = None  # None: the target's whole vocabulary
    method: str = "medusa"
    target_name: str = ""
    target_fingerprint: str = ""
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.num_heads < 1 or self.num_layers < 1:
            raise DraftsmithError(
                f"Medusa needs >= 1 head and layer, got {self.num_heads}, {self.num_layers}"
            )
        check_draft_vocab(self.draft_vocab_size, self.target_vocab_size)

    def save(self, directory: str | Path, tmp_suffix: str = "") -> None:
        write_config(directory, FORMAT, asdict(self), tmp_suffix)

    @classmethod
    def load(cls, directory: str | Path) -> MedusaConfig:
        return read_config(directory, FORMAT, "Medusa", cls)


class ResBlock(nn.Module):
    def __init__(self, h: int) -> None:
        super().__init__()
        self.linear = nn.Linear(h, h)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + nn.functional.silu(self.linear(x))


class MedusaModel(nn.Module):
    def __init__(self, cfg: MedusaConfig) -> None:
        super().__init__()
        self.cfg = cfg
        h = cfg.hidden_size
        self.heads = nn.ModuleList(
            nn.Sequential(*(ResBlock(h) for _ in range(cfg.num_layers))) for _ in range(cfg.num_heads)
        )
        vd = cfg.draft_vocab_size or cfg.target_vocab_size
        self.register_buffer("d2t", torch.arange(vd), persistent=True)  # draft index -> target id
        self.head: torch.Tensor | None = None  # [Vd, H] rows of the target's lm_head, frozen, not saved
        self.t2d: torch.Tensor | None = None  # [V] target id -> draft index (Vd = outside)

    def attach_target(self, lm_head: torch.Tensor) -> None:
        """Borrow the target's frozen lm_head rows of the draft vocabulary."""
        self.head = lm_head.detach()[self.d2t]
        vd = self.d2t.shape[0]
        self.t2d = torch.full((lm_head.shape[0],), vd, dtype=torch.long, device=self.d2t.device)
        self.t2d[self.d2t] = torch.arange(vd, device=self.d2t.device)

    def forward(self, final: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary logits [..., K, Vd] of every head from target states [..., H]."""
        states = torch.stack([head(final) for head in self.heads], -2)
        return read_head(states, self)
