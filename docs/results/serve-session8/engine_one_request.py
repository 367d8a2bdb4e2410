# Usage: python docs/results/serve-session8/engine_one_request.py
"""One request, plain, in process: speculative_generate (what generate runs) against BatchDecoder
with 1 and 32 slots, on the first 16 loadtest prompts."""

import time

import torch

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine import batch_cost
from draftsmith.engine.batch_decode import BatchDecoder, batch_generate
from draftsmith.engine.decode import speculative_generate
from draftsmith.serving.loadtest import load_prompts

t = load_target()
prompts = [t.encode(p, chat=c) for p, c in load_prompts("mtbench,humaneval,gsm", 16)][:16]
stop = t.stop_rule(64, ())
cost = batch_cost.cached(t.runner)
plain = build_drafter("plain", t)
for _ in range(2):
    t0 = time.perf_counter()
    n = 0
    for p in prompts:
        n += len(speculative_generate(t.runner, plain.fork(), torch.tensor(p), stop).tokens)
    a = n / (time.perf_counter() - t0)
    for slots in (1, 32):
        dec = BatchDecoder(t.runner, slots, 640, "fixed", cost)
        t0 = time.perf_counter()
        n = 0
        for p in prompts:
            n += len(batch_generate(dec, [p], [plain.fork()], stop)[0][0])
        b = n / (time.perf_counter() - t0)
        print(
            f"plain one request: generate {a:.1f} tok/s, BatchDecoder({slots} slots) {b:.1f} tok/s",
            flush=True,
        )
