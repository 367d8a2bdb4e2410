"""Where a DSpark/DFlash round's drafting time goes, op by op (torch.profiler over real decoding):
decode bench prompts with the shipped drafter, then profile `propose` (with its flush) for a few
more prompts and print the op count a round and the top ops by self CPU time.
Usage: python docs/results/session42/propose_profile.py [METHOD] [SUITE] [N_PROMPTS]
"""

import sys

import torch
from torch.profiler import ProfilerActivity, profile

from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import speculative_generate
from draftsmith.evaluation.suites import load_suite
from draftsmith.models.target import Target

method = sys.argv[1] if len(sys.argv) > 1 else "dspark"
suite = sys.argv[2] if len(sys.argv) > 2 else "gsm"
n = int(sys.argv[3]) if len(sys.argv) > 3 else 2
target = Target.load(None)
drafter = build_drafter(method, target)
prompts = [target.encode(p.text, chat=p.chat) for p in load_suite(suite, n)]
for ids in prompts:  # warm-up
    speculative_generate(target.runner, drafter, ids, target.stop_rule(128))

inner = type(drafter).propose_batch.__func__


def wrapped(cls, *a, **kw):
    with torch.profiler.record_function("propose"):
        return inner(cls, *a, **kw)


type(drafter).propose_batch = classmethod(wrapped)
rounds = 0
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for ids in prompts:
        res = speculative_generate(target.runner, drafter, ids, target.stop_rule(128))
        rounds += res.stats.rounds
by_op: dict[str, list[float]] = {}
total = 0.0


def walk(e) -> None:
    for c in e.cpu_children:
        if c.name.startswith("aten::") or c.name.startswith("mkldnn::"):
            rec = by_op.setdefault(c.name, [0, 0.0])
            rec[0] += 1
            rec[1] += c.self_cpu_time_total
        walk(c)


for e in prof.events():
    if e.name == "propose":
        total += e.cpu_time_total
        walk(e)
calls = sum(v[0] for v in by_op.values())
print(
    f"{method} {suite}: {rounds} rounds, propose {total / rounds / 1000:.3f} ms a round (profiled), "
    f"{calls / rounds:.0f} op calls a round (all levels)"
)
print("| op | calls a round | self ms a round |")
print("|---|---|---|")
for name, (c, t) in sorted(by_op.items(), key=lambda kv: -kv[1][1])[:25]:
    print(f"| {name} | {c / rounds:.1f} | {t / rounds / 1000:.3f} |")
