"""What the export formats share: the Qwen3 draft body, layer ids, draft vocabulary and Markov rows.

Every public DFlash / DSpark format stores the same Qwen3-style block drafter (per-head q/k norms,
`fc` + `hidden_norm` over the concatenated target states, no embedding or lm_head of its own).
Conversions here are exact both ways: a feature a format cannot carry is refused by name, never
approximated, so an exported drafter decodes as the original did.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from draftsmith.drafters.checkpoint import check_finite
from draftsmith.drafters.dflash.config import DFlashConfig
from draftsmith.drafters.dflash.model import DFlashModel
from draftsmith.errors import DraftsmithError

DEFAULT_VERIFIER = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the hub id of the embedded default target
WEIGHTS = "model.safetensors"


@dataclass
class Verifier:
    """The target an export is for, as the serving engines name and check it."""

    name: str
    architectures: list[str]
    num_layers: int
    max_position_embeddings: int = 8192


def verifier_of(target, name: str | None = None) -> Verifier:
    """Verifier facts from a loaded draftsmith Target (the engines need its depth and its hub name)."""
    from draftsmith.models.loading import DEFAULT_ALIASES

    cfg = target.model.config
    source = getattr(target, "source", None)
    if not name and source not in DEFAULT_ALIASES:  # the user's own target: its hub id or directory
        name = str(Path(source).expanduser().resolve()) if Path(str(source)).expanduser().exists() else source
    return Verifier(
        name=name or DEFAULT_VERIFIER,
        architectures=list(getattr(cfg, "architectures", None) or [type(target.model).__name__]),
        num_layers=int(cfg.num_hidden_layers),
        max_position_embeddings=int(getattr(cfg, "max_position_embeddings", 0) or 8192),
    )


# --- target layer ids ------------------------------------------------------------------------------
# draftsmith keys are HF `hidden_states` indices (0 = embeddings, i = output of decoder layer i - 1,
# 0-based), which is what vLLM / speculators call aux hidden-state layer ids. SGLang, z-lab and
# DeepSpec name the decoder layer itself: their id = ours - 1 (DeepSpec: -1 = the embedding output).


def to_layer_ids(ours: list[int]) -> list[int]:
    """draftsmith keys -> SGLang / z-lab / DeepSpec `target_layer_ids`."""
    return [i - 1 for i in ours]


def from_layer_ids(ids: list[int]) -> list[int]:
    """SGLang / z-lab / DeepSpec `target_layer_ids` -> draftsmith keys."""
    return [int(i) + 1 for i in ids]


# --- draft vocabulary ------------------------------------------------------------------------------


def d2t_offsets(d2t: torch.Tensor) -> torch.Tensor:
    """Our absolute draft->target ids -> speculators offsets (target_id = i + d2t[i])."""
    return (d2t.long() - torch.arange(d2t.shape[0])).to(torch.int64)


def d2t_absolute(offsets: torch.Tensor) -> torch.Tensor:
    """speculators offsets -> absolute target ids (what our d2t buffer holds)."""
    return offsets.long() + torch.arange(offsets.shape[0])


def t2d_mask(d2t: torch.Tensor, vocab: int) -> torch.Tensor:
    """bool [V]: which target ids are in the draft vocabulary."""
    mask = torch.zeros(vocab, dtype=torch.bool)
    mask[d2t.long()] = True
    return mask


def full_vocab(model: DFlashModel) -> bool:
    """True when the drafter drafts from the whole target vocabulary in the target's own order."""
    d2t = model.d2t.cpu()
    return d2t.shape[0] == model.cfg.target_vocab_size and torch.equal(d2t, torch.arange(d2t.shape[0]))


# --- the draft body --------------------------------------------------------------------------------


