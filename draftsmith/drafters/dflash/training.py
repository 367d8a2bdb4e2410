"""Training data layout and losses for DFlash / DSpark: many anchored blocks per target sequence.

For an anchor at position a, the block is [x_a, mask, ..., mask] at positions a..a+B-1; slot k is
trained to predict x_(a+k+1). Every block query sees the context strictly before its anchor and
its own block only, which is exactly what it will see at inference (the anchor is the last
committed token, whose target hidden state does not exist yet).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
import torch.nn.functional as F

from draftsmith.drafters.dflash.lookup import batch_guesses
from draftsmith.drafters.dflash.model import DFlashModel
from draftsmith.training.anchors import CAPPED_DRAFT, IGNORE
from draftsmith.training.labels import LABELS


@dataclass
class BlockBatch:
    block_ids: torch.Tensor  # [b, Q] anchor then mask tokens, Q = anchors * block_size
    block_pos: torch.Tensor  # [b, Q] real positions a + k
    ctx_pos: torch.Tensor  # [b, T]
    mask: torch.Tensor  # [b, Q, T + Q] True = may attend
    labels: torch.Tensor  # [b, Q] target ids of x_(a+k+1), IGNORE where absent
    prev_ids: torch.Tensor  # [b, Q] x_(a+k): the token before each slot's prediction (teacher forcing)
    slot: torch.Tensor  # [Q] slot index k
    target_pos: torch.Tensor  # [b, Q] a + k: where the target's own distribution for slot k lives
    greedy_labels: torch.Tensor | None = None  # [b, Q] the target's argmax at a + k (IGNORE where absent)
    guess_ids: torch.Tensor | None = None  # [b, Q] each slot's prompt-lookup guess (lookup_input drafters)
    guess_lens: torch.Tensor | None = None  # [b, Q] the suffix match behind it, 0 = no guess

    def to(self, device: torch.device | str) -> BlockBatch:
        """The same layout on `device` (a GPU trainer builds it on the CPU from cached rows)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return replace(self, **{k: v.to(device) for k, v in values.items() if v is not None})


def first_slot(cfg) -> int:
    """The first block slot that drafts: 0 when the anchor slot drafts (our default, DSpark), 1 in
    z-lab's layout (the anchor slot only carries the anchor token)."""
    return 0 if cfg.sample_from_anchor else 1


def build_blocks(
    ids: torch.Tensor,
    loss_mask: torch.Tensor,
    anchors: list[torch.Tensor],
    block_size: int,
    mask_token_id: int,
    greedy: torch.Tensor | None = None,
    lookup_input: int = 0,
    first_slot: int = 0,
) -> BlockBatch:
    """Lay out the anchored blocks of b sequences (ids [b, T]); short anchor lists are padded.

    greedy [b, T] (optional): the target's argmax next token at each position, so a slot can also
    be scored (or trained) against what greedy decoding would accept instead of the written token
    (exact on greedy answers; on other text only while the written tokens follow the greedy path).
    """
    b, t = ids.shape
    dev = ids.device  # the layout is built where the ids live (a GPU run builds it there)
    n_anchor = max(1, max(len(a) for a in anchors))
    q = n_anchor * block_size
    slot = torch.arange(block_size, device=dev).repeat(n_anchor)
    # one row per (sequence, anchor): padding anchors (short lists) have live = False
    anc = torch.zeros(b, n_anchor, dtype=torch.long, device=dev)
    live = torch.zeros(b, n_anchor, dtype=torch.bool, device=dev)
    for i, a in enumerate(anchors):
        anc[i, : len(a)] = a.to(dev)
        live[i, : len(a)] = True
    a_slot = anc.repeat_interleave(block_size, 1)  # [b, q] each slot's anchor
    live_slot = live.repeat_interleave(block_size, 1)
    pos = a_slot + slot[None]  # a + k
    block_pos = torch.where(live_slot, pos, 0)
    block_ids = torch.full((b, q), mask_token_id, dtype=torch.long, device=dev)
    first = live_slot & (slot == 0)[None]
    block_ids[first] = torch.gather(ids, 1, a_slot)[first]
    src = pos - first_slot  # the position whose next token the slot predicts (a + k, or a + k - 1)
    drafts = (slot >= first_slot)[None]
    nxt = src + 1
    at_next = nxt.clamp(max=t - 1)
    learn = live_slot & drafts & (nxt < t) & torch.gather(loss_mask, 1, at_next)
    labels = torch.where(learn, torch.gather(ids, 1, at_next), IGNORE)
    src_at = src.clamp(min=0, max=t - 1)
    prev_ids = torch.where(live_slot & (src < t), torch.gather(ids, 1, src_at), 0)
    # context strictly before the anchor (none for padding blocks), and the own block both ways:
    # padding blocks attend to themselves only, so no softmax row is empty
    ctx = torch.arange(t, device=dev)[None, None] < torch.where(live_slot, a_slot, 0)[..., None]
    blk = torch.arange(q, device=dev) // block_size
    own = blk[:, None] == blk[None]
    mask = torch.cat([ctx, own.expand(b, q, q)], -1)
    ctx_pos = torch.arange(t, device=dev).expand(b, t)
    target_pos = torch.where(live_slot, src_at, 0)
    greedy_labels = None
    if greedy is not None:
        # slot k's greedy label is the target's argmax after the written prefix through a + k; greedy
        # decoding would only reach that prefix if the written tokens a+1..a+k were the target's own
        # argmax choices too, so past the first departure from the greedy path the label is unknown
        written = torch.gather(ids, 1, target_pos)
        before = torch.gather(greedy, 1, (target_pos - 1).clamp(min=0, max=t - 1))
        on_path = (written == before) | (slot <= first_slot)[None]
        on_path = on_path.view(b, n_anchor, block_size).int().cumprod(-1).bool().view(b, q)
        greedy_labels = torch.where(
            (labels == IGNORE) | ~on_path, IGNORE, torch.gather(greedy, 1, target_pos)
        )
    guesses = _guesses(ids, anchors, block_size, lookup_input) if lookup_input else (None, None)
    return BlockBatch(
        block_ids, block_pos, ctx_pos, mask, labels, prev_ids, slot, target_pos, greedy_labels, *guesses
    )


