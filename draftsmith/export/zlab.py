"""z-lab DFlash format (SGLang's native DFLASH, vLLM `method: dflash`): a Qwen3 config with
`architectures: [DFlashDraftModel]` and `dflash_config: {mask_token_id, target_layer_ids}`.

z-lab drafters have no draft vocabulary (the target's lm_head scores every token), no DSpark heads,
and draft from the mask slots only: slot 0 holds the anchor (the bonus token) and slot k >= 1
predicts the token at anchor + k, so `block_size - 1` tokens per round. Layer ids name decoder
layers (draftsmith key - 1).
"""

from __future__ import annotations

from pathlib import Path

import draftsmith.export.common as common
from draftsmith.drafters.dflash.config import DFlashConfig
from draftsmith.drafters.dflash.model import DFlashModel
from draftsmith.errors import DraftsmithError

NAME = "zlab"
ARCH = "DFlashDraftModel"


def detect(config: dict) -> bool:
    archs = config.get("architectures") or []
    return "dflash_config" in config or any("DFlash" in a for a in archs)


def write(model: DFlashModel, out: str | Path, verifier: common.Verifier) -> Path:
    """Write a z-lab DFlash directory (config.json + the draft body)."""
    cfg = model.cfg
    common.require(
        cfg,
        NAME,
        **common.common_limits(model),
        reduced_vocab=not common.full_vocab(model),
        anchor_slot=cfg.sample_from_anchor,
        markov=cfg.markov_rank > 0,
        confidence=cfg.confidence,
        embedding_layer=0 in cfg.target_layers,
    )
    config = common.qwen3_config(cfg, verifier) | {
        "architectures": [ARCH],
        "block_size": cfg.block_size,
        "num_target_layers": verifier.num_layers,
        "dflash_config": {
            "mask_token_id": cfg.mask_token_id,
            "target_layer_ids": common.to_layer_ids(cfg.target_layers),
        },
        "dtype": str(model.fc.weight.dtype).removeprefix("torch."),
    }
    return common.write_dir(out, config, common.body_weights(model))


def read(path: Path, config: dict, target=None) -> tuple[DFlashModel, dict]:
    """A z-lab DFlash directory -> our model (mask-slot drafting, full vocabulary)."""
    archs = config.get("architectures") or []
    if archs and ARCH not in archs:
        raise DraftsmithError(f"{path}: architecture {archs} is not supported (z-lab {ARCH} only)")
    extra = config.get("dflash_config") or {}
    ids = extra.get("target_layer_ids", config.get("target_layer_ids"))
    mask = extra.get("mask_token_id", config.get("mask_token_id"))
    block = extra.get("block_size", config.get("block_size"))
    if ids is None or mask is None or block is None:
        raise DraftsmithError(
            f"{path}: z-lab config needs dflash_config.target_layer_ids, mask_token_id and block_size"
        )
    cfg = DFlashConfig(
        **common.body_config(config, path),
        target_layers=common.from_layer_ids(ids),
        mask_token_id=int(mask),
        block_size=int(block),
        sample_from_anchor=False,
        method="dflash",
    )
    weights = common.read_weights(path)
    model = DFlashModel(cfg)
    used = common.load_body(model, weights, path)
    owned = {k: weights[k] for k in ("lm_head.weight", "embed_tokens.weight") if k in weights}
    leftover = set(weights) - used - set(owned)
    if leftover:
        raise DraftsmithError(f"{path}: weights draftsmith's drafter has no place for: {sorted(leftover)}")
    return model, owned
