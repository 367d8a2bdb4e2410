"""Issue 8, session 31: where DSpark's ~5 ms of drafting a round goes on this CPU (fp32).

Decodes 4 gsm + 4 humaneval dev prompts (128 tokens) with the shipped DSpark, timing the drafter's
propose calls, then again with cProfile switched on inside propose only (functions and torch ops by
self time).
Usage: python docs/results/session31/draft_profile.py DEV_DIR
"""

import cProfile
import json
import pstats
import sys
import time

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import speculative_generate

dev = sys.argv[1]
target = load_target(dtype="float32")
drafter = build_drafter("dspark", target)
rows = []
for suite in ("gsm", "humaneval"):
    rows += [json.loads(line) for line in open(f"{dev}/{suite}-answers.jsonl")][:4]
prompts = [target.encode(r["prompt"], chat=True) for r in rows]
propose, spent, calls = drafter.propose, [0.0], [0]


prof = cProfile.Profile()
profiling = [False]


def timed(*a, **kw):
    t0 = time.perf_counter()
    if profiling[0]:
        prof.enable()
    out = propose(*a, **kw)
    if profiling[0]:
        prof.disable()
    spent[0] += time.perf_counter() - t0
    calls[0] += 1
    return out


drafter.propose = timed
speculative_generate(target.runner, drafter, prompts[0], target.stop_rule(32, ()))  # warm up
spent[0], calls[0] = 0.0, 0
for ids in prompts:
    speculative_generate(target.runner, drafter, ids, target.stop_rule(128, ()))
print(f"unprofiled: {calls[0]} proposals, {spent[0] / calls[0] * 1e3:.2f} ms each")
profiling[0] = True
for ids in prompts[:4]:
    speculative_generate(target.runner, drafter, ids, target.stop_rule(128, ()))
pstats.Stats(prof).sort_stats("tottime").print_stats(30)
