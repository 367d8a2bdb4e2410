"""Where the shipped DSpark's drafting time goes at one request (default mode): `propose` timed at
each draft depth, then a torch profile of depth-3 calls by operator. Contexts: the first 8 loadtest
prompts. Usage: python docs/results/session18/draft_cost.py [calls per depth]"""

import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.sampling import SamplingParams
from draftsmith.serving.loadtest import load_prompts

calls = int(sys.argv[1]) if len(sys.argv) > 1 else 40
target = load_target()
greedy = SamplingParams()
drafter = build_drafter("dspark", target)
cases = []
with torch.inference_mode():
    for text, chat in load_prompts("mtbench,humaneval,gsm", 8)[:8]:
        ids = torch.tensor(target.encode(text, chat=chat)[:400])
        target.runner.reset(len(ids) + 16)
        out = target.runner.forward(ids[:-1], n_logits=0, hidden=drafter.hidden_layers)
        d = drafter.fork()
        d.start(ids, out.hidden, len(ids) + 16)
        d.flush([d])
        cases.append((d, ids))
print(f"| depth | propose ms (median of {calls} calls x {len(cases)} contexts) |")
print("|---|---|")
for depth in range(1, 8):
    times = []
    for _ in range(calls):
        for d, ids in cases:
            t0 = time.perf_counter()
            d.propose(ids, depth, greedy, None)
            times.append(time.perf_counter() - t0)
    print(f"| {depth} | {statistics.median(times) * 1e3:.2f} |", flush=True)
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(calls):
        for d, ids in cases:
            d.propose(ids, 3, greedy, None)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
