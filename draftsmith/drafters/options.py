"""Decoding options every method that drafts with a trained model has: which model. EAGLE-3, MTP,
Medusa and distilled drafts take just this; DFlash/DSpark (and the hybrid) add their own."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from draftsmith.errors import DraftsmithError


@dataclass(frozen=True)
class TrainedDecodeOptions:
    """A trained method's `Drafter.options`: the drafter it decodes with."""

    drafter: str | Path | torch.nn.Module | None = field(
        default=None,
        metadata={
            "help": "a trained drafter directory, or from Python a loaded model (default: the method's "
            "own, where one ships)"
        },
    )

    def __post_init__(self) -> None:
        if not (self.drafter is None or isinstance(self.drafter, str | Path | torch.nn.Module)):
            raise DraftsmithError(
                f"drafter must be a directory or a loaded model, got {type(self.drafter).__name__}"
            )
