"""Issue 9: the drafting gate's forecast against what the steps then did. Confidence-scheduled
DSpark decodes n prompts at n slots in process; before every step the gate's estimate
(`BatchDecoder.drafting_estimate`: expected tokens and seconds of a drafting step and of a plain
one) is logged, then the step's real tokens and seconds. Grouped by the kind of step taken.
Usage: python docs/results/session12/gate_log.py [SLOTS] [TOKENS]   (nothing else should run)"""

import statistics
import sys
import time

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine import batch_cost
from draftsmith.engine.batch_decode import BatchDecoder, batch_generate
from draftsmith.serving.loadtest import load_prompts

n = int(sys.argv[1]) if len(sys.argv) > 1 else 16
tokens = int(sys.argv[2]) if len(sys.argv) > 2 else 128
target = load_target(dtype="float32")  # the CPU default until session 18
dspark = build_drafter("dspark", target)
prompts = [target.encode(p, chat=c) for p, c in load_prompts("mtbench,humaneval,gsm,alpaca", n)][:n]
dec = BatchDecoder(target.runner, n, 640, "confidence", batch_cost.cached(target.runner))
rows = []
step = dec.step


def logged_step():
    runs = list(dec.running.values())
    explore = dec.steps + 1 >= dec._explore_at
    est = dec.drafting_estimate(runs) if runs and not explore else None
    before = sum(len(r.progress.new) for r in runs)
    drafted = sum(r.stats.drafted for r in runs)
    t0 = time.perf_counter()
    done = step()
    seconds = time.perf_counter() - t0
    kind = "explore" if explore else ("drafting" if sum(r.stats.drafted for r in runs) > drafted else "plain")
    made = sum(len(r.progress.new) for r in runs) - before
    rows.append({"b": len(runs), "kind": kind, "est": est, "tokens": made, "seconds": seconds})
    return done


dec.step = logged_step
batch_generate(dec, prompts, [dspark.fork() for _ in prompts], target.stop_rule(tokens, ()))
print(f"## {n} prompts x {tokens} tokens at {n} slots, DSpark --schedule confidence")
print("| steps taken | n | tokens/step | s/step | tok/s | forecast drafting tok/s | forecast plain tok/s |")
print("|---|---|---|---|---|---|---|")
for kind in ("plain", "drafting", "explore"):
    mine = [r for r in rows if r["kind"] == kind and r["b"] == n]
    if not mine:
        continue
    tok = statistics.mean(r["tokens"] for r in mine)
    sec = statistics.median(r["seconds"] for r in mine)
    ests = [r["est"] for r in mine if r["est"]]
    fd = statistics.median(e[0] / e[1] for e in ests) if ests else float("nan")
    fp = statistics.median(e[2] / e[3] for e in ests) if ests else float("nan")
    cells = f"{len(mine)} | {tok:.2f} | {sec:.4f} | {tok / sec:.1f} | {fd:.1f} | {fp:.1f}"
    print(f"| {kind} (all {n} slots busy) | {cells} |")
ests = [r["est"] for r in rows if r["est"] and r["kind"] == "drafting" and r["b"] == n]
if ests:
    mean_tokens, sec = statistics.mean(e[0] for e in ests), statistics.median(e[1] for e in ests)
    print(f"forecast on drafting steps: expected tokens {mean_tokens:.2f}, seconds {sec:.4f}, "
          f"depth {statistics.median(e[4] for e in ests)}")
