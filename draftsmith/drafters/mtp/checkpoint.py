"""Save and load MTP heads trained here: `config.json` + `model.safetensors`, tied to their target."""

from __future__ import annotations

from pathlib import Path

import torch

from draftsmith.drafters.checkpoint import check_target, load_weights, save_model
from draftsmith.drafters.mtp.config import MTPConfig
from draftsmith.drafters.mtp.model import MTPModel, target_classes
from draftsmith.errors import DraftsmithError


def save_mtp(model: MTPModel, directory: str | Path, dtype: torch.dtype | None = None) -> Path:
    return save_model(model, directory, dtype)


def ready_for(model: MTPModel, target, dtype: torch.dtype | None = None) -> MTPModel:
    """On the target's device and dtype, with its embedding and lm_head attached, frozen."""
    p = next(target.model.parameters())
    rope = {n: b.clone() for n, b in model.rotary.named_buffers()}  # rotary frequencies stay fp32
    model.to(device=p.device, dtype=dtype or p.dtype)
    for n, b in rope.items():
        setattr(model.rotary, n, b.to(p.device))
    model.d2t = model.d2t.to(p.device)
    model.attach_target(
        target.model.get_input_embeddings().weight, target.model.get_output_embeddings().weight
    )
    return model.eval().requires_grad_(False)


def load_mtp(directory: str | Path, target, dtype: torch.dtype | None = None) -> MTPModel:
    """A head saved by save_mtp, for `target`; one trained for another target is refused."""
    path = Path(directory)
    if not path.is_dir():
        raise DraftsmithError(f"drafter directory not found: {directory}")
    cfg = MTPConfig.load(path)
    check_target(cfg, path, target, "MTP drafter")
    model = load_weights(MTPModel(cfg, target_classes(target.model)), path)
    return ready_for(model, target, dtype)
