"""How DFlash and DSpark train: options, model construction, anchored-block batches and the loss.

The generic trainer (training/train.py) drives this through the Recipe interface; the block
layout and the losses themselves live in training.py next to the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from draftsmith.drafters.checkpoint import target_fingerprint
from draftsmith.drafters.dflash.checkpoint import save_drafter
from draftsmith.drafters.dflash.config import DFlashConfig
from draftsmith.drafters.dflash.model import DFlashModel
from draftsmith.drafters.dflash.training import anchor_runs, block_loss, build_blocks, first_slot
from draftsmith.errors import DraftsmithError
from draftsmith.training.anchors import CAPPED_DRAFT, sample_anchors, walk
from draftsmith.training.labels import check_label, label_option
from draftsmith.training.recipe import Recipe


@dataclass
class DFlashOptions:
    anchors: int = field(default=64, metadata={"help": "anchored blocks per sequence"})
    block_size: int = field(default=7, metadata={"help": "slots per block (anchor + drafts)"})
    num_layers: int = field(default=1, metadata={"flag": "--layers", "help": "draft decoder layers"})
    markov_rank: int = field(default=64, metadata={"help": "DSpark: rank of the Markov head"})
    markov_state: int = field(
        default=0,
        metadata={
            "group": "draftsmith-only",
            "help": "DSpark, draftsmith-only (no engine or export format has it): width of a serial "
            "state update from the previous token (0 = off)",
        },
    )
    draft_vocab: int | None = field(
        default=0,
        metadata={
            "help": "draft vocabulary: 0 (default) = the target's whole vocabulary, as every export "
            "format carries; N = the N most frequent answer tokens, cheaper to draft and train on a CPU "
            "but exported only to speculators and GGUF"
        },
    )
    gamma: float = field(default=4.0, metadata={"help": "loss weight decay over slots, exp(-(k-1)/gamma)"})
    init: str = field(
        default="random",
        metadata={
            "group": "experimental",
            "choices": ["random", "head", "target"],
            "help": "draft layers start at random (DeepSpec), random with the target's final norm "
            "(head), or as copies of the target's last layers (target)",
        },
    )
    qk_norm: bool = field(
        default=True,
        metadata={
            "help": "per-head q/k RMSNorm (Qwen3-style draft layers, which every public DFlash/DSpark "
            "format and engine expects; --no-qk-norm drafts only in draftsmith)"
        },
    )
    anchor_context: bool = field(
        default=False,
        metadata={
            "group": "draftsmith-only",
            "help": "draftsmith-only (no engine or export format has it): add the context state before "
            "the anchor to every block input",
        },
    )
    lookup_input: int = field(
        default=0,
        metadata={
            "group": "draftsmith-only",
            "help": "draftsmith-only (no engine or export format has it): feed each block slot the "
            "prompt-lookup guess of its token (suffix matches up to N tokens) and the match length "
            "(0 = off)",
        },
    )
    lookup_dropout: float = field(
        default=0.0,
        metadata={
            "group": "draftsmith-only",
            "help": "with --lookup-input: the share of training blocks drafted without guesses, so one "
            "drafter drafts well with them (draftsmith's engine) and without them (every export format "
            "and other engine; `--no-lookup` here); its held-out tau is logged both ways",
        },
    )
    ce_weight: float = field(
        default=0.5, metadata={"help": "DSpark: CE weight; L1 to the target gets 1 - this (paper 0.1)"}
    )
    feature_weight: float = field(
        default=0.0,
        metadata={
            "group": "experimental",
            "help": "smooth-L1 regression of draft states onto the target's (EAGLE)",
        },
    )
    loss_slots: int = field(
        default=0,
        metadata={
            "group": "experimental",
            "help": "train only the first N block slots (0 = all; the default CPU mode verifies 3)",
        },
    )
    mask_slots: bool | None = field(
        default=None,
        metadata={
            "help": "slot layout. DFlash default (z-lab's, which SGLang, vLLM and llama.cpp run): slot 0 "
            "holds the anchor and drafts nothing, the mask slots draft (block size - 1 drafts). "
            "--no-mask-slots: every slot drafts, the first from the anchor (DSpark's layout, always "
            "DSpark's; for DFlash it exports to speculators and GGUF only)"
        },
    )
    survival: bool = field(
        default=False,
        metadata={
            "help": "weigh each slot by the drafter's own probability of every earlier slot's label "
            "(expected accepted length)"
        },
    )
    label: str = label_option("token")

    def __post_init__(self) -> None:
        if self.markov_state < 0:
            raise DraftsmithError(f"markov_state must be >= 0, got {self.markov_state}")
        if self.lookup_input < 0:
            raise DraftsmithError(f"lookup_input must be >= 0, got {self.lookup_input}")
        if not 0 <= self.lookup_dropout <= 1:
            raise DraftsmithError(f"lookup_dropout must be in [0, 1], got {self.lookup_dropout}")
        for name in ("anchors", "num_layers"):
            if getattr(self, name) < 1:
                raise DraftsmithError(f"{name} must be >= 1")
        if self.draft_vocab == 0:
            self.draft_vocab = None
        if self.init not in ("random", "head", "target"):
            raise DraftsmithError(f"init must be random, head or target, got {self.init!r}")
        if not 0 <= self.ce_weight <= 1:
            raise DraftsmithError(f"ce_weight must be in [0, 1], got {self.ce_weight}")
        check_label(self.label)
        if self.feature_weight < 0:
            raise DraftsmithError(f"feature_weight must be >= 0, got {self.feature_weight}")
        if self.loss_slots < 0:
            raise DraftsmithError(f"loss_slots must be >= 0 (0 = all), got {self.loss_slots}")


def drafter_config(target, method: str, opts: DFlashOptions, layers: list[int]) -> DFlashConfig:
    """Draft width = target width; heads and MLP size follow the target (as DFlash and DSpark do)."""
    c = target.model.config
    rope = getattr(c, "rope_parameters", None) or {}
    dspark = method == "dspark"
    if dspark and opts.mask_slots:
        raise DraftsmithError("--mask-slots is DFlash's z-lab layout; DSpark drafts from the anchor slot")
    mask_slots = not dspark if opts.mask_slots is None else opts.mask_slots
    return DFlashConfig(
        hidden_size=c.hidden_size,
        num_heads=c.num_attention_heads,
        num_kv_heads=getattr(c, "num_key_value_heads", c.num_attention_heads),
        head_dim=getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
        intermediate_size=c.intermediate_size,
        target_layers=list(layers),
        mask_token_id=mask_token(target),
        target_vocab_size=target.runner.vocab_size,
        num_layers=opts.num_layers,
        block_size=opts.block_size,
        rms_norm_eps=float(getattr(c, "rms_norm_eps", 1e-6)),
        rope_theta=float(rope.get("rope_theta", getattr(c, "rope_theta", 10000.0))),
        draft_vocab_size=opts.draft_vocab,
        markov_rank=opts.markov_rank if dspark else 0,
        markov_state=opts.markov_state if dspark else 0,
        confidence=dspark,
        gamma=opts.gamma,
        anchor_context=opts.anchor_context,
        lookup_input=opts.lookup_input,
        qk_norm=opts.qk_norm,
        sample_from_anchor=not mask_slots,
        method=method,
        target_name=target.name,
        target_fingerprint=target_fingerprint(target),
    )


def mask_token(target) -> int:
    """A fixed, rarely generated id whose frozen embedding marks the block's empty slots."""
    tok = target.tokenizer
    for cand in (getattr(tok, "unk_token_id", None), getattr(tok, "pad_token_id", None)):
        if cand is not None:
            return int(cand)
    return 0


