"""Verification rules that make speculative decoding lossless.

Greedy: keep the longest draft prefix equal to the target's argmax, then the target's own next
token (the bonus). Sampling: standard speculative sampling (Leviathan et al., Chen et al.):
accept draft token x with probability min(1, p(x)/q(x)); on the first rejection emit a token from
the normalised residual max(0, p - q); if every draft token survives, sample the bonus from p.
A deterministic drafter has a one-hot q, so the rule becomes "accept with p(x)", residual p
without x. Either way each emitted token is distributed exactly as plain sampling from p.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from draftsmith.engine.sampling import SamplingParams, sample, target_probs

Verifier = Callable[
    [torch.Tensor, torch.Tensor, "torch.Tensor | None", SamplingParams, "torch.Generator | None"],
    tuple[int, int],
]
"""(target_logits [k+1, V], draft_tokens [k], draft_probs [k, V] | None, params, rng) ->
(number of draft tokens accepted, the next token the target emits)."""


def verify_greedy(logits: torch.Tensor, draft: torch.Tensor) -> tuple[int, int]:
    choice = logits.argmax(-1)
    k = draft.shape[0]
    mismatch = (choice[:k] != draft).nonzero()
    n = int(mismatch[0]) if mismatch.numel() else k
    return n, int(choice[n])


def verify_sampling(
    logits: torch.Tensor,
    draft: torch.Tensor,
    draft_probs: torch.Tensor | None,
    params: SamplingParams,
    generator: torch.Generator | None,
) -> tuple[int, int]:
    p = target_probs(logits, params)
    k = draft.shape[0]
    if k:
        rows = torch.arange(k, device=p.device)
        p_x = p[rows, draft]
        q_x = torch.ones_like(p_x) if draft_probs is None else draft_probs[rows, draft].float()
        u = torch.rand(k, generator=generator, device=p.device)
        rejected = (u * q_x >= p_x).nonzero()  # accept iff u < p/q, written without dividing
        if rejected.numel():
            i = int(rejected[0])
            if draft_probs is None:
                residual = p[i].clone()
                residual[draft[i]] = 0.0
            else:
                residual = (p[i] - draft_probs[i].float()).clamp_min(0.0)
            if float(residual.sum()) <= 0.0:  # p == q exactly: any rejection is measure-zero
                residual = p[i]
            return i, int(sample(residual / residual.sum(), generator))
    return k, int(sample(p[k], generator))


def verify(
    logits: torch.Tensor,
    draft: torch.Tensor,
    draft_probs: torch.Tensor | None,
    params: SamplingParams,
    generator: torch.Generator | None,
) -> tuple[int, int]:
    """The default verifier: greedy at temperature 0, speculative sampling otherwise."""
    if params.greedy:
        return verify_greedy(logits, draft)
    return verify_sampling(logits, draft, draft_probs, params, generator)
