"""Verify-step time by tokens in the step inside real DSpark decoding, the single 4-row shape and
mixed shapes alternating in one process (3 gsm + 3 humaneval prompts, 128 tokens, twice).
Usage: python docs/results/session43/rows_time.py
"""

import statistics
import time
from collections import defaultdict

from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import speculative_generate
from draftsmith.evaluation.suites import load_suite
from draftsmith.models.target import Target

target = Target.load(None, fixed_rows=4)
r = target.runner
prompts = [target.encode(p.text, chat=p.chat) for s in ("gsm", "humaneval") for p in load_suite(s, 3)]
d = build_drafter("dspark", target)
times: dict[tuple[str, int], list[float]] = defaultdict(list)
forward = r.forward
mode = "fixed4"


def timed(ids, n_logits=1, hidden=()):
    t0 = time.perf_counter()
    out = forward(ids, n_logits, hidden)
    times[(mode, int(ids.shape[-1]))].append(time.perf_counter() - t0)
    return out


r.forward = timed
for _ in range(2):
    for mode in ("fixed4", "mixed"):
        if mode == "fixed4":
            r.set_fixed_rows(4)
        else:
            r.set_mixed_rows(16, 4)
        for ids in prompts:
            speculative_generate(r, d, ids, target.stop_rule(128))
for key in sorted(times):
    if key[1] <= 16:
        print(key, len(times[key]), f"{1000 * statistics.median(times[key]):.1f} ms")
print({k: round(v * 1000, 1) for k, v in r.step_cost.items()})
