"""Anchors: where training and held-out scoring start a draft round inside a cached sequence.

Every trained method draws its anchors (and its held-out anchors) by the same rule and seed, so
held-out accepted lengths of different methods are measured at the same places and compare.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

IGNORE = -100
"""Label of a position with nothing to learn or score."""

CAPPED_DRAFT = 3
"""Draft length of the capped tau metric: what a 4-row bf16 fixed-shape step verifies on the
2-core development CPU (`draftsmith calibrate --dtype bfloat16`)."""

EVAL_ANCHORS = 64
"""Anchors per held-out sequence."""

EVAL_SEED = 12345
"""Seed of the held-out anchor generator, shared by every method."""

TAU_KEYS = ("tau", "tau_k3", "tau_greedy", "tau_greedy_k3")


def sample_anchors(loss_mask: torch.Tensor, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Up to n anchors a >= 1 with x_a and x_(a+1) both in the loss mask (sorted)."""
    ok = loss_mask[1:-1] & loss_mask[2:]
    candidates = ok.nonzero().flatten() + 1
    if candidates.numel() <= n:
        return candidates
    pick = torch.randperm(candidates.numel(), generator=generator)[:n]
    return candidates[pick].sort().values


def anchor_labels(ids: torch.Tensor, mask: torch.Tensor, greedy: torch.Tensor | None, anchors, depth: int):
    """Expected tokens of draft s = 1..depth after each anchor a (the last committed token): the
    written x_(a+s) and, while the written tokens follow the target's argmax path, the target's
    argmax greedy[a+s-1] (what greedy decoding accepts); IGNORE elsewhere. [A, depth] each."""
    t = ids.shape[0]
    pos = anchors[:, None] + torch.arange(1, depth + 1, device=ids.device)[None]
    inside = pos < t
    at = pos.clamp(max=t - 1)
    written = torch.where(inside & mask[at], ids[at], IGNORE)
    if greedy is None:
        return written, None
    before = greedy[(pos - 1).clamp(max=t - 1)]
    on_path = torch.ones_like(written, dtype=torch.bool)
    on_path[:, 1:] = (ids[at[:, :-1]] == before[:, :-1]).int().cumprod(-1).bool()
    return written, torch.where((written != IGNORE) & on_path, before, IGNORE)


def accepted(draft: torch.Tensor, labels: torch.Tensor, cap: int | None = None) -> float:
    """Mean 1 + length of the run of drafts equal to their labels ([A, depth] target ids), over anchors
    whose first draft has a label; 1.0 when none has."""
    hit = (draft == labels) & (labels != IGNORE)
    run = hit[:, :cap].int().cumprod(-1).sum(-1)
    live = labels[:, 0] != IGNORE
    return float(1.0 + run[live].float().mean()) if live.any() else 1.0


def walk(runs: dict[int, int], cap: int | None = None) -> tuple[int, int]:
    """(tokens, rounds) of greedy decoding's walk over one answer: start at its first anchor, draft,
    accept the run there (capped at `cap` drafts) plus the target's own token, jump that far, repeat.
    Decoding writes the answer's first token in the prefill, so its rounds are these + 1.

    runs: anchor position -> accepted run length from there (teacher-forced). Decoding does not visit
    positions alike: it jumps over easy stretches in few rounds and spends rounds where drafts fail,
    so its accepted length is this walk's tokens / rounds, not the mean run over all positions
    (measured on a bench's own answers: the uniform mean reads ~12% above what decoding accepts)."""
    if not runs:
        return 0, 0
    start, end = min(runs), max(runs) + 1  # the last anchor's next token ends the answer
    j, rounds = start, 0
    while j in runs:
        j, rounds = j + (runs[j] if cap is None else min(runs[j], cap)) + 1, rounds + 1
    return min(j, end) - start, rounds  # decoding stops at the last token, not past it


def chain_taus(
    seqs: list,
    depth: int,
    collate: Callable[[list], object],
    drafts: Callable[[object, torch.Tensor], torch.Tensor],
) -> dict[str, float]:
    """Held-out accepted length of drafters that draft from the state before each anchor.

    collate([seq]) gives a batch with `ids`, `loss_mask` and `greedy` ([1, T]); drafts(batch, rows)
    gives the [A, depth] target ids drafted from rows = anchors - 1. "tau" scores them against the
    written tokens, "tau_greedy" against the target's argmax; "_k3" caps the drafts at 3."""
    if not len(seqs):
        return {k: float("nan") for k in TAU_KEYS}
    g = torch.Generator().manual_seed(EVAL_SEED)
    sums = dict.fromkeys(TAU_KEYS, 0.0)
    for s in seqs:
        anchors = sample_anchors(s.loss_mask, EVAL_ANCHORS, g)
        if not anchors.numel():
            sums = {k: v + 1.0 for k, v in sums.items()}
            continue
        b = collate([s])
        rows = (anchors - 1).to(b.ids.device)  # the newest state a round has: the anchor's predecessor
        draft = drafts(b, rows)
        greedy = b.greedy[0] if b.greedy is not None else None
        written, on_greedy = anchor_labels(b.ids[0], b.loss_mask[0], greedy, rows + 1, depth)
        sums["tau"] += accepted(draft, written)
        sums["tau_k3"] += accepted(draft, written, CAPPED_DRAFT)
        if on_greedy is not None:
            sums["tau_greedy"] += accepted(draft, on_greedy)
            sums["tau_greedy_k3"] += accepted(draft, on_greedy, CAPPED_DRAFT)
        else:
            sums["tau_greedy"] = sums["tau_greedy_k3"] = float("nan")
    return {k: v / len(seqs) for k, v in sums.items()}
