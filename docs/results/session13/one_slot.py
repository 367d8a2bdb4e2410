"""Issue 9, one user: where does the server lose to `generate`? In process, no HTTP: plain decoding
through the serial engine (what `draftsmith generate` runs) against the batched engine with a
32-slot cache and one request at a time (what `serve --max-batch 32` runs at concurrency 1), on the
server check's prompts (16 x 64 tokens), interleaved round by round. Prints tok/s per arm.

Usage: python docs/results/session13/one_slot.py [ROUNDS] [METHOD]"""

import statistics
import sys
import time

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.batch_decode import BatchDecoder, batch_generate
from draftsmith.engine.decode import speculative_generate
from draftsmith.serving.loadtest import load_prompts

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
METHOD = sys.argv[2] if len(sys.argv) > 2 else "plain"
N, TOKENS = 16, 64
target = load_target(dtype="float32")  # the CPU default until session 18
texts = load_prompts("mtbench,humaneval,gsm", N)[:N]
prompts = [target.encode(text, chat) for text, chat in texts]
drafter = build_drafter(METHOD, target)
decoder = BatchDecoder(target.runner, 32, 640, "fixed")
stop = target.stop_rule(TOKENS, ())
rows = {"serial": [], "batched-32": []}
for r in range(ROUNDS):
    for arm in rows:
        tokens, t0 = 0, time.perf_counter()
        for ids in prompts:
            if arm == "serial":
                tokens += len(speculative_generate(target.runner, drafter.fork(), ids, stop).tokens)
            else:
                tokens += len(batch_generate(decoder, [list(ids)], [drafter.fork()], stop)[0][0])
        rows[arm].append(tokens / (time.perf_counter() - t0))
        print(f"round {r} {arm}: {rows[arm][-1]:.1f} tok/s", flush=True)
for arm, speeds in rows.items():
    print(f"{arm}: median {statistics.median(speeds):.1f} tok/s over {ROUNDS} rounds")
ratio = statistics.median(b / s for b, s in zip(rows["batched-32"], rows["serial"], strict=True))
print(f"batched / serial, median of per-round ratios: {ratio:.3f}")
