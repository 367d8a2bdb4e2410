"""Training layout and loss of an MTP head: the recursive chain unrolled over whole sequences.

Step 1 runs at every position i of a sequence: (h_i, x_(i+1)) at position i+1 -> x_(i+2), causal
over the sequence, exactly the keys/values the drafter's committed context cache holds. Step s > 1
continues the chain from the same i: the previous step's state and the token x_(i+s) at position
i+s -> x_(i+s+1); its query sees step 1's keys up to i and the chain's own earlier steps at i (the
diagonal layout of EAGLE's training-time test), which is what a draft round sees at inference.
Teacher forcing feeds the written tokens; for accepted-length metrics that is exact, since a
draft is only counted while it equals the expected token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from draftsmith.drafters.mtp.model import MTPModel, StepKV
from draftsmith.training.anchors import IGNORE
from draftsmith.training.labels import LABELS


@dataclass
class ChainBatch:
    ids: torch.Tensor  # [b, T] long
    loss_mask: torch.Tensor  # [b, T] bool: answer tokens
    final: torch.Tensor  # [b, T, H] the target's final-norm states
    lse: torch.Tensor  # [b, T] logsumexp of the target's logits
    greedy: torch.Tensor | None = None  # [b, T] the target's argmax next token


def _step_mask(m: int, rows: torch.Tensor, step: int) -> torch.Tensor:
    """[1, r, m + (step-1) r]: step 1's keys up to the row's own position, then the row's own slot in
    each chain step 2..step (itself last)."""
    r = rows.shape[0]
    ctx = torch.arange(m, device=rows.device)[None] <= rows[:, None]
    own = torch.eye(r, dtype=torch.bool, device=rows.device).repeat(1, step - 1)
    return torch.cat([ctx, own], 1)[None]


def unrolled_logits(
    model: MTPModel, ids: torch.Tensor, final: torch.Tensor, depth: int, rows: torch.Tensor | None = None
) -> list[torch.Tensor]:
    """Draft-vocabulary logits of chain steps 1..depth: step 1 at every row i in 0..T-2 ([b, T-1, Vd]),
    later steps at `rows` only (default: all; [b, r, Vd]). Step s at row i predicts x_(i+s+1)."""
    b, t = ids.shape
    m = t - 1
    idx = torch.arange(m, device=ids.device)
    rows = idx if rows is None else rows
    causal = idx[None, :] <= idx[:, None]
    kv = StepKV([])
    raw = model.block(final[:, :m], ids[:, 1:], (idx + 1).expand(b, m), kv, causal[None].expand(b, m, m))
    earlier = [kv.new]
    logits, state = model.readout(raw)
    out = [logits]
    state = state[:, rows]
    for s in range(2, depth + 1):
        toks = ids[:, (rows + s).clamp(max=t - 1)]
        kv = StepKV(earlier)
        mask = _step_mask(m, rows, s).expand(b, -1, -1)
        raw = model.block(state, toks, (rows + s).expand(b, -1), kv, mask)
        earlier.append(kv.new)
        logits, state = model.readout(raw)
        out.append(logits)
    return out


def step_labels(batch: ChainBatch, step: int, rows: torch.Tensor, label: str = "token") -> torch.Tensor:
    """Target ids step `step` learns at rows i: x_(i+step+1) (or the target's argmax after x_(i+step)),
    IGNORE where that token is not an answer token or past the end."""
    t = batch.ids.shape[1]
    nxt = rows + step + 1
    inside = (nxt < t)[None]
    at = nxt.clamp(max=t - 1)
    ok = inside & batch.loss_mask[:, at]
    src = batch.ids[:, at] if label == "token" else batch.greedy[:, (rows + step).clamp(max=t - 1)]
    return torch.where(ok, src, IGNORE)


def chain_loss(
    model: MTPModel, batch: ChainBatch, depth: int = 1, label: str = "token", chain_weight: float = 0.5
) -> tuple[torch.Tensor, dict[str, float]]:
    """Weighted CE over the unrolled steps (step 1 weight 1, later steps chain_weight), normalised by
    the weights. Metrics: ce of each step, acc1 (step 1 top-1 against its label) and tau_est, the
    teacher-forced accepted length against the written tokens over the trained depth (so capped at
    depth + 1; held-out evaluation runs the full 7-draft chain)."""
    if label not in LABELS:
        raise ValueError(f"label must be one of {', '.join(LABELS)}, got {label!r}")
    if label == "greedy" and batch.greedy is None:
        raise ValueError("label='greedy' needs the target's greedy tokens in the batch")
    steps = unrolled_logits(model, batch.ids, batch.final, depth)
    m = batch.ids.shape[1] - 1
    rows = torch.arange(m, device=batch.ids.device)
    vd = model.d2t.shape[0]
    total, weights, metrics, hits = 0.0, 0.0, {}, []
    for s, logits in enumerate(steps, 1):
        logits = logits.float()
        written = step_labels(batch, s, rows)
        if label == "soft":  # the target's distribution at i+s over the draft vocabulary
            pos = (rows + s).clamp(max=batch.ids.shape[1] - 1)
            t_logits = (batch.final[:, pos] @ model.head.t().to(batch.final.dtype)).float()
            p = torch.exp(t_logits - batch.lse[:, pos, None])
            valid = written != IGNORE
            ce_all = -(p * torch.log_softmax(logits, -1)).sum(-1)
        else:
            lab = written if label == "token" else step_labels(batch, s, rows, "greedy")
            idx = torch.where(lab == IGNORE, vd, model.t2d[lab.clamp(min=0)])
            valid = idx < vd  # a token outside a reduced draft vocabulary cannot be learned
            ce_all = F.cross_entropy(logits.transpose(1, 2), idx.clamp(max=vd - 1), reduction="none")
        ce = (ce_all * valid).sum() / valid.sum().clamp(min=1)
        w = 1.0 if s == 1 else chain_weight
        total, weights = total + w * ce, weights + w
        metrics[f"ce{s}"] = float(ce.detach())
        with torch.no_grad():
            draft = model.d2t[logits.argmax(-1)]
            hit = (draft == written) & (written != IGNORE)
            hits.append(hit)
            if s == 1:
                live = written != IGNORE
                metrics["acc1"] = float(hit[live].float().mean()) if live.any() else 0.0
    loss = total / weights
    with torch.no_grad():
        run = torch.stack(hits, -1).int().cumprod(-1).sum(-1)
        live = step_labels(batch, 1, rows) != IGNORE
        metrics["tau_est"] = float(1.0 + run[live].float().mean()) if live.any() else 1.0
    metrics["loss"] = float(loss.detach())
    return loss, metrics
