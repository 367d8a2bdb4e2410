"""The EAGLE-3 drafter network (EAGLE-3, arXiv 2503.01840; the layout vLLM and SGLang load).

fc fuses the target's low/mid/high hidden states [K*Ht] into one state [H]. One decoder layer
(`midlayer`) reads concat(input_layernorm(token embedding), hidden_norm(carried state)) [2H] in
its q/k/v projections, adds attention and MLP residuals to the carried state, and `norm` +
`lm_head` read out logits over a reduced draft vocabulary. The layer's pre-norm output is the
state carried to the next drafted token in place of the target's features (training-time test).
The embedding is the target's, frozen and not saved. Parameter and buffer names are those of the
SGLang/SpecForge checkpoint, `d2t` as offsets (target id = i + d2t[i]) and `t2d` as a mask.

Attention has two shapes, shared by training and inference so both compute the same thing:
`context` appends committed positions (causal over the new ones, all of the old ones), `chain`
runs one unrolled draft step per query: it sees the committed context its mask allows plus the
keys of its own earlier draft steps (EAGLE-3's diagonal "cache_hidden" keys).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from draftsmith.drafters.dflash.model import rotate
from draftsmith.drafters.eagle3.config import Eagle3Config


class Attention(nn.Module):
    def __init__(self, cfg: Eagle3Config) -> None:
        super().__init__()
        h, nh, nkv, hd = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.q_proj = nn.Linear(2 * h, nh * hd, bias=False)
        self.k_proj = nn.Linear(2 * h, nkv * hd, bias=False)
        self.v_proj = nn.Linear(2 * h, nkv * hd, bias=False)
        self.o_proj = nn.Linear(nh * hd, h, bias=False)


class MLP(nn.Module):
    def __init__(self, cfg: Eagle3Config) -> None:
        super().__init__()
        h, i = cfg.hidden_size, cfg.intermediate_size
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MidLayer(nn.Module):
    """The single decoder layer; attention itself is done by the caller (context or chain)."""

    def __init__(self, cfg: Eagle3Config) -> None:
        super().__init__()
        self.cfg = cfg
        h = cfg.hidden_size
        self.self_attn = Attention(cfg)
        self.mlp = MLP(cfg)
        self.hidden_norm = nn.RMSNorm(h, eps=cfg.rms_norm_eps)
        self.input_layernorm = nn.RMSNorm(h, eps=cfg.rms_norm_eps)
        self.post_attention_layernorm = nn.RMSNorm(h, eps=cfg.rms_norm_eps)

    def _heads(self, x: torch.Tensor, n: int) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, n, self.cfg.head_dim).transpose(1, 2)

    def project(self, emb: torch.Tensor, hidden: torch.Tensor, pos: torch.Tensor):
        """emb, hidden [b, n, H] at rotary positions pos [b, n] -> q [b, nh, n, d], k, v [b, nkv, n, d]
        and the residual stream."""
        cfg, a = self.cfg, self.self_attn
        if cfg.norm_before_residual:
            hidden = self.hidden_norm(hidden)
            residual, h = hidden, hidden
        else:
            residual, h = hidden, self.hidden_norm(hidden)
        x = torch.cat([self.input_layernorm(emb), h], -1)
        q = rotate(self._heads(a.q_proj(x), cfg.num_heads), pos[:, None], cfg.rope_theta)
        k = rotate(self._heads(a.k_proj(x), cfg.num_kv_heads), pos[:, None], cfg.rope_theta)
        return q, k, self._heads(a.v_proj(x), cfg.num_kv_heads), residual

    def finish(self, residual: torch.Tensor, att: torch.Tensor) -> torch.Tensor:
        """Attention output [b, nh, n, d] -> the layer's (pre-norm) output state [b, n, H]."""
        b, _, n, _ = att.shape
        x = residual + self.self_attn.o_proj(att.transpose(1, 2).reshape(b, n, -1))
        return x + self.mlp(self.post_attention_layernorm(x))


def chain_attention(
    q: torch.Tensor,
    ctx_k: torch.Tensor,
    ctx_v: torch.Tensor,
    ctx_mask: torch.Tensor | None,
    chain_k: torch.Tensor,
    chain_v: torch.Tensor,
) -> torch.Tensor:
    """Each query [b, nh, n, d] attends the context keys [b, nkv, m, d] its mask [b, n, m] allows
    (None: all) and its own chain's keys [b, nkv, n, s, d] (one per earlier draft step, itself last)."""
    groups = q.shape[1] // ctx_k.shape[1]
    if groups > 1:
        ctx_k, ctx_v = ctx_k.repeat_interleave(groups, 1), ctx_v.repeat_interleave(groups, 1)
        chain_k, chain_v = chain_k.repeat_interleave(groups, 1), chain_v.repeat_interleave(groups, 1)
    scale = 1.0 / math.sqrt(q.shape[-1])
    s_ctx = (q @ ctx_k.transpose(-1, -2)) * scale
    if ctx_mask is not None:
        s_ctx = s_ctx.masked_fill(~ctx_mask[:, None], float("-inf"))
    s_chain = torch.einsum("bhnd,bhnsd->bhns", q, chain_k) * scale
    m = s_ctx.shape[-1]
    p = torch.softmax(torch.cat([s_ctx, s_chain], -1).float(), -1).to(q.dtype)
    return p[..., :m] @ ctx_v + torch.einsum("bhns,bhnsd->bhnd", p[..., m:], chain_v)


