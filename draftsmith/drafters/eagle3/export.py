"""EAGLE-3 drafters in the two layouts the servers load, and back.

- `sglang`: SpecForge / SGLang `LlamaForCausalLMEagle3` (vLLM loads it too): a LlamaConfig with one
  hidden layer and `eagle_config.eagle_aux_hidden_state_layer_ids` in SGLang's convention (the
  decoder layer whose output is captured = draftsmith key - 1; SGLang's models capture `id + 1`),
  plus a top-level `eagle_aux_hidden_state_layer_ids` in vLLM's convention for vLLM.
  Weights are ours as saved (midlayer.*, fc, norm, lm_head [Vd, H], d2t offsets, t2d); no embedding.
- `speculators`: `speculators_model_type: eagle3` (what vLLM auto-detects): `midlayer.` becomes
  `layers.0.`, aux ids in vLLM's convention (= draftsmith keys), `norm_before_residual` written
  explicitly, plus the target's embedding as speculators itself saves it.

Our layer is speculators' `Eagle3FirstLayerMixin` over a Llama layer (residual = the carried state,
before hidden_norm unless norm_before_residual; the pre-norm output is carried, norm + lm_head read
it out), so both conversions are renames. What a format cannot carry is refused by name.
"""

from __future__ import annotations

from pathlib import Path

import torch

from draftsmith.drafters.eagle3.config import Eagle3Config, vllm_default_layers
from draftsmith.drafters.eagle3.model import Eagle3Model
from draftsmith.errors import DraftsmithError
from draftsmith.export import common

FORMATS = ("sglang", "speculators")
SGLANG_ARCH = "LlamaForCausalLMEagle3"
SPEC_ARCH = "Eagle3Speculator"
EXPECTED = (
    "expected a draftsmith EAGLE-3 drafter (config.json format draftsmith-eagle3/1), a speculators "
    "export (speculators_model_type eagle3) or a SpecForge/SGLang export (architectures "
    f"[{SGLANG_ARCH}])"
)


def owns(config: dict | None) -> bool:
    """An EAGLE-3 drafter directory: ours, or a speculators / SGLang export."""
    if not config:
        return False
    if str(config.get("format", "")).startswith("draftsmith-eagle3/"):
        return True
    if config.get("speculators_model_type") == "eagle3":
        return True
    return SGLANG_ARCH in (config.get("architectures") or []) or "eagle_config" in config


def detect_format(path: str | Path) -> str | None:
    """'sglang' / 'speculators' for an exported directory; None for draftsmith's own (or no config)."""
    config = common.read_config(Path(path))
    if config is None or "format" in config:  # draftsmith's own (any method): its loader says which
        return None
    if config.get("speculators_model_type") == "eagle3":
        return "speculators"
    if SGLANG_ARCH in (config.get("architectures") or []) or "eagle_config" in config:
        return "sglang"
    if "speculators_model_type" in config:
        raise DraftsmithError(
            f"{path} is a speculators {config['speculators_model_type']!r} drafter; method eagle3 "
            "loads speculators_model_type eagle3"
        )
    raise DraftsmithError(f"{path} is not a drafter draftsmith can load: {EXPECTED}")



# --- writing ---------------------------------------------------------------------------------------


def _refuse(model: Eagle3Model, fmt: str) -> None:
    """Name every feature of `model` the format `fmt` cannot carry."""
    cfg, bad = model.cfg, []
    repeated = sorted({x for x in cfg.target_layers if cfg.target_layers.count(x) > 1})
    if repeated:
        bad.append(
            f"fuses target layer(s) {repeated} more than once (servers capture each layer once, so "
            "fc would get a narrower input than it was trained on)"
        )
    if fmt == "sglang" and cfg.norm_before_residual:
        bad.append(
            "takes its residual after hidden_norm (norm_before_residual); SGLang's "
            "LlamaForCausalLMEagle3 layer takes it before: use --format speculators"
        )
    if fmt == "sglang" and 0 in cfg.target_layers:
        bad.append("reads the embedding output (target layer key 0); SGLang's ids name decoder layers")
    if fmt == "speculators" and cfg.target_hidden_size != cfg.hidden_size:
        bad.append("has target_hidden_size != hidden_size; speculators 0.9.0 builds fc over K * hidden_size")
    if bad:
        raise DraftsmithError(
            f"cannot export this eagle3 drafter to the {fmt} format: it " + "; it ".join(bad)
        )


