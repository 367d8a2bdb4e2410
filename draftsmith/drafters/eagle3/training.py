"""EAGLE-3's training-time test (TTT): the drafter trained on its own unrolled chain.

For an anchor a (the last committed token, as in DFlash's layout), step 0 pairs the target's
fused state at a - 1 with the token x_a and predicts x_(a+1); step j >= 1 feeds the drafter's own
previous output state (in place of a target state) with the token x_(a+j) (the written token, as
EAGLE-3's and SpecForge's code do; `tokens="draft"` feeds the drafter's own argmax instead) at
rotary position a - 1 + j, and predicts x_(a+j+1). Every step sees the committed context (the
step-0 states of positions <= a - 1, computed once for the whole sequence) plus its own chain's
earlier steps: exactly what `Eagle3Drafter.propose` sees while decoding. (EAGLE-3's and
SpecForge's code also hide the last j context positions from step j: a mask that inference
does not apply, so it is not copied here.)

Only the anchors' chains are unrolled, so a step costs `anchors` queries rather than the whole
sequence (anchors = 0 unrolls from every answer position, SpecForge's dense layout).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from draftsmith.drafters.dflash.training import IGNORE, accepted_length
from draftsmith.drafters.eagle3.model import Eagle3Model
from draftsmith.training.labels import LABELS

TOKENS = ("true", "draft")
"""What later steps read: the written token (EAGLE-3 / SpecForge) or the drafter's own argmax."""


@dataclass
class TTTBatch:
    ids: torch.Tensor  # [b, T] long
    loss_mask: torch.Tensor  # [b, T] bool
    features: torch.Tensor  # [b, T, K*Ht] the drafter's target layers, concatenated
    anchors: torch.Tensor  # [b, A] long, padded with 1
    live: torch.Tensor  # [b, A] bool: a real anchor
    final: torch.Tensor | None = None  # [b, T, Ht] target final-norm states (soft labels)
    lse: torch.Tensor | None = None  # [b, T] log-normaliser of the target logits
    greedy: torch.Tensor | None = None  # [b, T] the target's argmax next token


