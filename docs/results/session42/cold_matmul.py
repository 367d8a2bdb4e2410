"""Cold against warm: one 3-row oneDNN-packed bf16 matmul with each of the default DSpark's weight
shapes, timed with the weight in cache (200 calls in a row) and after 400 MB of other memory pushed it
out, as the target's step does before every drafting pass: read by default, as a step reads its
weights (EVICT=write: written, which also leaves dirty lines to write back first).
Usage: [EVICT=read|write] python docs/results/session42/cold_matmul.py
"""

import os
import time

import torch

from draftsmith.engine.packing import pack_weight, packed_linear

shapes = {
    "head": (8192, 576),
    "fc": (576, 2880),
    "gate_up": (3072, 576),
    "down": (576, 1536),
    "q": (576, 576),
    "kv": (192, 576),
    "markov_out": (8192, 64),
}
READ = os.environ.get("EVICT", "read") == "read"
big = torch.ones(400_000_000, dtype=torch.uint8)
for name, (o, i) in shapes.items():
    packed = pack_weight(torch.randn(o, i).bfloat16())
    if packed is None:
        raise SystemExit("oneDNN does not pack bf16 weights on this CPU")
    x = torch.randn(3, i).bfloat16()
    for _ in range(5):
        packed_linear(x, packed)
    t = time.perf_counter()
    for _ in range(200):
        packed_linear(x, packed)
    warm = (time.perf_counter() - t) / 200
    cold = 0.0
    for _ in range(10):
        big.sum(dtype=torch.int32) if READ else big.add_(1)  # evict: read (as a target step does) or write
        t = time.perf_counter()
        packed_linear(x, packed)
        cold += (time.perf_counter() - t) / 10
    mb = o * i * 2 / 1e6
    print(
        f"{name:10s} {mb:5.2f} MB  warm {warm * 1e3:.3f} ms ({mb / 1e3 / warm:.0f} GB/s)  "
        f"cold {cold * 1e3:.3f} ms ({mb / 1e3 / cold:.0f} GB/s)"
    )
