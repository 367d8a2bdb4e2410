"""What every drafter checkpoint shares: the fingerprint of the target it was trained for, and a
config.json tagged with the drafter's format."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TypeVar

from draftsmith.errors import DraftsmithError

T = TypeVar("T")


def target_fingerprint(target) -> str:
    """Vocabulary + the architecture facts a drafter depends on (width, depth, vocab size)."""
    cfg = target.model.config
    arch = [cfg.model_type, cfg.hidden_size, cfg.num_hidden_layers, target.runner.vocab_size]
    return hashlib.sha1(json.dumps([target.vocab_fingerprint(), arch]).encode()).hexdigest()[:16]


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