def pad_stack(seqs: list, name: str, value=0) -> torch.Tensor:
    """Field `name` of every sequence, padded at the end to the longest one and stacked."""
    xs = [getattr(s, name) for s in seqs]
    t = max(x.shape[0] for x in xs)
    pad = [x.new_full((t - x.shape[0], *x.shape[1:]), value) for x in xs]
    return torch.stack([torch.cat([x, p]) if p.shape[0] else x for x, p in zip(xs, pad, strict=True)])


def collate(
    seqs: list,
    anchors: int,
    block: int,
    mask_id: int,
    g: torch.Generator,
    lookup_input: int = 0,
    first_slot: int = 0,
):
    """Pad sequences to one length and lay out their anchored blocks (with each slot's lookup guess
    when lookup_input > 0).

    Target states come back in fp32 whatever dtype the target ran in: the drafter trains in fp32.
    """
    ids, mask = pad_stack(seqs, "ids"), pad_stack(seqs, "loss_mask", False)
    greedy = pad_stack(seqs, "greedy") if all(s.greedy is not None for s in seqs) else None
    anchor_lists = [sample_anchors(m, anchors, g) for m in mask]
    batch = build_blocks(ids, mask, anchor_lists, block, mask_id, greedy, lookup_input, first_slot)
    feats, final, lse = (pad_stack(seqs, name).float() for name in ("features", "final", "lse"))
    return batch, feats, final, lse


