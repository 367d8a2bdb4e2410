"""Hybrid drafter: n-gram lookup when the text repeats itself, the trained DSpark drafter otherwise.

Prompt lookup is free and, when the current suffix already occurred (code that echoes its prompt,
lists, quoted text), often right for many tokens; a trained drafter wins on fresh text. This one
checks for a long suffix match first (at least `min_match` tokens) and falls back to DSpark. The
DSpark context cache is fed on every round whichever source drafted, so switching costs nothing.
"""

from __future__ import annotations

import torch

from draftsmith.drafters.base import Draft, Drafter
from draftsmith.drafters.dflash.drafter import DSparkDrafter
from draftsmith.drafters.ngram import NgramDrafter
from draftsmith.engine.runner import HiddenKey
from draftsmith.engine.sampling import SamplingParams


class HybridDrafter(Drafter):
    name = "hybrid"
    description = "n-gram lookup on a long suffix match, DSpark otherwise (needs a trained DSpark drafter)"

    def __init__(self, learned: DSparkDrafter, min_match: int = 3, max_match: int = 5) -> None:
        self.learned = learned
        self.lookup = NgramDrafter(
            k=learned.default_k, max_ngram=max(min_match, max_match), min_ngram=min_match
        )
        self.hidden_layers = learned.hidden_layers
        self.default_k = learned.default_k
        self.confidences: list[float] = []
        self.source = ""  # which drafter made the last proposal: "ngram" or "dspark"

    @classmethod
    def build(
        cls,
        target,
        drafter=None,
        k=None,
        confidence_threshold: float = 0.0,
        ngram_min: int = 3,
        ngram_max: int = 5,
        **_,
    ):
        """--ngram-min/--ngram-max bound the suffix match that switches to lookup; a match shorter
        than 3 tokens is too weak to trust over the trained drafter, so the minimum is at least 3."""
        learned = DSparkDrafter.build(target, drafter=drafter, confidence_threshold=confidence_threshold)
        return cls(learned, min_match=max(3, ngram_min), max_match=ngram_max)

    def fork(self) -> HybridDrafter:
        other = super().fork()
        other.learned = self.learned.fork()  # the lookup is stateless and shared
        return other

    def start(self, prompt: torch.Tensor, hidden: dict[HiddenKey, torch.Tensor], max_len: int) -> None:
        self.learned.start(prompt, hidden, max_len)

    def propose(
        self, tokens: torch.Tensor, k: int, params: SamplingParams, generator: torch.Generator | None
    ) -> Draft:
        draft = self.lookup.propose(tokens, k, params, generator)  # deterministic: lossless when sampling too
        if len(draft.tokens) >= min(k, 2):  # a 1-token lookup (a match at the very end) is worth less
            self.source, self.confidences = "ngram", []
            return draft
        self.source = "dspark"
        draft = self.learned.propose(tokens, k, params, generator)
        self.confidences = self.learned.confidences
        return draft

    def accept(self, tokens: torch.Tensor, n_new: int, hidden: dict[HiddenKey, torch.Tensor]) -> None:
        self.learned.accept(tokens, n_new, hidden)
