"""A small causal LM of the target's own architecture, cut from the target itself.

Same config, fewer decoder layers, each a copy of a chosen target layer; the embeddings, final norm
and lm_head are the target's too. The embeddings and lm_head stay frozen (tied when the target ties
them), so the draft keeps the target's token space and its last state aims at the same head; only
the copied layers and the final norm learn. The result is a plain `transformers` model: any engine
that runs the target's architecture runs the draft.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import torch
from torch import nn

from draftsmith.drafters.checkpoint import target_fingerprint
from draftsmith.errors import DraftsmithError

LAYER_INITS = ("evenly", "first")
"""Which target layers the draft's layers start as: evenly spaced (first and last included) or the
first N."""


DEPTH = 7
"""Default drafts per anchor of the held-out tau (DFlash's default block: 7 slots, all drafting)."""

PER_LAYER = ("layer_types", "no_rope_layers")
"""Config lists with one entry per decoder layer (sliding or full attention, RoPE or not): the
draft keeps the entries of the layers it copies."""


def pick_layers(n_target: int, n_draft: int, init: str) -> list[int]:
    """Indices of the target layers the draft's layers are copied from."""
    if not 1 <= n_draft <= n_target:
        raise DraftsmithError(
            f"a draft model needs 1 to {n_target} layers (the target has {n_target}), got {n_draft}"
        )
    if init == "first":
        return list(range(n_draft))
    if init == "evenly":
        return torch.linspace(0, n_target - 1, n_draft).round().long().tolist()
    raise DraftsmithError(f"layer_init must be one of {', '.join(LAYER_INITS)}, got {init!r}")


def decoder_layers_name(model: nn.Module) -> str:
    """Qualified name of the ModuleList of decoder layers ("model.layers" for Llama-family models)."""
    n = model.config.num_hidden_layers
    for name, mod in model.named_modules():
        if isinstance(mod, nn.ModuleList) and len(mod) == n and name.endswith("layers"):
            return name
    raise DraftsmithError(f"cannot find the decoder layers of a {model.config.model_type} model")


def draft_config(target_model: nn.Module, layers: list[int]):
    """The target's config with only `layers` (per-layer settings such as layer_types follow them)."""
    cfg = copy.deepcopy(target_model.config)
    n = cfg.num_hidden_layers
    cfg.num_hidden_layers = len(layers)
    for key in PER_LAYER:
        value = getattr(cfg, key, None)
        if isinstance(value, list) and len(value) == n:
            setattr(cfg, key, [value[i] for i in layers])
    if hasattr(cfg, "max_window_layers"):
        cfg.max_window_layers = min(cfg.max_window_layers, len(layers))
    if hasattr(cfg, "quantization_config"):  # a GGUF-loaded target: the draft's weights are dense
        del cfg.quantization_config
    cfg.name_or_path = ""
    return cfg


def build_draft_lm(target_model: nn.Module, layers: list[int]) -> nn.Module:
    """A fresh fp32 causal LM whose layer j is a copy of target layer layers[j] (the rest copied as is)."""
    from transformers import AutoModelForCausalLM

    prefix = decoder_layers_name(target_model) + "."
    lm = AutoModelForCausalLM.from_config(draft_config(target_model, layers), dtype=torch.float32)
    source = {j: i for j, i in enumerate(layers)}
    theirs = target_model.state_dict()
    state = {}
    for key in lm.state_dict():
        if key.startswith(prefix):
            j, rest = key[len(prefix) :].split(".", 1)
            key_t = f"{prefix}{source[int(j)]}.{rest}"
        else:
            key_t = key
        if key_t not in theirs:
            raise DraftsmithError(f"the target has no tensor {key_t} for the draft's {key}")
        state[key] = theirs[key_t].detach().float()
    lm.load_state_dict(state)
    lm.requires_grad_(True)
    lm.get_input_embeddings().weight.requires_grad_(False)
    lm.get_output_embeddings().weight.requires_grad_(False)
    return lm.eval()


class DistilledDraft(nn.Module):
    """The draft LM plus what its directory must say: the target it serves and the layers it came from."""

    def __init__(self, lm: nn.Module, source_layers: list[int], layer_init: str, target) -> None:
        super().__init__()
        self.lm = lm
        self.source_layers = list(source_layers)
        self.layer_init = layer_init
        self.target_name = target.name
        self.target_fingerprint = target_fingerprint(target)
        self.tokenizer = target.tokenizer

    @classmethod
    def from_target(cls, target, num_layers: int, layer_init: str) -> DistilledDraft:
        """Cut the draft from the target (fp32, on the target's device)."""
        layers = pick_layers(target.model.config.num_hidden_layers, num_layers, layer_init)
        lm = build_draft_lm(target.model, layers).to(target.device)
        return cls(lm, layers, layer_init, target)

    @property
    def cfg(self) -> SimpleNamespace:
        """What `draftsmith score` reads of a trained drafter: the target layers its data must hold
        (none is used, the draft reads token ids; 0 is the cheapest) and the drafts per anchor."""
        return SimpleNamespace(target_layers=[0], block_size=DEPTH)

    @property
    def head(self) -> nn.Module:
        return self.lm.get_output_embeddings()

    def states(self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Final-normed states [b, T, H]: state t predicts token t + 1."""
        base = self.lm.base_model
        return base(input_ids=ids, attention_mask=attention_mask, use_cache=False).last_hidden_state

    def cap(self, logits: torch.Tensor) -> torch.Tensor:
        """The model's final logit soft-capping (Gemma 2 style), where its config has one."""
        limit = getattr(self.lm.config, "final_logit_softcapping", None)
        return torch.tanh(logits / limit) * limit if limit else logits

    def logits(self, states: torch.Tensor) -> torch.Tensor:
        """Full-vocabulary logits of final-normed states (the draft's own, or the target's cached ones:
        the head is the target's)."""
        return self.cap(self.head(states))

    def logits_at(self, states: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """Logits [N, k] of states [N, H] for the tokens idx [N, k] only (the rows of the head they use)."""
        w = self.head.weight[idx]
        out = torch.einsum("nh,nkh->nk", states, w.to(states.dtype))
        if getattr(self.head, "bias", None) is not None:
            out = out + self.head.bias[idx]
        return self.cap(out)
