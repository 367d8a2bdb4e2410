"""How Medusa heads train on a frozen target: options, construction, loss, held-out metrics.

Training rows are drawn as DFlash draws its anchors (64 per sequence by default; 0 = every row):
the row of anchor a is a - 1, the newest state a round has. Head i (from 1) at row t learns the
token at t + i + 1: the written one, the target's argmax after the written prefix, or the target's
distribution there (soft). Head i's loss weighs step_decay^(i-1), as Medusa weighs later heads less.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from draftsmith.drafters.checkpoint import target_fingerprint
from draftsmith.drafters.medusa.checkpoint import save_medusa
from draftsmith.drafters.medusa.model import MedusaConfig, MedusaModel
from draftsmith.drafters.mtp.recipe import collate
from draftsmith.drafters.mtp.training import ChainBatch
from draftsmith.errors import DraftsmithError
from draftsmith.training.anchors import IGNORE, chain_taus, sample_anchors
from draftsmith.training.labels import check_label, label_option
from draftsmith.training.recipe import Recipe


@dataclass
class MedusaOptions:
    anchors: int = field(default=64, metadata={"help": "training rows per sequence (0 = every row)"})
    heads: int = field(default=4, metadata={"help": "Medusa: heads (the most drafts per round)"})
    num_layers: int = field(default=1, metadata={"flag": "--layers", "help": "residual blocks per head"})
    draft_vocab: int | None = field(default=8192, metadata={"help": "draft vocabulary (0 = the target's)"})
    step_decay: float = field(default=0.8, metadata={"help": "Medusa: loss weight of head i is this^(i-1)"})
    label: str = label_option("token")

    def __post_init__(self) -> None:
        if self.anchors < 0:
            raise DraftsmithError(f"anchors must be >= 0 (0 = every row), got {self.anchors}")
        if not 1 <= self.heads <= 16:
            raise DraftsmithError(f"heads must be in 1..16, got {self.heads}")
        if self.num_layers < 1:
            raise DraftsmithError(f"layers must be >= 1, got {self.num_layers}")
        if not 0 < self.step_decay <= 1:
            raise DraftsmithError(f"step_decay must be in (0, 1], got {self.step_decay}")
        if self.draft_vocab == 0:
            self.draft_vocab = None
        if self.draft_vocab is not None and self.draft_vocab < 1:
            raise DraftsmithError(f"draft_vocab must be >= 1, got {self.draft_vocab}")
        check_label(self.label)


@dataclass
class HeadBatch:
    seqs: ChainBatch  # the padded sequences
    rows: torch.Tensor  # [b, R] long: rows t whose heads train (an anchor's predecessor), -1 = padding


def head_labels(batch: HeadBatch, i: int, label: str) -> torch.Tensor:
    """Ids head i (0-based) learns at each row t: the written x_(t+i+2), or the target's argmax after
    x_(t+i+1); IGNORE at padding, past the end, or outside the answer. [b, R]"""
    s, rows = batch.seqs, batch.rows
    t = s.ids.shape[1]
    bi = torch.arange(rows.shape[0], device=rows.device)[:, None]
    nxt = rows.clamp(min=0) + i + 2
    at = nxt.clamp(max=t - 1)
    ok = (rows >= 0) & (nxt < t) & s.loss_mask[bi, at]
    src = s.ids[bi, at] if label == "token" else s.greedy[bi, at - 1]
    return torch.where(ok, src, IGNORE)


def head_loss(
    model: MedusaModel, batch: HeadBatch, label: str = "token", step_decay: float = 0.8
) -> tuple[torch.Tensor, dict[str, float]]:
    """Weighted CE of every head at the batch's rows, normalised by the weights; metrics: each head's
    ce, acc1 (head 1 top-1 against the written token) and tau_est (teacher-forced accepted length)."""
    s = batch.seqs
    if label == "greedy" and s.greedy is None:
        raise ValueError("label='greedy' needs the target's greedy tokens in the batch")
    t = s.ids.shape[1]
    rows = batch.rows.clamp(min=0)
    bi = torch.arange(rows.shape[0], device=rows.device)[:, None]
    logits = model(s.final[bi, rows]).float()  # [b, R, K, Vd]
    vd = model.d2t.shape[0]
    total, weights, metrics, hits = 0.0, 0.0, {}, []
    for i in range(model.cfg.num_heads):
        written = head_labels(batch, i, "token")
        if label == "soft":  # the target's distribution where it chose x_(t+i+2), over the draft vocabulary
            pos = (rows + i + 1).clamp(max=t - 1)
            t_logits = (s.final[bi, pos] @ model.head.t().to(s.final.dtype)).float()
            p = torch.exp(t_logits - s.lse[bi, pos, None])
            valid = written != IGNORE
            ce_all = -(p * torch.log_softmax(logits[:, :, i], -1)).sum(-1)
        else:
            lab = written if label == "token" else head_labels(batch, i, "greedy")
            idx = torch.where(lab == IGNORE, vd, model.t2d[lab.clamp(min=0)])
            valid = idx < vd  # a token outside a reduced draft vocabulary cannot be learned
            ce_all = F.cross_entropy(logits[:, :, i].transpose(1, 2), idx.clamp(max=vd - 1), reduction="none")
        ce = (ce_all * valid).sum() / valid.sum().clamp(min=1)
        w = step_decay**i
        total, weights = total + w * ce, weights + w
        metrics[f"ce{i + 1}"] = float(ce.detach())
        with torch.no_grad():
            hits.append((model.d2t[logits[:, :, i].argmax(-1)] == written) & (written != IGNORE))
    loss = total / weights
    with torch.no_grad():
        live = head_labels(batch, 0, "token") != IGNORE
        run = torch.stack(hits, -1).int().cumprod(-1).sum(-1)
        metrics["acc1"] = float(hits[0][live].float().mean()) if live.any() else 0.0
        metrics["tau_est"] = float(1.0 + run[live].float().mean()) if live.any() else 1.0
    metrics["loss"] = float(loss.detach())
    return loss, metrics


def layout(seqs: list, anchors: int, device: torch.device, generator: torch.Generator | None) -> HeadBatch:
    """Padded sequences and the rows to train: up to `anchors` anchors' predecessors per sequence,
    drawn as DFlash draws its anchors (0: every row)."""
    padded = collate(seqs, device)
    if anchors:
        picks = [sample_anchors(s.loss_mask, anchors, generator) - 1 for s in seqs]
    else:
        picks = [torch.arange(s.ids.shape[0] - 1) for s in seqs]
    n = max(1, max(p.shape[0] for p in picks))
    rows = torch.stack([torch.cat([p, p.new_full((n - p.shape[0],), -1)]) for p in picks])
    return HeadBatch(padded, rows.to(device))


class MedusaRecipe(Recipe):
    """Medusa-1 heads on the frozen target's final-norm states."""

    method = "medusa"
    options = MedusaOptions

    def build(self, target, opts: MedusaOptions, layers: list[int], data) -> MedusaModel:
        vocab = target.runner.vocab_size
        cfg = MedusaConfig(
            hidden_size=int(target.model.config.hidden_size),
            target_vocab_size=vocab,
            num_heads=opts.heads,
            num_layers=opts.num_layers,
            draft_vocab_size=opts.draft_vocab if opts.draft_vocab and opts.draft_vocab < vocab else None,
            target_name=target.name,
            target_fingerprint=target_fingerprint(target),
        )
        model = MedusaModel(cfg)
        if cfg.draft_vocab_size:
            counts = torch.from_numpy(data.token_counts(vocab))
            model.d2t = counts.topk(cfg.draft_vocab_size).indices.sort().values
        model.float().to(target.device)
        self.attach(model, target)
        return model

    def attach(self, model: MedusaModel, target) -> None:
        # the heads train in fp32 whatever dtype the target runs in
        model.attach_target(target.model.get_output_embeddings().weight.float())

    def batch(
        self, seqs: list, opts: MedusaOptions, model: MedusaModel, generator: torch.Generator
    ) -> HeadBatch:
        return layout(seqs, opts.anchors, model.d2t.device, generator)

    def loss(self, model: MedusaModel, batch: HeadBatch, opts: MedusaOptions):
        return head_loss(model, batch, opts.label, opts.step_decay)

    @torch.no_grad()
    def evaluate(self, model: MedusaModel, seqs: list, opts: MedusaOptions) -> dict[str, float]:
        """Accepted length of the K drafts at the shared held-out anchors."""
        return chain_taus(
            seqs,
            model.cfg.num_heads,
            lambda s: collate(s, model.d2t.device),
            lambda b, rows: model.d2t[model(b.final[0, rows]).argmax(-1)],
        )

    def save(self, model: MedusaModel, out: Path, dtype: torch.dtype | None) -> None:
        save_medusa(model, out, dtype=dtype)
