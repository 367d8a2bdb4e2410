"""What makes a drafter matmul "cold": the [k; v] projection (192 x 576, bf16, 3 rows) timed warm, after
a 5 ms sleep (nothing evicted), after reading 400 MB, dense instead of packed, and two tiny ops for
scale; with 2 threads and with 1. Usage: python docs/results/session42/cold_diag.py
"""

import time

import torch

from draftsmith.engine.packing import pack_weight, packed_linear

big = torch.ones(400_000_000, dtype=torch.uint8)
w = torch.randn(192, 576).bfloat16()
p = pack_weight(w)
x = torch.randn(3, 576).bfloat16()
other = torch.randn(10000, 576).bfloat16()


def t(fn, prep, n=10):
    s = 0.0
    for _ in range(n):
        prep()
        a = time.perf_counter()
        fn()
        s += time.perf_counter() - a
    return s / n * 1e3


for th in (2, 1):
    torch.set_num_threads(th)
    for _ in range(5):
        packed_linear(x, p)
    print(f"threads {th}")
    print(f"  packed warm            {t(lambda: packed_linear(x, p), lambda: None):.3f} ms")
    print(f"  packed after sleep 5ms {t(lambda: packed_linear(x, p), lambda: time.sleep(0.005)):.3f} ms")
    ms = t(lambda: packed_linear(x, p), lambda: big.sum(dtype=torch.int32))
    print(f"  packed after read 400MB {ms:.3f} ms")
    print(f"  dense after read 400MB  {t(lambda: x @ w.t(), lambda: big.sum(dtype=torch.int32)):.3f} ms")
    print(f"  packed after small op   {t(lambda: packed_linear(x, p), lambda: other.sum()):.3f} ms")
    print(f"  add after read 400MB    {t(lambda: x + 1, lambda: big.sum(dtype=torch.int32)):.3f} ms")
    print(f"  w.sum after read 400MB  {t(lambda: w.sum(), lambda: big.sum(dtype=torch.int32)):.3f} ms")