def llama_config(cfg: Eagle3Config, verifier: common.Verifier) -> dict:
    """The one Llama decoder layer of the drafter, as a LlamaConfig dict."""
    return common.decoder_config("llama", cfg, 1, verifier) | {"rope_scaling": None, "mlp_bias": False}


def _weights(model: Eagle3Model) -> dict[str, torch.Tensor]:
    """Our state dict (already SGLang's names), with d2t/t2d recomputed from the draft ids."""
    sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    ids = model.draft_ids.cpu()
    sd["d2t"] = common.d2t_offsets(ids)
    sd["t2d"] = common.t2d_mask(ids, model.cfg.target_vocab_size)
    return sd


def _dtype(model: Eagle3Model) -> str:
    return str(model.fc.weight.dtype).removeprefix("torch.")


def write_sglang(model: Eagle3Model, out: str | Path, verifier: common.Verifier) -> Path:
    """SpecForge / SGLang `LlamaForCausalLMEagle3` directory."""
    _refuse(model, "sglang")
    cfg = model.cfg
    config = llama_config(cfg, verifier) | {
        "architectures": [SGLANG_ARCH],
        "draft_vocab_size": cfg.vocab,
        "target_hidden_size": cfg.target_hidden_size,
        "eagle_config": {
            "eagle_aux_hidden_state_layer_ids": common.to_layer_ids(cfg.target_layers),
            "use_aux_hidden_state": True,
        },
        # vLLM reads this directory too but never converts the ids inside eagle_config (its V2 runner
        # reads only this top-level key, in its own convention = draftsmith keys); SGLang ignores it
        "eagle_aux_hidden_state_layer_ids": list(cfg.target_layers),
        "torch_dtype": _dtype(model),
    }
    return common.write_dir(out, config, _weights(model))


def write_speculators(model: Eagle3Model, out: str | Path, verifier: common.Verifier) -> Path:
    """speculators eagle3 directory (vLLM auto-detects it)."""
    _refuse(model, "speculators")
    cfg = model.cfg
    layer = llama_config(cfg, verifier)
    if len(cfg.target_layers) != 3:
        layer["num_aux_hidden_states"] = len(cfg.target_layers)
    config = {
        "architectures": [SPEC_ARCH],
        "speculators_model_type": "eagle3",
        "speculators_version": "0.9.0",
        "speculators_config": {
            "algorithm": "eagle3",
            "proposal_methods": [
                {
                    "proposal_type": "greedy",
                    "speculative_tokens": cfg.ttt_steps,
                    "verifier_accept_k": 1,
                    "accept_tolerance": 0.0,
                }
            ],
            "default_proposal_method": "greedy",
            "verifier": {"name_or_path": verifier.name, "architectures": verifier.architectures},
        },
        "transformer_layer_config": layer,
        "draft_vocab_size": cfg.vocab,
        "norm_before_residual": cfg.norm_before_residual,  # vLLM's default differs from ours: always write it
        "target_hidden_size": cfg.target_hidden_size,
        "eagle_aux_hidden_state_layer_ids": list(cfg.target_layers),
        "norm_before_fc": False,
        "fc_norm": False,
        "norm_output": False,
        "dtype": _dtype(model),
    }
    weights = {k.replace("midlayer.", "layers.0.", 1): v for k, v in _weights(model).items()}
    if cfg.draft_vocab_size is None:  # speculators registers no d2t/t2d at full vocabulary
        weights.pop("d2t")
        weights.pop("t2d")
    if model.embed is not None:  # speculators saves the (frozen) verifier embedding with the drafter
        weights["embed_tokens.weight"] = model.embed.detach().cpu().to(model.fc.weight.dtype)
    return common.write_dir(out, config, weights)


