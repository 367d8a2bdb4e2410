"""Distillation batches, losses and accepted lengths for the autoregressive draft model.

The draft reads token ids only, so one causal pass over a cache sequence trains every position at
once: state t learns the target's next-token distribution at t (softmax of final[t] @ lm_head.T,
the whole vocabulary or its top k) or a hard label (the written token t + 1, or the target's
argmax at t). Only positions whose next token is an answer token count.

Teacher-forced accepted length from an anchor a: the draft's inputs up to its first miss are
exactly its own earlier outputs, so drafting k tokens is accepted as far as the run of consecutive
positions a, a+1, ... whose argmax equals the expected token.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F

from draftsmith.drafters.dflash.recipe import pad_stack
from draftsmith.drafters.distilled.model import DEPTH, DistilledDraft
from draftsmith.training.anchors import CAPPED_DRAFT, sample_anchors

CHUNK = 1024
"""Positions per chunk of the vocabulary-sized loss: bounds its [chunk, V] tensors, which are freed
as soon as the chunk's gradient is known (see EagerGrad)."""


@dataclass
class DistillBatch:
    ids: torch.Tensor  # [b, T] padded token ids
    attention: torch.Tensor  # [b, T] 1 on real tokens
    sel: torch.Tensor  # [b, T] bool: positions whose next token is an answer token
    next_ids: torch.Tensor  # [N] written token after each selected position
    greedy: torch.Tensor  # [N] the target's argmax at each selected position
    final: torch.Tensor  # [N, H] the target's final-norm state there
    link: torch.Tensor  # [b, T] bool: ids[t] == greedy[t - 1] (the written text follows greedy there)


def collate(seqs: list, device: torch.device) -> DistillBatch:
    """Pad sequences to one length and pick the learned positions' labels."""
    ids, mask = pad_stack(seqs, "ids"), pad_stack(seqs, "loss_mask", False)
    lengths = torch.tensor([s.ids.shape[0] for s in seqs])
    attention = (torch.arange(ids.shape[1])[None] < lengths[:, None]).long()
    sel = torch.zeros_like(mask)
    sel[:, :-1] = mask[:, 1:]
    greedy = pad_stack(seqs, "greedy")
    link = torch.zeros_like(mask)
    link[:, 1:] = ids[:, 1:] == greedy[:, :-1]
    nxt = torch.zeros_like(ids)
    nxt[:, :-1] = ids[:, 1:]
    final = pad_stack(seqs, "final").float()[sel]
    to = {"device": device}
    return DistillBatch(
        ids.to(**to),
        attention.to(**to),
        sel.to(**to),
        nxt[sel].to(**to),
        greedy[sel].to(**to),
        final.to(**to),
        link.to(**to),
    )


