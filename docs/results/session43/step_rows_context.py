"""Fixed-path step time by tokens in the step and context length, interleaved, with and without a
drafter's pass between steps (what decoding does), against the calibrated table.
Usage: python docs/results/session43/step_rows_context.py [REPEATS]
"""

import statistics
import sys
import time

import torch

from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.sampling import SamplingParams
from draftsmith.models.target import Target

repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 20
target = Target.load(None)
r = target.runner
print(f"mixed {r.mixed_shapes}, fixed_rows {r.fixed_rows}, plan 4/8: {r.plan.get(4)} / {r.plan.get(8)}")
print("table ms:", {n: round(1000 * r.step_cost[n], 1) for n in (1, 4, 5, 8)})
drafter = build_drafter("dspark", target)
g = torch.Generator().manual_seed(0)
sizes = (4, 5, 8)
with torch.inference_mode():
    for ctx in (128, 300, 600):
        ids = torch.randint(100, 40000, (ctx + 16,), generator=g)
        r.reset(ctx + 32)
        pre = r.forward(ids[:ctx], n_logits=0, hidden=drafter.hidden_layers)
        drafter.start(ids[: ctx + 1], pre.hidden, ctx + 32)
        for with_draft in (False, True):
            t = {n: [] for n in sizes}
            for i in range(repeats):
                for n in sizes if i % 2 == 0 else reversed(sizes):
                    if with_draft:
                        drafter.propose(ids[: ctx + 1], 7, SamplingParams(), None)
                    t0 = time.perf_counter()
                    r.forward(ids[ctx : ctx + n], n_logits=n)
                    t[n].append(time.perf_counter() - t0)
                    r.rollback(ctx)
            med = {n: 1000 * statistics.median(v) for n, v in t.items()}
            print(
                f"context {ctx}, drafter pass between steps: {with_draft}: "
                + ", ".join(f"{n} tokens {med[n]:.1f} ms ({med[n] / med[4]:.3f}x)" for n in sizes),
                flush=True,
            )
