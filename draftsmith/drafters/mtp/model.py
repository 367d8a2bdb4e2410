"""The MTP block (DeepSeek-V3 style) and the key/value stores its attention writes into.

One block predicts the token after next: at position t it reads the target's state h_t and the
embedding of the next token x_(t+1), projects [enorm(e) ; hnorm(h)] back to the hidden width
(eh_proj), runs one decoder layer of the target's own kind (the target's decoder-layer class from
transformers, so Llama, Qwen3 and DeepSeek-V3 layers all work), and reads out through a final
norm and the target's lm_head: the logits of x_(t+2). Drafting k tokens chains the block: its own
output replaces h for the next step, whose token is the draft just chosen.

The layer's attention writes keys/values through a duck-typed cache (`update(k, v, layer_idx)`, the
call every transformers attention makes), so draftsmith decides what each query sees:
`ContextKV` holds the committed context (append-only) plus one round's drafts; `StepKV` puts the
earlier steps of a training-time chain in front of the current one.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoConfig, PretrainedConfig

from draftsmith.drafters.mtp.config import MTPConfig
from draftsmith.engine.packing import read_head
from draftsmith.errors import DraftsmithError


def target_classes(target_model: nn.Module) -> tuple[type, type, type]:
    """The target's decoder-layer, RMSNorm and rotary-embedding classes: the block is built from them."""
    base = getattr(target_model, "model", None)
    layers = getattr(base, "layers", None)
    if base is None or not layers or not hasattr(base, "norm") or not hasattr(base, "rotary_emb"):
        kind = target_model.config.model_type
        raise DraftsmithError(
            f"MTP needs a decoder-only target with model.layers/norm/rotary_emb; {kind!r} has not"
        )
    return type(layers[0]), type(base.norm), type(base.rotary_emb)


def hf_layer_config(cfg: MTPConfig) -> PretrainedConfig:
    """The transformers config the block's layer is built from: the stored one, SDPA attention (the
    masks here are boolean), and a full-attention entry at the block's index for per-layer types."""
    data = {k: v for k, v in cfg.layer_config.items() if k != "model_type"}
    try:
        hf = AutoConfig.for_model(cfg.model_type, **copy.deepcopy(data))
    except (KeyError, ValueError, TypeError) as e:
        raise DraftsmithError(f"cannot rebuild a {cfg.model_type!r} layer config: {e}") from e
    hf._attn_implementation = "sdpa"
    types = getattr(hf, "layer_types", None)
    if types is not None and len(types) <= cfg.layer_idx:
        hf.layer_types = list(types) + ["full_attention"] * (cfg.layer_idx + 1 - len(types))
    return hf


