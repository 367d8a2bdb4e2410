"""Sampling parameters and the one function that turns logits into the target distribution.

Plain sampling and speculative verification both call `target_probs`, so the distribution a
speculative run reproduces is exactly the one plain sampling draws from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from draftsmith.errors import DraftsmithError


@dataclass(frozen=True)
class SamplingParams:
    """Decoding settings. temperature 0 means greedy (argmax)."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.temperature, (int, float)) or not math.isfinite(self.temperature):
            raise DraftsmithError(f"temperature must be a finite number, got {self.temperature!r}")
        if self.temperature < 0:
            raise DraftsmithError(f"temperature must be >= 0 (0 means greedy), got {self.temperature}")
        if not isinstance(self.top_p, (int, float)) or not (0.0 < self.top_p <= 1.0):
            raise DraftsmithError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise DraftsmithError(f"top_k must be an integer >= 0 (0 disables it), got {self.top_k!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise DraftsmithError(f"seed must be an integer, got {self.seed!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def generator(self, device: torch.device | str = "cpu") -> torch.Generator:
        """A private RNG so that a seed reproduces a run regardless of global torch state."""
        g = torch.Generator(device=device)
        g.manual_seed(self.seed if self.seed is not None else torch.seed())
        return g


def target_probs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Probabilities after temperature, top-k and top-p, computed in fp32. logits: [..., V]."""
    logits = logits.float()
    if params.greedy:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    logits = logits / params.temperature
    if params.top_k and params.top_k < logits.shape[-1]:
        vals, idx, tied = _top_k(logits, params.top_k)
        if not tied:  # only the k largest survive: normalise and nucleus-filter those k alone
            return torch.zeros_like(logits).scatter(
                -1, idx, _top_p(torch.softmax(vals, dim=-1), params.top_p)
            )
        # ties with the k-th logit stay, as a full-vocabulary top-k keeps them
        logits = logits.masked_fill(logits < vals[..., -1:], float("-inf"))
    return _top_p(torch.softmax(logits, dim=-1), params.top_p)


def _top_k(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """The k largest logits and their ids, and whether any row has more than k tying at the k-th."""
    vals, idx = torch.topk(logits, k, dim=-1)
    return vals, idx, bool((logits >= vals[..., -1:]).sum(-1).gt(k).any())


def _top_p(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest prefix (by probability) whose mass reaches top_p; renormalise. Equal
    probabilities are ordered by position (stable sort), so which of several tied tokens crosses
    the line does not depend on the sort kernel."""
    if top_p >= 1.0:
        return probs
    sorted_p, idx = torch.sort(probs, dim=-1, descending=True, stable=True)
    # the token crossing the line stays
    drop_sorted = (sorted_p.cumsum(-1) - sorted_p) >= top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, idx, drop_sorted)
    probs = probs.masked_fill(drop, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Draw one token per row of probs [..., V]."""
    flat = probs.reshape(-1, probs.shape[-1])
    out = torch.multinomial(flat, 1, generator=generator)
    return out.reshape(probs.shape[:-1])


def sample_logits(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None
) -> torch.Tensor:
    """Draw one token per row of logits [B, V] from `target_probs`'s distribution.

    With top-k set, the draw runs over the top candidates only (a batch of rows then costs a top-k, not
    a full-vocabulary softmax and multinomial per row). Logits tying with the k-th stay candidates,
    as in `target_probs`: bf16 logits tie often, so TIE_ROOM extra candidates hold them; rows with
    even more ties take the full-vocabulary path.
    """
    if params.greedy:
        return logits.argmax(-1)
    k, vocab = params.top_k, logits.shape[-1]
    if k and k < vocab:
        # top-k of the raw logits (temperature is monotone): no full-vocabulary pass in fp32
        vals, idx = torch.topk(logits, min(vocab, k + TIE_ROOM), dim=-1)
        kth = vals[..., k - 1 : k]
        # every logit tying with the k-th is a candidate unless the last candidate still ties with it
        if vals.shape[-1] == vocab or bool((vals[..., -1:] < kth).all()):
            idx, order = idx.sort(-1)  # token-id order, so top-p breaks ties as the full-vocabulary path does
            vals = vals.gather(-1, order)
            scaled = (vals.float() / params.temperature).masked_fill(vals < kth, float("-inf"))
            probs = _top_p(torch.softmax(scaled, dim=-1), params.top_p)
            return idx.gather(-1, torch.multinomial(probs, 1, generator=generator)).squeeze(-1)
    return sample(target_probs(logits, params), generator)


TIE_ROOM = 32
"""Extra top-k candidates kept for logits that tie with the k-th (common in bf16)."""
