"""Issue 8, session 31: why does the decode loop price verify rows higher than the cached calibration?

Session 30 measured in real decode loops a 4-token verify at 1.22x a 1-token step (59.3 / 48.4 ms)
where the calibration (context 128, fastest of 5) says 1.13x. This times bare steps of 1 and 4
tokens at several context lengths, with and without the drafter's hidden states collected, and
reports the fastest and the median of N steps, to see which of these makes up the difference.
Usage: python docs/results/session31/step_cost_by_context.py [N]
"""

import statistics
import sys
import time

import torch

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter

N = int(sys.argv[1]) if len(sys.argv) > 1 else 30
target = load_target(dtype="float32")
runner = target.runner

hidden = build_drafter("dspark", target).hidden_layers
print("calibrated", {n: round(runner.step_cost[n] * 1e3, 1) for n in (1, 2, 4, 5)})
print("| context | hidden | 1 token min / median ms | 4 tokens min / median ms | 4/1 (median) |")
print("|---|---|---|---|---|")
with torch.inference_mode():
    for context in (128, 256, 384):
        for keys in ((), hidden):
            runner.reset(context + 8)
            runner.forward(torch.randint(3, 1000, (context,)), n_logits=0)
            times = {1: [], 4: []}
            for _ in range(N):
                for rows in (1, 4):  # interleaved, as a decode loop alternates shapes
                    ids = torch.randint(3, 1000, (rows,))
                    t0 = time.perf_counter()
                    runner.forward(ids, n_logits=rows, hidden=keys)
                    times[rows].append(time.perf_counter() - t0)
                    runner.rollback(context)
            a, b = (statistics.median(times[r]) * 1e3 for r in (1, 4))
            print(
                f"| {context} | {'yes' if keys else 'no'} | {min(times[1]) * 1e3:.1f} / {a:.1f} | "
                f"{min(times[4]) * 1e3:.1f} / {b:.1f} | {b / a:.2f} |"
            )