def require(cfg: DFlashConfig, fmt: str, **limits: bool) -> None:
    """Refuse, by feature name, what format `fmt` cannot carry (keyword = feature, value = present)."""
    reasons = {
        "anchor_context": "adds the anchor's context state to every block input (anchor_context)",
        "lookup_input": "feeds each block slot a prompt-lookup guess (lookup_input), which no serving "
        "engine's DFlash/DSpark computes",
        "markov_state": "updates each slot's state from the previous token (markov_state), which no "
        "serving engine's DSpark has",
        "no_qk_norm": "has no per-head q/k RMSNorm (every public DFlash/DSpark draft layer is Qwen3-style "
        "and normalises q and k; train with qk_norm to export)",
        "reduced_vocab": "drafts from a reduced draft vocabulary (d2t), and this format has no draft "
        "vocabulary: use --format speculators, or widen it first with `draftsmith grow-vocab --size 0` "
        "(no training)",
        "anchor_slot": "samples its first draft from the anchor slot (sample_from_anchor); this format "
        "drafts only from the mask slots (DFlash's default layout; a fine-tune with `train --init-from` "
        "this drafter relays it)",
        "mask_slots_only": "drafts only from the mask slots (sample_from_anchor false); this format samples "
        "from the anchor slot",
        "markov": "has a DSpark Markov head; this format has none: use --format speculators or deepspec",
        "confidence": "has a DSpark confidence head; this format has none: use --format speculators or "
        "deepspec",
        "embedding_layer": "reads the embedding output (target layer key 0); this format reads decoder "
        "layer outputs only",
    }
    bad = [reasons[k] for k, present in limits.items() if present]
    if bad:
        raise DraftsmithError(
            f"cannot export this {cfg.method} drafter to the {fmt} format: it " + "; it ".join(bad)
        )


def common_limits(model: DFlashModel) -> dict[str, bool]:
    """The features no format can carry, as `require` keywords."""
    return {
        "anchor_context": model.cfg.anchor_context,
        "lookup_input": bool(model.cfg.lookup_input),
        "markov_state": bool(model.cfg.markov_state),
        "no_qk_norm": not model.cfg.qk_norm,
    }


def read_config(path: Path) -> dict | None:
    """A directory's config.json as a dict; None when missing or not a JSON object (the method's
    own loader then reports what is wrong)."""
    file = Path(path) / "config.json"
    if not file.is_file():
        return None
    try:
        data = json.loads(file.read_text())
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def decoder_config(model_type: str, cfg, num_layers: int, verifier: Verifier) -> dict:
    """A drafter's decoder layers as a Hugging Face config dict (`cfg` any drafter config with the
    usual width, heads, norm and RoPE fields)."""
    return {
        "model_type": model_type,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": cfg.rope_theta},
        "vocab_size": cfg.target_vocab_size,
        "max_position_embeddings": verifier.max_position_embeddings,
        "attention_bias": False,
        "tie_word_embeddings": False,
    }


def qwen3_config(cfg: DFlashConfig, verifier: Verifier) -> dict:
    """The Qwen3 decoder-layer config of the draft body (shared by every format)."""
    return decoder_config("qwen3", cfg, cfg.num_layers, verifier) | {
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "layer_types": ["full_attention"] * cfg.num_layers,
    }


def body_weights(model: DFlashModel) -> dict[str, torch.Tensor]:
    """Our draft body under the Qwen3 / z-lab names (gate_up is split into gate_proj and up_proj)."""
    sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    out = {
        "fc.weight": sd["fc.weight"],
        "hidden_norm.weight": sd["ctx_norm.weight"],
        "norm.weight": sd["norm.weight"],
    }
    inter = model.cfg.intermediate_size
    for i in range(model.cfg.num_layers):
        ours, theirs = f"layers.{i}.", f"layers.{i}."
        for a, b in _LAYER_NAMES:
            if ours + a in sd:
                out[theirs + b] = sd[ours + a]
        gate_up = sd[ours + "gate_up.weight"]
        out[theirs + "mlp.gate_proj.weight"] = gate_up[:inter]
        out[theirs + "mlp.up_proj.weight"] = gate_up[inter:]
    return out


