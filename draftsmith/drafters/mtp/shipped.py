"""MTP modules shipped inside a model's own checkpoint, read straight from its safetensors files.

transformers drops these weights when it loads the target (they are no part of the causal LM), so
draftsmith reads them itself. Three layouts (names checked against vLLM's deepseek_mtp.py,
qwen3_next_mtp.py and mimo_mtp.py):

- "deepseek" (DeepSeek-V3/R1, GLM-4.5): `num_nextn_predict_layers` in config.json, the module as an
  extra decoder layer `model.layers.{num_hidden_layers}.*`: enorm, hnorm, eh_proj, the layer's own
  weights, shared_head.norm, shared_head.head (its own lm_head copy); embed_tokens is the main one.
  The next recursive step reads the block's output before shared_head.norm.
- "mtp" (Qwen3-Next / Qwen3.5): `mtp.fc`, `mtp.pre_fc_norm_embedding`, `mtp.pre_fc_norm_hidden`,
  `mtp.layers.0.*`, `mtp.norm`; the main lm_head; the next step reads the normed output.
- "mimo" (MiMo): `model.mtp_layers.0.*` with token_layernorm, hidden_layernorm, input_proj (over
  [hidden ; embedding], the other order), the layer, final_layernorm; the main lm_head.

Only the first module is used; drafting chains it recursively, as vLLM does with one module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import safe_open

from draftsmith.drafters.checkpoint import target_fingerprint
from draftsmith.drafters.mtp.checkpoint import ready_for
from draftsmith.drafters.mtp.config import MTPConfig
from draftsmith.drafters.mtp.model import MTPModel, target_classes
from draftsmith.errors import DraftsmithError

COUNT_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")


@dataclass(frozen=True)
class Layout:
    name: str
    prefix: str  # "{L}" stands for num_hidden_layers
    renames: dict = field(default_factory=dict)  # checkpoint sub-name prefix -> draftsmith's
    skip: tuple = ()  # sub-name prefixes that are not this module's (shared or later modules)
    chain: str = "normed"
    order: str = "eh"
    rest: str = "layer."  # where every other sub-name goes (the decoder layer's own weights)


LAYOUTS = (
    Layout(
        "deepseek",
        "model.layers.{L}.",
        {
            "enorm.": "enorm.",
            "hnorm.": "hnorm.",
            "eh_proj.": "eh_proj.",
            "shared_head.norm.": "norm.",
            "shared_head.head.weight": "own_head",
        },
        skip=("embed_tokens.",),
        chain="raw",
    ),
    Layout(
        "mtp",
        "mtp.",
        {
            "pre_fc_norm_embedding.": "enorm.",
            "pre_fc_norm_hidden.": "hnorm.",
            "fc.": "eh_proj.",
            "norm.": "norm.",
            "layers.0.": "layer.",
        },
        skip=("layers.", "embed_tokens.", "lm_head."),
        rest="",
    ),
    Layout(
        "mimo",
        "model.mtp_layers.0.",
        {
            "token_layernorm.": "enorm.",
            "hidden_layernorm.": "hnorm.",
            "input_proj.": "eh_proj.",
            "final_layernorm.": "norm.",
        },
        order="he",
    ),
)


def model_dir(target) -> Path | None:
    """The directory the target was loaded from (a local dir, or a hub id's cached snapshot)."""
    names = [getattr(target.model.config, "_name_or_path", None), getattr(target, "name", None)]
    for name in filter(None, names):
        path = Path(str(name)).expanduser()
        if path.is_dir() and (path / "config.json").is_file():
            return path
    for name in filter(None, names):
        if str(name).count("/") == 1 and not Path(str(name)).exists():
            try:
                from huggingface_hub import snapshot_download

                return Path(snapshot_download(str(name), local_files_only=True))
            except Exception:  # not cached (or no hub client): nothing shipped that we can read
                continue
    return None


def weight_files(directory: Path) -> dict[str, Path]:
    """Tensor name -> the safetensors file that holds it (from the index when sharded)."""
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text()).get("weight_map", {})
        return {name: directory / file for name, file in weight_map.items()}
    names: dict[str, Path] = {}
    for file in sorted(directory.glob("*.safetensors")):
        with safe_open(str(file), "pt") as f:
            names.update(dict.fromkeys(f.keys(), file))
    return names


