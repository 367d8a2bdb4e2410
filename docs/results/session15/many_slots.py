"""Issue 9, many users, in process: what a scheduled DSpark request costs when it does not draft.
32 prompts (the load test's suites) decoded together through one batched decoder with a 32-slot
cache, 64 tokens each: plain (fixed) against DSpark (confidence), interleaved, ROUNDS rounds; then
one cProfile of each arm, top functions by own time.
Usage: python docs/results/session15/many_slots.py [ROUNDS] [SLOTS]   (alone)"""

import cProfile
import io
import pstats
import statistics
import sys
import time

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.batch_decode import BatchDecoder, batch_generate
from draftsmith.serving.loadtest import load_prompts

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
slots = int(sys.argv[2]) if len(sys.argv) > 2 else 32
target = load_target(dtype="float32")  # the CPU default until session 18
texts = (load_prompts("mtbench,humaneval,gsm,alpaca", slots) * 2)[:slots]
ids = [list(target.encode(t, c)) for t, c in texts]
drafters = {m: build_drafter(m, target) for m in ("plain", "dspark")}
decoders = {
    "plain": BatchDecoder(target.runner, slots, 640, "fixed"),
    "dspark": BatchDecoder(target.runner, slots, 640, "confidence"),
}
stop = target.stop_rule(64, ())


def arm(method: str):
    return batch_generate(decoders[method], ids, [drafters[method].fork() for _ in ids], stop)


speeds: dict[str, list[float]] = {m: [] for m in decoders}
for r in range(rounds):
    for m in decoders:
        t0 = time.perf_counter()
        out = arm(m)
        wall = time.perf_counter() - t0
        n = sum(len(toks) for toks, _, _ in out)
        drafted = sum(s.drafted for _, _, s in out) / max(sum(s.rounds for _, _, s in out), 1)
        speeds[m].append(n / wall)
        print(
            f"round {r} {m}: {n / wall:.1f} tok/s ({n} tokens, {decoders[m].steps} steps so far), "
            f"drafted {drafted:.3f} a round",
            flush=True,
        )
ratio = statistics.median(d / p for d, p in zip(speeds["dspark"], speeds["plain"], strict=True))
print(
    f"medians: plain {statistics.median(speeds['plain']):.1f}, "
    f"dspark {statistics.median(speeds['dspark']):.1f} tok/s; "
    f"median per-round ratio {ratio:.3f}"
)
for m in decoders:
    prof = cProfile.Profile()
    prof.enable()
    arm(m)
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(18)
    print(f"\n=== profile {m} ===\n" + "\n".join(s.getvalue().splitlines()[:45]))
