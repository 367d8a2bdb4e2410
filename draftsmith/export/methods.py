"""`draftsmith export` for every trained method: which formats fit a drafter directory, and the writer.

The method is read from the directory itself (draftsmith's config `format` field, the distilled
draft's metadata file, or an exported layout), so the CLI needs no --method flag.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from draftsmith.errors import DraftsmithError

DFLASH_FORMATS = ("speculators", "zlab", "deepspec")
METHOD_FORMATS: dict[str, tuple[str, ...]] = {
    "dflash": DFLASH_FORMATS,
    "dspark": DFLASH_FORMATS,
    "eagle3": ("sglang", "speculators"),
    "mtp": ("speculators",),
    "distilled": ("hf",),
}
ALL_FORMATS = tuple(dict.fromkeys(f for fs in METHOD_FORMATS.values() for f in fs))


def method_of(directory: str | Path) -> str:
    """The method a drafter directory was trained for (or exported from)."""
    from draftsmith.drafters.distilled.checkpoint import META

    path = Path(directory)
    if not path.is_dir():
        raise DraftsmithError(f"drafter directory not found: {directory}")
    if (path / META).is_file():
        return "distilled"
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise DraftsmithError(f"{path} has no readable config.json: {e}") from e
    fmt = str(config.get("format", ""))
    for prefix, method in (("draftsmith-eagle3/", "eagle3"), ("draftsmith-mtp/", "mtp")):
        if fmt.startswith(prefix):
            return method
    if fmt.startswith("draftsmith-dflash/"):
        return "dspark" if config.get("method") == "dspark" else "dflash"
    kind = config.get("speculators_model_type")
    if kind in ("eagle3", "mtp"):
        return kind
    if "LlamaForCausalLMEagle3" in (config.get("architectures") or []) or "eagle_config" in config:
        return "eagle3"
    return "dflash"  # a DFlash / DSpark export, or something the DFlash loader refuses by name


def check_format(method: str, fmt: str) -> None:
    formats = METHOD_FORMATS[method]
    if fmt not in formats:
        raise DraftsmithError(
            f"format {fmt!r} does not fit a {method} drafter; its formats: {', '.join(formats)}"
        )


def stored_dtype(path: str | Path) -> torch.dtype:
    """The dtype of the first floating-point weight, so an export keeps the weights bit for bit."""
    from safetensors import safe_open

    try:
        with safe_open(str(Path(path) / "model.safetensors"), "pt") as f:
            for name in f.keys():
                dtype = f.get_slice(name)[:1].dtype
                if dtype.is_floating_point:
                    return dtype
    except Exception:  # a missing or odd file: the method's loader reports it properly
        pass
    return torch.float32


def export_directory(directory: str | Path, fmt: str, out: str | Path, target, verifier_name: str) -> Path:
    """Load the drafter in `directory` for `target` and write it in format `fmt` (refusals by name)."""
    from draftsmith.export.common import verifier_of

    method = method_of(directory)
    check_format(method, fmt)
    verifier = verifier_of(target, verifier_name)
    dtype = stored_dtype(directory)
    if method in ("dflash", "dspark"):
        from draftsmith.drafters.dflash.checkpoint import load_drafter
        from draftsmith.export import export_drafter

        return export_drafter(load_drafter(directory, target, dtype=dtype), fmt, out, verifier)
    if method == "eagle3":
        from draftsmith.drafters.eagle3.checkpoint import load_drafter
        from draftsmith.export.eagle3 import WRITERS

        return WRITERS[fmt](load_drafter(directory, target, dtype=dtype), out, verifier)
    if method == "mtp":
        from draftsmith.drafters.mtp.checkpoint import load_mtp
        from draftsmith.export.mtp import WRITERS

        return WRITERS[fmt](load_mtp(directory, target, dtype=dtype), out, verifier)
    from draftsmith.export.hf import write_hf

    return write_hf(directory, out, target)
