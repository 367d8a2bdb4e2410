"""Issue 9: what DSpark's context feed costs on rounds that do not draft, before and after queueing
accepted states until a request drafts. In process, at n slots: plain, DSpark that never drafts
(k=0) and confidence-scheduled DSpark, each with the feed immediate (MAX_QUEUED=1, the old
behaviour) and queued (the default); arms interleaved, medians of the repeats.
Usage: python docs/results/session10/deferred_feed.py [SLOTS ...]   (nothing else should run)"""

import statistics
import sys
import time

import draftsmith.drafters.base as drafter_base
from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine import batch_cost
from draftsmith.engine.batch_decode import BatchDecoder, batch_generate
from draftsmith.serving.loadtest import load_prompts

REPEATS = 3
QUEUED = drafter_base.MAX_QUEUED
target = load_target(dtype="float32")  # the CPU default until session 18
cost = batch_cost.cached(target.runner)
stop = target.stop_rule(64, ())
plain, dspark = build_drafter("plain", target), build_drafter("dspark", target)
arms = [
    ("plain", plain, "fixed", None, QUEUED),
    ("dspark k=0, fed every round", dspark, "fixed", 0, 1),
    ("dspark k=0, queued", dspark, "fixed", 0, QUEUED),
    ("dspark confidence, fed every round", dspark, "confidence", None, 1),
    ("dspark confidence, queued", dspark, "confidence", None, QUEUED),
]
for n in [int(a) for a in sys.argv[1:]] or [2, 4]:
    prompts = [target.encode(p, chat=c) for p, c in load_prompts("mtbench,humaneval,gsm,alpaca", 4)][: 2 * n]
    speeds: dict[str, list[float]] = {name: [] for name, *_ in arms}
    outputs: dict[str, list] = {}
    for _rep in range(REPEATS):
        for name, base, schedule, k, pending in arms:
            drafter_base.MAX_QUEUED = pending
            dec = BatchDecoder(target.runner, n, 640, schedule, cost)
            t0 = time.perf_counter()
            out = batch_generate(dec, prompts, [base.fork() for _ in prompts], stop, k=k)
            seconds = time.perf_counter() - t0
            speeds[name].append(sum(len(o[0]) for o in out) / seconds)
            outputs.setdefault(name, [o[0] for o in out])
    same = all(v == outputs["plain"] for v in outputs.values())
    head = f"## {n} slots, {len(prompts)} prompts x 64 tokens, {REPEATS} repeats"
    print(f"{head}; outputs identical to plain: {same}")
    print("| arm | tok/s median | runs | vs plain |\n|---|---|---|---|")
    base_speed = statistics.median(speeds["plain"])
    for name, runs in speeds.items():
        med = statistics.median(runs)
        print(f"| {name} | {med:.1f} | {' / '.join(f'{r:.1f}' for r in runs)} | {med / base_speed:.2f}x |")
    print(flush=True)
