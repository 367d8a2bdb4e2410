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
    k = params.top_k
    if k and k < logits.shape[-1]:
        candidates = _top_k_candidates(logits, k)
        if candidates is not None:  # normalise and nucleus-filter the candidates alone
            vals, idx = candidates
            return torch.zeros_like(logits).scatter(
                -1, idx, _top_p(torch.softmax(vals, dim=-1), params.top_p)
            )
        # more ties than candidate room: the same rule over the whole vocabulary
        logits = logits.masked_fill(logits < torch.topk(logits, k, dim=-1).values[..., -1:], float("-inf"))
    return _top_p(torch.softmax(logits, dim=-1), params.top_p)


TIE_ROOM = 32
"""Extra top-k candidates kept for logits that tie with the k-th (common in bf16)."""


def _top_k_candidates(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Each row's top-k logits, every logit tying with the k-th included, in token-id order (so
    top-p breaks ties as the full-vocabulary path does), with the extra non-candidates at -inf.
    None when some row ties with its k-th logit more often than TIE_ROOM allows for."""
    vocab = logits.shape[-1]
    vals, idx = torch.topk(logits, min(vocab, k + TIE_ROOM), dim=-1)
    kth = vals[..., k - 1 : k]
    if vals.shape[-1] < vocab and not bool((vals[..., -1:] < kth).all()):
        return None
    idx, order = idx.sort(-1)
    vals = vals.gather(-1, order)
    return vals.masked_fill(vals < kth, float("-inf")), idx


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
    if params.top_k and params.top_k < logits.shape[-1]:
        # candidates from the raw logits (temperature is monotone): no full-vocabulary pass in fp32
        candidates = _top_k_candidates(logits, params.top_k)
        if candidates is not None:
            vals, idx = candidates
            probs = _top_p(torch.softmax(vals.float() / params.temperature, dim=-1), params.top_p)
            return idx.gather(-1, torch.multinomial(probs, 1, generator=generator)).squeeze(-1)
    return sample(target_probs(logits, params), generator)


def draft_choice(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A drafter's pick from its logits and the distribution it was drawn from (None when greedy):
    speculative sampling needs the draft distribution to stay exact."""
    if params.greedy:
        return logits.argmax(-1), None
    q = target_probs(logits, params)
    return sample(q, generator), q
