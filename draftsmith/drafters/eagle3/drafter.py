"""EAGLE-3 decoding as a chain: k tokens proposed one after another by the one-layer drafter.

The drafter keeps its own append-only KV cache over committed positions: the entry of position t
pairs the target's fused state at t with the token t + 1, so it is final once both exist and is
never rolled back; `accept` appends the entries of the positions the target just verified (their
states come with the verify pass). A round's draft steps attend that cache plus their own chain
and are discarded after the round. The first draft token comes from the newest entry's output,
so k drafts cost k - 1 one-token passes.
"""

from __future__ import annotations

import torch

from draftsmith.drafters.checkpoint import shipped_drafter
from draftsmith.drafters.eagle3.checkpoint import load_drafter
from draftsmith.drafters.eagle3.model import Eagle3Model
from draftsmith.drafters.eagle3.recipe import Eagle3Recipe
from draftsmith.drafters.options import TrainedDecodeOptions
from draftsmith.engine.drafter import Draft, Drafter, QueuedStates
from draftsmith.engine.packing import for_decoding
from draftsmith.engine.sampling import SamplingParams, draft_choice
from draftsmith.errors import DraftsmithError


class Eagle3Drafter(QueuedStates, Drafter):
    name = "eagle3"
    description = (
        "EAGLE-3: one layer over fused low/mid/high target states, chain drafts (needs a trained drafter)"
    )
    recipe = Eagle3Recipe()
    options = TrainedDecodeOptions
    export_formats = ("sglang", "speculators", "gguf")

    @classmethod
    def owns(cls, path, config: dict | None) -> bool:
        from draftsmith.drafters.eagle3.export import owns

        return owns(config)

    @classmethod
    def export(cls, directory, fmt: str, out, target, verifier):
        from draftsmith.drafters.eagle3.export import WRITERS
        from draftsmith.export import stored_dtype

        return WRITERS[fmt](load_drafter(directory, target, dtype=stored_dtype(directory)), out, verifier)

    def __init__(self, model: Eagle3Model, target_vocab: int, k: int | None = None) -> None:
        if k is not None and k < 0:
            raise DraftsmithError(f"draft length k must be >= 0, got {k}")
        self.model = model
        self.cfg = model.cfg
        self.hidden_layers = tuple(dict.fromkeys(self.cfg.target_layers))  # unique, in order
        self.default_k = self.cfg.ttt_steps if k is None else k
        self.target_vocab = target_vocab
        self.n_ctx = 0
        self.last: torch.Tensor | None = None
        self.pending: list[dict] = []  # target states of rounds not fed yet

    @classmethod
    def load_model(cls, target, drafter=None, dtype: torch.dtype | None = None) -> Eagle3Model:
        """A loaded model, a trained directory (own format, or an SGLang / speculators export), or
        the one shipped for this target."""
        if isinstance(drafter, Eagle3Model):
            return drafter
        drafter = drafter or shipped_drafter(cls.name, target)
        if not drafter:
            raise DraftsmithError(
                f"method 'eagle3' needs --drafter DIR (a trained EAGLE-3 drafter; none ships for "
                f"{target.name!r}): train one with `draftsmith train --method eagle3`"
            )
        return load_drafter(drafter, target, dtype)

    @classmethod
    def build(
        cls, target, options: TrainedDecodeOptions | None = None, k: int | None = None
    ) -> Eagle3Drafter:
        drafter = (options or TrainedDecodeOptions()).drafter
        model = for_decoding(cls.load_model(target, drafter), drafter)
        return cls(model, target.runner.vocab_size, k)

    def start(self, prompt: torch.Tensor, hidden, max_len: int) -> None:
        cfg, p = self.cfg, self.model.fc.weight
        shape = (1, cfg.num_kv_heads, max_len + 1, cfg.head_dim)
        self.ctx_k = torch.empty(shape, dtype=p.dtype, device=p.device)
        self.ctx_v = torch.empty(shape, dtype=p.dtype, device=p.device)
        self.n_ctx = 0
        self.last = None
        self.pending = []
        self._append(prompt, hidden)

    @torch.inference_mode()
    def _append(self, tokens: torch.Tensor, hidden) -> None:
        """Entries for the positions whose target states `hidden` holds (the next n after n_ctx)."""
        if not hidden:
            return
        m = self.model
        feats = torch.cat([hidden[x] for x in self.cfg.target_layers], -1)[None].to(m.fc.weight.dtype)
        n, start = feats.shape[1], self.n_ctx
        nxt = tokens[start + 1 : start + n + 1][None].to(feats.device)
        pos = torch.arange(start, start + n, device=feats.device)[None]
        past_k, past_v = self.ctx_k[:, :, :start], self.ctx_v[:, :, :start]
        out, k, v = m.context(nxt, m.fuse(feats), pos, past_k, past_v)
        self.ctx_k[:, :, start : start + n] = k
        self.ctx_v[:, :, start : start + n] = v
        self.n_ctx += n
        self.last = out[:, -1:]

    @torch.inference_mode()
    def propose(self, tokens: torch.Tensor, k: int, params: SamplingParams, generator) -> Draft:
        m = self.model
        self.flush(tokens)
        if k <= 0 or self.last is None:  # a one-token prompt: no committed target state yet
            return Draft.empty(tokens.device)
        if self.n_ctx != tokens.shape[0] - 1:
            raise RuntimeError(f"context cache out of sync: {self.n_ctx} states for {tokens.shape[0]} tokens")
        ctx_k, ctx_v = self.ctx_k[:, :, : self.n_ctx], self.ctx_v[:, :, : self.n_ctx]
        hidden, last_pos = self.last, self.n_ctx - 1
        chosen, dists, ks, vs = [], [], [], []
        for j in range(k):
            if j:
                tok = m.draft_ids[chosen[-1]].view(1, 1)
                pos = torch.full((1, 1), last_pos + j, device=tokens.device)
                chain_k = torch.stack(ks, 3) if ks else None
                chain_v = torch.stack(vs, 3) if vs else None
                hidden, kj, vj = m.chain(tok, hidden, pos, ctx_k, ctx_v, None, chain_k, chain_v)
                ks.append(kj)
                vs.append(vj)
            idx, q = draft_choice(m.logits(hidden)[0, 0].float(), params, generator)
            chosen.append(idx)
            if q is not None:
                dists.append(q)
        out = m.draft_ids[torch.stack(chosen)]
        probs = None
        if dists:
            probs = torch.zeros(len(dists), self.target_vocab, device=tokens.device)
            probs[:, m.draft_ids] = torch.stack(dists)
        return Draft(out, probs)
