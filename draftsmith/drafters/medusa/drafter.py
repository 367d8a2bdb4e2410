"""Medusa decoding: all K heads read the newest target state at once; a round drafts their top
choices (or samples, each head's distribution kept for lossless speculative sampling).

The newest state the engine has is that of the position before the last committed token (the
last token itself enters the target's cache with the next verify pass), exactly the state whose
lm_head output chose that token: head i then guesses the token i places after it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from draftsmith.drafters.checkpoint import shipped_drafter
from draftsmith.drafters.medusa.checkpoint import load_medusa
from draftsmith.drafters.medusa.model import FORMAT, MedusaModel
from draftsmith.drafters.medusa.recipe import MedusaRecipe
from draftsmith.drafters.options import TrainedDecodeOptions
from draftsmith.engine.drafter import Draft, Drafter
from draftsmith.engine.packing import for_decoding
from draftsmith.engine.runner import FINAL
from draftsmith.engine.sampling import SamplingParams, draft_choice
from draftsmith.errors import DraftsmithError


class MedusaDrafter(Drafter):
    name = "medusa"
    description = (
        "Medusa: K parallel heads on the target's last state, one pass per round (needs a trained drafter)"
    )
    recipe = MedusaRecipe()
    options = TrainedDecodeOptions
    hidden_layers = (FINAL,)
    export_formats = ("medusa",)

    @classmethod
    def owns(cls, path, config: dict | None) -> bool:
        """Heads trained here, or a vLLM medusa directory (which loads back as well)."""
        from draftsmith.drafters.medusa.export import owns

        return str((config or {}).get("format", "")) == FORMAT or owns(config)

    @classmethod
    def export(cls, directory, fmt: str, out, target, verifier):
        from draftsmith.drafters.medusa.export import WRITERS
        from draftsmith.export import stored_dtype

        return WRITERS[fmt](load_medusa(directory, target, dtype=stored_dtype(directory)), out, verifier)

    def __init__(self, model: MedusaModel, target_vocab: int, k: int | None = None) -> None:
        if k is not None and k < 0:
            raise DraftsmithError(f"draft length k must be >= 0, got {k}")
        self.model = model
        self.target_vocab = target_vocab
        self.default_k = model.cfg.num_heads if k is None else min(k, model.cfg.num_heads)
        self.state: torch.Tensor | None = None  # [1, H] the newest target state

    @classmethod
    def load_model(cls, target, drafter=None, dtype: torch.dtype | None = None) -> MedusaModel:
        """A loaded model, a trained directory, or the heads shipped for this target."""
        if isinstance(drafter, MedusaModel):
            return drafter
        drafter = drafter or shipped_drafter(cls.name, target)
        if not drafter:
            raise DraftsmithError(
                f"method 'medusa' needs --drafter DIR (heads trained with `draftsmith train --method "
                f"medusa`; none ship for {target.name!r})"
            )
        return load_medusa(drafter, target, dtype)

    @classmethod
    def build(
        cls, target, options: TrainedDecodeOptions | None = None, k: int | None = None
    ) -> MedusaDrafter:
        drafter = (options or TrainedDecodeOptions()).drafter
        model = for_decoding(cls.load_model(target, drafter), drafter)
        return cls(model, target.runner.vocab_size, k)

    def batch_key(self) -> object:
        return id(self.model)

    def start(self, prompt: torch.Tensor, hidden, max_len: int) -> None:
        self.state = hidden[FINAL][-1:].clone() if hidden and hidden[FINAL].shape[0] else None

    def accept(self, tokens: torch.Tensor, n_new: int, hidden) -> None:
        if hidden and hidden[FINAL].shape[0]:
            self.state = hidden[FINAL][-1:].clone()

    def propose(self, tokens: torch.Tensor, k: int, params: SamplingParams, generator) -> Draft:
        return self.propose_batch([self], [tokens], [k], [params], [generator])[0]

    @classmethod
    @torch.inference_mode()
    def propose_batch(
        cls,
        drafters: Sequence[MedusaDrafter],
        tokens: Sequence[torch.Tensor],
        ks: Sequence[int],
        params: Sequence[SamplingParams],
        generators: Sequence[torch.Generator | None],
    ) -> list[Draft]:
        """One pass of the heads over every request's state (forks share the weights)."""
        live = [i for i, d in enumerate(drafters) if d.state is not None and ks[i] > 0]
        drafts = [Draft.empty(t.device) for t in tokens]
        if not live:
            return drafts
        m = drafters[live[0]].model
        logits = m(torch.cat([drafters[i].state for i in live]).to(m.d2t.device, m.head.dtype))  # [n, K, Vd]
        for row, i in enumerate(live):
            k = min(ks[i], m.cfg.num_heads)
            chosen, dists = [], []
            for j in range(k):
                idx, q = draft_choice(logits[row, j].float(), params[i], generators[i])
                chosen.append(idx)
                if q is not None:
                    dists.append(q)
            probs = None
            if dists:
                probs = torch.zeros(len(dists), drafters[i].target_vocab, device=logits.device)
                probs[:, m.d2t] = torch.stack(dists)
            drafts[i] = Draft(m.d2t[torch.stack(chosen)].to(tokens[i].device), probs)
        return drafts