class ContextKV:
    """Keys/values of the block at committed positions (append-only) and, after them, the current
    round's draft positions, which `rewind` drops. Grows by doubling; written in place."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.committed = 0
        self.end = 0

    def _reserve(self, n: int, k: torch.Tensor, v: torch.Tensor) -> None:
        if self.k is not None and n <= self.k.shape[2]:
            return
        size = max(n, self.capacity if self.k is None else 2 * self.k.shape[2])
        new_k = k.new_empty(*k.shape[:2], size, k.shape[3])
        new_v = v.new_empty(*v.shape[:2], size, v.shape[3])
        if self.k is not None:
            new_k[:, :, : self.end] = self.k[:, :, : self.end]
            new_v[:, :, : self.end] = self.v[:, :, : self.end]
        self.k, self.v = new_k, new_v

    def update(self, k: torch.Tensor, v: torch.Tensor, *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        n = k.shape[2]
        self._reserve(self.end + n, k, v)
        self.k[:, :, self.end : self.end + n] = k
        self.v[:, :, self.end : self.end + n] = v
        self.end += n
        return self.k[:, :, : self.end], self.v[:, :, : self.end]

    def commit(self) -> None:
        self.committed = self.end

    def rewind(self) -> None:
        self.end = self.committed


class StepKV:
    """Training-time chain: the keys/values of earlier steps, then this step's own (kept in `new`)."""

    def __init__(self, earlier: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        self.earlier = earlier
        self.new: tuple[torch.Tensor, torch.Tensor] | None = None

    def update(self, k: torch.Tensor, v: torch.Tensor, *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        self.new = (k, v)
        if not self.earlier:
            return k, v
        return (
            torch.cat([e[0] for e in self.earlier] + [k], 2),
            torch.cat([e[1] for e in self.earlier] + [v], 2),
        )


class MTPModel(nn.Module):
    """Trainable (or shipped) block weights plus frozen views of the target's embedding and lm_head."""

    def __init__(self, cfg: MTPConfig, classes: tuple[type, type, type]) -> None:
        super().__init__()
        layer_cls, norm_cls, rotary_cls = classes
        self.cfg = cfg
        h, eps = cfg.hidden_size, cfg.rms_norm_eps
        hf = hf_layer_config(cfg)
        self.enorm = norm_cls(h, eps=eps)
        self.hnorm = norm_cls(h, eps=eps)
        self.eh_proj = nn.Linear(2 * h, h, bias=False)
        self.layer = layer_cls(hf, cfg.layer_idx)
        self.norm = norm_cls(h, eps=eps)
        self.rotary = rotary_cls(config=hf)
        vd = cfg.draft_vocab_size or cfg.target_vocab_size
        self.register_buffer("d2t", torch.arange(vd), persistent=True)  # draft index -> target id
        if cfg.own_head:  # a shipped module's own lm_head copy (full vocabulary)
            self.own_head = nn.Parameter(torch.empty(cfg.target_vocab_size, h))
        self.embed: torch.Tensor | None = None  # [V, H] the target's, frozen, never saved here
        self.head: torch.Tensor | None = None  # [Vd, H] lm_head rows of the draft vocabulary
        self.t2d: torch.Tensor | None = None  # [V] target id -> draft index (Vd = outside)

    def attach_target(self, embed: torch.Tensor, lm_head: torch.Tensor) -> None:
        """Borrow the target's frozen embedding and lm_head (a shipped head replaces the latter)."""
        self.embed = embed.detach()
        head = self.own_head if self.cfg.own_head else lm_head
        self.head = head.detach()[self.d2t]
        vd = self.d2t.shape[0]
        self.t2d = torch.full((embed.shape[0],), vd, dtype=torch.long, device=self.d2t.device)
        self.t2d[self.d2t] = torch.arange(vd, device=self.d2t.device)

    def block(
        self,
        state: torch.Tensor,
        next_ids: torch.Tensor,
        pos: torch.Tensor,
        kv,
        mask: torch.Tensor | None,
    ) -> torch.Tensor:
        """Raw block outputs [b, n, H] for states [b, n, H] and next tokens [b, n] at positions pos.

        kv: a ContextKV / StepKV (what the attention sees besides these n positions); mask [b, n, K]
        over every key it returns (True = may attend); None only for one query that sees all."""
        e = F.embedding(next_ids, self.embed).to(self.eh_proj.weight.dtype)
        parts = [self.enorm(e), self.hnorm(state.to(e.dtype))]
        x = self.eh_proj(torch.cat(parts if self.cfg.order == "eh" else parts[::-1], -1))
        out = self.layer(
            x,
            attention_mask=None if mask is None else mask[:, None],
            position_ids=pos,
            past_key_values=kv,
            use_cache=True,
            position_embeddings=self.rotary(x, pos),
        )
        return out[0] if isinstance(out, tuple) else out

    def readout(self, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(draft-vocabulary logits, the state the next recursive step reads) of raw block outputs."""
        normed = self.norm(raw)
        return read_head(normed, self), normed if self.cfg.chain == "normed" else raw

    @torch.no_grad()
    def init_weights(self, seed: int = 0) -> None:
        """Random projections (std 1/sqrt(fan_in)); norms keep their class's neutral start."""
        g = torch.Generator().manual_seed(seed)
        for name, p in self.named_parameters():
            if p.dim() >= 2 and name != "own_head":
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)

    @torch.no_grad()
    def copy_final_norm(self, target_model: nn.Module) -> None:
        """Start the block's norm as the target's final norm: it sets the logit scale through the
        shared lm_head (SmolLM2's weights average 1.8, not the neutral 1)."""
        self.norm.load_state_dict(target_model.model.norm.state_dict())

    @torch.no_grad()
    def copy_last_layer(self, target_model: nn.Module) -> None:
        """Start the layer as a copy of the target's last decoder layer (same class, same shapes)."""
        self.layer.load_state_dict(target_model.model.layers[-1].state_dict())
