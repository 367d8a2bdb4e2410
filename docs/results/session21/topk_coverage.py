"""What a draft tree could add to DSpark (issue 8): during real greedy DSpark decoding (3 drafts a
round, the default mode) record, for each draft slot of each round, the rank of the target's own
token among the drafter's candidates, where slot s >= 1 is conditioned (through the Markov head) on
the drafter's argmax at the slots before it. The final output is the target's greedy text, so the
token each slot should have drafted is known afterwards. Also records, for slot 0, the rank of the
target's token at slot 1 when the chain is re-walked from the 2nd/3rd candidate at slot 0 (the
Markov head only: the block pass does not depend on drafted tokens), i.e. what a branch would give.
Usage: python docs/results/session21/topk_coverage.py [prompts per suite] [max_new_tokens]"""

import sys
from collections import Counter

import torch

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.evaluation.suites import load_suite

n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
new = int(sys.argv[2]) if len(sys.argv) > 2 else 128
K = 8
target = load_target()
drafter = build_drafter("dspark", target)
cls = type(drafter)
m = drafter.model
records: list[tuple[int, list[list[int]], list[list[int]]]] = []  # (anchor, topk per slot, branch topk)
orig = cls.propose_batch.__func__


def spy(klass, drafters, tokens, ks, params, generators):
    """Recompute the block pass for the first request and keep the top-K per slot (same math as
    propose_batch for one request, greedy), then draft as usual."""
    d = drafters[0]
    klass.flush(drafters)
    toks = tokens[0]
    a = int(toks.shape[0]) - 1
    cfg, b, s0 = d.cfg, d.cfg.block_size, d.first_slot
    ids = torch.full((1, b), cfg.mask_token_id, dtype=torch.long)
    ids[0, 0] = toks[-1]
    pos = torch.tensor([a])[:, None] + torch.arange(b)[None]
    states = m.backbone(ids, pos, klass._context([d], a), None, None)[:, s0 : s0 + 3]
    base = m.base_logits(states).float()[0]
    prev = m.prev_index(toks[-1:])
    tops, branch = [], []
    for s in range(3):
        logits = base[s] + m.markov_bias(prev, m.markov_in(prev)).float()[0]
        top = logits.topk(K).indices
        tops.append(m.d2t[top].tolist())
        if s == 0:  # slot 1 re-walked from each of the top-3 slot-0 candidates
            for c in top[:3]:
                p2 = m.draft_row(c[None])
                l2 = base[1] + m.markov_bias(p2, m.markov_in(p2)).float()[0]
                branch.append(m.d2t[l2.topk(K).indices].tolist())
        prev = m.draft_row(top[:1])
    records.append((a, tops, branch))
    return orig(klass, drafters, tokens, ks, params, generators)


cls.propose_batch = classmethod(spy)
stop = StopRule(new, frozenset(target.eos_ids))
rank = [Counter() for _ in range(3)]
br = Counter()
chain = [0, 0, 0]  # rounds whose argmax chain is right at slots 1..s (what a 3-draft chain accepts)
rounds = 0
for suite in ("humaneval", "gsm", "mtbench", "alpaca"):
    for p in load_suite(suite, n):
        ids = target.encode(p.text, chat=p.chat)
        records.clear()
        with torch.inference_mode():
            r = speculative_generate(target.runner, drafter.fork(), ids, stop, k=3, adaptive=False)
        full = ids + list(r.tokens)
        for a, tops, branch in records:
            truth = full[a + 1 : a + 4]
            if len(truth) < 3:
                continue
            rounds += 1
            for s in range(3):
                rank[s][tops[s].index(truth[s]) if truth[s] in tops[s] else K] += 1
            for s in range(3):
                if tops[s][0] != truth[s]:
                    break
                chain[s] += 1
            # slot 0 right at candidate j: is slot 1 (re-walked from j) right at its argmax?
            j = tops[0].index(truth[0]) if truth[0] in tops[0][:3] else None
            if j is not None:
                br[(j, branch[j][0] == truth[1])] += 1
        print(f"{suite} {p.id}: {len(r.tokens)} tokens, tau {r.stats.tau:.2f}", flush=True)
print(f"\n{rounds} rounds, {n} prompts x 4 suites, {new} tokens, the shipped DSpark, default mode")
print("| slot | top-1 | top-2 | top-3 | top-4 | top-8 |")
print("|---|---|---|---|---|---|")
for s in range(3):
    c = [sum(rank[s][i] for i in range(j)) / rounds for j in (1, 2, 3, 4, 8)]
    print(f"| {s + 1} (given the argmax chain) | " + " | ".join(f"{x:.3f}" for x in c) + " |")
print(
    "argmax chain right at slots 1 / 1-2 / 1-3: "
    + " / ".join(f"{c / rounds:.3f}" for c in chain)
    + f" (a 3-draft chain's tau on these positions: {1 + sum(chain) / rounds:.3f})"
)
for j in range(3):
    hit, tot = br[(j, True)], br[(j, True)] + br[(j, False)]
    share = f" = {hit / tot:.3f}" if tot else ""
    print(f"slot 1 right when slot 0 is right at candidate {j + 1}: {hit}/{tot}{share}")
