"""Batched decoding in process, n slots, the first 2n loadtest prompts, 64 tokens: plain; DSpark
that never drafts (k=0: it only takes in target states); DSpark scheduled (confidence). Twice,
interleaved. Usage: python docs/results/serve-session8/batch_in_process.py SLOTS  (8 in BENCHMARKS.md)"""

import sys
import time

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine import batch_cost
from draftsmith.engine.batch_decode import BatchDecoder, batch_generate
from draftsmith.serving.loadtest import load_prompts

n = int(sys.argv[1])
target = load_target(dtype="float32")  # the CPU default until session 18
prompts = [target.encode(p, chat=c) for p, c in load_prompts("mtbench,humaneval,gsm", 16)][: 2 * n]
cost = batch_cost.cached(target.runner)
stop = target.stop_rule(64, ())
plain, dspark = build_drafter("plain", target), build_drafter("dspark", target)
arms = [
    ("plain", plain, "fixed", None),
    ("dspark k=0", dspark, "fixed", 0),
    ("dspark confidence", dspark, "confidence", None),
]
for _ in range(2):
    for name, base, schedule, k in arms:
        dec = BatchDecoder(target.runner, n, 640, schedule, cost)
        t0 = time.perf_counter()
        out = batch_generate(dec, prompts, [base.fork() for _ in prompts], stop, k=k)
        seconds = time.perf_counter() - t0
        tokens = sum(len(o[0]) for o in out)
        drafted, accepted = sum(o[2].drafted for o in out), sum(o[2].accepted for o in out)
        overhead = {kind: round(v * 1e3, 2) for kind, v in dec.overhead.items()}
        print(
            f"n={n} {name}: {tokens / seconds:.1f} tok/s, steps {dec.steps}, "
            f"drafted {drafted}, accepted {accepted}"
        )
        print(f"  overhead ms per slot (drafting step: value): {overhead}", flush=True)
