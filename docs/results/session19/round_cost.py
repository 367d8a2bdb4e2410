"""Where a single-request DSpark round's time goes in the default mode (issue 8): decode the first
prompts of each bench suite with the shipped DSpark and split the round into the drafter's context
feed (flush), the block pass, the Markov walk and the rest of `propose`, the verify forward and the
engine's own work; then a cProfile of the same runs by function (cumulative, top 30).
With a third argument "quick" it skips the profile (for A/B runs of two code versions).
Usage: python docs/results/session19/round_cost.py [prompts per suite] [max_new_tokens] [quick]"""

import cProfile
import pstats
import sys
import time
from collections import defaultdict

from draftsmith.api import load_target
from draftsmith.drafters.dflash.drafter import DFlashDrafter
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.evaluation.suites import load_suite

per_suite = int(sys.argv[1]) if len(sys.argv) > 1 else 3
new = int(sys.argv[2]) if len(sys.argv) > 2 else 128
target = load_target()
print(f"fixed_rows {target.runner.fixed_rows}")
drafter = build_drafter("dspark", target)
prompts = [
    target.encode(p.text, chat=p.chat)[:400]
    for suite in ("humaneval", "gsm", "mtbench", "alpaca")
    for p in load_suite(suite, per_suite)
]
stop = StopRule(new, frozenset(target.eos_ids))
parts: dict[str, float] = defaultdict(float)


def timed(owner, attr, bucket):
    fn = getattr(owner, attr)

    def wrapper(*a, **kw):
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            parts[bucket] += time.perf_counter() - t0

    setattr(owner, attr, staticmethod(wrapper) if isinstance(owner, type) else wrapper)


def decode_all():
    rounds = tokens = 0
    draft_s = verify_s = total = 0.0
    for ids in prompts:
        r = speculative_generate(target.runner, drafter.fork(), ids, stop)
        rounds += r.stats.rounds
        tokens += r.stats.new_tokens
        draft_s += r.stats.draft_s
        verify_s += r.stats.verify_s
        total += r.stats.total_s - r.stats.prefill_s
    return rounds, tokens, draft_s, verify_s, total


decode_all()  # warm
m = drafter.model
timed(DFlashDrafter, "_append_all", "feed")
timed(m, "backbone", "block pass")
timed(m, "base_logits", "base logits")
rounds, tokens, draft_s, verify_s, total = decode_all()
print(f"{len(prompts)} prompts x {new} tokens: {rounds} rounds, "
      f"tau {tokens / rounds:.2f}, {tokens / total:.1f} tok/s")
ms = {k: 1e3 * v / rounds for k, v in parts.items()}
print(
    f"ms per round: total {1e3 * total / rounds:.2f} = draft {1e3 * draft_s / rounds:.2f} "
    f"(feed {ms['feed']:.2f}, block pass {ms['block pass']:.2f}, base logits {ms['base logits']:.2f}, "
    f"walk and rest {1e3 * draft_s / rounds - sum(ms.values()):.2f}) + verify {1e3 * verify_s / rounds:.2f} "
    f"+ engine {1e3 * (total - draft_s - verify_s) / rounds:.2f}"
)
if sys.argv[3:4] == ["quick"]:
    sys.exit(0)
prof = cProfile.Profile()
prof.enable()
decode_all()
prof.disable()
pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
