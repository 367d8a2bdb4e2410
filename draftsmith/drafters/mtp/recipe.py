"""How an MTP head trains on a frozen target: options, construction, batches, loss, held-out metrics.

Input state: the cache's `final` (the target's final-norm state; the runner hands it over at
inference for free as FINAL). DeepSeek-V3 feeds the last layer's output before the final norm,
which the cache does not hold; after hnorm the two differ only by the final norm's per-channel
scale, which eh_proj absorbs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from draftsmith.drafters.checkpoint import target_fingerprint
from draftsmith.drafters.mtp.checkpoint import save_mtp
from draftsmith.drafters.mtp.config import MTPConfig
from draftsmith.drafters.mtp.model import MTPModel, target_classes
from draftsmith.drafters.mtp.training import (
    ChainBatch,
    chain_loss,
    unrolled_logits,
)
from draftsmith.errors import DraftsmithError
from draftsmith.training.anchors import chain_taus
from draftsmith.training.labels import check_label, label_option
from draftsmith.training.recipe import Recipe

EVAL_DEPTH = 7
"""Drafts per anchor in the held-out accepted length (DFlash's block of 7 slots drafts up to 7)."""


@dataclass
class MTPOptions:
    unroll: int = field(
        default=1, metadata={"help": "MTP: chain steps trained per position (its own output feeds step 2)"}
    )
    chain_weight: float = field(
        default=0.5, metadata={"help": "MTP: loss weight of chain steps after the first"}
    )
    # 8192 like DFlash/DSpark: the lm_head is most of a step's cost, and on the shipped SmolLM2 cache
    # the 8192 most frequent answer tokens cover 99.0% of them (4096: 95.2%)
    draft_vocab: int | None = field(default=8192, metadata={"help": "draft vocabulary (0 = the target's)"})
    init: str = field(
        default="random",
        metadata={
            "choices": ["random", "target"],
            "help": "the block's layer starts at random or as a copy of the target's last layer",
        },
    )
    label: str = label_option("token")

    def __post_init__(self) -> None:
        if not 1 <= self.unroll <= EVAL_DEPTH:
            raise DraftsmithError(f"unroll must be in 1..{EVAL_DEPTH}, got {self.unroll}")
        if self.chain_weight < 0:
            raise DraftsmithError(f"chain_weight must be >= 0, got {self.chain_weight}")
        if self.draft_vocab == 0:
            self.draft_vocab = None
        if self.draft_vocab is not None and self.draft_vocab < 1:
            raise DraftsmithError(f"draft_vocab must be >= 1, got {self.draft_vocab}")
        if self.init not in ("random", "target"):
            raise DraftsmithError(f"init must be random or target, got {self.init!r}")
        check_label(self.label)


def mtp_config(target, opts: MTPOptions) -> MTPConfig:
    """A block of the target's kind (its layer config, index after its last layer), fed FINAL."""
    c = target.model.config
    vocab = target.runner.vocab_size
    return MTPConfig(
        hidden_size=int(c.hidden_size),
        target_vocab_size=vocab,
        model_type=c.model_type,
        layer_config=c.to_dict(),
        layer_idx=int(c.num_hidden_layers),
        rms_norm_eps=float(getattr(c, "rms_norm_eps", 1e-6)),
        chain="normed",
        draft_vocab_size=opts.draft_vocab if opts.draft_vocab and opts.draft_vocab < vocab else None,
        target_name=target.name,
        target_fingerprint=target_fingerprint(target),
    )


def pad_stack(xs: list[torch.Tensor], value=0) -> torch.Tensor:
    t = max(x.shape[0] for x in xs)
    return torch.stack([torch.cat([x, x.new_full((t - x.shape[0], *x.shape[1:]), value)]) for x in xs])


def collate(seqs: list, device: torch.device) -> ChainBatch:
    """Pad cache sequences at the end to one length (padding is never a label); states in fp32."""
    greedy = pad_stack([s.greedy for s in seqs]) if all(s.greedy is not None for s in seqs) else None
    return ChainBatch(
        pad_stack([s.ids for s in seqs]).to(device),
        pad_stack([s.loss_mask for s in seqs], False).to(device),
        pad_stack([s.final for s in seqs]).float().to(device),
        pad_stack([s.lse for s in seqs]).float().to(device),
        None if greedy is None else greedy.to(device),
    )


class MTPRecipe(Recipe):
    """A DeepSeek-V3-style MTP block on the frozen target, trained as a recursive chain."""

    method = "mtp"
    options = MTPOptions

    def build(self, target, opts: MTPOptions, layers: list[int], data) -> MTPModel:
        cfg = mtp_config(target, opts)
        model = MTPModel(cfg, target_classes(target.model))
        model.init_weights(torch.initial_seed())  # the trainer seeded torch with its --seed
        model.copy_final_norm(target.model)
        if opts.init == "target":
            model.copy_last_layer(target.model)
        if cfg.draft_vocab_size:
            counts = torch.from_numpy(data.token_counts(cfg.target_vocab_size))
            model.d2t = counts.topk(cfg.draft_vocab_size).indices.sort().values
        model.float().to(target.device)
        self.attach(model, target)
        return model

    def attach(self, model: MTPModel, target) -> None:
        # the head trains in fp32 whatever dtype the target runs in
        emb = target.model.get_input_embeddings().weight.float()
        model.attach_target(emb, target.model.get_output_embeddings().weight.float())

    def batch(self, seqs: list, opts: MTPOptions, model: MTPModel, generator: torch.Generator) -> ChainBatch:
        return collate(seqs, model.eh_proj.weight.device)

    def loss(self, model: MTPModel, batch: ChainBatch, opts: MTPOptions):
        return chain_loss(model, batch, opts.unroll, opts.label, opts.chain_weight)

    @torch.no_grad()
    def evaluate(self, model: MTPModel, seqs: list, opts: MTPOptions) -> dict[str, float]:
        """Accepted length of the recursive chain (up to 7 drafts) at the shared held-out anchors."""

        def drafts(b: ChainBatch, rows: torch.Tensor) -> torch.Tensor:
            steps = unrolled_logits(model, b.ids, b.final, EVAL_DEPTH, rows)
            first = model.d2t[steps[0][0, rows].argmax(-1)]
            return torch.stack([first] + [model.d2t[x[0].argmax(-1)] for x in steps[1:]], -1)

        return chain_taus(seqs, EVAL_DEPTH, lambda s: collate(s, model.eh_proj.weight.device), drafts)

    def save(self, model: MTPModel, out: Path, dtype: torch.dtype | None) -> None:
        save_mtp(model, out, dtype=dtype)
