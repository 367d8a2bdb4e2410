"""Issue 9: at n slots in process, plain against DSpark with a fixed draft of 2 and DSpark
scheduled by confidence; tok/s, seconds drafting and verifying, CPU user/sys time. Usage:
python docs/results/session9/two_slots.py 2"""

import resource
import sys
import time

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine import batch_cost
from draftsmith.engine.batch_decode import BatchDecoder, batch_generate
from draftsmith.serving.loadtest import load_prompts

n = int(sys.argv[1])
target = load_target(dtype="float32")  # the CPU default until session 18
prompts = [target.encode(p, chat=c) for p, c in load_prompts("mtbench,humaneval,gsm,alpaca", 4)][: 2 * n]
cost = batch_cost.cached(target.runner)
print(
    "table cost(2,1..4)",
    [round(cost(2, r) * 1e3, 1) for r in range(1, 5)],
    "cost(1,1..4)",
    [round(cost(1, r) * 1e3, 1) for r in range(1, 5)],
)
stop = target.stop_rule(64, ())
plain, dspark = build_drafter("plain", target), build_drafter("dspark", target)
for _rep in range(2):
    for name, base, schedule, k in [
        ("plain", plain, "fixed", None),
        ("dspark k=2", dspark, "fixed", 2),
        ("dspark conf", dspark, "confidence", None),
    ]:
        dec = BatchDecoder(target.runner, n, 640, schedule, cost)
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        out = batch_generate(dec, prompts, [base.fork() for _ in prompts], stop, k=k)
        s = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        tok = sum(len(o[0]) for o in out)
        d = sum(o[2].draft_s for o in out)
        v = sum(o[2].verify_s for o in out)
        acc = sum(o[2].accepted for o in out)
        dr = sum(o[2].drafted for o in out)
        cpu = f"user {r1.ru_utime - r0.ru_utime:.1f} s, sys {r1.ru_stime - r0.ru_stime:.1f} s"
        print(
            f"{name}: {tok / s:.1f} tok/s, steps {dec.steps}, drafting {d:.2f} s, verifying {v:.2f} s, "
            f"total {s:.2f} s, drafted {dr}, accepted {acc}, {cpu}",
            flush=True,
        )
