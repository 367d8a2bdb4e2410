"""`draftsmith export` for every trained method: which method a drafter directory holds, its formats,
and the writer. Each method recognises and exports its own drafters (`Drafter.owns`,
`Drafter.export_formats`, `Drafter.export`, in its package), so the CLI needs no --method flag and
a new method needs nothing here.
"""

from __future__ import annotations

from pathlib import Path

from draftsmith.drafters.registry import METHODS
from draftsmith.errors import DraftsmithError
from draftsmith.export.common import read_config


def method_of(directory: str | Path) -> str:
    """The method a drafter directory was trained for (or exported from)."""
    path = Path(directory)
    if not path.is_dir():
        raise DraftsmithError(f"drafter directory not found: {directory}")
    config = read_config(path)
    for name, cls in METHODS.items():
        if cls.export_formats and cls.owns(path, config):
            return name
    if config is None:
        raise DraftsmithError(f"{path} has no readable config.json")
    kinds = ", ".join(name for name, cls in METHODS.items() if cls.export_formats)
    raise DraftsmithError(f"{path} holds no drafter draftsmith can export (methods: {kinds})")


def check_format(method: str, fmt: str) -> None:
    formats = METHODS[method].export_formats
    if fmt not in formats:
        raise DraftsmithError(
            f"format {fmt!r} does not fit a {method} drafter; its formats: {', '.join(formats)}"
        )


def export_directory(directory: str | Path, fmt: str, out: str | Path, target, verifier_name: str) -> Path:
    """Load the drafter in `directory` for `target` and write it in format `fmt` (refusals by name)."""
    from draftsmith.export.common import verifier_of

    method = method_of(directory)
    check_format(method, fmt)
    return METHODS[method].export(Path(directory), fmt, Path(out), target, verifier_of(target, verifier_name))