def claimed_modules(directory: Path) -> int:
    """How many MTP modules config.json says the checkpoint ships (0 when it says nothing)."""
    cfg = json.loads((directory / "config.json").read_text())
    for scope in (cfg, cfg.get("text_config") or {}):
        for key in COUNT_KEYS:
            if scope.get(key):
                return int(scope[key])
    return 0


def _rename(layout: Layout, sub: str) -> str | None:
    for src, dst in layout.renames.items():
        if sub.startswith(src):
            return dst + sub[len(src) :]
    if sub.startswith(layout.skip):
        return None
    return layout.rest + sub if layout.rest else None


def find_layout(names, num_layers: int) -> tuple[Layout, str] | None:
    """The first layout whose prefix some tensor name carries, with that prefix."""
    for layout in LAYOUTS:
        prefix = layout.prefix.format(L=num_layers)
        if any(n.startswith(prefix) for n in names):
            return layout, prefix
    return None


def load_shipped(target, directory: Path | None = None) -> MTPModel | None:
    """The target's own first MTP module, ready to draft; None when its checkpoint ships none."""
    directory = directory or model_dir(target)
    if directory is None:
        return None
    claimed = claimed_modules(directory)
    files = weight_files(directory)
    num_layers = int(target.model.config.num_hidden_layers)
    found = find_layout(files, num_layers)
    if found is None:
        if claimed:
            raise DraftsmithError(
                f"{directory}/config.json says the model ships {claimed} MTP module(s), but its safetensors "
                f"hold no model.layers.{num_layers}.*, mtp.* or model.mtp_layers.* weights"
            )
        return None
    layout, prefix = found
    mine = {}
    for name in files:
        if name.startswith(prefix):
            new = _rename(layout, name[len(prefix) :])
            if new is not None:
                mine[new] = name
    if any(n.endswith(("_scale_inv", "weight_scale", ".qweight")) for n in mine.values()):
        raise DraftsmithError(f"the MTP module in {directory} is quantized; dequantise the checkpoint first")
    c = target.model.config
    cfg = MTPConfig(
        hidden_size=int(c.hidden_size),
        target_vocab_size=target.runner.vocab_size,
        model_type=c.model_type,
        layer_config=c.to_dict(),
        layer_idx=num_layers,
        rms_norm_eps=float(getattr(c, "rms_norm_eps", 1e-6)),
        chain=layout.chain,
        order=layout.order,
        own_head="own_head" in mine,
        source=layout.name,
        target_name=target.name,
        target_fingerprint=target_fingerprint(target),
    )
    model = MTPModel(cfg, target_classes(target.model))
    state = _read(files, mine)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if k != "d2t"]
    if missing or unexpected:
        raise DraftsmithError(
            f"the {layout.name} MTP module in {directory} does not fit a {c.model_type} block: "
            f"missing {missing[:8]}, unexpected {unexpected[:8]}"
        )
    return ready_for(model, target)


def _read(files: dict[str, Path], wanted: dict[str, str]) -> dict[str, torch.Tensor]:
    """Only the wanted tensors, file by file (a big checkpoint's other shards are never opened)."""
    by_file: dict[Path, list[str]] = {}
    for new, old in wanted.items():
        by_file.setdefault(files[old], []).append(new)
    out = {}
    for file, news in by_file.items():
        if not file.is_file():
            raise DraftsmithError(f"{file} is missing (named by the checkpoint's index)")
        with safe_open(str(file), "pt") as f:
            for new in news:
                out[new] = f.get_tensor(wanted[new])
    return out