def _guesses(
    ids: torch.Tensor, anchors: list[torch.Tensor], block_size: int, max_match: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each slot's lookup guess and match length [b, n_anchor * block_size] (zeros for padding)."""
    seqs = list(ids.cpu().numpy())
    out_ids, out_lens = batch_guesses(seqs, [a.cpu().numpy() for a in anchors], block_size, max_match)
    return torch.from_numpy(out_ids).to(ids.device), torch.from_numpy(out_lens).to(ids.device)


def block_forward(model: DFlashModel, batch: BlockBatch, features: torch.Tensor) -> torch.Tensor:
    """Final-normed draft states [b, Q, H] for every anchored block (one parallel pass)."""
    ctx = model.fuse_context(features)
    ctx_kv = [layer.project_context(ctx, batch.ctx_pos) for layer in model.layers]
    anchor_ctx = None
    if model.cfg.anchor_context:  # the state at a - 1 for every slot of the block anchored at a
        before = (batch.block_pos - batch.slot[None] - 1).clamp(min=0, max=ctx.shape[1] - 1)
        anchor_ctx = torch.gather(ctx, 1, before[..., None].expand(-1, -1, ctx.shape[-1]))
    guesses = None
    if model.cfg.lookup_input:
        if batch.guess_ids is None:
            raise ValueError("this drafter reads prompt-lookup guesses: build the batch with lookup_input")
        guesses = (batch.guess_ids, batch.guess_lens)
    return model.backbone(batch.block_ids, batch.block_pos, ctx_kv, batch.mask, anchor_ctx, guesses)


def draft_logits(
    model: DFlashModel, batch: BlockBatch, features: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Teacher-forced slot states [b, Q, H], draft-vocabulary logits [b, Q, Vd] (fp32, with DSpark's
    Markov bias from the written previous token) and those tokens' Markov rows [b, Q]. Teacher
    forcing is exact for accepted prefixes: there the drafted previous token is the written one."""
    states = model.step_states(block_forward(model, batch, features), batch.prev_ids)
    logits = model.base_logits(states).float()
    prev_idx = model.prev_index(batch.prev_ids)
    if model.cfg.markov_rank:
        logits = logits + model.markov_bias(prev_idx)
    return states, logits, prev_idx


def anchor_runs(model: DFlashModel, batch: BlockBatch, features: torch.Tensor) -> torch.Tensor:
    """Accepted run length [b, anchors] at each anchored block against the target's greedy labels
    (what greedy decoding accepts), every slot verified; -1 for blocks with no first label."""
    if batch.greedy_labels is None:
        raise ValueError("run lengths need a batch built with the target's greedy tokens")
    draft = draft_logits(model, batch, features)[1].argmax(-1)
    labels = batch.greedy_labels
    # a token outside the draft vocabulary maps to row Vd, which no draft reaches: a miss
    scored = torch.where(labels == IGNORE, IGNORE, model.t2d[labels.clamp(min=0)])
    prefix, live = prefix_hits(draft, scored, model.cfg.block_size, first_slot(model.cfg))
    return torch.where(live, prefix.sum(-1), -1)


def block_loss(
    model: DFlashModel,
    batch: BlockBatch,
    features: torch.Tensor,
    target_final: torch.Tensor | None = None,
    target_head: torch.Tensor | None = None,
    target_lse: torch.Tensor | None = None,
    label: str = "token",
    ce_weight: float = 0.1,
    feature_weight: float = 0.0,
    loss_slots: int = 0,
    survival: bool = False,
) -> tuple[torch.Tensor, dict[str, float]]:
    """DFlash: position-weighted CE. DSpark: w CE + (1 - w) L1(p_draft, p_target) + 1.0 BCE(confidence),
    w = ce_weight (0.1 in the DSpark paper).

    label: what the CE term learns, "token" (the token written in the answer), "greedy" (the target's
    argmax at that position, which is what greedy verification accepts; needs the batch's greedy labels)
    or "soft" (the target's whole distribution: distillation). feature_weight > 0 adds EAGLE's smooth-L1
    regression of the draft states onto the target's final-norm states, a dense signal per slot instead
    of one token. loss_slots > 0 trains only the block's first loss_slots slots (what a verifier of that
    many drafts checks); survival weighs each slot by the drafter's own (detached) probability of every
    earlier slot's label, so a slot counts as much as decoding is likely to reach it (an expected-
    accepted-length weighting). The target distribution comes from its final-norm states: with the
    cached log-normaliser (target_lse) only the draft-vocabulary logits are computed; otherwise the full
    lm_head is used. Metrics: tau_est (against the written tokens) and, when the batch has them,
    tau_greedy (against the target's argmax), each also with drafts capped at CAPPED_DRAFT.
    """
    cfg = model.cfg
    states, logits, prev_idx = draft_logits(model, batch, features)
    vd = logits.shape[-1]

    def draft_index(labels: torch.Tensor) -> torch.Tensor:
        return torch.where(labels == IGNORE, vd, model.t2d[labels.clamp(min=0)])

    if label not in LABELS:
        raise ValueError(f"label must be one of {', '.join(LABELS)}, got {label!r}")
    if label == "greedy" and batch.greedy_labels is None:
        raise ValueError("label='greedy' needs a batch built with the target's greedy tokens")
    needs_target = bool(cfg.markov_rank or cfg.confidence or label == "soft" or feature_weight)
    if needs_target and (target_final is None or (target_head is None and target_lse is None)):
        raise ValueError("DSpark, soft labels and feature regression need the target's final states and lse")
    p_t_draft = final = None
    if needs_target:
        idx = batch.target_pos[..., None].expand(-1, -1, target_final.shape[-1])
        final = torch.gather(target_final, 1, idx)
    if cfg.markov_rank or cfg.confidence or label == "soft":  # the target's draft-vocab distribution
        if target_lse is not None:
            lse = torch.gather(target_lse, 1, batch.target_pos)
            p_t_draft = torch.exp((final @ model.head.t()).float() - lse[..., None])
        else:
            p_t_draft = torch.softmax((final @ target_head.t()).float(), -1)[..., model.d2t]
    has_next = batch.labels != IGNORE
    label_idx = draft_index(batch.greedy_labels if label == "greedy" else batch.labels)
    valid = label_idx < vd  # tokens outside a reduced draft vocabulary cannot be learned
    if label != "soft" or survival:  # soft labels read it only for the survival weights
        hard_ce = F.cross_entropy(logits.transpose(1, 2), label_idx.clamp(max=vd - 1), reduction="none")
    else:
        hard_ce = torch.zeros_like(has_next, dtype=logits.dtype)
    slot_w = slot_weights(model, batch, hard_ce, valid, loss_slots, survival)
    w_all = slot_w * has_next
    n_all = w_all.sum().clamp(min=1e-6)
    if label == "soft":  # cross-entropy to the target's full distribution (distillation)
        ce = -(p_t_draft * torch.log_softmax(logits, -1)).sum(-1)
        ce = (ce * w_all).sum() / n_all
    else:
        weight = slot_w * valid
        ce = (hard_ce * weight).sum() / weight.sum().clamp(min=1e-6)
    terms = {"ce": ce}  # tensors until the end, so torch.compile sees the whole loss as one graph
    loss = ce
    if cfg.markov_rank or cfg.confidence:
        outside = (1.0 - p_t_draft.sum(-1)).clamp(min=0.0)
        p_d = torch.softmax(logits, -1)
        l1 = (p_d - p_t_draft).abs().sum(-1) + outside
        l1_loss = (l1 * w_all).sum() / n_all
        loss = ce_weight * ce + (1.0 - ce_weight) * l1_loss
        terms["l1"] = l1_loss
        if cfg.confidence:
            accept = (1.0 - 0.5 * l1).detach().clamp(0.0, 1.0)
            conf = model.confidence_logit(states, prev_idx)
            bce = F.binary_cross_entropy_with_logits(conf.float(), accept, reduction="none")
            bce_loss = (bce * w_all).sum() / n_all
            loss = loss + bce_loss
            terms["bce"] = bce_loss
    if feature_weight:  # EAGLE's dense signal: regress the target's final-norm state at each slot
        feat = F.smooth_l1_loss(states.float(), final.float(), reduction="none").mean(-1)
        feat_loss = (feat * w_all).sum() / n_all
        loss = loss + feature_weight * feat_loss
        terms["feat"] = feat_loss
    with torch.no_grad():
        draft = logits.argmax(-1)

        def scored(labels: torch.Tensor) -> torch.Tensor:  # draft index, -1 outside the draft vocab
            idx = draft_index(labels)
            return torch.where(labels == IGNORE, IGNORE, torch.where(idx == vd, -1, idx))

        first = first_slot(cfg)
        terms.update(accepted_runs(draft, scored(batch.labels), cfg.block_size, "tau_est", first))
        if batch.greedy_labels is not None:
            greedy_runs = accepted_runs(
                draft, scored(batch.greedy_labels), cfg.block_size, "tau_greedy", first
            )
            terms.update(greedy_runs)
    terms["loss"] = loss
    return loss, {k: float(v.detach()) for k, v in terms.items()}


def slot_weights(
    model: DFlashModel,
    batch: BlockBatch,
    ce: torch.Tensor,
    valid: torch.Tensor,
    loss_slots: int = 0,
    survival: bool = False,
) -> torch.Tensor:
    """Loss weight of every block slot [b, Q]: the position decay exp(-k/gamma), zero from slot
    loss_slots on (when > 0), times (survival) the detached probability that the drafter got every
    earlier slot of its block right, exp(-sum of their CE); a label outside the draft vocabulary
    ends the block's survival."""
    block, first = model.cfg.block_size, first_slot(model.cfg)
    draft_slot = (batch.slot - first).clamp(min=0)  # the draft's index in its block
    w = model.position_weights(ce.device)[draft_slot]
    if loss_slots:
        w = w * (draft_slot < loss_slots)
    w = w.expand_as(ce)
    if survival:
        nll = ce.detach().masked_fill(~valid, float("inf")).view(ce.shape[0], -1, block)
        nll[..., :first] = 0.0  # a slot that drafts nothing does not end the block's survival
        earlier = torch.cumsum(F.pad(nll[..., :-1], (1, 0)), -1)  # CE summed over the slots before
        w = w * torch.exp(-earlier).view_as(ce)
    return w


def prefix_hits(
    draft: torch.Tensor, labels: torch.Tensor, block_size: int, first_slot: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per anchored block, 1 at each drafting slot while every draft so far equals its label ([b, A,
    block - first_slot]) and whether the block's first drafting slot has a label at all ([b, A]);
    draft and labels [b, A * block]."""
    blocks = (draft == labels).view(draft.shape[0], -1, block_size)[..., first_slot:]
    live = (labels != IGNORE).view(draft.shape[0], -1, block_size)[..., first_slot]
    return blocks.int().cumprod(-1), live


def accepted_runs(
    draft: torch.Tensor, labels: torch.Tensor, block_size: int, name: str, first_slot: int = 0
) -> dict[str, torch.Tensor]:
    """accepted_length as 0-dim tensors, without a data-dependent branch (compiles as one graph)."""
    prefix, live = prefix_hits(draft, labels, block_size, first_slot)
    live = live.float()
    n = live.sum().clamp(min=1.0)  # no live block: 1 + 0 / 1 = 1.0
    return {
        key: 1.0 + (run.float() * live).sum() / n
        for key, run in ((name, prefix.sum(-1)), (f"{name}_k3", prefix[..., :CAPPED_DRAFT].sum(-1)))
    }


def accepted_length(
    draft: torch.Tensor, labels: torch.Tensor, block_size: int, name: str
) -> dict[str, float]:
    """Greedy accepted length per block if every slot were verified (teacher-forced prefix).

    draft: the drafter's argmax as draft-vocabulary indices; labels: the expected tokens as
    draft-vocabulary indices, -1 for a token outside the draft vocabulary (always a miss) and
    IGNORE where a slot has no label. Blocks whose first slot has no label are not counted.
    Returns `name` for the full block and `name`_k3 with drafts capped at CAPPED_DRAFT (the
    length a machine verifies)."""
    return {k: float(v) for k, v in accepted_runs(draft, labels, block_size, name).items()}
