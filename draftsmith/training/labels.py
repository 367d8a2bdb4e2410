"""The CE target every trainable method can learn (`--label`), in one place.

The written token is what sampled answers hold, the target's argmax is what greedy decoding
accepts, and the target's distribution is what lossless sampling accepts; each method's options
take the same flag with the same choices.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from draftsmith.errors import DraftsmithError

LABELS = ("token", "greedy", "soft")
"""What the CE term learns: the written token, the target's argmax, or the target's distribution."""


def label_option(default: str = "token") -> Any:
    """The `label` field of a method's options dataclass (the CLI derives `--label` from it)."""
    return dataclasses.field(
        default=default,
        metadata={
            "choices": list(LABELS),
            "help": "CE target: the written token, the target's argmax, or its distribution (soft)",
        },
    )


def check_label(label: str) -> None:
    """Refuse an unknown label by name before any training starts."""
    if label not in LABELS:
        raise DraftsmithError(f"label must be one of {', '.join(LABELS)}, got {label!r}")
