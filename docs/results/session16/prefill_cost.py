"""Issue 8: why end-to-end regeneration (181 tok/s) runs far below the steady-state decode table
(426 tok/s at 32 slots, fp32 packed): time one slot's prefill of a prompt of N tokens, and one
32-slot decode step at a ~600-token context, in fp32 (packed) and bf16, medians of REPEATS.
Usage: python docs/results/session16/prefill_cost.py [REPEATS]   (alone)"""

import statistics
import sys
import time

import torch

from draftsmith.api import load_target
from draftsmith.engine.slots import SlotRunner

repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
for dtype in ("float32", "bfloat16"):
    target = load_target(dtype=dtype, fixed_rows=0)
    slots = SlotRunner(target.runner, 32, 2048)
    g = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for n in (64, 200, 400, 800, 1200):
            ids = torch.randint(0, 1000, (n,), generator=g)
            times = []
            for _ in range(repeats + 1):
                slots.reset(0)
                t0 = time.perf_counter()
                slots.forward([(0, ids)], n_logits=1)
                times.append(time.perf_counter() - t0)
            ms = statistics.median(times[1:]) * 1e3
            print(f"{dtype} prefill {n:5d} tokens: {ms:8.1f} ms ({n / ms * 1e3:7.0f} tok/s)", flush=True)
        slots.lengths = [600] * 32
        tok = torch.randint(0, 1000, (32,), generator=g)
        times = []
        for _ in range(repeats + 1):
            t0 = time.perf_counter()
            slots.forward([(s, tok[s : s + 1]) for s in range(32)], n_logits=1)
            times.append(time.perf_counter() - t0)
        ms = statistics.median(times[1:]) * 1e3
        print(f"{dtype} decode, 32 slots at 600: {ms:.1f} ms ({32 / ms * 1e3:.0f} tok/s)", flush=True)
