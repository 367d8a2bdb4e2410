"""Prompt lookup: draft the continuation of the latest earlier occurrence of the current suffix.

Free to run and strong on copy-heavy text (code edits, quoting the prompt); weak on open chat.
"""

from __future__ import annotations

import torch

from draftsmith.drafters.base import Draft, Drafter
from draftsmith.errors import DraftsmithError


class NgramDrafter(Drafter):
    name = "ngram"
    description = "n-gram prompt lookup over prompt + generated text (no training)"

    def __init__(self, k: int = 10, max_ngram: int = 3, min_ngram: int = 2) -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise DraftsmithError(f"need 1 <= ngram_min <= ngram_max, got {min_ngram}..{max_ngram}")
        self.default_k = k
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram

    @classmethod
    def build(cls, target, k: int | None = None, ngram_max: int = 3, ngram_min: int = 2, **_) -> NgramDrafter:
        return cls(k=10 if k is None else k, max_ngram=ngram_max, min_ngram=ngram_min)

    def propose(self, tokens: torch.Tensor, k: int, params, generator) -> Draft:
        return Draft(lookup(tokens, k, self.max_ngram, self.min_ngram)[0])


def lookup(tokens: torch.Tensor, k: int, max_ngram: int, min_ngram: int) -> tuple[torch.Tensor, int]:
    """Up to k tokens that followed an earlier occurrence of the longest suffix of `tokens` of
    min_ngram..max_ngram tokens, and that suffix's length (an empty tensor and 0 when none matches)."""
    n_tok = tokens.shape[0]
    for n in range(min(max_ngram, n_tok - 1), min_ngram - 1, -1):
        windows = tokens[: n_tok - 1].unfold(0, n, 1)  # every earlier n-gram with a successor
        hits = (windows == tokens[n_tok - n :]).all(dim=1).nonzero()
        if hits.numel():
            # the most recent match is the most local context, unless the sequence end truncates
            # its continuation; then the earliest match gives the longest draft
            starts = hits[:, 0] + n
            full = starts[starts + k <= n_tok]
            start = int(full[-1]) if full.numel() else int(starts[0])
            return tokens[start : start + k].clone(), n
    return tokens.new_empty(0), 0
