"""Issue 9: why a fresh confidence-scheduled DSpark decoder declines to draft at one user.
Runs N requests (64 tokens) one at a time through one 32-slot decoder, as a fresh server's first
traffic, and logs the gate's state before each non-explore step: its forecast parts (drafting
time fitted so far, per-slot overheads, table scale, forecast corrections) and the decision.
Usage: python docs/results/session16/gate_trace.py OUT.jsonl [N] [USERS]   (alone)"""

import json
import sys
import time

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine import batch_cost
from draftsmith.engine.batch_decode import BatchDecoder, load
from draftsmith.serving.loadtest import load_prompts

out, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 12
users = int(sys.argv[3]) if len(sys.argv) > 3 else 1
target = load_target(dtype="float32")  # the CPU default until session 18
cost = batch_cost.cached(target.runner)
drafter = build_drafter("dspark", target)
dec = BatchDecoder(target.runner, 32, 640, "confidence", cost)
pool = [target.encode(p, chat=c) for p, c in load_prompts("mtbench,humaneval,gsm", n)][:n]
stop = target.stop_rule(64, ())
queue = list(pool)
with open(out, "w") as f:
    while queue or dec.running:
        while queue and len(dec.running) < users:
            dec.add(list(queue.pop(0)), drafter.fork(), stop)
        runs = list(dec.running.values())
        b = len(runs)
        explore = dec.steps + 1 >= dec._explore_at
        est = None if explore else dec.drafting_estimate(runs)
        dt = dec.draft_time.get("dspark")
        state = {
            "step": dec.steps + 1,
            "b": b,
            "explore": explore,
            "drafting_before": dec._drafting,
            "est": est,
            "draft_time_calls": None if dt is None else [(k, round(s * 1e3, 2)) for k, s in dt.calls][-4:],
            "draft_time_3": None if dt is None else round(dt(4) * 1e3, 2),
            "overhead": {str(k): round(v * 1e3, 2) for k, v in dec.overhead.items() if k[1] == load(b)},
            "scale": {str(k): round(v, 3) for k, v in dec.cost_scale.items() if k[1] == load(b)},
            "error": {str(k): round(v, 3) for k, v in dec.forecast_error.items() if k[1] == load(b)},
            "kept": [None if r.kept is None else round(r.kept, 3) for r in runs],
            "kept_m": dec.kept.get("dspark"),
        }
        before = sum(len(r.progress.new) for r in runs)
        drafted = sum(r.stats.drafted for r in runs)
        t0 = time.perf_counter()
        for run in dec.step():
            dec.remove(run.slot)
        state["seconds"] = round((time.perf_counter() - t0) * 1e3, 2)
        state["tokens"] = sum(len(r.progress.new) for r in runs) - before
        state["drafted"] = sum(r.stats.drafted for r in runs) - drafted
        state["drafting_after"] = dec._drafting
        f.write(json.dumps(state, default=lambda v: round(v, 5)) + "\n")
