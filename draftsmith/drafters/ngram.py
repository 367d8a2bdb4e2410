"""Prompt lookup: draft the continuation of the latest earlier occurrence of the current suffix.

Free to run and strong on copy-heavy text (code edits, quoting the prompt); weak on open chat.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from draftsmith.engine.drafter import Draft, Drafter
from draftsmith.errors import DraftsmithError


@dataclass(frozen=True)
class NgramDecodeOptions:
    """Prompt lookup's decoding options (`NgramDrafter.options`): the suffix lengths it matches."""

    ngram_max: int = field(default=3, metadata={"help": "longest suffix to match"})
    ngram_min: int = field(default=2, metadata={"help": "shortest suffix to match"})

    def __post_init__(self) -> None:
        if not 1 <= self.ngram_min <= self.ngram_max:
            raise DraftsmithError(f"need 1 <= ngram_min <= ngram_max, got {self.ngram_min}..{self.ngram_max}")


class NgramDrafter(Drafter):
    name = "ngram"
    description = "n-gram prompt lookup over prompt + generated text (no training)"
    options = NgramDecodeOptions

    def __init__(self, k: int = 10, max_ngram: int = 3, min_ngram: int = 2) -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise DraftsmithError(f"need 1 <= ngram_min <= ngram_max, got {min_ngram}..{max_ngram}")
        self.default_k = k
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram

    @classmethod
    def build(cls, target, options: NgramDecodeOptions | None = None, k: int | None = None) -> NgramDrafter:
        o = options or NgramDecodeOptions()
        return cls(k=10 if k is None else k, max_ngram=o.ngram_max, min_ngram=o.ngram_min)

    def propose(self, tokens: torch.Tensor, k: int, params, generator) -> Draft:
        cont, _ = lookup(tokens.cpu().numpy(), k, self.max_ngram, self.min_ngram)
        return Draft(torch.from_numpy(cont).to(tokens.device))


def lookup(seq: np.ndarray, k: int, max_ngram: int, min_ngram: int) -> tuple[np.ndarray, int]:
    """Up to k tokens that followed an earlier occurrence of the longest suffix of `seq` of
    min_ngram..max_ngram tokens, and that suffix's length (empty and 0 when none matches). In numpy:
    the hybrid runs it at every slot of every DSpark round, where torch's per-call overhead cost
    ~107 against ~30 us a call on a 2-core CPU."""
    last = len(seq) - 1
    ends = np.flatnonzero(seq[:last] == seq[last]) if last > 0 else np.zeros(0, np.int64)
    length = np.ones(len(ends), dtype=np.int64)  # each earlier occurrence's match, extended backwards
    alive = np.ones(len(ends), dtype=bool)
    for back in range(1, min(max_ngram, last)):
        ok = ends >= back
        ok[ok] = seq[ends[ok] - back] == seq[last - back]
        alive &= ok
        length += alive
    best = int(length.max()) if len(ends) else 0
    if best < min_ngram:
        return seq[:0].copy(), 0
    # the most recent match is the most local context, unless the sequence end truncates its
    # continuation; then the earliest match gives the longest draft
    starts = ends[length == best] + 1
    full = starts[starts + k <= len(seq)]
    start = int(full[-1]) if len(full) else int(starts[0])
    return seq[start : start + k].copy(), best
