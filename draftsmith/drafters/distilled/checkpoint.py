"""The distilled draft model on disk: a standard HF directory plus one file tying it to its target.

config.json + model.safetensors (save_pretrained) and the target's tokenizer files, so
`AutoModelForCausalLM.from_pretrained(DIR)`, `--method draft-model --draft-model DIR` and other
engines load it as any small LM; `draftsmith_draft.json` names the target it was distilled from,
which `--method distilled` checks before drafting.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch
from transformers.utils import logging as hf_logging

from draftsmith.drafters.checkpoint import target_fingerprint
from draftsmith.errors import DraftsmithError

META = "draftsmith_draft.json"
FORMAT = "draftsmith-distilled/1"


def save_draft(model, directory: str | Path, dtype: torch.dtype | None = None) -> Path:
    """Write the draft (weights in `dtype`, e.g. float16 to ship) without touching the training copy.

    Everything is written into a scratch folder first and each file renamed over the old one, so an
    interrupted save leaves the previous checkpoint readable; the metadata file goes last.
    """
    out = Path(directory)
    tmp = out / ".draft.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    dtype = dtype or torch.float32
    lm = model.lm
    cast: dict[int, torch.Tensor] = {}  # one cast per storage, so tied embeddings stay tied (one copy)
    state = {}
    for k, v in lm.state_dict().items():
        if v.data_ptr() not in cast:
            cast[v.data_ptr()] = v.detach().to(dtype) if v.is_floating_point() else v
        state[k] = cast[v.data_ptr()]
    old, bar = lm.config.dtype, hf_logging.is_progress_bar_enabled()
    lm.config.dtype = dtype
    hf_logging.disable_progress_bar()  # one "Writing model shards" bar per checkpoint is noise
    try:
        lm.save_pretrained(tmp, state_dict=state)
    finally:
        lm.config.dtype = old
        if bar:
            hf_logging.enable_progress_bar()
    model.tokenizer.save_pretrained(tmp)
    meta = {
        "format": FORMAT,
        "method": "distilled",
        "target_name": model.target_name,
        "target_fingerprint": model.target_fingerprint,
        "source_layers": model.source_layers,
        "layer_init": model.layer_init,
    }
    (tmp / META).write_text(json.dumps(meta, indent=1))
    names = sorted(p.name for p in tmp.iterdir())
    for name in [n for n in names if n != META] + [META]:
        os.replace(tmp / name, out / name)
    tmp.rmdir()
    return out


def read_meta(directory: str | Path) -> dict:
    """The draft's metadata; a clear error for a directory that is not a distilled draft."""
    path = Path(directory)
    if not path.is_dir():
        raise DraftsmithError(f"draft model directory not found: {directory}")
    meta_path = path / META
    if not meta_path.is_file():
        raise DraftsmithError(
            f"{directory} is not a distilled draft model (no {META}); train one with "
            "`draftsmith train --method distilled`, or use any same-tokenizer LM with "
            "--method draft-model --draft-model DIR"
        )
    try:
        meta = json.loads(meta_path.read_text())
    except json.JSONDecodeError as e:
        raise DraftsmithError(f"{meta_path} is not valid JSON: {e}") from e
    if meta.get("format") != FORMAT:
        raise DraftsmithError(f"{meta_path} has format {meta.get('format')!r}; this version reads {FORMAT}")
    return meta


def check_target(directory: str | Path, target) -> dict:
    """Refuse a draft distilled from another target: its layers were cut from different weights."""
    meta = read_meta(directory)
    if meta.get("target_fingerprint") != target_fingerprint(target):
        raise DraftsmithError(
            f"draft model {directory} was distilled from target {meta.get('target_name')!r} "
            f"(fingerprint {meta.get('target_fingerprint')}), not from {target.name!r}; "
            "train one for this target with `draftsmith train --method distilled`"
        )
    return meta


def load_draft(directory: str | Path, target, dtype: torch.dtype | None = None):
    """A saved draft as a DistilledDraft (for held-out scoring), checked against `target`."""
    from transformers import AutoModelForCausalLM

    from draftsmith.drafters.distilled.model import DistilledDraft

    meta = check_target(directory, target)
    try:
        lm = AutoModelForCausalLM.from_pretrained(directory, dtype=dtype or torch.float32)
    except Exception as e:  # transformers raises many types for a bad checkpoint
        raise DraftsmithError(f"could not load draft model {directory}: {e}") from e
    model = DistilledDraft(lm.to(target.device).eval(), meta["source_layers"], meta["layer_init"], target)
    return model.requires_grad_(False)
