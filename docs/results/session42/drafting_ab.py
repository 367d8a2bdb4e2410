"""Drafting ms a round, A/B, interleaved: the shipped DSpark/DFlash drafter with the general walk and
separate q/k/v weights (before session 42) against the lean greedy walk and fused weights, on the
same prompts, alternating per prompt, repeated; prints each arm's median drafting ms a round and
checks that every arm wrote the same tokens.
Usage: python docs/results/session42/drafting_ab.py [METHOD] [N_PROMPTS_PER_SUITE] [REPEATS]
(METHOD: dspark, dflash or hybrid)
"""

import statistics
import sys

from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import speculative_generate
from draftsmith.evaluation.suites import load_suite
from draftsmith.models.target import Target

method = sys.argv[1] if len(sys.argv) > 1 else "dspark"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 3
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 2
target = Target.load(None)
prompts = [target.encode(p.text, chat=p.chat) for s in ("gsm", "humaneval") for p in load_suite(s, n)]


def arm(lean: bool, fused: bool):
    d = build_drafter(method, target)
    learned = getattr(d, "learned", d)  # the hybrid drafts its non-lookup rounds with its DSpark
    learned.lean_walk = lean
    if not fused:
        for layer in learned.model.layers:
            layer.qkv_packed = layer.kv_packed = None
    return d


arms = {"before": arm(False, False), "fused": arm(False, True), "lean+fused": arm(True, True)}
ms: dict[str, list[float]] = {a: [] for a in arms}
tok_ms: dict[str, list[float]] = {a: [] for a in arms}
outs: dict[str, list] = {a: [] for a in arms}
for ids in prompts[:1]:  # warm-up
    for d in arms.values():
        speculative_generate(target.runner, d, ids, target.stop_rule(128))
for r in range(repeats):
    for i, ids in enumerate(prompts):
        order = list(arms) if (i + r) % 2 == 0 else list(reversed(arms))
        for a in order:
            res = speculative_generate(target.runner, arms[a], ids, target.stop_rule(128))
            ms[a].append(1000 * res.stats.draft_s / res.stats.rounds)
            tok_ms[a].append(1000 * res.stats.total_s / max(1, res.stats.new_tokens))
            if r == 0:
                outs[a].append(res.tokens)
same = all(outs[a] == outs["before"] for a in arms)
print(
    f"{method}: {len(prompts)} prompts (gsm, humaneval) x {repeats} repeats, 128 tokens; "
    f"identical outputs: {same}"
)
print("| arm | drafting ms a round, median (min-max) | ms a token, median |")
print("|---|---|---|")
for a in arms:
    print(
        f"| {a} | {statistics.median(ms[a]):.2f} ({min(ms[a]):.2f}-{max(ms[a]):.2f}) | "
        f"{statistics.median(tok_ms[a]):.2f} |"
    )
