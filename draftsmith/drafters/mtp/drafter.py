"""Inference for MTP: the block chained recursively over an append-only context cache.

Committed positions: for every pair (target state h_t, token x_(t+1)) the engine hands over, the
block runs once and its keys/values stay in the cache (nothing committed is ever recomputed or
rolled back). The block's output at the newest pair already holds the first draft's logits, so
a round costs k - 1 single-token block steps: each reads the previous step's state and the draft
just chosen, attends to the committed cache plus this round's earlier drafts, and is discarded
when the round ends.
"""

from __future__ import annotations

import torch

from draftsmith.drafters.checkpoint import shipped_drafter
from draftsmith.drafters.mtp.checkpoint import load_mtp
from draftsmith.drafters.mtp.model import ContextKV, MTPModel
from draftsmith.drafters.mtp.recipe import MTPRecipe
from draftsmith.drafters.mtp.shipped import load_shipped
from draftsmith.drafters.options import TrainedDecodeOptions
from draftsmith.engine.drafter import Draft, Drafter, QueuedStates
from draftsmith.engine.packing import for_decoding
from draftsmith.engine.runner import FINAL
from draftsmith.engine.sampling import SamplingParams, draft_choice
from draftsmith.errors import DraftsmithError


class MTPDrafter(QueuedStates, Drafter):
    name = "mtp"
    description = (
        "MTP: a DeepSeek-V3-style next-next-token block chained recursively "
        "(trained with `draftsmith train --method mtp`, or the module a checkpoint ships)"
    )
    recipe = MTPRecipe()
    options = TrainedDecodeOptions
    export_formats = ("speculators",)

    @classmethod
    def owns(cls, path, config: dict | None) -> bool:
        """A head trained here (a speculators export of one is written, never read back)."""
        fmt = str((config or {}).get("format", ""))
        return fmt.startswith("draftsmith-mtp/") or (config or {}).get("speculators_model_type") == "mtp"

    @classmethod
    def export(cls, directory, fmt: str, out, target, verifier):
        from draftsmith.drafters.mtp.export import WRITERS
        from draftsmith.export import stored_dtype

        return WRITERS[fmt](load_mtp(directory, target, dtype=stored_dtype(directory)), out, verifier)
    hidden_layers = (FINAL,)
    default_k = 3

    def __init__(self, model: MTPModel, target_vocab: int) -> None:
        self.model = model
        self.cfg = model.cfg
        self.target_vocab = target_vocab
        self.kv = ContextKV(1)
        self.n_ctx = 0
        self.last: torch.Tensor | None = None  # raw block output at the newest committed pair
        self.pending: list[dict] = []  # target states of rounds not fed yet

    @classmethod
    def load_model(cls, target, drafter=None, dtype: torch.dtype | None = None) -> MTPModel:
        """A loaded model, a directory trained here, or (no drafter given) the target's own module,
        else the head shipped in draftsmith for this target."""
        if isinstance(drafter, MTPModel):
            return drafter
        if drafter:
            return load_mtp(drafter, target, dtype)
        model = load_shipped(target)
        if model is not None:
            return model
        packaged = shipped_drafter(cls.name, target)
        if packaged is None:
            raise DraftsmithError(
                f"method 'mtp' needs --drafter DIR (a head trained with `draftsmith train --method mtp`) "
                f"or a target whose checkpoint ships MTP modules (num_nextn_predict_layers); "
                f"{target.name!r} ships none"
            )
        return load_mtp(packaged, target, dtype)

    @classmethod
    def build(cls, target, options: TrainedDecodeOptions | None = None, k: int | None = None) -> MTPDrafter:
        drafter = (options or TrainedDecodeOptions()).drafter
        model = for_decoding(cls.load_model(target, drafter), drafter)
        return cls(model, target.runner.vocab_size)

    def start(self, prompt: torch.Tensor, hidden, max_len: int) -> None:
        self.kv = ContextKV(max_len + 8)
        self.n_ctx = 0
        self.last = None
        self.pending = []
        self._append(prompt, hidden)

    @torch.inference_mode()
    def _append(self, tokens: torch.Tensor, hidden) -> None:
        """Run the block over the newly committed pairs (h_t, x_(t+1)) and keep their keys/values."""
        if not hidden:
            return
        h = hidden[FINAL]
        n, p0 = h.shape[0], self.n_ctx
        dev = h.device
        nxt = tokens[p0 + 1 : p0 + 1 + n].to(dev)
        if nxt.shape[0] != n:
            raise RuntimeError(f"MTP context out of sync: {n} states but {nxt.shape[0]} next tokens")
        self.kv.rewind()  # the last round's draft positions
        idx = torch.arange(n, device=dev)
        mask = torch.cat([torch.ones(n, p0, dtype=torch.bool, device=dev), idx[:, None] >= idx[None]], 1)
        pos = (idx + p0 + 1)[None]
        raw = self.model.block(h[None], nxt[None], pos, self.kv, mask[None])
        self.kv.commit()
        self.last = raw[:, -1:]
        self.n_ctx += n

    @torch.inference_mode()
    def propose(self, tokens: torch.Tensor, k: int, params: SamplingParams, generator) -> Draft:
        n = int(tokens.shape[0])
        self.flush(tokens)
        if self.last is None or k < 1:  # a one-token prompt: no target state yet
            return Draft.empty(tokens.device)
        if self.n_ctx != n - 1:
            raise RuntimeError(f"MTP context out of sync: {self.n_ctx} pairs for {n} tokens")
        m = self.model
        raw, chosen, dists = self.last, [], []
        for s in range(k):
            logits, state = m.readout(raw)
            idx, q = draft_choice(logits[0, -1].float(), params, generator)
            chosen.append(idx)
            if q is not None:
                dists.append(q)
            if s + 1 < k:  # step s + 2 reads this step's state and its draft, one position on
                pos = torch.tensor([[n + s]], device=raw.device)
                raw = m.block(state, m.d2t[idx].view(1, 1), pos, self.kv, None)
        self.kv.rewind()
        out = m.d2t[torch.stack(chosen)]
        probs = None
        if dists:
            probs = torch.zeros(len(dists), self.target_vocab, device=out.device)
            probs[:, m.d2t] = torch.stack(dists)
        return Draft(out, probs)
