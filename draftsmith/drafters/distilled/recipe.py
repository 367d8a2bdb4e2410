"""How the distilled draft model trains: options, construction from the target, batches and loss.

The generic trainer (training/train.py) drives this through the Recipe interface. The draft is
built from the target (model.py), distilled on the target cache's token ids against the target's
own next-token distributions (training.py), and saved as a standard HF directory (checkpoint.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from draftsmith.drafters.distilled.checkpoint import save_draft
from draftsmith.drafters.distilled.model import LAYER_INITS, DistilledDraft
from draftsmith.drafters.distilled.training import DEPTH, collate, distill_loss, sequence_taus
from draftsmith.errors import DraftsmithError
from draftsmith.training.labels import check_label, label_option
from draftsmith.training.recipe import Recipe


@dataclass
class DistilledOptions:
    # names shared with DFlash's options (num_layers, label, anchors) mean the same and share a flag
    num_layers: int = field(default=4, metadata={"flag": "--layers", "help": "draft decoder layers"})
    layer_init: str = field(
        default="evenly",
        metadata={
            "choices": list(LAYER_INITS),
            "help": "distilled: the draft's layers start as evenly spaced target layers (first and "
            "last included) or as its first N",
        },
    )
    label: str = label_option("soft")
    soft_topk: int = field(
        default=0,
        metadata={
            "help": "distilled, soft labels: learn the target's top-k tokens only (renormalised; the "
            "draft's logits over those k); 0 = the whole vocabulary"
        },
    )
    anchors: int = field(default=64, metadata={"help": "anchored blocks per sequence"})
    block_size: int = field(
        default=DEPTH,
        metadata={"help": "slots per block (anchor + drafts); distilled: drafts per held-out anchor"},
    )

    def __post_init__(self) -> None:
        if self.num_layers < 1:
            raise DraftsmithError(f"num_layers must be >= 1, got {self.num_layers}")
        if self.layer_init not in LAYER_INITS:
            raise DraftsmithError(
                f"layer_init must be one of {', '.join(LAYER_INITS)}, got {self.layer_init!r}"
            )
        check_label(self.label)
        if self.soft_topk < 0 or self.anchors < 1 or self.block_size < 1:
            raise DraftsmithError("soft_topk must be >= 0, anchors and block_size >= 1")


class DistilledRecipe(Recipe):
    """A few of the target's own layers, distilled into a standalone draft LM."""

    method = "distilled"
    options = DistilledOptions
    # measured: with the heap-only allocator a distilled run's anonymous memory grew ~0.3 GiB a step
    # (vocabulary-wide chunks of varying length) until the OOM killer stopped it at 24 GiB, step 132
    heap_only = False

    def build(self, target, opts: DistilledOptions, layers: list[int], data) -> DistilledDraft:
        # `layers` (the cache's feature layers) are unused: the draft reads token ids only
        if not callable(getattr(target.tokenizer, "save_pretrained", None)):
            raise DraftsmithError(
                "the target's tokenizer cannot be saved (no save_pretrained), so the draft's directory "
                "could not carry it; load the target from an HF directory or GGUF file"
            )
        return DistilledDraft.from_target(target, opts.num_layers, opts.layer_init)

    def batch(self, seqs: list, opts: DistilledOptions, model: DistilledDraft, generator: torch.Generator):
        return collate(seqs, next(model.parameters()).device)

    def loss(self, model: DistilledDraft, batch, opts: DistilledOptions):
        return distill_loss(model, batch, opts.label, opts.soft_topk)

    @torch.no_grad()
    def evaluate(self, model: DistilledDraft, seqs: list, opts: DistilledOptions) -> dict[str, float]:
        """DFlash's held-out metrics at DFlash's anchors (same sampler, seed and order), so the two
        methods' taus compare on one scale."""
        keys = ("tau", "tau_k3", "tau_greedy", "tau_greedy_k3")
        if not len(seqs):
            return {k: float("nan") for k in keys}
        g = torch.Generator().manual_seed(12345)
        sums = dict.fromkeys(keys, 0.0)
        for s in seqs:
            m = sequence_taus(model, s, opts.anchors, g, opts.block_size)
            for k in keys:
                sums[k] += m[k]
        return {k: v / len(seqs) for k, v in sums.items()}

    def save(self, model: DistilledDraft, out: Path, dtype: torch.dtype | None) -> None:
        save_draft(model, out, dtype)
