"""Every matmul of one decoding step of the default target (30 layers x qkv, o, gate_up, down, and
the lm_head), by rows per step: dense weights in both layouts against oneDNN's packed copy
(engine/packing.py), median of 5 sweeps, ms. Usage: python docs/results/session13/matmul_packed.py"""

import statistics
import time

import torch
import torch.nn.functional as F

from draftsmith.api import load_target
from draftsmith.engine.packing import pack_weight, packed_linear

runner = load_target(dtype="float32")  # the CPU default until session 18.runner
fused = [layer[n] for layer in runner.layers for n in ("qkv", "o", "gate_up", "down")] + [runner.lm_head]
dense = [f.w_t.t().contiguous() for f in fused]  # [out, in]
dense_t = [w.t().contiguous() for w in dense]  # [in, out]
packed = [pack_weight(w) for w in dense]
ways = {
    "dense [in,out] (x @ W)": lambda x, i: x @ dense_t[i],
    "dense [out,in] (F.linear)": lambda x, i: F.linear(x, dense[i]),
    "packed (oneDNN)": lambda x, i: packed_linear(x, packed[i]),
}


def sweep(way, rows: int) -> float:
    xs = {w.shape[1]: torch.randn(rows, w.shape[1]) for w in dense}
    t0 = time.perf_counter()
    for i, w in enumerate(dense):
        way(xs[w.shape[1]], i)
    return time.perf_counter() - t0


print("| rows | " + " | ".join(ways) + " | dense best / packed |")
print("|---" * (len(ways) + 2) + "|")
with torch.inference_mode():
    for rows in (1, 2, 4, 8, 16, 64, 128):
        ms = []
        for way in ways.values():
            sweep(way, rows)
            ms.append(statistics.median(sweep(way, rows) for _ in range(5)) * 1e3)
        print(f"| {rows} | " + " | ".join(f"{t:.1f}" for t in ms) + f" | {min(ms[:2]) / ms[2]:.2f}x |")
