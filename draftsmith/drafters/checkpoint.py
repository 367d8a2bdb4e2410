"""What every drafter checkpoint shares: the fingerprint of the target it was trained for, and a
config.json tagged with the drafter's format."""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

import torch
from safetensors.torch import load_file, save_file

from draftsmith.errors import DraftsmithError

T = TypeVar("T")

PRETRAINED = Path(__file__).resolve().parent / "pretrained"
"""Drafters shipped in the package, one directory per target and method (`smollm2-dspark`), so every
method runs out of the box on the default target."""


def target_fingerprint(target) -> str:
    """Vocabulary + the architecture facts a drafter depends on (width, depth, vocab size)."""
    cfg = target.model.config
    arch = [cfg.model_type, cfg.hidden_size, cfg.num_hidden_layers, target.runner.vocab_size]
    return hashlib.sha1(json.dumps([target.vocab_fingerprint(), arch]).encode()).hexdigest()[:16]


def shipped_drafter(method: str, target) -> Path | None:
    """The drafter of `method` shipped in the package for this target (matched by the fingerprint in
    its config.json), if there is one."""
    if not PRETRAINED.is_dir():
        return None
    fingerprint = target_fingerprint(target)
    for path in sorted(PRETRAINED.glob(f"*-{method}")):
        try:
            config = json.loads((path / "config.json").read_text())
        except (OSError, ValueError):
            continue
        if config.get("target_fingerprint") == fingerprint:
            return path
    return None


def write_config(directory: str | Path, fmt: str, fields: dict, tmp_suffix: str = "") -> None:
    """config.json tagged with the drafter format, so a loader can tell its own files from others."""
    path = Path(directory) / ("config.json" + tmp_suffix)
    path.write_text(json.dumps({"format": fmt, **fields}, indent=1))


def read_config(directory: str | Path, fmt: str, kind: str, cls: type[T]) -> T:
    """The config dataclass `cls` from directory/config.json; a clear error for a missing, corrupt,
    foreign ("not a draftsmith {kind} drafter") or mismatched file."""
    path = Path(directory) / "config.json"
    if not path.is_file():
        raise DraftsmithError(f"no drafter config at {path}")
    try:
        data = json.loads(path.read_text())
    except ValueError as e:
        raise DraftsmithError(f"{path} is not valid JSON: {e}") from e
    if not isinstance(data, dict) or data.pop("format", None) != fmt:
        raise DraftsmithError(f"{directory} is not a draftsmith {kind} drafter (format {fmt})")
    try:
        return cls(**data)
    except TypeError as e:
        raise DraftsmithError(f"{path} has unexpected fields: {e}") from e


def check_draft_vocab(draft_vocab_size: int | None, target_vocab_size: int) -> None:
    """A draft vocabulary (None: the target's whole one) must fit inside the target's."""
    if draft_vocab_size is not None and not 0 < draft_vocab_size <= target_vocab_size:
        raise DraftsmithError(f"draft_vocab_size must be in 1..{target_vocab_size}, got {draft_vocab_size}")


def check_target(cfg, path: str | Path, target, what: str = "drafter") -> None:
    """Refuse a checkpoint trained for another target: its drafts would be noise, or shapes clash."""
    if target is not None and cfg.target_fingerprint and cfg.target_fingerprint != target_fingerprint(target):
        raise DraftsmithError(
            f"{what} {path} was trained for target {cfg.target_name!r} "
            f"(fingerprint {cfg.target_fingerprint}), not for {target.name!r}; train one for this target"
        )


def save_model(model: torch.nn.Module, directory: str | Path, dtype: torch.dtype | None = None) -> Path:
    """config.json (`model.cfg.save`) + model.safetensors, atomic per file (temporary name, then
    rename), so an interrupted save keeps the last one; integer buffers (d2t) keep their type."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    model.cfg.save(out, tmp_suffix=".tmp")
    os.replace(out / "config.json.tmp", out / "config.json")
    tensors = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    if dtype is not None:
        tensors = {k: v.to(dtype) if v.is_floating_point() else v for k, v in tensors.items()}
    save_file(tensors, str(out / "model.safetensors.tmp"), metadata={"format": "pt"})
    os.replace(out / "model.safetensors.tmp", out / "model.safetensors")
    return out


def check_finite(state: dict[str, torch.Tensor], where: object) -> None:
    """Refuse NaN or inf weights: a diverged training run saves them (an earlier GPU run had one),
    and a drafter made of them drafts nothing (lossless, but never accepted), silently."""
    bad = [k for k, v in state.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        raise DraftsmithError(
            f"{where} holds non-finite (NaN or inf) weights in {', '.join(bad[:3])}{more}: the training run "
            "that wrote it diverged; retrain (a lower --lr) or use an earlier checkpoint"
        )


def load_weights(model: torch.nn.Module, path: str | Path) -> torch.nn.Module:
    """path/model.safetensors into `model`, every tensor accounted for; a reduced draft vocabulary
    (d2t) resizes its buffer first. A corrupt or mismatched file is a clear error."""
    file = Path(path) / "model.safetensors"
    try:
        state = load_file(str(file))
    except Exception as e:  # safetensors raises its own error type for a missing or corrupt file
        raise DraftsmithError(f"could not read {file}: {e}") from e
    check_finite(state, file)
    if "d2t" in state and hasattr(model, "d2t"):
        model.d2t = torch.empty_like(state["d2t"])
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as e:  # shapes that disagree with config.json
        raise DraftsmithError(f"{path} does not match its config: {e}") from e
    if missing or unexpected:
        raise DraftsmithError(f"{path} does not match its config: missing {missing}, unexpected {unexpected}")
    return model


STS_FILE = "sts.json"
"""Per-position temperatures of a confidence head, fitted by `draftsmith sts` (evaluation/sts.py)."""


def sts_confidence(logit: float, slot: int, temps: Sequence[float], biases: Sequence[float] = ()) -> float:
    """A slot's confidence under a fitted STS: sigmoid(logit / T + b), with T = 1 and b = 0 beyond the
    fitted slots (the one rule the drafter applies and `draftsmith sts` fits)."""
    x = logit / (temps[slot] if slot < len(temps) else 1.0) + (biases[slot] if slot < len(biases) else 0.0)
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def read_sts(drafter_dir: object) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The STS temperatures and logit biases stored with a drafter directory, ((), ()) when it has
    none; files written before biases were fitted have none (0 at every position)."""
    if not isinstance(drafter_dir, str | Path):
        return (), ()
    path = Path(drafter_dir) / STS_FILE
    if not path.is_file():
        return (), ()
    try:
        body = json.loads(path.read_text())
        temps = tuple(float(t) for t in body["temperatures"])
        biases = tuple(float(b) for b in body.get("biases", ()))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise DraftsmithError(
            f"{path}: not an STS file ({e}); delete it or refit with `draftsmith sts`"
        ) from e
    if not all(math.isfinite(t) and t > 0 for t in temps) or not all(map(math.isfinite, biases)):
        raise DraftsmithError(
            f"{path}: temperatures must be finite and > 0, biases finite; refit with `draftsmith sts`"
        )
    if len(biases) > len(temps):
        raise DraftsmithError(f"{path}: more biases than temperatures; refit with `draftsmith sts`")
    return temps, biases