_LAYER_NAMES = [
    ("ln1.weight", "input_layernorm.weight"),
    ("q.weight", "self_attn.q_proj.weight"),
    ("k.weight", "self_attn.k_proj.weight"),
    ("v.weight", "self_attn.v_proj.weight"),
    ("o.weight", "self_attn.o_proj.weight"),
    ("q_norm.weight", "self_attn.q_norm.weight"),
    ("k_norm.weight", "self_attn.k_norm.weight"),
    ("ln2.weight", "post_attention_layernorm.weight"),
    ("down.weight", "mlp.down_proj.weight"),
]


def load_body(model: DFlashModel, weights: dict[str, torch.Tensor], where: Path) -> set[str]:
    """Copy a Qwen3-named draft body into our model; returns the names it used."""
    used: set[str] = set()
    sd = model.state_dict()

    def take(name: str) -> torch.Tensor:
        if name not in weights:
            raise DraftsmithError(f"{where} has no weight {name!r} (a corrupt or incomplete export?)")
        used.add(name)
        return weights[name]

    state = {"fc.weight": take("fc.weight"), "ctx_norm.weight": take("hidden_norm.weight")}
    state["norm.weight"] = take("norm.weight")
    for i in range(model.cfg.num_layers):
        p = f"layers.{i}."
        for a, b in _LAYER_NAMES:
            if p + a in sd:
                state[p + a] = take(p + b)
        state[p + "gate_up.weight"] = torch.cat(
            [take(p + "mlp.gate_proj.weight"), take(p + "mlp.up_proj.weight")]
        )
        state[p + "down.weight"] = take(p + "mlp.down_proj.weight")
    for name, value in state.items():
        if tuple(value.shape) != tuple(sd[name].shape):
            raise DraftsmithError(
                f"{where}: weight for {name} has shape {tuple(value.shape)}, "
                f"its config implies {tuple(sd[name].shape)}"
            )
    model.load_state_dict(state, strict=False)
    return used


# --- DSpark heads ----------------------------------------------------------------------------------


def markov_rows(model: DFlashModel) -> torch.Tensor:
    """markov_w1 [V, r], indexed by target id (ours: draft index, one shared row outside the draft vocab)."""
    w = model.markov_in.weight.detach().cpu()
    if model.cfg.markov_vocab == "target":
        return w
    vd = model.d2t.shape[0]
    rows = torch.full((model.cfg.target_vocab_size,), vd, dtype=torch.long)
    rows[model.d2t.cpu().long()] = torch.arange(vd)
    return w[rows]


def head_weights(model: DFlashModel) -> dict[str, torch.Tensor]:
    """DSpark Markov (vanilla) and confidence heads under the speculators / DeepSpec names."""
    out: dict[str, torch.Tensor] = {}
    if model.cfg.markov_rank:
        out["markov_head.markov_w1.weight"] = markov_rows(model)
        out["markov_head.markov_w2.weight"] = model.markov_out.weight.detach().cpu()
    if model.cfg.confidence:
        out["confidence_head.proj.weight"] = model.conf.weight.detach().cpu()
        out["confidence_head.proj.bias"] = model.conf.bias.detach().cpu()
    return out


def load_heads(
    model: DFlashModel, weights: dict[str, torch.Tensor], where: Path, conf_with_markov: bool
) -> set[str]:
    """Copy DSpark heads into our model (markov_vocab 'target': one Markov row per target id)."""
    cfg, used, state = model.cfg, set(), {}
    if cfg.markov_rank:
        used |= {"markov_head.markov_w1.weight", "markov_head.markov_w2.weight"}
        state["markov_in.weight"] = _get(weights, "markov_head.markov_w1.weight", where)
        state["markov_out.weight"] = _get(weights, "markov_head.markov_w2.weight", where)
    if cfg.confidence:
        used |= {"confidence_head.proj.weight", "confidence_head.proj.bias"}
        w = _get(weights, "confidence_head.proj.weight", where)
        if cfg.markov_rank and not conf_with_markov:  # ours always reads [state, markov row]: zero the latter
            w = torch.cat([w, torch.zeros(w.shape[0], cfg.markov_rank, dtype=w.dtype)], -1)
        state["conf.weight"] = w
        state["conf.bias"] = _get(weights, "confidence_head.proj.bias", where)
    sd = model.state_dict()
    for name, value in state.items():
        if tuple(value.shape) != tuple(sd[name].shape):
            raise DraftsmithError(
                f"{where}: weight for {name} has shape {tuple(value.shape)}, "
                f"its config implies {tuple(sd[name].shape)}"
            )
    model.load_state_dict(state, strict=False)
    return used


