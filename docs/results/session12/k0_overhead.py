"""Issue 9: where DSpark requests that do not draft (k=0), or a confidence-scheduled DSpark batch,
spend time that plain requests do not, at n slots, in process: the two arms interleaved (medians
of REPEATS), then one cProfile pass of each, the functions with the largest own-time difference.
Usage: python docs/results/session12/k0_overhead.py [SLOTS] [k0|confidence]   (nothing else should run)"""

import cProfile
import pstats
import statistics
import sys
import time

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine import batch_cost
from draftsmith.engine.batch_decode import BatchDecoder, batch_generate
from draftsmith.serving.loadtest import load_prompts

REPEATS = 3
n = int(sys.argv[1]) if len(sys.argv) > 1 else 32
mode = sys.argv[2] if len(sys.argv) > 2 else "k0"
target = load_target(dtype="float32")  # the CPU default until session 18
cost = batch_cost.cached(target.runner)
stop = target.stop_rule(64, ())
OTHER = "dspark k=0" if mode == "k0" else "dspark confidence"
arms = {"plain": (build_drafter("plain", target), 0, "fixed")}
k0 = mode == "k0"
arms[OTHER] = (build_drafter("dspark", target), 0 if k0 else None, "fixed" if k0 else mode)
prompts = [target.encode(p, chat=c) for p, c in load_prompts("mtbench,humaneval,gsm,alpaca", n)][:n]


def run(name: str):
    base, k, schedule = arms[name]
    dec = BatchDecoder(target.runner, n, 640, schedule, cost)
    return batch_generate(dec, prompts, [base.fork() for _ in prompts], stop, k=k)


speeds: dict[str, list[float]] = {name: [] for name in arms}
for _ in range(REPEATS):
    for name in arms:
        t0 = time.perf_counter()
        out = run(name)
        speeds[name].append(sum(len(o[0]) for o in out) / (time.perf_counter() - t0))
print(f"## {n} slots, {len(prompts)} prompts x 64 tokens")
for name, runs in speeds.items():
    print(f"{name}: {statistics.median(runs):.1f} tok/s ({' / '.join(f'{r:.1f}' for r in runs)})")
own: dict[str, dict] = {}
for name in arms:
    prof = cProfile.Profile()
    prof.runcall(run, name)
    stats = pstats.Stats(prof).stats
    own[name] = {f"{fn[0].split('/')[-1]}:{fn[1]}:{fn[2]}": (s[0], s[2]) for fn, s in stats.items()}
    print(f"{name}: profiled total {sum(v[1] for v in own[name].values()):.2f} s own time")
ds, pl = own[OTHER], own["plain"]
diff = {f: ds[f][1] - pl.get(f, (0, 0.0))[1] for f in ds}
print("| function | calls (dspark) | own s dspark | own s plain | diff |\n|---|---|---|---|---|")
for f, d in sorted(diff.items(), key=lambda kv: -kv[1])[:30]:
    p = own["plain"].get(f, (0, 0.0))
    print(f"| {f} | {ds[f][0]} | {ds[f][1]:.3f} | {p[1]:.3f} | {d:+.3f} |")
