"""speculators format (what vLLM auto-detects): `speculators_model_type` dflash / dspark.

Names and fields follow speculators 0.9.0 (`models/dflash`, `models/dspark`): a Qwen3
`transformer_layer_config`, aux hidden-state ids in vLLM's convention (= draftsmith's keys), d2t as
offsets plus a bool t2d and a [Vd, H] lm_head when the draft vocabulary is reduced, DSpark heads as
`markov_head.markov_w{1,2}` and `confidence_head.proj`. No embedding: speculators itself saves none
and fills it from the verifier. This is the one format that carries every draftsmith drafter
trained with q/k norms (reduced vocabulary, either slot layout, DSpark heads).
"""

from __future__ import annotations

from pathlib import Path

import draftsmith.export.common as common
from draftsmith.drafters.dflash.config import DFlashConfig
from draftsmith.drafters.dflash.model import DFlashModel
from draftsmith.errors import DraftsmithError

NAME = "speculators"
VERSION = "0.9.0"  # the speculators release these files were checked against
TYPES = ("dflash", "dspark")


def detect(config: dict) -> bool:
    return "speculators_model_type" in config


def write(model: DFlashModel, out: str | Path, verifier: common.Verifier) -> Path:
    """Write a speculators dflash (no DSpark heads) or dspark directory."""
    cfg = model.cfg
    full = common.full_vocab(model)
    common.require(cfg, NAME, **common.common_limits(model))
    vd = model.d2t.shape[0]
    if vd == cfg.target_vocab_size and not full:
        raise DraftsmithError(
            "cannot export a drafter whose full draft vocabulary is permuted (d2t is not identity)"
        )
    # A DFlash that drafts from the anchor slot is written as a DSpark without heads (markov_rank 0):
    # vLLM's DFlash runner refuses sample_from_anchor (its layout is anchor + N mask slots), its
    # DSpark runner honours it, as llama.cpp's DSpark path does.
    kind = "dspark" if cfg.markov_rank or cfg.confidence or cfg.sample_from_anchor else "dflash"
    tokens = cfg.block_size if cfg.sample_from_anchor else cfg.block_size - 1
    config = {
        "architectures": ["DSparkSpeculator" if kind == "dspark" else "DFlashSpeculator"],
        "speculators_model_type": kind,
        "speculators_version": VERSION,
        "speculators_config": {
            "algorithm": kind,
            "proposal_methods": [
                {
                    "proposal_type": "greedy",
                    "speculative_tokens": tokens,
                    "verifier_accept_k": 1,
                    "accept_tolerance": 0.0,
                }
            ],
            "default_proposal_method": "greedy",
            "verifier": {"name_or_path": verifier.name, "architectures": verifier.architectures},
        },
        "transformer_layer_config": common.qwen3_config(cfg, verifier),
        "draft_vocab_size": vd,
        "block_size": cfg.block_size,
        "target_hidden_size": cfg.hidden_size,
        "aux_hidden_state_layer_ids": list(cfg.target_layers),
        "mask_token_id": cfg.mask_token_id,
        "sample_from_anchor": cfg.sample_from_anchor,
        "sliding_window_non_causal": True,  # vLLM: causal = not this; draftsmith blocks are bidirectional
        "dtype": str(model.fc.weight.dtype).removeprefix("torch."),
    }
    if kind == "dspark":
        config.update(
            markov_rank=cfg.markov_rank,
            markov_head_type="vanilla",
            enable_confidence_head=cfg.confidence,
            confidence_head_with_markov=bool(cfg.confidence and cfg.markov_rank),
        )
    weights = common.body_weights(model) | common.head_weights(model)
    if not full:
        if model.head is None:
            raise DraftsmithError(
                "exporting a reduced draft vocabulary needs the target's lm_head: load with a target"
            )
        weights["lm_head.weight"] = model.head.detach().cpu().to(model.fc.weight.dtype)
        weights["d2t"] = common.d2t_offsets(model.d2t.cpu())
        weights["t2d"] = common.t2d_mask(model.d2t.cpu(), cfg.target_vocab_size)
    return common.write_dir(out, config, weights)


def read(path: Path, config: dict, target=None) -> tuple[DFlashModel, dict]:
    """A speculators dflash / dspark directory -> our model, plus the verifier-owned weights it ships."""
    kind = config.get("speculators_model_type")
    if kind not in TYPES:
        raise DraftsmithError(
            f"{path} is a speculators {kind!r} drafter; draftsmith's dflash/dspark methods load "
            f"speculators_model_type {' or '.join(TYPES)}"
        )
    tl = config.get("transformer_layer_config")
    if not isinstance(tl, dict):
        raise DraftsmithError(f"{path}: speculators config has no transformer_layer_config")
    fields = common.body_config(tl, path)
    if config.get("target_hidden_size") not in (None, fields["hidden_size"]):
        raise DraftsmithError(f"{path}: target_hidden_size differs from the draft width (not supported)")
    layers, mask = config.get("aux_hidden_state_layer_ids"), config.get("mask_token_id")
    if not layers or mask is None:
        raise DraftsmithError(f"{path}: aux_hidden_state_layer_ids and mask_token_id are required")
    rank = int(config.get("markov_rank", 0)) if kind == "dspark" else 0
    if rank and config.get("markov_head_type", "vanilla") != "vanilla":
        raise DraftsmithError(
            f"{path}: markov_head_type {config['markov_head_type']!r} is not supported (vanilla only)"
        )
    confidence = kind == "dspark" and bool(config.get("enable_confidence_head", True))
    weights = common.read_weights(path)
    vd = int(config.get("draft_vocab_size") or fields["target_vocab_size"])
    cfg = DFlashConfig(
        **fields,
        target_layers=[int(i) for i in layers],
        mask_token_id=int(mask),
        block_size=int(config.get("block_size", 8)),
        draft_vocab_size=vd if vd != fields["target_vocab_size"] else None,
        markov_rank=rank,
        confidence=confidence,
        sample_from_anchor=bool(config.get("sample_from_anchor", kind == "dspark")),
        markov_vocab="target",
        method="dspark" if rank else "dflash",
    )
    model = DFlashModel(cfg)
    used = common.load_body(model, weights, path)
    used |= common.load_heads(model, weights, path, bool(config.get("confidence_head_with_markov", True)))
    if cfg.draft_vocab_size:
        if "d2t" not in weights:
            raise DraftsmithError(f"{path}: draft_vocab_size {vd} < vocab_size but no d2t")
        model.d2t = common.d2t_absolute(weights["d2t"])
        used |= {"d2t", "t2d"}
    owned = {k: weights[k] for k in ("lm_head.weight", "embed_tokens.weight") if k in weights}
    leftover = set(weights) - used - set(owned) - {"t2d", "verifier_norm.weight"}
    if leftover:
        raise DraftsmithError(f"{path}: weights draftsmith's drafter has no place for: {sorted(leftover)}")
    return model, owned