def pad_anchors(anchors: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Anchor lists of b sequences -> [b, A] padded (with 1) and the mask of real ones."""
    n = max(1, max(len(a) for a in anchors))
    out = torch.ones(len(anchors), n, dtype=torch.long)
    live = torch.zeros(len(anchors), n, dtype=torch.bool)
    for i, a in enumerate(anchors):
        out[i, : len(a)] = a
        live[i, : len(a)] = True
    return out, live


def gather_rows(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """x [b, T, ...] at positions idx [b, ...] (clamped into the sequence)."""
    b, t = x.shape[:2]
    flat = idx.clamp(0, t - 1).reshape(b, -1)
    if x.dim() == 2:
        return torch.gather(x, 1, flat).view(idx.shape)
    out = torch.gather(x, 1, flat[..., None].expand(-1, -1, x.shape[-1]))
    return out.view(*idx.shape, x.shape[-1])


def ttt_forward(model: Eagle3Model, batch: TTTBatch, steps: int, tokens: str = "true") -> torch.Tensor:
    """Draft-vocabulary logits [b, A, steps, Vd] of every anchor's unrolled chain."""
    if tokens not in TOKENS:
        raise ValueError(f"tokens must be one of {', '.join(TOKENS)}, got {tokens!r}")
    ids, a = batch.ids, batch.anchors
    b, t = ids.shape
    dtype = model.fc.weight.dtype
    fused = model.fuse(batch.features.to(dtype))
    next_ids = torch.cat([ids[:, 1:], ids.new_zeros(b, 1)], 1)  # the token after each position
    pos = torch.arange(t, device=ids.device).expand(b, t)
    out0, ctx_k, ctx_v = model.context(next_ids, fused, pos)
    last = a - 1  # the newest committed position of each chain
    hidden = gather_rows(out0, last)
    ctx_mask = torch.arange(t, device=ids.device)[None, None] <= last[..., None]  # [b, A, T]
    logits = [model.logits(hidden)]
    ks, vs = [], []
    for j in range(1, steps):
        if tokens == "true":
            tok = gather_rows(ids, a + j)
        else:
            tok = model.draft_ids[logits[-1].argmax(-1)]
        chain_k = torch.stack(ks, 3) if ks else None
        chain_v = torch.stack(vs, 3) if vs else None
        hidden, k, v = model.chain(tok, hidden, last + j, ctx_k, ctx_v, ctx_mask, chain_k, chain_v)
        ks.append(k)
        vs.append(v)
        logits.append(model.logits(hidden))
    return torch.stack(logits, 2)


def chain_labels(batch: TTTBatch, steps: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Expected tokens [b, A, steps] (IGNORE where none): the written x_(a+j+1), and the target's
    argmax at a + j while the written tokens stay on the target's greedy path (past the first
    departure greedy decoding never sees that prefix, so the label is unknown)."""
    ids, mask, a = batch.ids, batch.loss_mask, batch.anchors
    t = ids.shape[1]
    j = torch.arange(steps, device=ids.device)
    where = a[..., None] + j  # a + j: the position whose next token step j predicts
    ok = batch.live[..., None] & (where + 1 < t) & gather_rows(mask, where + 1)
    labels = torch.where(ok, gather_rows(ids, where + 1), IGNORE)
    if batch.greedy is None:
        return labels, None
    on_path = (gather_rows(ids, where) == gather_rows(batch.greedy, where - 1)) | (j == 0)
    on_path = on_path.int().cumprod(-1).bool()
    return labels, torch.where(ok & on_path, gather_rows(batch.greedy, where), IGNORE)


def ttt_loss(
    model: Eagle3Model,
    batch: TTTBatch,
    steps: int,
    label: str = "soft",
    decay: float = 0.8,
    tokens: str = "true",
) -> tuple[torch.Tensor, dict[str, float]]:
    """Sum over unrolled steps of decay^j times that step's mean CE over its anchors (normalised by
    the weights' sum so the scale stays that of one CE). label "soft" is EAGLE-3's: cross-entropy
    to the target's distribution over the draft vocabulary, exp(final @ head_d.T - lse) (not
    renormalised: mass outside the draft vocabulary is simply unreachable). Metrics: tau_est and
    tau_greedy (teacher-forced accepted length of the chain), each also capped at 3 drafts."""
    if label not in LABELS:
        raise ValueError(f"label must be one of {', '.join(LABELS)}, got {label!r}")
    logits = ttt_forward(model, batch, steps, tokens).float()
    labels, greedy = chain_labels(batch, steps)
    if label == "greedy" and greedy is None:
        raise ValueError("label='greedy' needs a batch with the target's greedy tokens")
    vd = logits.shape[-1]
    if label == "soft":
        if batch.final is None or batch.lse is None or model.target_head is None:
            raise ValueError("soft labels need the target's final states, lse and lm_head")
        where = batch.anchors[..., None] + torch.arange(steps, device=logits.device)
        final = gather_rows(batch.final, where).to(model.target_head.dtype)
        p = torch.exp((final @ model.target_head.t()).float() - gather_rows(batch.lse, where)[..., None])
        valid = labels != IGNORE
        ce = -(p * torch.log_softmax(logits, -1)).sum(-1)
    else:
        lab = labels if label == "token" else greedy
        idx = torch.where(lab == IGNORE, vd, model.t2d_index[lab.clamp(min=0)])
        valid = idx < vd  # tokens outside the draft vocabulary cannot be learned
        ce = F.cross_entropy(logits.permute(0, 3, 1, 2), idx.clamp(max=vd - 1), reduction="none")
    ce = torch.where(valid, ce, 0.0)
    per_step = ce.sum((0, 1)) / valid.sum((0, 1)).clamp(min=1)
    w = decay ** torch.arange(steps, device=logits.device, dtype=torch.float32)
    loss = (w * per_step).sum() / w.sum()
    metrics = {"loss": float(loss.detach()), "ce_0": float(per_step[0].detach())}
    metrics.update(chain_metrics(model, logits, labels, greedy))
    return loss, metrics


@torch.no_grad()
def chain_metrics(
    model: Eagle3Model, logits: torch.Tensor, labels: torch.Tensor, greedy: torch.Tensor | None
) -> dict[str, float]:
    """Teacher-forced accepted lengths (DFlash's metric, one chain per anchor as one block)."""
    b, n, steps, vd = logits.shape
    draft = logits.argmax(-1).view(b, -1)

    def scored(lab: torch.Tensor) -> torch.Tensor:  # draft index, -1 outside the draft vocabulary
        idx = model.t2d_index[lab.clamp(min=0)]
        return torch.where(lab == IGNORE, IGNORE, torch.where(idx == vd, -1, idx)).view(b, -1)

    out = accepted_length(draft, scored(labels), steps, "tau_est")
    if greedy is not None:
        out.update(accepted_length(draft, scored(greedy), steps, "tau_greedy"))
    return out
