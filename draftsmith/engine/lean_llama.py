"""A lean forward for the Llama family (Llama, Mistral, Qwen2, Qwen3), gpt-fast style.

Hugging Face's module-per-op forward spends much of a small model's batch-1 step in Python. This
runner reuses the loaded model's weights (q/k/v and gate/up are fused once; the HF modules are
re-pointed at views of the fused tensors, so memory is not doubled and the HF model still works)
and runs a flat loop: one fused matmul per projection, SDPA over a preallocated cache.
Anything it does not recognise falls back to `HFRunner` (see `runners.make_runner`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from draftsmith.engine.runner import FINAL, HiddenKey, ModelRunner, RunnerOutput

SUPPORTED = {"llama", "mistral", "qwen2", "qwen3"}
STATIC_ROPE = {"default", "llama3", "linear", "yarn"}


def supports(model: torch.nn.Module) -> bool:
    """True when this lean path reproduces the HF forward exactly for the model."""
    cfg = model.config
    if cfg.model_type not in SUPPORTED or getattr(cfg, "hidden_act", "silu") != "silu":
        return False
    if getattr(cfg, "use_sliding_window", False):
        return False
    if cfg.model_type == "mistral" and getattr(cfg, "sliding_window", None):
        return False
    rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    if rope.get("rope_type", rope.get("type", "default")) not in STATIC_ROPE:
        return False
    return not getattr(cfg, "mlp_bias", False)


def _fuse(modules: list[torch.nn.Module]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Fuse Linear weights into one [in, out] matrix; re-point the modules at views of it.

    The [in, out] layout is deliberate: on CPU, x @ W for a few rows runs about twice as fast as
    F.linear(x, W) with W stored [out, in] (MKL picks a better kernel), and few rows is exactly
    the shape of decode and verify steps. The HF modules keep working on transposed views.
    """
    weight = torch.cat([m.weight.detach() for m in modules]).t().contiguous()
    has_bias = all(getattr(m, "bias", None) is not None for m in modules)
    bias = torch.cat([m.bias.detach() for m in modules]).contiguous() if has_bias else None
    start = 0
    for m in modules:
        rows = m.weight.shape[0]
        m.weight = torch.nn.Parameter(weight[:, start : start + rows].t(), requires_grad=False)
        if has_bias:
            m.bias = torch.nn.Parameter(bias[start : start + rows], requires_grad=False)
        start += rows
    return weight, bias


def _mm(x: torch.Tensor, w_t: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    y = x @ w_t
    return y if b is None else y + b


class LeanLlamaRunner(ModelRunner):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__(model)
        base = model.model
        first = base.layers[0].self_attn
        self.n_heads = int(self.config.num_attention_heads)
        self.n_kv = int(self.config.num_key_value_heads)
        self.head_dim = int(first.head_dim)
        self.eps = float(self.config.rms_norm_eps)
        self.embed = base.embed_tokens
        self.norm_w = base.norm.weight
        head = model.get_output_embeddings()
        tied = head.weight is self.embed.weight
        self.lm_head, _ = _fuse([head])
        if tied:
            self.embed.weight = head.weight
        self.rotary = base.rotary_emb
        self.layers = []
        for layer in base.layers:
            a, mlp = layer.self_attn, layer.mlp
            qkv_w, qkv_b = _fuse([a.q_proj, a.k_proj, a.v_proj])
            gu_w, _ = _fuse([mlp.gate_proj, mlp.up_proj])
            o_w, o_b = _fuse([a.o_proj])
            down_w, down_b = _fuse([mlp.down_proj])
            self.layers.append(
                dict(
                    ln1=layer.input_layernorm.weight,
                    qkv_w=qkv_w,
                    qkv_b=qkv_b,
                    q_norm=getattr(a, "q_norm", None),
                    k_norm=getattr(a, "k_norm", None),
                    o=o_w,
                    o_b=o_b,
                    ln2=layer.post_attention_layernorm.weight,
                    gu=gu_w,
                    down=down_w,
                    down_b=down_b,
                )
            )
        self.k_cache: torch.Tensor | None = None
        self.v_cache: torch.Tensor | None = None

    def _allocate(self, capacity: int) -> None:
        p = self.lm_head
        shape = (len(self.layers), 1, self.n_kv, capacity, self.head_dim)
        self.k_cache = torch.empty(shape, dtype=p.dtype, device=p.device)
        self.v_cache = torch.empty(shape, dtype=p.dtype, device=p.device)
        pos = torch.arange(capacity, device=p.device)[None]
        dummy = torch.empty(1, dtype=torch.float32, device=p.device)
        cos, sin = self.rotary(dummy, pos)
        self.cos, self.sin = cos[0].to(p.dtype), sin[0].to(p.dtype)

    def _rms(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), w, self.eps)

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    def _forward(self, ids: torch.Tensor, n_logits: int, hidden: tuple[HiddenKey, ...]) -> RunnerOutput:
        n, start = ids.shape[1], self.length
        end = start + n
        nh, nkv, hd = self.n_heads, self.n_kv, self.head_dim
        cos, sin = self.cos[start:end], self.sin[start:end]
        # a query at position start+i sees keys 0..start+i (SDPA's is_causal aligns top-left, so build it)
        mask = None if n == 1 else torch.ones(n, end, dtype=torch.bool, device=ids.device).tril(start)
        x = self.embed(ids)
        out: dict[HiddenKey, torch.Tensor] = {}
        if 0 in hidden:
            out[0] = x[0]
        for i, w in enumerate(self.layers):
            h = _mm(self._rms(x, w["ln1"]), w["qkv_w"], w["qkv_b"])
            q, k, v = h.split([nh * hd, nkv * hd, nkv * hd], dim=-1)
            q = q.view(1, n, nh, hd)
            k = k.view(1, n, nkv, hd)
            if w["q_norm"] is not None:
                q, k = w["q_norm"](q), w["k_norm"](k)
            q = self._rotate(q.transpose(1, 2), cos, sin)
            k = self._rotate(k.transpose(1, 2), cos, sin)
            self.k_cache[i, :, :, start:end] = k
            self.v_cache[i, :, :, start:end] = v.view(1, n, nkv, hd).transpose(1, 2)
            att = F.scaled_dot_product_attention(
                q, self.k_cache[i, :, :, :end], self.v_cache[i, :, :, :end], attn_mask=mask,
                enable_gqa=nh != nkv,
            )
            x = x + _mm(att.transpose(1, 2).reshape(1, n, nh * hd), w["o"], w["o_b"])
            gate, up = _mm(self._rms(x, w["ln2"]), w["gu"]).chunk(2, dim=-1)
            x = x + _mm(F.silu(gate) * up, w["down"], w["down_b"])
            if i + 1 in hidden:
                out[i + 1] = x[0]
        logits = None
        if n_logits or FINAL in hidden:
            normed = self._rms(x[0], self.norm_w)
            if FINAL in hidden:
                out[FINAL] = normed
            if n_logits:
                logits = _mm(normed[n - n_logits :], self.lm_head)
        return RunnerOutput(logits, out)
