"""Issue 8, session 32: what would a compiled decode step cost on this CPU, per row count?

On this AVX2 VM a 4-token verify step costs ~1.22x a 1-token step (sessions 30-31), which is why
DSpark needs tau ~2.8 for 2.0x here. Inductor's CPP GEMM template (torch.compile with frozen
weights and max-autotune) ran the default target's matmul shapes faster than the oneDNN-packed
weights the lean runner uses (`linear_shapes.py`). This builds the default target's decoder
gpt-fast style (a static KV cache of MAX_LEN keys, a mask from the input positions, one graph per
row count: dynamic=False), compiles it for 1, 2, 4 and 8 rows, checks its logits against the lean
runner's, and times both, interleaved, at a context of CONTEXT tokens.
Usage: python docs/results/session32/compiled_step.py [N] [CONTEXT] [MAX_LEN]
"""

import statistics
import sys
import time

import torch
import torch._inductor.config as inductor
import torch.nn.functional as F
from torch import nn

from draftsmith.api import load_target
from draftsmith.engine.lean_llama import LeanLlamaRunner

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20
CONTEXT = int(sys.argv[2]) if len(sys.argv) > 2 else 256
MAX_LEN = int(sys.argv[3]) if len(sys.argv) > 3 else 512
ROWS = (1, 2, 4, 8)
inductor.freezing = True
inductor.max_autotune = True
inductor.max_autotune_gemm_backends = "CPP,ATEN"


def lin(*mods: nn.Linear) -> nn.Linear:
    w = torch.cat([m.weight.detach() for m in mods])
    out = nn.Linear(w.shape[1], w.shape[0], bias=False)
    out.weight = nn.Parameter(w.clone(), requires_grad=False)
    return out


class StaticDecoder(nn.Module):
    """The Llama decoder over a static cache: every shape fixed by the row count alone."""

    def __init__(self, model: nn.Module, max_len: int) -> None:
        super().__init__()
        cfg, base = model.config, model.model
        a0 = base.layers[0].self_attn
        self.nh, self.nkv, self.hd = cfg.num_attention_heads, cfg.num_key_value_heads, a0.head_dim
        self.eps = cfg.rms_norm_eps
        self.embed = nn.Parameter(base.embed_tokens.weight.detach().clone(), requires_grad=False)
        self.norm = nn.Parameter(base.norm.weight.detach().clone(), requires_grad=False)
        self.head = lin(model.get_output_embeddings())
        attn = [x.self_attn for x in base.layers]
        self.qkv = nn.ModuleList(lin(a.q_proj, a.k_proj, a.v_proj) for a in attn)
        self.o = nn.ModuleList(lin(x.self_attn.o_proj) for x in base.layers)
        self.gate_up = nn.ModuleList(lin(x.mlp.gate_proj, x.mlp.up_proj) for x in base.layers)
        self.down = nn.ModuleList(lin(x.mlp.down_proj) for x in base.layers)
        self.ln1 = nn.ParameterList(
            nn.Parameter(x.input_layernorm.weight.detach().clone()) for x in base.layers
        )
        self.ln2 = nn.ParameterList(
            nn.Parameter(x.post_attention_layernorm.weight.detach().clone()) for x in base.layers
        )
        n = len(base.layers)
        self.register_buffer("k_cache", torch.zeros(n, 1, self.nkv, max_len, self.hd))
        self.register_buffer("v_cache", torch.zeros(n, 1, self.nkv, max_len, self.hd))
        cos, sin = base.rotary_emb(torch.empty(1), torch.arange(max_len)[None])
        self.register_buffer("cos", cos[0].clone())
        self.register_buffer("sin", sin[0].clone())
        self.max_len = max_len

    def rms(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), w, self.eps)

    rotate = staticmethod(LeanLlamaRunner._rotate)  # the lean runner's rotary, shared

    def forward(self, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """ids [n], pos [n] (consecutive positions): logits [n, V]; writes K/V at pos."""
        n = ids.shape[0]
        nh, nkv, hd = self.nh, self.nkv, self.hd
        x = F.embedding(ids, self.embed)[None]
        cos, sin = self.cos[pos], self.sin[pos]
        mask = torch.arange(self.max_len, device=ids.device)[None] <= pos[:, None]
        for i in range(len(self.qkv)):
            h = self.qkv[i](self.rms(x, self.ln1[i]))
            q, k, v = h.split([nh * hd, nkv * hd, nkv * hd], dim=-1)
            q = self.rotate(q.view(1, n, nh, hd).transpose(1, 2), cos, sin)
            k = self.rotate(k.view(1, n, nkv, hd).transpose(1, 2), cos, sin)
            self.k_cache[i].index_copy_(2, pos, k)
            self.v_cache[i].index_copy_(2, pos, v.view(1, n, nkv, hd).transpose(1, 2))
            kc, vc = self.k_cache[i], self.v_cache[i]
            att = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask, enable_gqa=True)
            x = x + self.o[i](att.transpose(1, 2).reshape(1, n, nh * hd))
            gate, up = self.gate_up[i](self.rms(x, self.ln2[i])).chunk(2, dim=-1)
            x = x + self.down[i](F.silu(gate) * up)
        return self.head(self.rms(x[0], self.norm))


def main() -> None:
    target = load_target(dtype="float32", fixed_rows=0)
    runner = target.runner
    torch.manual_seed(0)
    prompt = torch.randint(3, 1000, (CONTEXT,))
    with torch.inference_mode():
        static = StaticDecoder(target.model, MAX_LEN).eval()
        steps = {}
        for rows in ROWS:
            t0 = time.time()
            steps[rows] = torch.compile(static, dynamic=False)
            steps[rows](prompt[:rows], torch.arange(rows))
            print(f"compiled {rows} rows in {time.time() - t0:.0f} s", flush=True)
        # fill both caches with the same context (the static one `rows` tokens at a time)
        runner.reset(MAX_LEN)
        runner.forward(prompt, n_logits=0)
        for s in range(0, CONTEXT, 8):
            steps[8](prompt[s : s + 8], torch.arange(s, s + 8))
        probe = torch.randint(3, 1000, (8,))
        for rows in ROWS:
            ref = runner.forward(probe[:rows], n_logits=rows).logits
            runner.rollback(CONTEXT)
            got = steps[rows](probe[:rows], torch.arange(CONTEXT, CONTEXT + rows))
            same = bool((ref.argmax(-1) == got.argmax(-1)).all())
            print(f"{rows} rows: max |logit diff| {float((ref - got).abs().max()):.2e}, argmax equal: {same}")
        times = {(kind, r): [] for kind in ("lean", "compiled") for r in ROWS}
        for _ in range(N):
            for rows in ROWS:
                ids = torch.randint(3, 1000, (rows,))
                t0 = time.perf_counter()
                runner.forward(ids, n_logits=rows)
                times["lean", rows].append(time.perf_counter() - t0)
                runner.rollback(CONTEXT)
                t0 = time.perf_counter()
                steps[rows](ids, torch.arange(CONTEXT, CONTEXT + rows))
                times["compiled", rows].append(time.perf_counter() - t0)
    head = " | ".join(f"{r} rows" for r in ROWS)
    print(f"\n| step (context {CONTEXT}, median of {N}, interleaved) | {head} |")
    print("|---|" + "---|" * len(ROWS))
    for kind in ("lean", "compiled"):
        med = [statistics.median(times[kind, r]) * 1e3 for r in ROWS]
        print(f"| {kind} | " + " | ".join(f"{m:.1f} ms ({m / med[0]:.2f}x)" for m in med) + " |")


if __name__ == "__main__":
    main()
