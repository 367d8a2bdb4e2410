"""The distilled draft model as a plain Hugging Face directory (vLLM `draft_model`, SGLang STANDALONE).

A distilled draft is already one (config.json, model.safetensors, tokenizer files): `--drafter DIR`
works in both servers as it is. This copy checks it against the target (distilled from it, same
vocabulary size, which both servers require) and leaves out draftsmith's own metadata file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from draftsmith.drafters.distilled.checkpoint import META, check_target
from draftsmith.errors import DraftsmithError

FORMATS = ("hf",)


def write_hf(directory: str | Path, out: str | Path, target) -> Path:
    """Copy every file of the draft directory except draftsmith's metadata into `out`."""
    src, dst = Path(directory), Path(out)
    check_target(src, target)
    try:
        config = json.loads((src / "config.json").read_text())
    except (OSError, ValueError):
        raise DraftsmithError(
            f"{src} has no readable config.json: not a complete distilled draft directory (a packed "
            "copy holds only its layers; rebuild it with `draftsmith train --method distilled`)"
        ) from None
    vocab = target.runner.vocab_size
    if int(config.get("vocab_size", -1)) != vocab:
        raise DraftsmithError(
            f"cannot export {src} to the hf format: its vocab_size {config.get('vocab_size')} != the "
            f"target's {vocab} (vLLM and SGLang require equal vocabularies)"
        )
    if dst.resolve() == src.resolve():
        raise DraftsmithError("--out must differ from --drafter")
    dst.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.iterdir()):
        if f.is_file() and f.name != META and not f.name.startswith("."):
            shutil.copy2(f, dst / f.name)
    return dst
