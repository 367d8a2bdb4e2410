"""Which fixed step shapes give bitwise the same per-row results in bf16 on this CPU?

Prefills one prompt, then runs the same n real tokens as steps of R rows (R = 2..16) and compares
each real row's logits bitwise with the R=4 step (today's default fixed shape). Shapes that agree
with 4 on every n and context could be mixed per round without breaking exactness.
Usage: python docs/results/session43/shape_invariance.py [CONTEXTS]
"""

import sys

import torch

from draftsmith.api import load_target
from draftsmith.engine.lean_llama import KV_BLOCK

contexts = [int(c) for c in (sys.argv[1] if len(sys.argv) > 1 else "37,100,250,600").split(",")]
target = load_target(dtype="bfloat16", fixed_rows=4)
r = target.runner
print(f"KV_BLOCK {KV_BLOCK}, plan {{4: {r.plan.get(4)}, 8: {r.plan.get(8)}}}, packed {r.packed}")
g = torch.Generator().manual_seed(0)
shapes = list(range(2, 17))
with torch.inference_mode():
    for ctx in contexts:
        prompt = torch.randint(100, 40000, (ctx,), generator=g)
        step = torch.randint(100, 40000, (4,), generator=g)
        ref: dict[int, torch.Tensor] = {}
        same = {R: True for R in shapes}
        for R in [4] + [s for s in shapes if s != 4]:
            r.fixed_rows = R
            r.capacity = 0
            r.reset(ctx + 64)
            r.forward(prompt, n_logits=0)
            for n in range(1, min(R, 4) + 1):
                out = r.forward(step[:n], n_logits=n).logits.float()
                r.rollback(ctx)
                if R == 4:
                    ref[n] = out
                elif n in ref and not torch.equal(out, ref[n]):
                    same[R] = False
        r.fixed_rows = 4
        print(f"context {ctx}: same as 4 rows: {[R for R in shapes if same[R]]}; "
              f"differs: {[R for R in shapes if not same[R]]}", flush=True)
