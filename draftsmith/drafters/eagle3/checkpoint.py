"""Save and load EAGLE-3 drafters as `config.json` + `model.safetensors`, tied to their target.

The tensor names are the SGLang/SpecForge ones (midlayer.*, fc, norm, lm_head, d2t offsets, t2d),
so writing a server's format is a config rewrite plus, for speculators, `midlayer.` -> `layers.0.`.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from safetensors.torch import save_file

from draftsmith.drafters.checkpoint import check_target, load_weights
from draftsmith.drafters.eagle3.config import Eagle3Config
from draftsmith.drafters.eagle3.model import Eagle3Model
from draftsmith.errors import DraftsmithError


def save_drafter(model: Eagle3Model, directory: str | Path, dtype: torch.dtype | None = None) -> Path:
    """Atomic per file (temporary name, then rename), so an interrupted save keeps the last one."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    model.cfg.save(out, tmp_suffix=".tmp")
    os.replace(out / "config.json.tmp", out / "config.json")
    tensors = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    if dtype is not None:  # integer / bool buffers (d2t, t2d) keep their type
        tensors = {k: v.to(dtype) if v.is_floating_point() else v for k, v in tensors.items()}
    save_file(tensors, str(out / "model.safetensors.tmp"), metadata={"format": "pt"})
    os.replace(out / "model.safetensors.tmp", out / "model.safetensors")
    return out


def load_drafter(directory: str | Path, target=None, dtype: torch.dtype | None = None) -> Eagle3Model:
    """Load a drafter; with `target`, refuse one trained for another target, move it to the
    target's device and dtype and borrow its embedding."""
    path = Path(directory)
    if not path.is_dir():
        raise DraftsmithError(f"drafter directory not found: {directory}")
    # late: the export module imports this package
    from draftsmith.drafters.eagle3.export import detect_format, import_drafter

    foreign = detect_format(path)  # an SGLang / speculators export: converted exactly, or refused
    model = import_drafter(path, foreign, target) if foreign else _load_own(path, target)
    if target is not None:
        p = next(target.model.parameters())
        model.to(device=p.device, dtype=dtype or p.dtype)
        model.attach_target(target.model.get_input_embeddings().weight)
    else:
        model.refresh_vocab()
    model.eval().requires_grad_(False)
    return model


def _load_own(path: Path, target) -> Eagle3Model:
    """A drafter saved by save_drafter (config.json format draftsmith-eagle3/1)."""
    cfg = Eagle3Config.load(path)
    check_target(cfg, path, target)
    return load_weights(Eagle3Model(cfg), path)
