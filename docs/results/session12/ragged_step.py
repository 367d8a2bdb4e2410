"""Issue 9: a ragged batched step (some requests verify drafts, others one token; idle slots in the
range) with matmuls on every padded row, as before, against matmuls on the real rows only (now).
In process, n slots: plain and confidence-scheduled DSpark, each padded and packed; arms interleaved,
medians of REPEATS, outputs checked identical to plain.
Usage: python docs/results/session12/ragged_step.py [SLOTS ...]   (nothing else should run)"""

import statistics
import sys
import time

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine import batch_cost
from draftsmith.engine.batch_decode import BatchDecoder, batch_generate
from draftsmith.engine.lean_llama import LeanLlamaRunner
from draftsmith.serving.loadtest import load_prompts

REPEATS, TOKENS = 3, 128
target = load_target(dtype="float32")  # the CPU default until session 18
cost = batch_cost.cached(target.runner)
stop = target.stop_rule(TOKENS, ())
packed_decoder = LeanLlamaRunner.decoder


def padded_decoder(self, *args, **kwargs):
    """The decoder as it ran before: every padded row through every matmul."""
    args = args[:8]  # drop `real`
    kwargs.pop("real", None)
    return packed_decoder(self, *args, **kwargs)


plain, dspark = build_drafter("plain", target), build_drafter("dspark", target)
arms = [("plain", plain, packed_decoder), ("plain, padded", plain, padded_decoder)]
arms += [("dspark confidence, padded", dspark, padded_decoder)]
arms += [("dspark confidence, packed", dspark, packed_decoder)]
for n in [int(a) for a in sys.argv[1:]] or [32]:
    prompts = [target.encode(p, chat=c) for p, c in load_prompts("mtbench,humaneval,gsm,alpaca", n)][:n]
    speeds: dict[str, list[float]] = {name: [] for name, *_ in arms}
    outputs: dict[str, list] = {}
    for _ in range(REPEATS):
        for name, base, decoder in arms:
            LeanLlamaRunner.decoder = decoder
            schedule = "fixed" if name.startswith("plain") else "confidence"
            dec = BatchDecoder(target.runner, n, 640, schedule, cost)
            t0 = time.perf_counter()
            out = batch_generate(dec, prompts, [base.fork() for _ in prompts], stop)
            speeds[name].append(sum(len(o[0]) for o in out) / (time.perf_counter() - t0))
            outputs.setdefault(name, [o[0] for o in out])
    LeanLlamaRunner.decoder = packed_decoder
    same = all(v == outputs["plain"] for v in outputs.values())
    head = f"## {n} slots, {len(prompts)} prompts x {TOKENS} tokens, {REPEATS} repeats"
    print(f"{head}; identical to plain: {same}")
    print("| arm | tok/s median | runs | vs plain |\n|---|---|---|---|")
    base_speed = statistics.median(speeds["plain"])
    for name, runs in speeds.items():
        med = statistics.median(runs)
        print(f"| {name} | {med:.1f} | {' / '.join(f'{r:.1f}' for r in runs)} | {med / base_speed:.2f}x |")
    print(flush=True)