def drop_guesses(batch, block_size: int, share: float, generator: torch.Generator):
    """The batch with every slot's guess removed in about `share` of its blocks (whole blocks, as a
    drafter that runs without the lookup sees them); share 1 removes them all."""
    if batch.guess_lens is None:
        return batch
    b, q = batch.guess_lens.shape
    if share >= 1:  # draws nothing, so a scorer's anchors stay those of its run with guesses
        keep = torch.zeros(b, q // block_size, dtype=torch.bool)
    else:
        keep = torch.rand(b, q // block_size, generator=generator) >= share
    keep = keep.repeat_interleave(block_size, 1).to(batch.guess_lens.device)
    return replace(batch, guess_lens=batch.guess_lens * keep, guess_ids=batch.guess_ids * keep)


def scored_ways(cfg) -> list[tuple[str, float]]:
    """(metric suffix, share of blocks without guesses) a held-out score is taken at: a lookup drafter
    with and without its guesses (what every other engine drafts), any other as it is."""
    return [("", 0.0), ("_no_lookup", 1.0)] if cfg.lookup_input else [("", 0.0)]


METRIC_OF = {
    "tau": "tau_est",
    "tau_k3": "tau_est_k3",
    "tau_greedy": "tau_greedy",
    "tau_greedy_k3": "tau_greedy_k3",
}
"""evaluate() key -> the block_loss metric it averages."""


class DFlashRecipe(Recipe):
    """DFlash (parallel block) or, with method="dspark", DSpark (+ Markov and confidence heads)."""

    options = DFlashOptions
    old_defaults = {
        "label": "token",
        "anchor_context": False,
        "ce_weight": 0.1,
        "qk_norm": False,
        "lookup_input": 0,
        "lookup_dropout": 0.0,
        "loss_slots": 0,
        "survival": False,
        "mask_slots": False,
    }

    def __init__(self, method: str) -> None:
        self.method = method

    def build(self, target, opts: DFlashOptions, layers: list[int], data) -> DFlashModel:
        cfg = drafter_config(target, self.method, opts, layers)
        model = DFlashModel(cfg)
        model.init_weights(torch.initial_seed())  # the trainer seeded torch with its --seed
        if opts.init == "target":
            model.init_from_target(target.model)
        elif opts.init == "head":
            model.init_head_side(target.model)
        model.token_counts = data.token_counts(cfg.target_vocab_size)  # saved with it (FR-Spec cuts)
        if cfg.draft_vocab_size and cfg.draft_vocab_size < cfg.target_vocab_size:
            counts = torch.from_numpy(model.token_counts)
            model.d2t = counts.topk(cfg.draft_vocab_size).indices.sort().values
        model.to(target.device)
        self.attach(model, target)
        return model

    def attach(self, model: DFlashModel, target) -> None:
        # the drafter trains in fp32 whatever dtype the target runs in (bf16 on GPUs and most new CPUs)
        emb = target.model.get_input_embeddings().weight.float()
        model.attach_target(emb, target.model.get_output_embeddings().weight.float())

    def batch(self, seqs: list, opts: DFlashOptions, model: DFlashModel, generator: torch.Generator):
        """A training batch: with --lookup-dropout, that share of blocks loses its guesses."""
        return self._batch(seqs, opts, model, generator, opts.lookup_dropout)

    def _batch(
        self, seqs: list, opts: DFlashOptions, model: DFlashModel, generator: torch.Generator, drop: float
    ):
        mask_id = model.cfg.mask_token_id
        lookup = model.cfg.lookup_input  # the model's own, so a loaded drafter is scored as it decodes
        first = first_slot(model.cfg)
        batch, feats, final, lse = collate(
            seqs, opts.anchors, opts.block_size, mask_id, generator, lookup, first
        )
        if lookup and drop > 0:
            batch = drop_guesses(batch, model.cfg.block_size, drop, generator)
        device = model.fc.weight.device
        return batch.to(device), feats.to(device), final.to(device), lse.to(device)

    def loss(self, model: DFlashModel, batch, opts: DFlashOptions):
        blocks, feats, final, lse = batch
        return block_loss(
            model,
            blocks,
            feats,
            final,
            target_lse=lse,
            label=opts.label,
            ce_weight=opts.ce_weight,
            feature_weight=opts.feature_weight,
            loss_slots=opts.loss_slots,
            survival=opts.survival,
        )

    @torch.no_grad()
    def tune_options(self, model: DFlashModel) -> DFlashOptions:
        """The drafter's own layout, and the shipped recipe's training choices: a lookup input keeps
        half of its blocks without guesses (so its exports stay as good), slots weighed by survival."""
        c = model.cfg
        values = {f: getattr(c, f) for f in ("block_size", "num_layers", "markov_rank", "markov_state")}
        values |= {f: getattr(c, f) for f in ("gamma", "qk_norm", "anchor_context", "lookup_input")}
        return DFlashOptions(
            **values,
            draft_vocab=0 if c.draft_vocab_size in (None, c.target_vocab_size) else c.draft_vocab_size,
            mask_slots=not c.sample_from_anchor,
            lookup_dropout=0.5 if c.lookup_input else 0.0,
            survival=True,
        )

    def evaluate(self, model: DFlashModel, seqs: list, opts: DFlashOptions) -> dict[str, float]:
        """Teacher-forced accepted length at fixed anchors: "tau" against the answer's tokens and
        "tau_greedy" against the target's argmax (what greedy decoding accepts; exact on greedy
        answers), each if every block slot were verified and ("_k3") with drafts capped at 3."""
        if not len(seqs):
            return {k: float("nan") for k in METRIC_OF}
        out = {}
        for suffix, drop in scored_ways(model.cfg):
            g = torch.Generator().manual_seed(12345)
            sums = dict.fromkeys(METRIC_OF, 0.0)
            for s in seqs:
                batch = self._batch([s], opts, model, g, drop)
                _, m = block_loss(model, batch[0], batch[1], batch[2], target_lse=batch[3])
                for k in METRIC_OF:
                    sums[k] += m.get(METRIC_OF[k], float("nan"))
            out.update({k + suffix: v / len(seqs) for k, v in sums.items()})
        return out

    WALK_CHUNK = 128
    """Anchors laid out per pass when every position is one (bounds the attention mask's memory)."""

    @torch.no_grad()
    def walk(self, model: DFlashModel, seqs: list, opts: DFlashOptions) -> dict[str, float]:
        """Teacher-forced accepted length as greedy decoding collects it: every answer position is an
        anchor, then decoding's walk over their runs (training/anchors.walk), pooled over sequences.
        The uniform "tau_greedy" weighs every position alike; this is what a bench would measure."""
        out = {}
        for suffix, drop in scored_ways(model.cfg):
            found = self._walk(model, seqs, drop)
            out.update({k + suffix: v for k, v in found.items()})
        return out

    def _walk(self, model: DFlashModel, seqs: list, drop: float) -> dict[str, float]:
        if not len(seqs):
            return {"tau_walk": float("nan"), "tau_walk_k3": float("nan")}
        device, cfg = model.fc.weight.device, model.cfg
        totals = {cap: [0, 0] for cap in (None, CAPPED_DRAFT)}  # tokens, rounds
        for s in seqs:
            if s.greedy is None:
                raise DraftsmithError("the walk needs the target's greedy tokens (rebuild the cache)")
            runs: dict[int, int] = {}
            for chunk in sample_anchors(s.loss_mask, s.ids.shape[0]).split(self.WALK_CHUNK):
                batch = build_blocks(
                    s.ids[None],
                    s.loss_mask[None],
                    [chunk],
                    cfg.block_size,  # the model's own: anchor_runs reads its blocks at that size
                    cfg.mask_token_id,
                    s.greedy[None],
                    cfg.lookup_input,
                    first_slot(cfg),
                )
                if drop:
                    batch = drop_guesses(batch, cfg.block_size, drop, None)
                found = anchor_runs(model, batch.to(device), s.features[None].float().to(device))[0]
                runs.update((a, r) for a, r in zip(chunk.tolist(), found.tolist(), strict=True) if r >= 0)
            for cap, total in totals.items():
                tokens, rounds = walk(runs, cap)
                total[0] += tokens
                total[1] += rounds
        (t, r), (t3, r3) = totals[None], totals[CAPPED_DRAFT]
        return {"tau_walk": t / max(r, 1), "tau_walk_k3": t3 / max(r3, 1)}

    def save(self, model: DFlashModel, out: Path, dtype: torch.dtype | None) -> None:
        save_drafter(model, out, dtype=dtype)
