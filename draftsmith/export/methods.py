"""`draftsmith export` for every trained method: which method a drafter directory holds, its formats,
and the writer. Each method recognises and exports its own drafters (`Drafter.owns`,
`Drafter.export_formats`, `Drafter.export`, in its package), so the CLI needs no --method flag and
a new method needs nothing here.
"""

from __future__ import annotations

import tempfile
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


NOTES = {("medusa", "vllm"): " (vLLM 0.33 has no Medusa; `medusa` is the layout older vLLM releases read)"}


def check_format(method: str, fmt: str) -> None:
    formats = METHODS[method].export_formats
    if fmt not in formats:
        raise DraftsmithError(
            f"format {fmt!r} does not fit a {method} drafter; its formats: {', '.join(formats)}"
            + NOTES.get((method, fmt), "")
        )


def export_directory(
    directory: str | Path,
    fmt: str,
    out: str | Path,
    target,
    verifier_name: str | None,
    gguf_type: str = "f16",
    lookup: bool = True,
    draft_vocab: int | None = None,
) -> tuple[Path, list[str]]:
    """Load the drafter in `directory` for `target` and write it in format `fmt` (refusals by name).
    "gguf" goes through the method's speculators export and llama.cpp's own converter. A DFlash /
    DSpark may first drop its lookup input (`lookup` False) or cut its head to the `draft_vocab` most
    frequent tokens (export/variant.py); returns the output and what that cost, as measured."""
    from draftsmith.export import variant
    from draftsmith.export.common import verifier_of

    method = method_of(directory)
    check_format(method, fmt)
    variant.check(Path(directory), method, lookup, draft_vocab)
    verifier = verifier_of(target, verifier_name)
    with tempfile.TemporaryDirectory() as tmp:
        source, notes = Path(directory), []
        if not lookup or draft_vocab:  # the drafter as that engine runs it, then its export
            notes = variant.prepare(source, target, lookup, draft_vocab, Path(tmp) / "drafter")
            source = Path(tmp) / "drafter"
        if fmt == "gguf":
            from draftsmith.export import gguf

            return gguf.write(source, method, Path(out), target, verifier, gguf_type), notes
        return METHODS[method].export(source, fmt, Path(out), target, verifier), notes
