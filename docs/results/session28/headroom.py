"""Where DSpark's acceptance is lost, and how much a better mix of lookup and DSpark could win (issue 8).

For each dev answer (the target's greedy 128-token answers to bench-shaped prompts, `draftsmith data
dev` via session24/bench_dev.sh) one target pass over prompt + answer gives the context states; at
EVERY answer position the shipped DSpark drafts 3 tokens (as in decoding) and n-gram lookup drafts 3
(the `ngram` method's rule) and the hybrid's lookup (suffix match >= 3 tokens). From those accept
lengths, the walk of greedy decoding (start at the first answer token, jump accepted + 1) gives tau for:
DSpark, n-gram, today's hybrid rule, and an oracle that picks the better of the two drafts every round
(the ceiling of any rule that switches between them). It also splits DSpark's misses at the first
draft: the token is outside the draft vocabulary / lookup had it / neither.
Usage: python docs/results/session28/headroom.py DEV_DIR [per_suite] [dtype]   (alone on the machine)
"""

import collections
import json
import statistics
import sys

import torch
from walk_lib import SUITES, K, dev_rows, hits, positions, print_table, walk

from draftsmith.api import load_target
from draftsmith.drafters.ngram import NgramDrafter
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.sampling import SamplingParams

dev = sys.argv[1]
per_suite = int(sys.argv[2]) if len(sys.argv) > 2 else 30
dtype = sys.argv[3] if len(sys.argv) > 3 else "float32"
target = load_target(dtype=dtype, fixed_rows=0)
dspark = build_drafter("dspark", target)
ngram = NgramDrafter(k=K, max_ngram=3, min_ngram=2)  # the `ngram` method's defaults
lookup = NgramDrafter(k=K, max_ngram=5, min_ngram=3)  # the hybrid's lookup
in_vocab = set(dspark.model.d2t.tolist()) if dspark.cfg.draft_vocab_size else None
greedy = SamplingParams()


table = {}
with torch.inference_mode():
    for suite in SUITES:
        arms = collections.defaultdict(list)
        miss = collections.Counter()
        for r in dev_rows(dev, suite, 0, per_suite):
            per = collections.defaultdict(list)
            for _, ctx, truth, d in positions(target, dspark, r):
                ds = d.propose(ctx, K, greedy, None).tokens.tolist()
                ng = ngram.propose(ctx, K, greedy, None).tokens.tolist()
                lk = lookup.propose(ctx, K, greedy, None).tokens.tolist()
                h_ds, h_ng, h_lk = hits(ds, truth), hits(ng, truth), hits(lk, truth)
                per["dspark"].append(h_ds)
                per["ngram"].append(h_ng)
                per["hybrid rule"].append(h_lk if len(lk) >= min(K, 2) else h_ds)
                per["oracle(dspark, ngram)"].append(max(h_ds, h_ng))
                if h_ds == 0:
                    if in_vocab is not None and truth[0] not in in_vocab:
                        miss["outside the draft vocabulary"] += 1
                    elif h_ng > 0:
                        miss["lookup had it"] += 1
                    else:
                        miss["neither"] += 1
                miss["positions"] += 1
            for arm, lengths in per.items():
                arms[arm].append(walk(lengths))
        table[suite] = ({arm: statistics.mean(v) for arm, v in arms.items()}, miss)
        print(
            suite,
            json.dumps({arm: round(statistics.mean(v), 3) for arm, v in arms.items()}),
            dict(miss),
            flush=True,
        )

print_table(
    {s: t for s, (t, _) in table.items()},
    f"{per_suite} dev answers per suite, {dtype}, {K} drafts, walk tau (greedy decoding's rounds)",
)
print(
    "\n| DSpark misses the first draft (share of positions) | humaneval | mtbench | gsm | alpaca |"
    "\n|---|---|---|---|---|"
)
for kind in ("outside the draft vocabulary", "lookup had it", "neither"):
    print(
        f"| {kind} | "
        + " | ".join(f"{table[s][1][kind] / table[s][1]['positions']:.3f}" for s in table)
        + " |"
    )