def _get(weights: dict[str, torch.Tensor], name: str, where: Path) -> torch.Tensor:
    if name not in weights:
        raise DraftsmithError(f"{where} has no weight {name!r} (a corrupt or incomplete export?)")
    return weights[name]


# --- files -----------------------------------------------------------------------------------------


def write_dir(out: str | Path, config: dict, weights: dict[str, torch.Tensor]) -> Path:
    """config.json + model.safetensors, the two files every loader reads."""
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tensors = {k: v.detach().contiguous().cpu() for k, v in weights.items()}
    save_file(tensors, str(path / WEIGHTS), metadata={"format": "pt"})
    return path


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """model.safetensors (or sharded model-*.safetensors), with an optional `model.` prefix stripped."""
    files = [path / WEIGHTS] if (path / WEIGHTS).is_file() else sorted(path.glob("model-*.safetensors"))
    if not files:
        raise DraftsmithError(f"{path} has no {WEIGHTS}")
    weights: dict[str, torch.Tensor] = {}
    for f in files:
        try:
            weights.update(load_file(str(f)))
        except Exception as e:  # safetensors raises its own error type for a corrupt file
            raise DraftsmithError(f"could not read {f}: {e}") from e
    check_finite(weights, path)
    return {k.removeprefix("model."): v for k, v in weights.items()}


def rope_theta(config: dict, where: Path) -> float:
    """The draft layers' rope base; a scaled rope (yarn, llama3, ...) is refused, not ignored."""
    params = config.get("rope_parameters") or config.get("rope_scaling") or {}
    kind = params.get("rope_type", params.get("type", "default"))
    if kind != "default":
        raise DraftsmithError(
            f"{where}: rope type {kind!r} is not supported (draftsmith's drafter uses plain rope)"
        )
    theta = params.get("rope_theta", config.get("rope_theta"))
    if theta is None:
        raise DraftsmithError(f"{where}: config has no rope_theta")
    return float(theta)


def body_config(config: dict, where: Path) -> dict:
    """DFlashConfig fields of a Qwen3 draft-layer config; refuses what our layers cannot run."""
    if config.get("attention_bias"):
        raise DraftsmithError(f"{where}: draft layers with attention bias are not supported")
    if "sliding_attention" in (config.get("layer_types") or []):
        raise DraftsmithError(f"{where}: sliding-window draft layers are not supported")
    if config.get("is_causal"):
        raise DraftsmithError(
            f"{where}: causal draft blocks are not supported (draftsmith drafts bidirectionally)"
        )
    extra = config.get("dflash_config") or {}
    for key, neutral in (
        ("input_embedding_scale", 1.0),
        ("output_multiplier", 1.0),
        ("final_logit_softcapping", 0.0),
    ):
        value = config.get(key, extra.get(key))
        if value is not None and float(value) != neutral:
            raise DraftsmithError(f"{where}: {key}={value} is not supported")
    try:
        hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
        return {
            "hidden_size": hidden,
            "num_heads": heads,
            "num_kv_heads": int(config.get("num_key_value_heads", heads)),
            "head_dim": int(config.get("head_dim") or hidden // heads),
            "intermediate_size": int(config["intermediate_size"]),
            "num_layers": int(config["num_hidden_layers"]),
            "rms_norm_eps": float(config.get("rms_norm_eps", 1e-6)),
            "rope_theta": rope_theta(config, where),
            "target_vocab_size": int(config["vocab_size"]),
            "qk_norm": True,
        }
    except (KeyError, TypeError, ValueError) as e:
        raise DraftsmithError(f"{where}: draft layer config is missing or has a bad {e}") from e
