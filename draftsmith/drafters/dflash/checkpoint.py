"""Save and load drafters as `config.json` + `model.safetensors`, tied to the target they serve."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from safetensors.torch import save_file

from draftsmith.drafters.checkpoint import check_target, load_weights
from draftsmith.drafters.dflash.config import DFlashConfig
from draftsmith.drafters.dflash.model import DFlashModel
from draftsmith.drafters.dflash.vocab import read_counts, write_counts
from draftsmith.errors import DraftsmithError


def save_drafter(model: DFlashModel, directory: str | Path, dtype: torch.dtype | None = None) -> Path:
    """Each file is written to a temporary name and renamed over the old one, so an interrupted save
    leaves the previous checkpoint readable (the config never changes during a run)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    model.cfg.save(out, tmp_suffix=".tmp")
    os.replace(out / "config.json.tmp", out / "config.json")
    tensors = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    if dtype is not None:  # e.g. fp16 for shipping; integer buffers (d2t) keep their type
        tensors = {k: v.to(dtype) if v.is_floating_point() else v for k, v in tensors.items()}
    save_file(tensors, str(out / "model.safetensors.tmp"), metadata={"format": "pt"})
    os.replace(out / "model.safetensors.tmp", out / "model.safetensors")
    if getattr(model, "token_counts", None) is not None:  # what ranks a cut draft vocabulary (FR-Spec)
        write_counts(out, model.token_counts)
    return out


def load_drafter(directory: str | Path, target=None, dtype: torch.dtype | None = None) -> DFlashModel:
    """Load a drafter; with `target`, refuse one trained for another target and attach its weights."""
    path = Path(directory)
    if not path.is_dir():
        raise DraftsmithError(f"drafter directory not found: {directory}")
    from draftsmith.export import detect_format, import_drafter  # late: export imports this module

    foreign = detect_format(path)
    if foreign:  # a speculators / z-lab / DeepSpec export: converted exactly, or refused with the reason
        model = import_drafter(path, foreign, target)
    else:
        model = _load_own(path, target)
    if target is not None:
        p = next(target.model.parameters())
        model.to(device=p.device, dtype=dtype or p.dtype)
        model.d2t = model.d2t.to(p.device)
        model.attach_target(
            target.model.get_input_embeddings().weight, target.model.get_output_embeddings().weight
        )
    model.eval().requires_grad_(False)
    return model


def _load_own(path: Path, target) -> DFlashModel:
    """A drafter saved by save_drafter: config.json (format draftsmith-dflash/1) + model.safetensors."""
    cfg = DFlashConfig.load(path)
    check_target(cfg, path, target)
    model = load_weights(DFlashModel(cfg), path)
    model.token_counts = read_counts(path)
    return model
