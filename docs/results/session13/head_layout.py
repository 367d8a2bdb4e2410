"""The lm_head and one layer matmul (gate_up) in both weight layouts, by rows: median of 15/30
calls. The step plan (`row_major`) is calibrated on whole steps; the head, vocabulary-wide, has its
own crossover (HEAD_SMALL in engine/lean_llama.py). Usage: python docs/results/session13/head_layout.py"""

import statistics
import time

import torch

from draftsmith.api import load_target


def median_ms(fn, x: torch.Tensor, row_major: bool, calls: int) -> float:
    for _ in range(3):
        fn(x, row_major)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn(x, row_major)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


r = load_target(dtype="float32")  # the CPU default until session 18.runner
torch.manual_seed(0)
gate_up = r.layers[0]["gate_up"]
for rows in (1, 2, 3, 4, 8, 16, 32):
    x = torch.randn(rows, r.lm_head.w_t.shape[0])
    head = [median_ms(r.lm_head, x, rm, 15) for rm in (False, True)]
    layer = [median_ms(gate_up, x, rm, 30) for rm in (False, True)]
    print(
        f"rows {rows}: head [in,out] {head[0]:.2f} ms, [out,in] {head[1]:.2f} ms | "
        f"gate_up {layer[0]:.3f} / {layer[1]:.3f}"
    )
