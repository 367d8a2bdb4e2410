"""Export trained DFlash / DSpark drafters to the formats vLLM and SGLang load, and import them back.

One module per format (speculators, zlab, deepspec), each with `detect(config)`, `write(model, out,
verifier)` and `read(path, config, target)`. `load_drafter` calls `detect_format` first, so
`--drafter EXPORTED_DIR` decodes in draftsmith's engine with no conversion step.

The other trained methods export from their own packages (drafters/eagle3/export.py: SGLang and
speculators, imported back by the EAGLE-3 loader; drafters/mtp/export.py: speculators;
drafters/distilled/export.py: a plain HF directory); methods.py asks the registry which method a
drafter directory holds and hands it the export (`Drafter.owns` / `export_formats` / `export`).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import torch

from draftsmith.drafters.dflash.config import FORMAT
from draftsmith.drafters.dflash.model import DFlashModel
from draftsmith.errors import DraftsmithError
from draftsmith.export import deepspec, speculators, zlab
from draftsmith.export.common import DEFAULT_VERIFIER, Verifier, read_config, verifier_of

FORMATS: dict[str, ModuleType] = {"speculators": speculators, "zlab": zlab, "deepspec": deepspec}
EXPECTED = (
    f"expected a draftsmith drafter (config.json format {FORMAT!r}), a speculators export "
    "(speculators_model_type dflash or dspark), a z-lab DFlash export (architectures [DFlashDraftModel]) "
    "or a DeepSpec DSpark export (architectures [Qwen3DSparkModel])"
)

__all__ = [
    "DEFAULT_VERIFIER",
    "FORMATS",
    "Verifier",
    "detect_format",
    "export_drafter",
    "import_drafter",
    "stored_dtype",
    "verifier_of",
]


def export_drafter(model: DFlashModel, fmt: str, out: str | Path, verifier: Verifier) -> Path:
    """Write `model` in format `fmt`; refuses (DraftsmithError) what the format cannot carry exactly."""
    if fmt not in FORMATS:
        raise DraftsmithError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return FORMATS[fmt].write(model, out, verifier)


def stored_dtype(path: str | Path) -> torch.dtype:
    """The dtype of a drafter's first floating-point weight, so an export keeps the weights bit for
    bit (fp32 if unknown)."""
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



def detect_format(path: str | Path) -> str | None:
    """The foreign format of a drafter directory; None for draftsmith's own (or no/invalid config).

    A readable config.json that is neither draftsmith's nor a known export is refused here, listing
    what was expected."""
    config = read_config(Path(path))
    if config is None or config.get("format") == FORMAT:
        return None
    for name in ("speculators", "deepspec", "zlab"):  # speculators first: its architectures say DFlash too
        if FORMATS[name].detect(config):
            return name
    raise DraftsmithError(f"{path} is not a drafter draftsmith can load: {EXPECTED}")


def import_drafter(path: str | Path, fmt: str, target=None) -> DFlashModel:
    """Read an exported drafter; with `target`, check it fits (vocab, width, layers, its embedding/head)."""
    path = Path(path)
    config = read_config(path)
    if config is None:
        raise DraftsmithError(f"{path} has no readable config.json; {EXPECTED}")
    model, owned = FORMATS[fmt].read(path, config, target)
    if target is not None:
        _check_fits(model, owned, target, path)
    return model


def _check_fits(model: DFlashModel, owned: dict[str, torch.Tensor], target, path: Path) -> None:
    """An export carries no fingerprint: check the facts it depends on, and that any embedding or
    lm_head it ships is the target's own (draftsmith always drafts with the target's)."""
    cfg, tcfg = model.cfg, target.model.config
    vocab, layers = target.runner.vocab_size, int(tcfg.num_hidden_layers)
    problems = []
    if cfg.target_vocab_size != vocab:
        problems.append(f"vocab_size {cfg.target_vocab_size} != the target's {vocab}")
    if cfg.hidden_size != tcfg.hidden_size:
        problems.append(f"hidden size {cfg.hidden_size} != the target's {tcfg.hidden_size}")
    if max(cfg.target_layers) >= layers or min(cfg.target_layers) < 0:
        problems.append(
            f"target layers {cfg.target_layers} (draftsmith keys) outside the target's 0..{layers - 1}"
        )
    if cfg.mask_token_id >= vocab:
        problems.append(f"mask_token_id {cfg.mask_token_id} >= the target's vocab {vocab}")
    if problems:
        raise DraftsmithError(f"{path} does not fit target {target.name!r}: " + "; ".join(problems))
    mine = {
        "embed_tokens.weight": target.model.get_input_embeddings().weight,
        "lm_head.weight": target.model.get_output_embeddings().weight,
    }
    for name, theirs in owned.items():
        ref = mine[name].detach().cpu()
        if name == "lm_head.weight" and theirs.shape[0] != ref.shape[0]:
            ref = ref[model.d2t.long()]
        same = theirs.shape == ref.shape and torch.allclose(theirs.float(), ref.float(), rtol=1e-2, atol=1e-3)
        if not same:  # a tolerance for dtype rounding (a bf16 copy of an fp32 target), not for other weights
            raise DraftsmithError(
                f"{path}: its {name} is not the target's own; draftsmith drafts with the target's "
                f"embedding and lm_head, so it would draft differently (was it trained for another target?)"
            )
