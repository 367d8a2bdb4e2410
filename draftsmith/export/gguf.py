"""GGUF for llama.cpp: a drafter's speculators / z-lab export, converted by llama.cpp's own converter.

llama.cpp (the pinned source, draftsmith.deploy.llamacpp) reads speculators, z-lab and DeepSpec
DFlash/DSpark checkpoints and EAGLE-3 ones with `convert_hf_to_gguf.py --target-model-dir`; going
through it keeps the GGUF layout llama.cpp's, not a copy of it. A DFlash in z-lab's layout (the
default: slot 0 carries the anchor) goes through its z-lab export and runs on llama.cpp's DFlash path
(`--spec-type draft-dflash`). A DFlash that samples its first draft from the anchor slot
(`--no-mask-slots`) is written as a DSpark without heads (export/speculators.py), which llama.cpp
runs on its DSpark path (`dflash.sample_from_anchor`) under `--spec-type draft-dspark`, with
`--spec-draft-p-min 0` since it has no confidence head.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from draftsmith.errors import DraftsmithError

OUTTYPES = ("f32", "f16", "bf16", "q8_0")
SPEC_TYPES = {"dflash": "draft-dspark", "dspark": "draft-dspark", "eagle3": "draft-eagle3"}
"""llama-server --spec-type for each method's GGUF."""


def converter_target_dir(target, out: Path) -> Path:
    """A directory llama.cpp's converter reads the target's tokenizer and shape from: its config (with
    `architectures`, which a config rebuilt from a GGUF lacks) and tokenizer files."""
    out.mkdir(parents=True, exist_ok=True)
    cfg = target.model.config.to_dict()
    cfg["architectures"] = list(cfg.get("architectures") or [type(target.model).__name__])
    cfg.pop("quantization_config", None)
    (out / "config.json").write_text(json.dumps(cfg, indent=1, default=str))
    target.tokenizer.save_pretrained(out)
    return out


def mask_slots(directory: Path | None) -> bool:
    """Whether the drafter in `directory` drafts only from its mask slots (z-lab's DFlash layout)."""
    from draftsmith.export.common import read_config

    config = (read_config(Path(directory)) if directory else None) or {}
    # a z-lab export (dflash_config) drafts from its mask slots by definition; ours says so in its config
    return config.get("sample_from_anchor") is False or "dflash_config" in config


def spec_type(method: str, directory: Path | None = None) -> str:
    """llama-server's --spec-type for this method's drafter (its layout decides for DFlash)."""
    return "draft-dflash" if method == "dflash" and mask_slots(directory) else SPEC_TYPES[method]


def write(directory: Path, method: str, out: Path, target, verifier, outtype: str = "f16") -> Path:
    """Convert the drafter in `directory` to the GGUF file `out` (a folder: out/drafter-OUTTYPE.gguf)."""
    from draftsmith.deploy import llamacpp
    from draftsmith.drafters.registry import METHODS

    if outtype not in OUTTYPES:
        raise DraftsmithError(f"unknown GGUF type {outtype!r}; choose one of {', '.join(OUTTYPES)}")
    if method not in SPEC_TYPES:
        raise DraftsmithError(f"llama.cpp runs no {method} drafter; GGUF exports: {', '.join(SPEC_TYPES)}")
    llamacpp.require()
    file = out / f"drafter-{outtype}.gguf" if out.suffix != ".gguf" else out
    file.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        fmt = "zlab" if spec_type(method, directory) == "draft-dflash" else "speculators"
        spec = METHODS[method].export(directory, fmt, Path(tmp) / fmt, target, verifier)
        tdir = converter_target_dir(target, Path(tmp) / "target")
        llamacpp.run_converter(
            [str(spec), "--outfile", str(file), "--outtype", outtype, "--target-model-dir", str(tdir)]
        )
    return file


def target_gguf(target) -> Path | None:
    """The GGUF file a target was loaded from (the default target is one), else None."""
    from draftsmith.models.loading import DEFAULT_ALIASES, default_target_file

    source = getattr(target, "source", "")
    if source in DEFAULT_ALIASES:
        return default_target_file()
    path = Path(str(source))
    return path if path.suffix == ".gguf" and path.is_file() else None


def write_target(target, out: Path, outtype: str = "q8_0") -> Path:
    """The target as a GGUF, for users whose target is an HF model (a GGUF target is used as is)."""
    from draftsmith.deploy import llamacpp

    existing = target_gguf(target)
    if existing is not None:
        return existing
    llamacpp.require()
    file = out / f"target-{outtype}.gguf"
    file.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tdir = converter_target_dir(target, Path(tmp) / "target")
        target.model.save_pretrained(tdir, safe_serialization=True)
        llamacpp.run_converter([str(tdir), "--outfile", str(file), "--outtype", outtype])
    return file


def server_command(
    method: str, target_gguf: Path, drafter_gguf: Path, draft_max: int = 3, directory: Path | None = None
) -> str:
    """The llama-server line that runs this drafter (greedy drafts; DFlash has no confidence head);
    `directory`: the drafter it was converted from (its layout picks DFlash's --spec-type)."""
    from draftsmith.deploy import llamacpp

    pmin = " --spec-draft-p-min 0" if method == "dflash" else ""
    server = llamacpp.binary("llama-server") if llamacpp.installed() else "llama-server"
    return (
        f"{server} -m {target_gguf} -md {drafter_gguf} --spec-type {spec_type(method, directory)} "
        f"--spec-draft-n-max {draft_max}{pmin}"
    )