class Eagle3Model(nn.Module):
    """Trainable drafter weights plus a frozen view of the target's embedding (and, for soft
    labels in training, the target's lm_head rows of the draft vocabulary)."""

    def __init__(self, cfg: Eagle3Config) -> None:
        super().__init__()
        self.cfg = cfg
        h, vd, v = cfg.hidden_size, cfg.vocab, cfg.target_vocab_size
        self.fc = nn.Linear(len(cfg.target_layers) * cfg.target_hidden_size, h, bias=False)
        self.midlayer = MidLayer(cfg)
        self.norm = nn.RMSNorm(h, eps=cfg.rms_norm_eps)
        self.lm_head = nn.Linear(h, vd, bias=False)
        # the exported vocabulary mapping: target id = i + d2t[i]; t2d[id] = id is in the draft vocab
        self.register_buffer("d2t", torch.zeros(vd, dtype=torch.long))
        self.register_buffer("t2d", torch.zeros(v, dtype=torch.bool))
        self.register_buffer("draft_ids", torch.arange(vd), persistent=False)  # draft index -> target id
        self.register_buffer("t2d_index", torch.zeros(v, dtype=torch.long), persistent=False)  # vd = outside
        self.set_draft_vocab(torch.arange(vd))
        self.embed: torch.Tensor | None = None  # [V, H] frozen target embedding
        self.target_head: torch.Tensor | None = None  # [Vd, Ht] frozen target lm_head rows (training)

    def set_draft_vocab(self, ids: torch.Tensor) -> None:
        """Use the target ids `ids` (sorted, [Vd]) as the draft vocabulary."""
        ids = ids.to(self.d2t.device, torch.long)
        self.d2t.copy_(ids - torch.arange(ids.shape[0], device=ids.device))
        self.t2d.zero_()
        self.t2d[ids] = True
        self.refresh_vocab()

    def refresh_vocab(self) -> None:
        """Rebuild the index maps from the d2t buffer (after a load_state_dict)."""
        vd = self.d2t.shape[0]
        self.draft_ids = torch.arange(vd, device=self.d2t.device) + self.d2t
        index = torch.full((self.cfg.target_vocab_size,), vd, dtype=torch.long, device=self.d2t.device)
        index[self.draft_ids] = torch.arange(vd, device=self.d2t.device)
        self.t2d_index = index

    def attach_target(self, embed: torch.Tensor, lm_head: torch.Tensor | None = None) -> None:
        """Borrow the target's frozen embedding (and lm_head, for soft labels): never trained or saved."""
        self.refresh_vocab()
        self.embed = embed.detach()
        self.target_head = None if lm_head is None else lm_head.detach()[self.draft_ids]

    def fuse(self, features: torch.Tensor) -> torch.Tensor:
        """[b, T, K*Ht] target features -> [b, T, H]."""
        return self.fc(features)

    def context(
        self,
        next_ids: torch.Tensor,
        fused: torch.Tensor,
        pos: torch.Tensor,
        past_k: torch.Tensor | None = None,
        past_v: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Committed positions pos [b, n]: each pairs the target state there (fused [b, n, H]) with
        the token after it (next_ids [b, n]). Attends every past key and the new ones causally.
        Returns the output states [b, n, H] and the new keys / values [b, nkv, n, d]."""
        layer = self.midlayer
        q, k, v, res = layer.project(F.embedding(next_ids, self.embed).to(fused.dtype), fused, pos)
        n, p = q.shape[2], 0 if past_k is None else past_k.shape[2]
        keys = k if past_k is None else torch.cat([past_k, k], 2)
        vals = v if past_v is None else torch.cat([past_v, v], 2)
        mask = torch.ones(n, p + n, dtype=torch.bool, device=q.device)
        mask[:, p:] = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        att = F.scaled_dot_product_attention(
            q, keys, vals, attn_mask=mask, enable_gqa=q.shape[1] != k.shape[1]
        )
        return layer.finish(res, att), k, v

    def chain(
        self,
        ids: torch.Tensor,
        hidden: torch.Tensor,
        pos: torch.Tensor,
        ctx_k: torch.Tensor,
        ctx_v: torch.Tensor,
        ctx_mask: torch.Tensor | None,
        chain_k: torch.Tensor | None = None,
        chain_v: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One unrolled draft step for n chains: token ids [b, n], carried states hidden [b, n, H] at
        rotary positions pos [b, n]; chain_k/v [b, nkv, n, s, d] hold the chains' earlier draft steps.
        Returns the new states [b, n, H] and this step's keys / values [b, nkv, n, d]."""
        layer = self.midlayer
        q, k, v, res = layer.project(F.embedding(ids, self.embed).to(hidden.dtype), hidden, pos)
        ck = k[..., None, :] if chain_k is None else torch.cat([chain_k, k[..., None, :]], 3)
        cv = v[..., None, :] if chain_v is None else torch.cat([chain_v, v[..., None, :]], 3)
        return layer.finish(res, chain_attention(q, ctx_k, ctx_v, ctx_mask, ck, cv)), k, v

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary logits of carried states."""
        return self.lm_head(self.norm(hidden))

    def init_weights(self, seed: int = 0) -> None:
        """Random start (as DeepSpec / SpecForge train it): N(0, 1/fan_in) matrices, unit norms."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in self.parameters():
                if p.dim() == 2:
                    p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))

    @torch.no_grad()
    def init_head(self, target_model: nn.Module) -> None:
        """Start the read-out as the target's: its final norm and its lm_head rows of the draft
        vocabulary (only when the widths match)."""
        norm = getattr(getattr(target_model, "model", None), "norm", None)
        head = target_model.get_output_embeddings().weight
        if head.shape[1] != self.cfg.hidden_size:
            return
        self.lm_head.weight.copy_(head[self.draft_ids.to(head.device)].to(self.lm_head.weight))
        if getattr(norm, "weight", None) is not None and norm.weight.shape == self.norm.weight.shape:
            self.norm.weight.copy_(norm.weight)
