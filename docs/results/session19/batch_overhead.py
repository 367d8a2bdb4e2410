"""Where scheduled DSpark's few percent below plain at 4-8 users go (issue 9): the same requests
decoded in process by one BatchDecoder (fp32, the server's cost table), plain against
confidence-scheduled DSpark, interleaved, with each step's time split into the gate, drafting,
the forward, verify/commit and the drafters' state feed (accept).
With LOG=1 it then logs two more passes of scheduled DSpark step by step: the kind of step the
gate took (drafted?, running requests), its time and tokens, and the gate's estimates after.
Usage: [LOG=1] python docs/results/session19/batch_overhead.py [users] [rounds] [max_new_tokens]"""

import os
import statistics
import sys
import time
from collections import defaultdict

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine import batch_cost
from draftsmith.engine.batch_decode import BatchDecoder
from draftsmith.engine.decode import StopRule
from draftsmith.serving.loadtest import load_prompts

users = int(sys.argv[1]) if len(sys.argv) > 1 else 8
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
new = int(sys.argv[3]) if len(sys.argv) > 3 else 64
target = load_target(dtype="float32")
cost = batch_cost.cached(target.runner)
prompts = [target.encode(t, chat=c)[:400] for t, c in load_prompts("mtbench,humaneval,gsm,alpaca", 8)]
stop = StopRule(new, frozenset(target.eos_ids))
arms = {"plain": ("plain", "fixed"), "dspark": ("dspark", "confidence")}
drafters = {name: build_drafter(method, target) for name, (method, _) in arms.items()}
decoders = {name: BatchDecoder(target.runner, 32, 640, sched, cost) for name, (_, sched) in arms.items()}
parts: dict[str, dict[str, float]] = {name: defaultdict(float) for name in arms}


def timed(obj, attr, bucket):
    """Wrap obj.attr so its time adds to parts[<current arm>][bucket]."""
    fn = getattr(obj, attr)

    def wrapper(*a, **kw):
        global inside_add
        t0 = time.perf_counter()
        outer = inside_add
        inside_add = inside_add or bucket == "add"
        try:
            return fn(*a, **kw)
        finally:
            inside_add = outer
            if not (outer and bucket == "forward"):
                parts[current][bucket] += time.perf_counter() - t0

    setattr(obj, attr, wrapper)


current = "plain"
inside_add = False
for dec in decoders.values():
    timed(dec, "_drafting_pays", "gate")
    timed(dec, "_propose", "propose")
    timed(dec, "_accept", "accept")
    timed(dec.runner, "forward", "forward")
    timed(dec, "step", "step")
    timed(dec, "add", "add")


def run(name: str) -> tuple[float, int, int]:
    """Decode `users` requests at a time over every prompt (continuous batching); (s, tokens, steps)."""
    global current
    current = name
    dec = decoders[name]
    queue = list(prompts)
    tokens = steps = 0
    t0 = time.perf_counter()
    while queue or dec.running:
        while queue and dec.free_slots and len(dec.running) < users:
            dec.add(queue.pop(0), drafters[name].fork(), stop)
        for r in dec.step():
            tokens += len(r.progress.new)
            dec.remove(r.slot)
        steps += 1
    return time.perf_counter() - t0, tokens, steps


run("plain"), run("dspark")  # warm
for p in parts.values():
    p.clear()
speeds = defaultdict(list)
totals = {name: [0.0, 0, 0] for name in arms}
for _ in range(rounds):
    for name in arms:
        s, n, k = run(name)
        speeds[name].append(n / s)
        for i, v in enumerate((s, n, k)):
            totals[name][i] += v
print(f"{users} users, {len(prompts)} prompts x {new} tokens, {rounds} rounds")
for name in arms:
    s, n, k = totals[name]
    p = parts[name]
    other = p["step"] - p["gate"] - p["propose"] - p["accept"] - p["forward"]
    ms = {key: f"{1e3 * v / k:.2f}" for key, v in p.items()}
    print(
        f"{name}: {statistics.median(speeds[name]):.1f} tok/s "
        f"(rounds {[round(x, 1) for x in speeds[name]]}), "
        f"{n / k:.2f} tok/step, ms/step: step {ms['step']} forward {ms.get('forward')} "
        f"gate {ms.get('gate', 0)} propose {ms.get('propose', 0)} accept {ms.get('accept')} "
        f"rest {1e3 * other / k:.2f}; prefill {ms['add']}"
    )
print(f"dspark / plain: {statistics.median(speeds['dspark']) / statistics.median(speeds['plain']):.3f}")

if os.environ.get("LOG"):
    print(cost.markdown())
    dec = decoders["dspark"]
    log = []
    plain_step = dec._step

    def logged():
        t0 = time.perf_counter()
        before = sum(len(r.progress.new) for r in dec.running.values())
        done, timing = plain_step()
        after = sum(len(r.progress.new) for r in dec.running.values())
        seconds = time.perf_counter() - t0
        log.append((timing[0] if timing else None, len(dec.running), seconds, after - before))
        return done, timing

    dec._step = logged
    for _ in range(2):
        run("dspark")
    groups = defaultdict(list)
    for drafted, b, s, n in log:
        groups[(drafted, b)].append((s, n))
    for key in sorted(groups, key=str):
        v = groups[key]
        ms = 1e3 * statistics.median(s for s, _ in v)
        print(key, len(v), "steps, ms", round(ms, 2), "tok/step", round(sum(n for _, n in v) / len(v), 2))
    print("kept", dec.kept, "draft_time", {k: list(t.calls)[-3:] for k, t in dec.draft_time.items()})
    print("forecast_error", dec.forecast_error, "cost_scale", dec.cost_scale)
