"""Save and load Medusa heads: `config.json` + `model.safetensors`, tied to their target."""

from __future__ import annotations

from pathlib import Path

import torch

from draftsmith.drafters.checkpoint import check_target, load_weights, save_model
from draftsmith.drafters.medusa.model import MedusaConfig, MedusaModel
from draftsmith.errors import DraftsmithError
from draftsmith.export.common import read_config


def save_medusa(model: MedusaModel, directory: str | Path, dtype: torch.dtype | None = None) -> Path:
    return save_model(model, directory, dtype)


def load_medusa(directory: str | Path, target, dtype: torch.dtype | None = None) -> MedusaModel:
    """Heads saved by save_medusa (or exported to vLLM's medusa format), on the target's device and
    dtype with its lm_head attached; heads trained for another target are refused."""
    from draftsmith.drafters.medusa import export

    path = Path(directory)
    if not path.is_dir():
        raise DraftsmithError(f"drafter directory not found: {directory}")
    config = read_config(path)
    if export.owns(config):
        model = export.read_medusa(path, config, target)
    else:
        cfg = MedusaConfig.load(path)
        check_target(cfg, path, target, "Medusa drafter")
        model = load_weights(MedusaModel(cfg), path)
        size = cfg.draft_vocab_size or cfg.target_vocab_size
        model.d2t = export.check_map(model.d2t, cfg.target_vocab_size, size, path)
    p = next(target.model.parameters())
    model.to(device=p.device, dtype=dtype or p.dtype)
    model.d2t = model.d2t.to(p.device)
    model.attach_target(target.model.get_output_embeddings().weight)
    return model.eval().requires_grad_(False)
