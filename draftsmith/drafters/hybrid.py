"""Hybrid drafter: n-gram lookup when the text repeats itself, the trained DSpark drafter otherwise.

Prompt lookup is free and, when the current suffix already occurred (code that echoes its prompt,
lists, quoted text), often right for many tokens; a trained drafter wins on fresh text. This one
checks for a long suffix match first (at least `min_match` tokens) and falls back to DSpark. The
DSpark context cache is fed on every round whichever source drafted, so switching costs nothing.
Where DSpark drafts, a shorter match still counts: at each slot of its serial walk the token that
followed the latest earlier occurrence of the current suffix (context + drafts so far, at least
SOFT_MIN_MATCH tokens) gets `lookup_bonus` added to its logit, so lookup steers DSpark where DSpark
is unsure and DSpark overrules it where it is sure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch

from draftsmith.drafters.dflash.drafter import DFlashDecodeOptions
from draftsmith.drafters.dspark.drafter import DSparkDrafter
from draftsmith.drafters.ngram import NgramDrafter, lookup
from draftsmith.engine.drafter import Draft, Drafter
from draftsmith.engine.runner import HiddenKey
from draftsmith.engine.sampling import SamplingParams
from draftsmith.errors import DraftsmithError

SOFT_MIN_MATCH = 2
"""Shortest suffix match whose next token DSpark's walk is steered to. With the bonus below it lifted
teacher-forced walk tau on dev answers over the hard switch alone on every suite (2.057 -> 2.101
on answers held out from the grid that chose it; docs/experiments.md)."""

LOOKUP_BONUS = 4.0
"""Default logit bonus for that token (an earlier grid on dev answers 0-14: bonuses 1, 2, 4 and 8 at
minimum matches of 1, 2 and 3; 4 at 2 led, and held on answers 15-29)."""


def lookup_hint(
    max_match: int, bonus: float, tokens: torch.Tensor, drafted: list[int]
) -> tuple[int, float] | None:
    """The token after the latest earlier occurrence of the longest suffix (SOFT_MIN_MATCH..max_match
    tokens) of tokens + drafted, with the bonus; None when no such suffix occurred before."""
    seq = tokens.cpu().numpy()
    if drafted:
        seq = np.concatenate([seq, np.asarray(drafted, dtype=seq.dtype)])
    cont, n = lookup(seq, 1, max_match, SOFT_MIN_MATCH)
    return (int(cont[0]), bonus) if n else None


@dataclass(frozen=True)
class HybridDecodeOptions(DFlashDecodeOptions):
    """The hybrid's decoding options (`HybridDrafter.options`): its DSpark drafter's, and the lookup's."""

    ngram_max: int = field(
        default=3, metadata={"help": "longest suffix matched, for the switch to lookup and for the bonus"}
    )
    ngram_min: int = field(
        default=3,
        metadata={
            "help": "shortest suffix match that switches to lookup (at least 3: a shorter match is too "
            "weak to trust over the trained drafter)"
        },
    )
    lookup_bonus: float = field(
        default=LOOKUP_BONUS,
        metadata={
            "help": "logit bonus DSpark's walk gives the token that followed an earlier occurrence of the "
            "current suffix (0 = only the hard switch to lookup on long matches)",
            "per_method": True,
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if min(self.ngram_min, self.ngram_max) < 1:
            raise DraftsmithError(
                f"ngram_min and ngram_max must be >= 1, got {self.ngram_min}..{self.ngram_max}"
            )
        if not (math.isfinite(self.lookup_bonus) and self.lookup_bonus >= 0):
            raise DraftsmithError(
                f"lookup bonus must be a finite number >= 0 (0 = off), got {self.lookup_bonus}"
            )


class HybridDrafter(Drafter):
    name = "hybrid"
    description = "n-gram lookup on a long suffix match, DSpark otherwise (needs a trained DSpark drafter)"
    options = HybridDecodeOptions

    def __init__(
        self,
        learned: DSparkDrafter,
        min_match: int = 3,
        max_match: int = 5,
        lookup_bonus: float = LOOKUP_BONUS,
    ) -> None:
        if not (math.isfinite(lookup_bonus) and lookup_bonus >= 0):
            raise DraftsmithError(f"lookup bonus must be a finite number >= 0 (0 = off), got {lookup_bonus}")
        self.learned = learned
        learned.slot_hint = (
            partial(lookup_hint, max(min_match, max_match), lookup_bonus) if lookup_bonus else None
        )
        self.lookup = NgramDrafter(
            k=learned.default_k, max_ngram=max(min_match, max_match), min_ngram=min_match
        )
        self.hidden_layers = learned.hidden_layers
        self.default_k = learned.default_k
        self.confidences: list[float] = []
        self.source = ""  # which drafter made the last proposal: "ngram" or "dspark"
        self.length_rule = learned.length_rule  # applies to DSpark's rounds (token_probs below)

    @property
    def token_probs(self) -> list[float]:
        """DSpark's probabilities of this round's drafts, or 1.0 for each slot of a lookup round: a
        lookup copies text the context already holds, so the engine verifies all it drafted (up to the
        history length + 1 the engine asked for), unless the rows cost more than certain tokens earn.
        Cutting lookups by the history rule instead lost 0.01-0.02x in two interleaved benches
        (docs/experiments.md)."""
        return self.learned.token_probs if self.source == "dspark" else [1.0] * self.default_k

    @classmethod
    def build(cls, target, options: HybridDecodeOptions | None = None, k: int | None = None) -> HybridDrafter:
        """ngram_min/ngram_max bound the suffix match that switches to lookup (the minimum is at least
        3); lookup_bonus steers DSpark's own drafts toward shorter matches (0: off); the rest is
        DSpark's (its drafter, confidence threshold and length rule)."""
        o = options or HybridDecodeOptions()
        learned = DSparkDrafter.build(target, o)  # reads its DFlashDecodeOptions part
        return cls(learned, min_match=max(3, o.ngram_min), max_match=o.ngram_max, lookup_bonus=o.lookup_bonus)

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
