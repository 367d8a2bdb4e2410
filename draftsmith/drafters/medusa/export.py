"""Medusa heads in the `medusa` layout vLLM's former Medusa model read, and back (vLLM before 0.33:
model_executor/models/medusa.py and transformers_utils/configs/medusa.py; vLLM 0.33 has no Medusa,
so no current serving engine loads this format: it is for older vLLM releases and for import).

The layout: config.json with model_type "medusa", hidden_size, vocab_size (the target's), num_heads,
num_hidden_layers (residual blocks per head), truncated_vocab_size (the draft vocabulary),
medusa_fc_bias and original_lm_head (one lm_head shared by every head); weights
`blocks.{i}.layers.{j}.{weight,bias}`, `lm_heads.0.weight` (the shared head, truncated) and, for a
reduced vocabulary, `token_map` (draft index -> target id: our d2t). vLLM's block computes
x + SiLU(W x + b) layer by layer on the target's final-norm hidden state, as ours does, and its
proposals are each head's top-1 token, as our greedy drafts are.

Imported directories draft through the target's own lm_head, as heads trained here do: one whose
head is not the target's (original Medusa checkpoints train a copy per head) is refused by name.
"""

from __future__ import annotations

from pathlib import Path

import torch

from draftsmith.drafters.medusa.model import MedusaConfig, MedusaModel
from draftsmith.errors import DraftsmithError
from draftsmith.export import common

FORMATS = ("medusa",)


def files(model: MedusaModel, verifier: common.Verifier) -> tuple[dict, dict[str, torch.Tensor]]:
    """config.json contents and weights of the vLLM medusa directory."""
    cfg = model.cfg
    sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    dtype = sd["heads.0.0.linear.weight"].dtype
    weights = {
        f"blocks.{i}.layers.{j}.{p}": sd[f"heads.{i}.{j}.linear.{p}"]
        for i in range(cfg.num_heads)
        for j in range(cfg.num_layers)
        for p in ("weight", "bias")
    }
    weights["lm_heads.0.weight"] = model.head.detach().cpu().to(dtype)
    vd = model.d2t.shape[0]
    if vd < cfg.target_vocab_size:
        weights["token_map"] = model.d2t.cpu()
    config = {
        "architectures": ["MedusaModel"],
        "model_type": "medusa",
        "hidden_size": cfg.hidden_size,
        "vocab_size": cfg.target_vocab_size,
        "num_heads": cfg.num_heads,
        "num_hidden_layers": cfg.num_layers,
        "truncated_vocab_size": vd,
        "medusa_fc_bias": True,
        "original_lm_head": True,
        "torch_dtype": str(dtype).removeprefix("torch."),
        "verifier": verifier.name,
    }
    return config, weights


def write_medusa(model: MedusaModel, out: str | Path, verifier: common.Verifier) -> Path:
    return common.write_dir(out, *files(model, verifier))


WRITERS = {"medusa": write_medusa}


def owns(config: dict | None) -> bool:
    return (config or {}).get("model_type") == "medusa"


def check_map(d2t: torch.Tensor, vocab: int, size: int, where: Path) -> torch.Tensor:
    """A draft vocabulary map (draft index -> target id) that speculative sampling can trust: 1-D,
    `size` distinct ids of the target's vocabulary (a repeated id would corrupt the draft
    distribution handed to verification)."""
    if d2t.dim() != 1 or d2t.is_floating_point() or d2t.shape[0] != size:
        raise DraftsmithError(
            f"{where}: the draft vocabulary map must be {size} integer ids, got {tuple(d2t.shape)}"
        )
    d2t = d2t.long()
    if d2t.numel() and (int(d2t.min()) < 0 or int(d2t.max()) >= vocab or d2t.unique().numel() != size):
        raise DraftsmithError(f"{where}: the draft vocabulary map must hold distinct ids in 0..{vocab - 1}")
    return d2t


def read_medusa(path: Path, config: dict, target) -> MedusaModel:
    """A vLLM medusa directory as draftsmith heads for `target` (fp32, lm_head not yet attached).
    Anything vLLM would compute differently from draftsmith is refused by name."""
    head_w = target.model.get_output_embeddings().weight
    vocab, h = head_w.shape[0], int(target.model.config.hidden_size)
    try:
        heads, layers = int(config["num_heads"]), int(config["num_hidden_layers"])
        vd = int(config.get("truncated_vocab_size") or config["vocab_size"])
        if int(config["hidden_size"]) != h or int(config["vocab_size"]) != vocab:
            raise DraftsmithError(
                f"{path} is a Medusa drafter for hidden size {config['hidden_size']} and vocabulary "
                f"{config['vocab_size']}; the target has {h} and {vocab}"
            )
    except (KeyError, TypeError, ValueError) as e:
        raise DraftsmithError(f"{path}/config.json is not a vLLM medusa config: {e!r}") from e
    bias = bool(config.get("medusa_fc_bias", False))  # vLLM's default: layers without bias
    shared = bool(config.get("original_lm_head", False))
    weights = common.read_weights(path)
    expected = {f"blocks.{i}.layers.{j}.weight" for i in range(heads) for j in range(layers)}
    if bias:
        expected |= {f"blocks.{i}.layers.{j}.bias" for i in range(heads) for j in range(layers)}
    expected |= {"lm_heads.0.weight"} if shared else {f"lm_heads.{i}.weight" for i in range(heads)}
    if vd < vocab:
        expected.add("token_map")
    missing, unexpected = sorted(expected - set(weights)), sorted(set(weights) - expected)
    if missing or unexpected:
        raise DraftsmithError(
            f"{path} does not match its config (num_heads {heads}, num_hidden_layers {layers}, "
            f"medusa_fc_bias {bias}, original_lm_head {shared}, truncated_vocab_size {vd}): "
            f"missing {missing[:4]}, unexpected {unexpected[:4]}"
        )
    cfg = MedusaConfig(h, vocab, heads, layers, vd if vd < vocab else None, target_name=target.name)
    model = MedusaModel(cfg)
    if vd < vocab:
        model.d2t = check_map(weights["token_map"], vocab, vd, path)
    state = {"d2t": model.d2t}
    for i in range(heads):
        for j in range(layers):
            w = weights[f"blocks.{i}.layers.{j}.weight"]
            b = weights[f"blocks.{i}.layers.{j}.bias"] if bias else torch.zeros(h, dtype=w.dtype)
            state[f"heads.{i}.{j}.linear.weight"], state[f"heads.{i}.{j}.linear.bias"] = w, b
    try:
        model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()})
    except RuntimeError as e:
        raise DraftsmithError(f"{path} does not match its config: {e}") from e
    for i in [0] if shared else range(heads):
        lm = weights[f"lm_heads.{i}.weight"]
        if lm.shape[0] == vocab and vd < vocab:  # a whole head: vLLM keeps the token_map rows
            lm = lm[model.d2t]
        # draftsmith drafts through the target's own head: the file's must be exactly its rows
        # (up to the rounding of a bf16 / fp16 copy: an export made where the target ran in bf16)
        rows = head_w.detach()[model.d2t]
        same = lm.shape == rows.shape and torch.allclose(lm.float(), rows.float(), rtol=1e-2, atol=1e-3)
        if not same:
            raise DraftsmithError(
                f"{path} has its own lm_head (lm_heads.{i}), not this target's: draftsmith's Medusa "
                "drafts through the target's lm_head (train heads with `draftsmith train --method medusa`)"
            )
    return model
