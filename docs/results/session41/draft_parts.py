"""Drafting time a round split into its parts (wall clock, the shipped DSpark or DFlash, default
mode): decode bench prompts and time each part of `propose` by wrapping the model's methods.
Usage: [INT8=1 [MIN=N]] python docs/results/session41/draft_parts.py [METHOD] [SUITE] [N_PROMPTS]
"""

import os
import sys
import time
from collections import defaultdict

import torch

from draftsmith.drafters.dflash import drafter as dmod
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import speculative_generate
from draftsmith.evaluation.suites import load_suite
from draftsmith.models.target import Target

method = sys.argv[1] if len(sys.argv) > 1 else "dspark"
suite = sys.argv[2] if len(sys.argv) > 2 else "gsm"
n = int(sys.argv[3]) if len(sys.argv) > 3 else 3
target = Target.load(None)
drafter = build_drafter(method, target)
prompts = [target.encode(p.text, chat=p.chat) for p in load_suite(suite, n)]
spent: dict[str, float] = defaultdict(float)


def timed(obj, name, label):
    if not hasattr(obj, name):
        return
    if isinstance(getattr(obj, name), torch.nn.Module):  # time the module's forward
        obj, name = getattr(obj, name), "forward"
    fn = getattr(obj, name)

    def wrapper(*a, **kw):
        t = time.perf_counter()
        out = fn(*a, **kw)
        spent[label] += time.perf_counter() - t
        return out

    setattr(obj, name, staticmethod(wrapper) if isinstance(obj, type) else wrapper)


m = drafter.model
if os.environ.get("INT8"):  # int8 weights (int8_drafter.py): MIN = the smallest weight swapped
    sys.path.insert(0, os.path.dirname(__file__))
    from int8_drafter import to_int8

    to_int8(m, int(os.environ.get("MIN", "0")))
timed(type(drafter), "propose_batch", "propose (all)")
timed(type(drafter), "flush", "flush (project new states)")
timed(dmod, "slot_guesses", "lookup guesses")
timed(m, "backbone", "backbone (block pass)")
timed(m, "base_logits", "base logits (head)")
timed(m, "markov_in", "markov_in")
timed(m, "markov_bias", "markov bias")
timed(m, "confidence_logit", "confidence")
for ids in prompts:  # warm-up
    speculative_generate(target.runner, drafter, ids, target.stop_rule(128))
spent.clear()
rounds = draft_s = verify_s = 0.0
for ids in prompts:
    res = speculative_generate(target.runner, drafter, ids, target.stop_rule(128))
    rounds += res.stats.rounds
    draft_s += res.stats.draft_s
    verify_s += res.stats.verify_s
print(
    f"{method} {suite}: {int(rounds)} rounds, engine drafting {1000 * draft_s / rounds:.3f} ms a round, "
    f"verification {1000 * verify_s / rounds:.2f} ms, tau {res.stats.tau:.2f} (last prompt)"
)
for label, s in spent.items():
    print(f"  {label:28s} {1000 * s / rounds:.3f} ms a round")
