"""DFlash block drafter, and the DSpark heads on top of it (z-lab/dflash, DeepSpec's DSpark).

One parallel pass drafts a whole block. Context: hidden states of chosen target layers,
concatenated, fused by `fc` and an RMSNorm. Each draft layer projects that context with its own
k/v weights and attends over [context ; block]: the block (anchor token + mask tokens, at their
real positions) is bidirectional inside and sees only context strictly before its anchor. Slot k
predicts the token at anchor + k + 1. Embeddings and lm_head are the target's, frozen and not
saved. DSpark adds a low-rank Markov head (slot k's logits get a bias from the token chosen at
slot k-1, sampled serially at inference) and a confidence head predicting each slot's acceptance.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from draftsmith.drafters.dflash.config import DFlashConfig
from draftsmith.engine.packing import pack_weight, packed_linear, packing_enabled, read_head

_ROPE: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}  # (d, theta, device, dtype) -> cos, sin


def _cos_sin(pos: torch.Tensor, d: int, theta: float, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """cos and sin [..., d] of the rotary angles at integer positions pos [...]."""
    inv = 1.0 / theta ** (torch.arange(0, d, 2, device=pos.device, dtype=torch.float32) / d)
    ang = pos.to(torch.float32)[..., None] * inv
    ang = torch.cat([ang, ang], -1)
    return ang.cos().to(dtype), ang.sin().to(dtype)


def rope_table(d: int, theta: float, n: int, device: torch.device, dtype: torch.dtype):
    """cos and sin [>= n, d] of the rotary angles at positions 0.. (computed once per shape and grown
    by doubling): a round re-derived them for every rotation, ~15 small ops each on the decode path."""
    key = (d, float(theta), str(device), dtype)
    table = _ROPE.get(key)
    if table is None or table[0].shape[0] < n:
        size = max(n, 2 * table[0].shape[0] if table is not None else 1024)
        table = _ROPE[key] = _cos_sin(torch.arange(size, device=device), d, theta, dtype)
    return table


def rotate(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary embedding of x [..., n, d] at integer positions pos [..., n] (broadcast over heads).
    Decoding reads the angles from a table; training computes them (the same values), which keeps
    the compiled loss one graph (a table lookup sized by the data would break it)."""
    d = x.shape[-1]
    if torch.is_grad_enabled() or torch.compiler.is_compiling():
        cos, sin = _cos_sin(pos, d, theta, x.dtype)
    else:
        cos, sin = rope_table(d, theta, int(pos.max()) + 1 if pos.numel() else 1, x.device, x.dtype)
        cos, sin = cos[pos], sin[pos]
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class DraftLayer(nn.Module):
    """A Llama-style decoder layer whose keys/values also cover the injected target context."""

    qkv_packed: torch.Tensor | None = None  # decoding only (`fuse_for_decoding`); never saved
    kv_packed: torch.Tensor | None = None

    def __init__(self, cfg: DFlashConfig) -> None:
        super().__init__()
        h, nh, nkv, hd = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.cfg = cfg
        self.ln1 = nn.RMSNorm(h, eps=cfg.rms_norm_eps)
        self.q = nn.Linear(h, nh * hd, bias=False)
        self.k = nn.Linear(h, nkv * hd, bias=False)
        self.v = nn.Linear(h, nkv * hd, bias=False)
        self.o = nn.Linear(nh * hd, h, bias=False)
        self.ln2 = nn.RMSNorm(h, eps=cfg.rms_norm_eps)
        self.gate_up = nn.Linear(h, 2 * cfg.intermediate_size, bias=False)
        self.down = nn.Linear(cfg.intermediate_size, h, bias=False)
        if cfg.qk_norm:  # Qwen3-style per-head norms, applied before the rotation
            self.q_norm = nn.RMSNorm(hd, eps=cfg.rms_norm_eps)
            self.k_norm = nn.RMSNorm(hd, eps=cfg.rms_norm_eps)

    def fuse_for_decoding(self) -> None:
        """Decoding only: one packed [q; k; v] weight for the block and one [k; v] for the context.
        After each target step the drafter's weights are fetched cold, and every oneDNN call pays
        its own start; one call per projection group reads the same bytes with fewer starts and
        gives bitwise the same products (tests/test_dflash_lean_decoding.py)."""
        ws = [getattr(self, name).weight.detach() for name in ("q", "k", "v")]
        self.qkv_packed = pack_weight(torch.cat(ws))
        self.kv_packed = pack_weight(torch.cat(ws[1:])) if self.qkv_packed is not None else None

    def _split_kv(self, kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Fused [k; v] outputs [b, n, 2 * kv_heads * d] -> normed key heads and value heads."""
        k, v = kv.chunk(2, dim=-1)
        return self._key_heads(k), self._heads(v, self.cfg.num_kv_heads)

    def _heads(self, x: torch.Tensor, n_heads: int) -> torch.Tensor:
        b, n, _ = x.shape
        return x.view(b, n, n_heads, self.cfg.head_dim).transpose(1, 2)

    def _keys(self, x: torch.Tensor) -> torch.Tensor:
        return self._key_heads(self.k(x))

    def _key_heads(self, k: torch.Tensor) -> torch.Tensor:
        """Projected keys [b, n, kv_heads * d] -> key heads, normed where the config says."""
        k = self._heads(k, self.cfg.num_kv_heads)
        return self.k_norm(k) if self.cfg.qk_norm else k

    def project_context(self, ctx: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ctx [b, T, H] at positions pos [b, T] -> rotated keys and values [b, kv_heads, T, d]."""
        if self.kv_packed is not None:
            k, v = self._split_kv(packed_linear(ctx, self.kv_packed))
        else:
            k, v = self._keys(ctx), self._heads(self.v(ctx), self.cfg.num_kv_heads)
        return rotate(k, pos[:, None], self.cfg.rope_theta), v

    def forward(
        self,
        x: torch.Tensor,
        pos: torch.Tensor,
        ctx_k: torch.Tensor,
        ctx_v: torch.Tensor,
        mask: torch.Tensor | None,
    ) -> torch.Tensor:
        """x [b, q, H] block states at positions pos [b, q]; mask [b, q, T + q] (True = may attend;
        None: everything)."""
        cfg = self.cfg
        h = self.ln1(x)
        if self.qkv_packed is not None:
            qkv = packed_linear(h, self.qkv_packed)
            nq = cfg.num_heads * cfg.head_dim
            q = self._heads(qkv[..., :nq], cfg.num_heads)
            k, v = self._split_kv(qkv[..., nq:])
        else:
            q = self._heads(self.q(h), cfg.num_heads)
            k, v = self._keys(h), self._heads(self.v(h), cfg.num_kv_heads)
        q = rotate(self.q_norm(q) if cfg.qk_norm else q, pos[:, None], cfg.rope_theta)
        k = rotate(k, pos[:, None], cfg.rope_theta)
        att = F.scaled_dot_product_attention(
            q,
            torch.cat([ctx_k, k], 2),
            torch.cat([ctx_v, v], 2),
            attn_mask=None if mask is None else mask[:, None],
            enable_gqa=cfg.num_heads != cfg.num_kv_heads,
        )
        b, _, n, _ = att.shape
        x = x + self.o(att.transpose(1, 2).reshape(b, n, -1))
        gate, up = self.gate_up(self.ln2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class DFlashModel(nn.Module):
    """Trainable drafter weights plus frozen views of the target's embedding and lm_head."""

    ZERO_START = ("markov_out", "state_out", "lookup_in", "lookup_len")
    """Weights that start at zero, so a head added to a trained drafter starts as a no-op."""
    GROWABLE = ("state_in", "state_out", "lookup_in", "lookup_len", "layers.")
    """Weights a fine-tune may add to a drafter that lacks them (`train --init-from`): they start as
    a no-op, so the fine-tune begins from the loaded drafter's own predictions."""
    GROWABLE_CONFIG = ("markov_state", "lookup_input", "num_layers", "qk_norm")
    """Config fields a fine-tune may raise: 0 -> on switches those weights on; extra draft layers go
    on top of the loaded ones and start as the identity (`start_grown`); q/k norms start at weight 1.
    A raise that reshapes a loaded weight (e.g. lookup_input 6 -> 8) is still refused by the weight
    check."""
    DROPPABLE = ("lookup_in", "lookup_len")
    DROPPABLE_CONFIG = ("lookup_input",)
    """Config fields a fine-tune may turn off (to 0), dropping their weights: how a drafter trained
    with a draftsmith-only input becomes one the export formats carry."""
    RELAYOUT = ("d2t",)
    RELAYOUT_CONFIG = ("sample_from_anchor", "draft_vocab_size")
    """Config fields a fine-tune may change freely, keeping the new drafter's buffers of those names:
    the block's slot layout (z-lab's mask slots or not) and the draft vocabulary (rows of the target's
    own lm_head, which the drafter borrows) reshape no trained weight of a DFlash drafter. A DSpark
    Markov head sized by the draft vocabulary is still refused by the weight check."""

    def __init__(self, cfg: DFlashConfig) -> None:
        super().__init__()
        self.cfg = cfg
        h = cfg.hidden_size
        vd = cfg.draft_vocab_size or cfg.target_vocab_size
        self.fc = nn.Linear(len(cfg.target_layers) * h, h, bias=False)
        self.ctx_norm = nn.RMSNorm(h, eps=cfg.rms_norm_eps)
        self.layers = nn.ModuleList(DraftLayer(cfg) for _ in range(cfg.num_layers))
        self.norm = nn.RMSNorm(h, eps=cfg.rms_norm_eps)
        # draft index -> target id (identity for the full vocabulary); saved with the weights
        self.register_buffer("d2t", torch.arange(vd), persistent=True)
        if cfg.markov_rank:
            # rows: draft vocabulary + one shared row for tokens outside it (or one per target id)
            rows = cfg.target_vocab_size if cfg.markov_vocab == "target" else vd + 1
            self.markov_in = nn.Embedding(rows, cfg.markov_rank)
            self.markov_out = nn.Linear(cfg.markov_rank, vd, bias=False)
            nn.init.zeros_(self.markov_out.weight)  # start as plain DFlash
        if cfg.markov_state:
            self.state_in = nn.Linear(2 * h, cfg.markov_state)
            self.state_out = nn.Linear(cfg.markov_state, h, bias=False)
            nn.init.zeros_(self.state_out.weight)  # starts as a no-op: a fine-tune of a DSpark grows it
        if cfg.confidence:
            self.conf = nn.Linear(h + cfg.markov_rank, 1)
        if cfg.lookup_input:  # each slot's prompt-lookup guess and its match length (lookup.py)
            self.lookup_in = nn.Linear(h, h, bias=False)
            self.lookup_len = nn.Embedding(cfg.lookup_input + 1, h)
            nn.init.zeros_(self.lookup_in.weight)  # starts as a no-op: a fine-tune grows it
            nn.init.zeros_(self.lookup_len.weight)
        self.embed: torch.Tensor | None = None  # [V, H] frozen target embedding
        self.head: torch.Tensor | None = None  # [Vd, H] frozen target lm_head rows of the draft vocab
        self.t2d: torch.Tensor | None = None  # [V] target id -> draft index (vd = outside)
        # how often each target token occurred in the training answers (saved beside the weights):
        # ranks the tokens when decoding cuts the draft vocabulary (vocab.cut_vocab)
        self.token_counts: np.ndarray | None = None

    def attach_target(self, embed: torch.Tensor, lm_head: torch.Tensor) -> None:
        """Borrow the target's frozen embedding and lm_head (never trained, never saved here)."""
        self.embed = embed.detach()
        self.head = lm_head.detach()[self.d2t]
        self._index_vocab()

    def _index_vocab(self) -> None:
        """t2d: each target id's draft index (vd = outside the draft vocabulary)."""
        vd = self.d2t.shape[0]
        t2d = torch.full((self.embed.shape[0],), vd, dtype=torch.long, device=self.d2t.device)
        t2d[self.d2t] = torch.arange(vd, device=self.d2t.device)
        self.t2d = t2d

    def derive(self, cfg: DFlashConfig, state: dict, rows: torch.Tensor | None = None) -> DFlashModel:
        """A drafter made from this one (vocab.cut_vocab, lookup.drop_lookup): `cfg` with weights
        `state`, in this one's dtype and device, with its token counts and its attached target (the
        head's `rows` when the new one drafts a subset of its tokens), ready to draft."""
        out = DFlashModel(cfg)
        out.d2t = torch.empty_like(state["d2t"])
        out.load_state_dict(state)
        p = next(self.parameters())
        out.to(device=p.device, dtype=p.dtype)
        out.d2t = out.d2t.to(p.device)
        out.token_counts = self.token_counts
        if self.embed is not None:
            out.embed = self.embed
            out.head = self.head if rows is None else self.head[rows.to(self.head.device)]
            out._index_vocab()
        return out.eval().requires_grad_(False)

    def fuse_for_decoding(self) -> None:
        """Give each draft layer its fused decoding weights (`DraftLayer.fuse_for_decoding`); for a
        drafter loaded to draft only, never one that trains (the packed op has no gradient)."""
        if packing_enabled():
            for layer in self.layers:
                layer.fuse_for_decoding()

    def fuse_context(self, features: torch.Tensor) -> torch.Tensor:
        """[b, T, n_layers * H] target features -> [b, T, H] context states."""
        return self.ctx_norm(self.fc(features))

    def backbone(
        self,
        block_ids: torch.Tensor,
        pos: torch.Tensor,
        ctx_kv: list[tuple[torch.Tensor, torch.Tensor]],
        mask: torch.Tensor | None,
        anchor_ctx: torch.Tensor | None = None,
        guesses: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Final-normed block states [b, q, H] for block tokens block_ids [b, q].

        anchor_ctx [b, q, H]: the fused context state just before each slot's anchor, added to the
        block inputs when cfg.anchor_context (EAGLE's direct path from the newest target state,
        which plain DFlash reaches only through attention). guesses: each slot's prompt-lookup
        guess (target ids [b, q]) and match length ([b, q], 0 = none), when cfg.lookup_input."""
        x = F.embedding(block_ids, self.embed)
        if self.cfg.anchor_context:
            if anchor_ctx is None:
                raise ValueError("this drafter adds the anchor's context state: pass anchor_ctx")
            x = x + anchor_ctx.to(x.dtype)
        if self.cfg.lookup_input:
            if guesses is None:
                raise ValueError("this drafter reads prompt-lookup guesses: pass guesses")
            x = x + self.guess_inputs(*guesses).to(x.dtype)
        for layer, (k, v) in zip(self.layers, ctx_kv, strict=True):
            x = layer(x, pos, k, v, mask)
        return self.norm(x)

    def guess_inputs(self, ids: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
        """[..., H] added to each slot's input: its guess's embedding, projected, plus a vector for
        the match length; zero where a slot has no guess, so no match means plain DFlash/DSpark."""
        lens = lens.clamp(max=self.cfg.lookup_input)
        emb = F.embedding(ids, self.embed).to(self.lookup_in.weight.dtype)
        x = self.lookup_in(emb) + self.lookup_len(lens)
        return x * (lens > 0)[..., None].to(x.dtype)

    def step_states(self, states: torch.Tensor, prev_ids: torch.Tensor) -> torch.Tensor:
        """Slot states [..., H] updated by the token before each slot (target ids prev_ids [...]):
        the serial part of DSpark that reaches the full head (identity without markov_state)."""
        if not self.cfg.markov_state:
            return states
        x = torch.cat([states, F.embedding(prev_ids, self.embed).to(states.dtype)], -1)
        return states + self.state_out(F.silu(self.state_in(x)))

    def base_logits(self, states: torch.Tensor) -> torch.Tensor:
        return read_head(states, self)

    def prev_index(self, prev_ids: torch.Tensor) -> torch.Tensor:
        """Markov rows of previous tokens given as target ids."""
        return prev_ids if self.cfg.markov_vocab == "target" else self.t2d[prev_ids]

    def draft_row(self, idx: torch.Tensor) -> torch.Tensor:
        """Markov rows of tokens chosen as draft indices (the next slot's previous token)."""
        return self.d2t[idx] if self.cfg.markov_vocab == "target" else idx

    def markov_bias(self, prev_idx: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """Low-rank previous-token bias [..., Vd] for draft indices prev_idx [...] (or their Markov
        rows, when the caller already looked them up)."""
        return self.markov_out(self.markov_in(prev_idx) if rows is None else rows)

    def confidence_logit(
        self, states: torch.Tensor, prev_idx: torch.Tensor, rows: torch.Tensor | None = None
    ) -> torch.Tensor:
        if self.cfg.markov_rank:
            states = torch.cat([states, self.markov_in(prev_idx) if rows is None else rows], -1)
        return self.conf(states).squeeze(-1)

    def position_weights(self, device: torch.device | None = None) -> torch.Tensor:
        k = torch.arange(self.cfg.block_size, device=device, dtype=torch.float32)
        return torch.exp(-k / self.cfg.gamma)

    @torch.no_grad()
    def init_from_target(self, target_model: nn.Module) -> None:
        """Start from the target's last decoder layers and final norm, and an fc that passes the
        deepest selected layer through. With little data this beats a random start: the block
        path begins as a real (shallow) transformer over sensible context states."""
        base = target_model.model
        src_layers = list(base.layers)[-len(self.layers) :]
        for mine, theirs in zip(self.layers, src_layers, strict=True):
            a, mlp = theirs.self_attn, theirs.mlp
            pairs = [
                (mine.ln1.weight, theirs.input_layernorm.weight),
                (mine.q.weight, a.q_proj.weight),
                (mine.k.weight, a.k_proj.weight),
                (mine.v.weight, a.v_proj.weight),
                (mine.o.weight, a.o_proj.weight),
                (mine.ln2.weight, theirs.post_attention_layernorm.weight),
                (mine.down.weight, mlp.down_proj.weight),
            ]
            pairs.append((mine.gate_up.weight, torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])))
            if any(dst.shape != src.shape for dst, src in pairs):
                return  # a drafter narrower than its target keeps the random start
            for dst, src in pairs:
                dst.copy_(src)
        self.norm.weight.copy_(base.norm.weight)
        h = self.cfg.hidden_size
        self.fc.weight.zero_()
        self.fc.weight[:, -h:] = torch.eye(h)

    @torch.no_grad()
    def init_head_side(self, target_model: nn.Module) -> None:
        """Copy the target's final norm: the drafter reads out through the target's own lm_head,
        whose logit scale that norm sets (SmolLM2's weights average 1.8, not the default 1)."""
        src = getattr(getattr(target_model, "model", None), "norm", None)
        if (
            src is not None
            and getattr(src, "weight", None) is not None
            and src.weight.shape == self.norm.weight.shape
        ):
            self.norm.weight.copy_(src.weight)

    @torch.no_grad()
    def start_grown(self, grown: set[str]) -> None:
        """Zero the residual outputs (attention `o`, MLP `down`) of draft layers a fine-tune adds, so
        each starts as the identity on top of the loaded layers; its other weights keep their init
        and learn once the zeroed outputs move (as LoRA's zero B does)."""
        for name, p in self.named_parameters():
            if name in grown and name.startswith("layers.") and name.endswith((".o.weight", ".down.weight")):
                p.zero_()

    def init_weights(self, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        for name, p in self.named_parameters():
            if p.dim() == 2 and not name.startswith(self.ZERO_START):
                with torch.no_grad():
                    p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))
