"""DeepSpec DSpark format (SGLang `--speculative-algorithm DSPARK`): `architectures: [Qwen3DSparkModel]`
with the DSpark settings at the top level of a Qwen3 config.

DeepSpec drafts from the anchor slot (slot k predicts anchor + k + 1, as draftsmith does), over the
full vocabulary: it ships the target's embedding and lm_head [V, H] and a Markov head whose
markov_w2 spans all V tokens, so a reduced draft vocabulary cannot be written. Layer ids name
decoder layers (draftsmith key - 1; -1 = the embedding output). markov_rank 0 is DeepSpec's DFlash.
"""

from __future__ import annotations

from pathlib import Path

import draftsmith.export.common as common
from draftsmith.drafters.dflash.config import DFlashConfig
from draftsmith.drafters.dflash.model import DFlashModel
from draftsmith.errors import DraftsmithError

NAME = "deepspec"
ARCH = "Qwen3DSparkModel"
NUM_ANCHORS = 512  # a training setting DeepSpec's model requires; DeepSpec's own configs use 512


def detect(config: dict) -> bool:
    return ARCH in (config.get("architectures") or [])


def write(model: DFlashModel, out: str | Path, verifier: common.Verifier) -> Path:
    """Write a DeepSpec Qwen3DSparkModel directory (body, target embedding and lm_head, heads)."""
    cfg = model.cfg
    common.require(cfg, NAME, **common.common_limits(model))
    if not cfg.markov_rank:  # SGLang: "DSpark draft requires markov_rank > 0"
        raise DraftsmithError(
            "cannot export this dflash drafter to the deepspec format: it has no Markov head, and "
            "SGLang's DSpark path (the one that reads this format) requires markov_rank > 0; "
            "use --format zlab or speculators"
        )
    common.require(
        cfg, NAME, reduced_vocab=not common.full_vocab(model), mask_slots_only=not cfg.sample_from_anchor
    )
    if model.embed is None or model.head is None:
        raise DraftsmithError(
            "the DeepSpec format ships the target's embedding and lm_head: load with a target"
        )
    config = common.qwen3_config(cfg, verifier) | {
        "architectures": [ARCH],
        "block_size": cfg.block_size,
        "target_layer_ids": common.to_layer_ids(cfg.target_layers),
        "mask_token_id": cfg.mask_token_id,
        "num_target_layers": verifier.num_layers,
        "num_anchors": NUM_ANCHORS,
        "markov_rank": cfg.markov_rank,
        "enable_confidence_head": cfg.confidence,
        "dtype": str(model.fc.weight.dtype).removeprefix("torch."),
    }
    if cfg.markov_rank:
        config["markov_head_type"] = "vanilla"
    if cfg.confidence:
        config["confidence_head_with_markov"] = cfg.markov_rank > 0
    weights = common.body_weights(model) | common.head_weights(model)
    dtype = model.fc.weight.dtype
    weights["embed_tokens.weight"] = model.embed.detach().cpu().to(dtype)
    weights["lm_head.weight"] = model.head.detach().cpu().to(dtype)
    return common.write_dir(out, config, weights)


def read(path: Path, config: dict, target=None) -> tuple[DFlashModel, dict]:
    """A DeepSpec Qwen3DSparkModel directory -> our model (anchor-slot drafting, full vocabulary)."""
    for key in ("target_layer_ids", "mask_token_id", "block_size", "markov_rank"):
        if key not in config:
            raise DraftsmithError(f"{path}: DeepSpec config has no {key!r}")
    rank = int(config["markov_rank"])
    if rank and config.get("markov_head_type") != "vanilla":
        raise DraftsmithError(
            f"{path}: markov_head_type {config.get('markov_head_type')!r} is not supported (vanilla only)"
        )
    confidence = bool(config.get("enable_confidence_head", False))
    cfg = DFlashConfig(
        **common.body_config(config, path),
        target_layers=common.from_layer_ids(config["target_layer_ids"]),
        mask_token_id=int(config["mask_token_id"]),
        block_size=int(config["block_size"]),
        markov_rank=rank,
        confidence=confidence,
        markov_vocab="target",
        method="dspark" if rank else "dflash",
    )
    weights = common.read_weights(path)
    model = DFlashModel(cfg)
    used = common.load_body(model, weights, path)
    used |= common.load_heads(model, weights, path, bool(config.get("confidence_head_with_markov", False)))
    owned = {k: weights[k] for k in ("lm_head.weight", "embed_tokens.weight") if k in weights}
    leftover = set(weights) - used - set(owned)
    if leftover:
        raise DraftsmithError(f"{path}: weights draftsmith's drafter has no place for: {sorted(leftover)}")
    return model, owned
