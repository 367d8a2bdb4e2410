"""Time the target's own matmul shapes at 1..8 rows in both weight layouts and in fp32 and bf16.

Why: speculative decoding pays only if verifying k+1 tokens costs about as much as decoding one.
On a CPU that depends on the GEMM kernels for a handful of rows, which differ by dtype and weight
layout in ways no datasheet tells you; this table shows where a step's time goes.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

ROWS = (1, 2, 4, 8)


def _median_ms(fn, repeats: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000 * sorted(times)[len(times) // 2]


def matmul_table(config, dtypes=(torch.float32, torch.bfloat16), repeats: int = 30) -> list[dict]:
    """Rows: {matmul, dtype, rows, ms_in_out (x @ W[in,out]), ms_out_in (F.linear, W[out,in])}."""
    h = int(config.hidden_size)
    heads = int(config.num_attention_heads)
    hd = int(getattr(config, "head_dim", None) or h // heads)
    kv = int(getattr(config, "num_key_value_heads", heads))
    shapes = {
        "q,k,v": (h, (heads + 2 * kv) * hd),
        "o": (heads * hd, h),
        "gate,up": (h, 2 * int(config.intermediate_size)),
        "down": (int(config.intermediate_size), h),
        "lm_head": (h, int(config.vocab_size)),
    }
    out = []
    g = torch.Generator().manual_seed(0)
    for dtype in dtypes:
        for name, (i, o) in shapes.items():
            w_t = torch.randn(i, o, generator=g).to(dtype)
            w = w_t.t().contiguous()
            for n in ROWS:
                x = torch.randn(n, i, generator=g).to(dtype)
                out.append(
                    {
                        "matmul": f"{name} {i}->{o}",
                        "dtype": str(dtype).removeprefix("torch."),
                        "rows": n,
                        "ms_in_out": _median_ms(lambda x=x, w_t=w_t: x @ w_t, repeats),
                        "ms_out_in": _median_ms(lambda x=x, w=w: F.linear(x, w), repeats),
                    }
                )
    return out


def markdown(rows: list[dict]) -> str:
    lines = [
        "| matmul | dtype | " + " | ".join(f"{n} rows" for n in ROWS) + " |",
        "|---|---|" + "---|" * len(ROWS),
    ]
    keys = dict.fromkeys((r["matmul"], r["dtype"]) for r in rows)
    for m, d in keys:
        cells = [
            f"{r['ms_in_out']:.3f}/{r['ms_out_in']:.3f}" for r in rows if (r["matmul"], r["dtype"]) == (m, d)
        ]
        lines.append(f"| {m} | {d} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
