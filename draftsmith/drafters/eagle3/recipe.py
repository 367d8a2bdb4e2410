"""How EAGLE-3 trains: options, model construction, anchored TTT batches, the loss, held-out
metrics and the checkpoint. The generic trainer (training/train.py) drives it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from draftsmith.drafters.checkpoint import target_fingerprint
from draftsmith.drafters.eagle3.checkpoint import save_drafter
from draftsmith.drafters.eagle3.config import Eagle3Config, pick_layers
from draftsmith.drafters.eagle3.model import Eagle3Model
from draftsmith.drafters.eagle3.training import TOKENS, TTTBatch, pad_anchors, ttt_loss
from draftsmith.errors import DraftsmithError
from draftsmith.training.anchors import sample_anchors
from draftsmith.training.labels import check_label, label_option
from draftsmith.training.recipe import Recipe

EVAL_DEPTH = 7
"""Held-out chains are unrolled 7 steps whatever ttt_steps is: the scale DFlash's block 7 uses."""


@dataclass
class Eagle3Options:
    target_layers: str = field(
        default="auto",
        metadata={
            "help": "EAGLE-3: fused target layers, comma list of cache layers (auto: vLLM's [2, L//2, L-3])"
        },
    )
    ttt_steps: int = field(default=7, metadata={"help": "EAGLE-3: unrolled training-time-test steps"})
    anchors: int = field(
        default=64, metadata={"help": "anchored blocks per sequence (EAGLE-3: 0 = every position)"}
    )
    draft_vocab: int | None = field(default=8192, metadata={"help": "draft vocabulary (0 = the target's)"})
    label: str = label_option("soft")
    step_decay: float = field(
        default=0.8, metadata={"help": "EAGLE-3: loss weight of unrolled step j is this^j"}
    )
    ttt_tokens: str = field(
        default="true",
        metadata={
            "choices": list(TOKENS),
            "help": "EAGLE-3: tokens read by unrolled steps, the written ones or the drafter's argmax",
        },
    )
    init: str = field(
        default="random",
        metadata={"help": "EAGLE-3: random, or head (lm_head and final norm start as the target's)"},
    )

    def __post_init__(self) -> None:
        if self.ttt_steps < 1:
            raise DraftsmithError(f"ttt_steps must be >= 1, got {self.ttt_steps}")
        if self.anchors < 0:
            raise DraftsmithError(f"anchors must be >= 0 (0 = every position), got {self.anchors}")
        if self.draft_vocab == 0:
            self.draft_vocab = None
        check_label(self.label)
        if self.ttt_tokens not in TOKENS:
            raise DraftsmithError(f"ttt_tokens must be one of {', '.join(TOKENS)}, got {self.ttt_tokens!r}")
        if not 0 < self.step_decay <= 1:
            raise DraftsmithError(f"step_decay must be in (0, 1], got {self.step_decay}")
        if self.init not in ("random", "head"):
            raise DraftsmithError(f"init must be random or head for eagle3, got {self.init!r}")


def drafter_config(target, opts: Eagle3Options, layers: list[int]) -> Eagle3Config:
    """Draft width = target width (the embedding is the target's); heads and MLP follow the target."""
    c = target.model.config
    rope = getattr(c, "rope_parameters", None) or {}
    vocab = target.runner.vocab_size
    return Eagle3Config(
        hidden_size=c.hidden_size,
        num_heads=c.num_attention_heads,
        num_kv_heads=getattr(c, "num_key_value_heads", None) or c.num_attention_heads,
        head_dim=getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
        intermediate_size=c.intermediate_size,
        target_hidden_size=c.hidden_size,
        target_layers=pick_layers(c.num_hidden_layers, list(layers), opts.target_layers),
        target_vocab_size=vocab,
        draft_vocab_size=opts.draft_vocab if opts.draft_vocab and opts.draft_vocab < vocab else None,
        rms_norm_eps=float(getattr(c, "rms_norm_eps", 1e-6)),
        rope_theta=float(rope.get("rope_theta", getattr(c, "rope_theta", 10000.0))),
        ttt_steps=opts.ttt_steps,
        target_name=target.name,
        target_fingerprint=target_fingerprint(target),
    )


