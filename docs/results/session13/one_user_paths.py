"""Issue 9, one user, in process: `generate` (the API `draftsmith generate` runs), the
single-request loop called directly (`speculative_generate`), and the batched decoder with a
32-slot cache at one request, on the server check's prompts (16 x 64 tokens, plain), interleaved,
ROUNDS rounds. Usage: python docs/results/session13/one_user_paths.py [ROUNDS]   (alone)"""

import statistics
import sys
import time

from draftsmith.api import generate, load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.batch_decode import BatchDecoder, batch_generate
from draftsmith.engine.decode import speculative_generate
from draftsmith.serving.loadtest import load_prompts

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
target = load_target(dtype="float32")  # the CPU default until session 18
texts = load_prompts("mtbench,humaneval,gsm", 16)[:16]
ids = [target.encode(t, c) for t, c in texts]
plain = build_drafter("plain", target)
decoder = BatchDecoder(target.runner, 32, 640, "fixed")
stop = target.stop_rule(64, ())


def api() -> int:
    return sum(len(generate(target, t, plain.fork(), max_new_tokens=64, chat=c).tokens) for t, c in texts)


def loop() -> int:
    return sum(len(speculative_generate(target.runner, plain.fork(), p, stop).tokens) for p in ids)


def batched() -> int:
    return sum(len(batch_generate(decoder, [list(p)], [plain.fork()], stop)[0][0]) for p in ids)


arms = {"generate": api, "loop": loop, "batched-32": batched}
speeds: dict[str, list[float]] = {a: [] for a in arms}
for r in range(rounds):
    for name, fn in arms.items():
        t0 = time.perf_counter()
        n = fn()
        speeds[name].append(n / (time.perf_counter() - t0))
        print(f"round {r} {name}: {speeds[name][-1]:.1f} tok/s ({n} tokens)", flush=True)
for name, v in speeds.items():
    print(f"{name}: median {statistics.median(v):.1f} tok/s")