WRITERS = {"sglang": write_sglang, "speculators": write_speculators}


# --- reading ---------------------------------------------------------------------------------------


def import_drafter(path: str | Path, fmt: str, target=None) -> Eagle3Model:
    """An exported directory -> our model; with `target`, checks it fits (a shipped embedding included)."""
    path = Path(path)
    config = common.read_config(path)
    if config is None:
        raise DraftsmithError(f"{path} has no readable config.json; {EXPECTED}")
    if fmt == "speculators":
        for key in ("norm_before_fc", "fc_norm", "norm_output"):
            if config.get(key):
                raise DraftsmithError(f"{path}: {key} is not supported (draftsmith's EAGLE-3 layer has none)")
        layer = config.get("transformer_layer_config")
        if not isinstance(layer, dict):
            raise DraftsmithError(f"{path}: speculators config has no transformer_layer_config")
        ids = config.get("eagle_aux_hidden_state_layer_ids")
        layers = None if ids is None else [int(i) for i in ids]
        proposals = (config.get("speculators_config") or {}).get("proposal_methods") or [{}]
        steps = proposals[0].get("speculative_tokens")
        residual = bool(config.get("norm_before_residual", False))  # speculators' own default
    else:
        layer = config
        ids = (config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
        layers = None if ids is None else common.from_layer_ids(ids)
        steps, residual = None, bool(config.get("norm_before_residual", False))
    fields = _layer_fields(layer, path)
    if layers is None:  # both servers' default: [2, L//2, L-3] as hidden_states indices
        if target is None:
            raise DraftsmithError(f"{path}: no aux layer ids in its config, and no target to default them")
        layers = vllm_default_layers(int(target.model.config.num_hidden_layers))
    vocab = fields["target_vocab_size"]
    vd = int(config.get("draft_vocab_size") or layer.get("draft_vocab_size") or vocab)
    cfg = Eagle3Config(
        **fields,
        target_hidden_size=int(config.get("target_hidden_size") or fields["hidden_size"]),
        target_layers=layers,
        draft_vocab_size=vd if vd != vocab else None,
        norm_before_residual=residual,
        **({"ttt_steps": int(steps)} if steps else {}),
    )
    model, embed = _load_weights(Eagle3Model(cfg), common.read_weights(path), path, fmt)
    if target is not None:
        _check_fits(model, embed, target, path)
    return model


def _layer_fields(layer: dict, where: Path) -> dict:
    """Eagle3Config fields of the drafter's Llama layer; refuses what our layer cannot run."""
    kind = layer.get("model_type", "llama")
    if kind != "llama":
        raise DraftsmithError(
            f"{where}: a {kind!r} EAGLE-3 layer is not supported (draftsmith's is a Llama layer, no q/k norm)"
        )
    if int(layer.get("num_hidden_layers", 1)) != 1:
        raise DraftsmithError(f"{where}: {layer['num_hidden_layers']} draft layers (draftsmith runs one)")
    if layer.get("attention_bias") or layer.get("mlp_bias"):
        raise DraftsmithError(f"{where}: draft layers with bias are not supported")
    if layer.get("hidden_act", "silu") != "silu":
        raise DraftsmithError(f"{where}: hidden_act {layer['hidden_act']!r} is not supported (silu only)")
    try:
        hidden, heads = int(layer["hidden_size"]), int(layer["num_attention_heads"])
        return {
            "hidden_size": hidden,
            "num_heads": heads,
            "num_kv_heads": int(layer.get("num_key_value_heads") or heads),
            "head_dim": int(layer.get("head_dim") or hidden // heads),
            "intermediate_size": int(layer["intermediate_size"]),
            "target_vocab_size": int(layer["vocab_size"]),
            "rms_norm_eps": float(layer.get("rms_norm_eps", 1e-6)),
            "rope_theta": common.rope_theta(layer, where),
        }
    except (KeyError, TypeError, ValueError) as e:
        raise DraftsmithError(f"{where}: draft layer config is missing or has a bad {e}") from e


def _load_weights(
    model: Eagle3Model, weights: dict[str, torch.Tensor], where: Path, fmt: str
) -> tuple[Eagle3Model, torch.Tensor | None]:
    """Copy the weights in (all of them, shapes checked); returns the model and any shipped embedding."""
    if fmt == "speculators":
        weights = {k.replace("layers.0.", "midlayer.", 1): v for k, v in weights.items()}
    embed = weights.pop("embed_tokens.weight", None)
    sd = model.state_dict()
    if "d2t" not in weights:
        if model.cfg.draft_vocab_size is not None:
            raise DraftsmithError(f"{where}: draft_vocab_size < vocab_size but no d2t")
        weights["d2t"], weights["t2d"] = sd["d2t"], torch.ones_like(sd["t2d"])
    if "t2d" not in weights:  # vLLM / SGLang read d2t only
        weights["t2d"] = common.t2d_mask(common.d2t_absolute(weights["d2t"]), model.cfg.target_vocab_size)
    weights["d2t"] = weights["d2t"].long()
    weights["t2d"] = weights["t2d"].bool()
    missing = sorted(set(sd) - set(weights))
    if missing:
        raise DraftsmithError(f"{where} has no weight {missing[0]!r} (a corrupt or incomplete export?)")
    extra = sorted(set(weights) - set(sd) - {"verifier_norm.weight", "verifier_lm_head.weight"})
    if extra:
        raise DraftsmithError(f"{where}: weights draftsmith's drafter has no place for: {extra}")
    for name in sd:
        if tuple(weights[name].shape) != tuple(sd[name].shape):
            raise DraftsmithError(
                f"{where}: weight for {name} has shape {tuple(weights[name].shape)}, "
                f"its config implies {tuple(sd[name].shape)}"
            )
    model.load_state_dict({k: weights[k] for k in sd})
    model.refresh_vocab()
    return model, embed


def _check_fits(model: Eagle3Model, embed: torch.Tensor | None, target, where: Path) -> None:
    """An export carries no fingerprint: check vocab, width and layers against the target, and that
    a shipped embedding is the target's own (draftsmith drafts with the target's)."""
    cfg, tcfg = model.cfg, target.model.config
    vocab, layers = target.runner.vocab_size, int(tcfg.num_hidden_layers)
    problems = []
    if cfg.target_vocab_size != vocab:
        problems.append(f"vocab_size {cfg.target_vocab_size} != the target's {vocab}")
    if cfg.target_hidden_size != tcfg.hidden_size or cfg.hidden_size != tcfg.hidden_size:
        problems.append(f"hidden size {cfg.hidden_size} != the target's {tcfg.hidden_size}")
    if max(cfg.target_layers) >= layers or min(cfg.target_layers) < 0:
        problems.append(
            f"target layers {cfg.target_layers} (draftsmith keys) outside the target's 0..{layers - 1}"
        )
    if problems:
        raise DraftsmithError(f"{where} does not fit target {target.name!r}: " + "; ".join(problems))
    if embed is not None:
        ref = target.model.get_input_embeddings().weight.detach().cpu()
        if embed.shape != ref.shape or not torch.allclose(embed.float(), ref.float(), rtol=1e-2, atol=1e-3):
            raise DraftsmithError(
                f"{where}: its embed_tokens.weight is not the target's own; draftsmith drafts with the "
                "target's embedding, so it would draft differently (was it trained for another target?)"
            )