class EagerGrad(torch.autograd.Function):
    """A loss whose gradient w.r.t. its input was already computed: backward only scales it.

    The head's [chunk, V] logits and probabilities then live for one chunk only, and each costs one
    forward and one backward matmul (torch's checkpoint would recompute the forward, teacher included).
    """

    @staticmethod
    def forward(ctx, h: torch.Tensor, loss: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(grad)
        return loss.clone()

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        (grad,) = ctx.saved_tensors
        return g * grad, None, None


def eager(fn, h: torch.Tensor, *args) -> tuple[torch.Tensor, torch.Tensor]:
    """fn(h, *args) -> (summed loss, draft argmax) with the loss's gradient taken now (EagerGrad)."""
    if not (torch.is_grad_enabled() and h.requires_grad):  # scoring: nothing to differentiate
        return fn(h, *args)
    leaf = h.detach().requires_grad_()
    with torch.enable_grad():
        loss, pred = fn(leaf, *args)
        (grad,) = torch.autograd.grad(loss, leaf)
    return EagerGrad.apply(h, loss.detach(), grad), pred


def teacher_logits(model: DistilledDraft, final: torch.Tensor) -> torch.Tensor:
    """The target's logits from its cached final-norm states, in fp32 (its head is the draft's)."""
    with torch.no_grad(), torch.autocast(final.device.type, enabled=False):
        return model.logits(final.float()).float()


def _soft_full(model: DistilledDraft, h, final):
    """Cross-entropy to the target's whole distribution, summed over a chunk; plus the draft argmax.

    The teacher is normalised by its own logsumexp, not the cached lse: recomputed from fp16-stored
    states its mass under the cached lse is off by up to ~10% on the default target."""
    z = model.logits(h).float()
    p = torch.softmax(teacher_logits(model, final), -1)
    ce = -(p * torch.log_softmax(z, -1)).sum(-1)
    return ce.sum(), z.detach().argmax(-1)


def _soft_topk(model: DistilledDraft, h, final, k: int):
    """Cross-entropy to the target's top-k tokens (renormalised), the draft's logits over those k only.

    The argmax is the draft's best of those k: an estimate for the progress bar."""
    top = teacher_logits(model, final).topk(k, -1)
    p = torch.softmax(top.values, -1)
    z = model.logits_at(h, top.indices).float()
    ce = -(p * torch.log_softmax(z, -1)).sum(-1)
    return ce.sum(), top.indices.gather(1, z.detach().argmax(-1, keepdim=True))[:, 0]


def _hard(model: DistilledDraft, h, labels):
    z = model.logits(h).float()
    return F.cross_entropy(z, labels, reduction="sum"), z.detach().argmax(-1)


def distill_loss(
    model: DistilledDraft, batch: DistillBatch, label: str = "soft", topk: int = 0
) -> tuple[torch.Tensor, dict[str, float]]:
    """Mean per-position loss over the learned positions, and the batch's teacher-forced tau."""
    states = model.states(batch.ids, batch.attention)[batch.sel]
    n = states.shape[0]
    total, preds = states.sum() * 0.0, []  # stays in the graph when a batch has no answer token
    for lo in range(0, n, CHUNK):
        h, part = states[lo : lo + CHUNK], slice(lo, lo + CHUNK)
        if label == "soft" and topk:
            ce, pred = eager(partial(_soft_topk, model), h, batch.final[part], topk)
        elif label == "soft":
            ce, pred = eager(partial(_soft_full, model), h, batch.final[part])
        else:
            labels = batch.next_ids if label == "token" else batch.greedy
            ce, pred = eager(partial(_hard, model), h, labels[part])
        total, preds = total + ce, [*preds, pred]
    loss = total / max(1, n)
    pred = torch.cat(preds) if preds else batch.next_ids
    metrics = {"loss": float(loss.detach()), "ce": float(loss.detach())}
    anchors = batch.sel & batch.sel.roll(1, 1)  # x_a and x_(a+1) in the answer, as DFlash samples them
    anchors[:, 0] = False
    maps = hit_maps(batch.sel, pred, batch.next_ids, batch.greedy, batch.link)
    found = taus(maps, anchors)
    metrics["tau_est"], metrics["tau_est_k3"] = found["tau"], found["tau_k3"]
    metrics["tau_greedy"], metrics["tau_greedy_k3"] = found["tau_greedy"], found["tau_greedy_k3"]
    return loss, metrics


def hit_maps(sel, pred, next_ids, greedy, link) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Per metric, [b, T] bool maps (first slot, later slots) of where the draft's argmax is accepted.

    "tau": the written next token. "tau_greedy": the target's argmax, which greedy verification
    accepts; a later slot also needs the written text to follow greedy decoding up to it (`link`),
    else that prefix is one greedy decoding never reaches (DFlash's on-path rule)."""
    hits = torch.zeros_like(sel)
    hits[sel] = pred == next_ids
    g_hits = torch.zeros_like(sel)
    g_hits[sel] = pred == greedy
    return {"tau": (hits, hits), "tau_greedy": (g_hits, g_hits & link)}


def run_lengths(first: torch.Tensor, later: torch.Tensor, depth: int) -> torch.Tensor:
    """[b, T]: accepted drafts from each position, at most `depth`: slot 0 passes where `first` holds
    at the anchor, slot k where `later` holds k positions on, each only after all earlier slots."""
    b, t = later.shape
    padded = torch.cat([later, later.new_zeros(b, depth)], 1)
    alive = first.clone()
    run = alive.long()
    for k in range(1, depth):
        alive = alive & padded[:, k : k + t]
        run = run + alive.long()
    return run


def taus(maps: dict, anchors: torch.Tensor, depth: int = DEPTH) -> dict[str, float]:
    """Mean accepted length (1 + drafts accepted) over the anchors, at full depth and capped at
    CAPPED_DRAFT drafts; 1.0 where there is no anchor (as DFlash's accepted_length)."""
    out = {}
    for name, (first, later) in maps.items():
        for key, cap in ((name, depth), (f"{name}_k3", min(depth, CAPPED_DRAFT))):
            run = run_lengths(first, later, cap)[anchors]
            out[key] = float(1.0 + run.float().mean()) if run.numel() else 1.0
    return out


@torch.no_grad()
def sequence_taus(
    model: DistilledDraft, seq, n_anchors: int, generator: torch.Generator, depth: int = DEPTH
) -> dict[str, float]:
    """Held-out accepted lengths of one cache sequence at DFlash's anchors (same sampler and generator)."""
    device = next(model.parameters()).device
    batch = collate([seq], device)
    states = model.states(batch.ids, batch.attention)[batch.sel]
    pred = torch.cat([model.logits(h).argmax(-1) for h in states.split(CHUNK)] or [batch.next_ids])
    anchor_idx = sample_anchors(seq.loss_mask, n_anchors, generator)
    anchors = torch.zeros_like(batch.sel)
    anchors[0, anchor_idx.to(device)] = True
    return taus(hit_maps(batch.sel, pred, batch.next_ids, batch.greedy, batch.link), anchors, depth)
