"""Issue 9: where a load level's time goes, DSpark (confidence) against plain, in process. One
level (2 x USERS requests of 64 tokens, at most USERS at once, a 32-slot decoder as `serve` keeps)
is run once to warm up, then once under cProfile per method; prints wall time and the top
functions by cumulative time. Usage: python docs/results/session15/profile_level.py [USERS]  (alone)"""

import cProfile
import io
import pstats
import sys
import time

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine import batch_cost
from draftsmith.engine.batch_decode import BatchDecoder
from draftsmith.serving.loadtest import load_prompts

users = int(sys.argv[1]) if len(sys.argv) > 1 else 4
target = load_target(dtype="float32")  # the CPU default until session 18
cost = batch_cost.cached(target.runner)
pool = [target.encode(p, chat=c) for p, c in load_prompts("mtbench,humaneval,gsm,alpaca", 64)]
stop = target.stop_rule(64, ())


def level(dec: BatchDecoder, drafter, offset: int) -> None:
    queue = [pool[(offset + i) % len(pool)] for i in range(2 * users)]
    while queue or dec.running:
        while queue and len(dec.running) < users:
            dec.add(list(queue.pop(0)), drafter.fork(), stop)
        for run in dec.step():
            dec.remove(run.slot)


for method, schedule in (("plain", "fixed"), ("dspark", "confidence")):
    drafter = build_drafter(method, target)
    dec = BatchDecoder(target.runner, 32, 640, schedule, cost)
    level(dec, drafter, 0)
    dec._drafting, dec._explore_at = False, 10**9  # profile the non-drafting path only
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    level(dec, drafter, users)
    prof.disable()
    print(f"\n=== {method}: {time.perf_counter() - t0:.3f} s, {dec.steps} steps so far ===")
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(30)
    print("\n".join(s.getvalue().splitlines()[6:45]))
