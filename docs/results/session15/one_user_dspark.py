"""Issue 9, one user, in process: where scheduled DSpark in the server loses to `generate`.
`generate` (the single-request loop, history schedule, what `draftsmith generate` runs) against the
batched decoder with a 32-slot cache at one request under each schedule (fixed, history,
confidence), and plain through both paths, on the server check's prompts (16 x 64 tokens),
interleaved, ROUNDS rounds; per arm tok/s, drafted tokens and tokens per verify round, and the
seconds spent drafting and verifying (GenerationStats).
Usage: python docs/results/session15/one_user_dspark.py [ROUNDS]   (alone)"""

import statistics
import sys
import time

from draftsmith.api import generate, load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine import batch_cost
from draftsmith.engine.batch_decode import BatchDecoder, batch_generate
from draftsmith.serving.loadtest import load_prompts

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
target = load_target(dtype="float32")  # the CPU default until session 18
texts = load_prompts("mtbench,humaneval,gsm", 16)[:16]
ids = [target.encode(t, c) for t, c in texts]
drafters = {m: build_drafter(m, target) for m in ("plain", "dspark")}
cost = batch_cost.cached(target.runner)  # as `serve` does: the schedules need the table
decoders = {s: BatchDecoder(target.runner, 32, 640, s, cost) for s in ("fixed", "history", "confidence")}
stop = target.stop_rule(64, ())


def api(method: str):
    return [generate(target, t, drafters[method].fork(), max_new_tokens=64, chat=c).stats for t, c in texts]


def batched(method: str, schedule: str):
    dec = decoders[schedule]
    return [batch_generate(dec, [list(p)], [drafters[method].fork()], stop)[0][2] for p in ids]


arms = {
    "plain generate": lambda: api("plain"),
    "plain batched": lambda: batched("plain", "fixed"),
    "dspark generate": lambda: api("dspark"),
    "dspark batched fixed": lambda: batched("dspark", "fixed"),
    "dspark batched history": lambda: batched("dspark", "history"),
    "dspark batched confidence": lambda: batched("dspark", "confidence"),
}
speeds: dict[str, list[float]] = {a: [] for a in arms}
for r in range(rounds):
    for name, fn in arms.items():
        t0 = time.perf_counter()
        stats = fn()
        wall = time.perf_counter() - t0
        n = sum(s.new_tokens for s in stats)
        rounds_ = sum(s.rounds for s in stats) or 1
        speeds[name].append(n / wall)
        drafted = sum(s.drafted for s in stats) / rounds_
        produced = sum(s.produced for s in stats) / rounds_
        draft_s, verify_s = sum(s.draft_s for s in stats), sum(s.verify_s for s in stats)
        print(
            f"round {r} {name}: {n / wall:.1f} tok/s ({n} tokens), drafted {drafted:.2f} and "
            f"{produced:.2f} tokens a round, draft {draft_s:.2f} s, verify {verify_s:.2f} s, "
            f"wall {wall:.2f} s",
            flush=True,
        )
for name, v in speeds.items():
    ratio = statistics.median(x / y for x, y in zip(v, speeds["plain generate"], strict=True))
    print(
        f"{name}: median {statistics.median(v):.1f} tok/s, median per-round ratio to plain generate "
        f"{ratio:.3f}"
    )
