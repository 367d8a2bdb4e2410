"""MTP heads in the speculators `mtp` layout (speculators 0.9.0 `models/mtp`), or a refusal that says why.

The layout: `mtp_layers.0.{token_layernorm, hidden_layernorm, input_proj, <decoder layer>,
final_layernorm}`, input_proj [H, 2H] over concat(token embedding, hidden state) (our eh_proj in
"eh" order; "he" heads have their halves swapped), the target's embedding and lm_head over the whole
vocabulary, the next step fed the final_layernorm output (our chain "normed"), a qwen3 / qwen3_next
/ qwen3_5 decoder layer.

What it cannot carry exactly, refused by name: a reduced draft vocabulary (speculators' MTP raises
on one), a shipped lm_head copy, a raw chain, a layer of another kind (Llama has no q/k norm), and
the input state itself: draftsmith's heads read the target's final-norm state (FINAL), while
speculators' MTP reads `verifier_last_hidden_states`, the last decoder layer's output before the
final norm (its EAGLE-3 passes the same tensor through `verifier_norm`). hidden_layernorm(x) and
hnorm(final_norm(x)) differ unless the final norm's weight is uniform, so the drafts would differ.
`files` builds the directory's contents without that last check (it is exact for the same input
state), which is what the tests compare against speculators' own classes.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from draftsmith.drafters.mtp.model import MTPModel
from draftsmith.errors import DraftsmithError
from draftsmith.export import common

FORMATS = ("speculators",)
LAYER_TYPES = ("qwen3", "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")  # speculators 0.9.0's MTP layers
PREFIX = "mtp_layers.0."
INPUT_STATE = (
    "reads the target's final-norm state (FINAL); speculators' MTP reads the last decoder layer's output "
    "before the final norm (verifier_last_hidden_states), and its hidden_layernorm of that is not our "
    "hnorm of the normed state, so it would draft differently"
)


def _refuse(model: MTPModel, check_input: bool) -> None:
    cfg, bad = model.cfg, []
    if cfg.model_type not in LAYER_TYPES:
        bad.append(
            f"has a {cfg.model_type!r} decoder layer; speculators' mtp has {', '.join(LAYER_TYPES)} "
            "layers only (a Llama layer has no q/k norm)"
        )
    if cfg.draft_vocab_size is not None:
        bad.append(
            "drafts from a reduced draft vocabulary (d2t); speculators' MTP scores the whole vocabulary "
            "(train with --draft-vocab 0)"
        )
    if cfg.own_head:
        bad.append("has its own lm_head copy; speculators' MTP uses the verifier's")
    if cfg.chain != "normed":
        bad.append(
            "feeds its output before the final norm to the next step (chain raw); speculators' "
            "MTP feeds the final_layernorm output"
        )
    if check_input:
        bad.append(INPUT_STATE)
    if bad:
        raise DraftsmithError(
            "cannot export this mtp drafter to the speculators format: it " + "; it ".join(bad)
        )


def files(model: MTPModel, verifier: common.Verifier) -> tuple[dict, dict[str, torch.Tensor]]:
    """config.json contents and weights of the speculators mtp directory (input-state check not applied)."""
    _refuse(model, check_input=False)
    cfg = model.cfg
    layer = copy.deepcopy(cfg.layer_config) | {"model_type": cfg.model_type}
    n = int(layer.get("num_hidden_layers", 1))
    layer["layer_types"] = ["full_attention"] * n  # our block's layer attends fully (see mtp/model.py)
    layer["use_sliding_window"] = False
    layer["tie_word_embeddings"] = False
    for key in ("architectures", "auto_map", "transformers_version"):
        layer.pop(key, None)
    sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    h = cfg.hidden_size
    proj = sd["eh_proj.weight"]
    if cfg.order == "he":  # ours reads [hidden ; embedding]: theirs [embedding ; hidden]
        proj = torch.cat([proj[:, h:], proj[:, :h]], 1)
    weights = {
        PREFIX + "token_layernorm.weight": sd["enorm.weight"],
        PREFIX + "hidden_layernorm.weight": sd["hnorm.weight"],
        PREFIX + "input_proj.weight": proj,
        PREFIX + "final_layernorm.weight": sd["norm.weight"],
    }
    weights |= {PREFIX + k.removeprefix("layer."): v for k, v in sd.items() if k.startswith("layer.")}
    config = {
        "architectures": ["MTPDraftModel"],
        "speculators_model_type": "mtp",
        "speculators_version": "0.9.0",
        "speculators_config": {
            "algorithm": "mtp",
            "proposal_methods": [
                {
                    "proposal_type": "greedy",
                    "speculative_tokens": 3,
                    "verifier_accept_k": 1,
                    "accept_tolerance": 0.0,
                }
            ],
            "default_proposal_method": "greedy",
            "verifier": {"name_or_path": verifier.name, "architectures": verifier.architectures},
        },
        "transformer_layer_config": layer,
        "num_nextn_predict_layers": 1,
        "dtype": str(model.eh_proj.weight.dtype).removeprefix("torch."),
    }
    return config, weights


def write_speculators(model: MTPModel, out: str | Path, verifier: common.Verifier) -> Path:
    """Refuses (by name) what speculators' MTP would compute differently; see the module docstring."""
    _refuse(model, check_input=True)
    return common.write_dir(out, *files(model, verifier))  # unreachable today: every head reads FINAL


WRITERS = {"speculators": write_speculators}