def feature_columns(model: Eagle3Model) -> torch.Tensor | None:
    """Columns of the cache's concatenated features that hold the drafter's layers (None: all)."""
    source = getattr(model, "source_layers", None)
    want = list(model.cfg.target_layers)
    if source is None or list(source) == want:
        return None
    h = model.cfg.target_hidden_size
    return torch.cat([torch.arange(source.index(x) * h, (source.index(x) + 1) * h) for x in want])


def pad_stack(xs: list[torch.Tensor], value=0) -> torch.Tensor:
    t = max(x.shape[0] for x in xs)
    return torch.stack([torch.cat([x, x.new_full((t - x.shape[0], *x.shape[1:]), value)]) for x in xs])


class Eagle3Recipe(Recipe):
    method = "eagle3"
    options = Eagle3Options

    def build(self, target, opts: Eagle3Options, layers: list[int], data) -> Eagle3Model:
        cfg = drafter_config(target, opts, layers)
        model = Eagle3Model(cfg)
        model.init_weights(torch.initial_seed())  # the trainer seeded torch with its --seed
        if cfg.draft_vocab_size:
            counts = torch.from_numpy(data.token_counts(cfg.target_vocab_size))
            model.set_draft_vocab(counts.topk(cfg.draft_vocab_size).indices.sort().values)
        if opts.init == "head":
            model.init_head(target.model)
        model.source_layers = list(layers)  # the cache's layers: which feature columns to read
        model.to(target.device)
        self.attach(model, target)
        return model

    def attach(self, model: Eagle3Model, target) -> None:
        # the drafter trains in fp32 whatever dtype the target runs in
        model.attach_target(
            target.model.get_input_embeddings().weight.float(),
            target.model.get_output_embeddings().weight.float(),
        )

    def batch(
        self, seqs: list, opts: Eagle3Options, model: Eagle3Model, generator: torch.Generator
    ) -> TTTBatch:
        n = opts.anchors
        picks = []
        for s in seqs:  # anchors = 0: every candidate position (a count no sequence reaches)
            picks.append(sample_anchors(s.loss_mask, n if n else len(s.ids), generator))
        anchors, live = pad_anchors(picks)
        cols = feature_columns(model)
        feats = pad_stack([s.features if cols is None else s.features[:, cols] for s in seqs]).float()
        device = model.fc.weight.device
        greedy = pad_stack([s.greedy for s in seqs]) if all(s.greedy is not None for s in seqs) else None
        return TTTBatch(
            ids=pad_stack([s.ids for s in seqs]).to(device),
            loss_mask=pad_stack([s.loss_mask for s in seqs], False).to(device),
            features=feats.to(device),
            anchors=anchors.to(device),
            live=live.to(device),
            final=pad_stack([s.final for s in seqs]).float().to(device),
            lse=pad_stack([s.lse for s in seqs]).float().to(device),
            greedy=None if greedy is None else greedy.to(device),
        )

    def loss(self, model: Eagle3Model, batch: TTTBatch, opts: Eagle3Options):
        return ttt_loss(model, batch, opts.ttt_steps, opts.label, opts.step_decay, opts.ttt_tokens)

    @torch.no_grad()
    def evaluate(self, model: Eagle3Model, seqs: list, opts: Eagle3Options) -> dict[str, float]:
        """Teacher-forced accepted length of each anchor's chain unrolled EVAL_DEPTH steps, at fixed
        anchors (the same generator seed as DFlash's): "tau" against the written tokens, "tau_greedy"
        against the target's argmax, and their "_k3" forms with drafts capped at 3."""
        keys = {
            "tau": "tau_est",
            "tau_k3": "tau_est_k3",
            "tau_greedy": "tau_greedy",
            "tau_greedy_k3": "tau_greedy_k3",
        }
        if not len(seqs):
            return {k: float("nan") for k in keys}
        g = torch.Generator().manual_seed(12345)
        sums = dict.fromkeys(keys, 0.0)
        for s in seqs:
            _, m = ttt_loss(model, self.batch([s], opts, model, g), EVAL_DEPTH, label="token")
            for k, src in keys.items():
                sums[k] += m.get(src, float("nan"))
        return {k: v / len(seqs) for k, v in sums.items()}

    def save(self, model: Eagle3Model, out: Path, dtype: torch.dtype | None) -> None:
        save_drafter(model, out, dtype=dtype)
