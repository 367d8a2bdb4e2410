"""Issue 9 in process, no HTTP: plain, confidence-scheduled DSpark and fixed-k DSpark through the
batched engine at a few slot counts (N prompts at a time, 64 new tokens), alternating, ROUNDS
rounds; total tok/s and drafted tokens per request-round. Isolates the gate from serving costs.
Usage: python docs/results/session13/gate_inprocess.py [SLOTS=1,4] [ROUNDS=2]   (alone)"""

import statistics
import sys
import time

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine import batch_cost
from draftsmith.engine.batch_decode import BatchDecoder, batch_generate
from draftsmith.serving.loadtest import load_prompts

levels = [int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "1,4").split(",")]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
target = load_target(dtype="float32")  # the CPU default until session 18
cost = batch_cost.cached(target.runner)
drafters = {"plain": build_drafter("plain", target), "dspark": build_drafter("dspark", target)}
arms = {"plain": ("plain", "fixed"), "dspark": ("dspark", "confidence"), "dspark-fixed": ("dspark", "fixed")}
texts = load_prompts("mtbench,humaneval,gsm,alpaca", 16)[:16]
prompts = [target.encode(t, chat=c) for t, c in texts]
stop = target.stop_rule(64, ())
speed: dict = {}
for r in range(rounds):
    for n in levels:
        for arm, (method, schedule) in arms.items():
            dec = BatchDecoder(target.runner, n, 640, schedule, cost)
            t0 = time.perf_counter()
            out = batch_generate(dec, prompts, [drafters[method].fork() for _ in prompts], stop)
            seconds = time.perf_counter() - t0
            tokens = sum(len(t) for t, _, _ in out)
            rounds_ = sum(s.rounds for _, _, s in out)
            drafted = sum(s.drafted for _, _, s in out) / max(rounds_, 1)
            speed.setdefault((n, arm), []).append(tokens / seconds)
            line = f"round {r} slots {n} {arm}: {tokens / seconds:.1f} tok/s, drafted/round {drafted:.2f}"
            print(line, flush=True)
for (n, arm), v in speed.items():
    mid, base = statistics.median(v), statistics.median(speed[(n, "plain")])
    print(f"slots {n} {arm}: median {mid:.1f} tok/s, {mid / base:.2f}x plain")
