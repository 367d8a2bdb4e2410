"""Where draftsmith keeps data it creates or fetches (converted models, suite files)."""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    """$DRAFTSMITH_DATA, else ~/.cache/draftsmith."""
    return Path(os.environ.get("DRAFTSMITH_DATA", Path.home() / ".cache" / "draftsmith"))
