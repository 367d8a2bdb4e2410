"""A soft lookup inside DSpark's serial walk, against today's hard hybrid rule (issue 8).

The hybrid drafts with n-gram lookup when the context's suffix (>= 3 tokens) occurred before, and with
DSpark otherwise. The soft variant lets DSpark draft every round but, at each slot, adds a logit bonus
to the token that followed the latest earlier occurrence of the current suffix (context + drafts so
far): lookup steers DSpark where it agrees enough, and DSpark's own confidence can overrule it.
Teacher-forced walk on the dev answers as headroom.py (3 drafts at every position, greedy decoding's
rounds); each arm is one (minimum suffix, bonus) pair, "+hard" keeps the hard switch on long matches;
"unless conf > g" keeps DSpark's draft where its calibrated first-slot confidence exceeds g and it
disagrees with the lookup. Session 28 ran the grid on answers 0-14 (soft_lookup-grid-0-14.txt):
  ARMS=2:2,2:4,2:8,3:2,3:4,3:8,1:2,2:1 GATES= python .../soft_lookup.py /tmp/dev 15 float32 0
and the chosen arm with the gates on answers 15-29 (soft_lookup-gates-15-29.txt, the defaults):
  python .../soft_lookup.py /tmp/dev 15 float32 15
Usage: python docs/results/session28/soft_lookup.py DEV_DIR [per_suite] [dtype] [skip]   (alone)
"""

import collections
import json
import os
import statistics
import sys

import numpy as np
import torch
from walk_lib import SUITES, K, dev_rows, hits, positions, print_table, walk

from draftsmith.api import load_target
from draftsmith.drafters.ngram import NgramDrafter, lookup
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.sampling import SamplingParams

dev = sys.argv[1]
per_suite = int(sys.argv[2]) if len(sys.argv) > 2 else 15
skip = int(sys.argv[4]) if len(sys.argv) > 4 else 0
dtype = sys.argv[3] if len(sys.argv) > 3 else "float32"
ARMS = [(int(a), float(b)) for a, b in (x.split(":") for x in os.environ.get("ARMS", "2:4").split(","))]
GATES = [float(g) for g in os.environ.get("GATES", "0.5,0.6,0.7,0.8,0.9").split(",") if g]
target = load_target(dtype=dtype, fixed_rows=0)
dspark = build_drafter("dspark", target)
hard = NgramDrafter(k=K, max_ngram=5, min_ngram=3)  # the hybrid's lookup
greedy = SamplingParams()


def hint(min_n: int, bonus: float):
    """The hybrid's lookup hint (`hybrid.lookup_hint`) with the minimum match as a parameter."""

    def f(tokens: torch.Tensor, drafted: list[int]):
        seq = np.concatenate([tokens.numpy(), np.asarray(drafted, dtype=np.int64)])
        cont, n = lookup(seq, 1, 5, min_n)
        return (int(cont[0]), bonus) if n else None

    return f


table = {}
with torch.inference_mode():
    for suite in SUITES:
        arms = collections.defaultdict(list)
        for r in dev_rows(dev, suite, skip, per_suite):
            per = collections.defaultdict(list)
            for _, ctx, truth, d in positions(target, dspark, r):
                ds = d.propose(ctx, K, greedy, None).tokens.tolist()
                c1 = d.confidences[0] if d.confidences else 0.0
                h_ds = hits(ds, truth)
                lk = hard.propose(ctx, K, greedy, None).tokens.tolist()
                long_match = len(lk) >= min(K, 2)
                per["dspark"].append(h_ds)
                per["hybrid (hard rule)"].append(hits(lk, truth) if long_match else h_ds)
                for min_n, bonus in ARMS:
                    d.slot_hint = hint(min_n, bonus)
                    h_soft = hits(d.propose(ctx, K, greedy, None).tokens.tolist(), truth)
                    d.slot_hint = None
                    per[f"soft >={min_n} +{bonus:g}"].append(h_soft)
                    per[f"soft >={min_n} +{bonus:g} +hard"].append(hits(lk, truth) if long_match else h_soft)
                    for g in GATES:  # keep DSpark's draft where it is confident and disagrees with lookup
                        use_lookup = long_match and not (c1 > g and ds[:1] != lk[:1])
                        per[f"soft >={min_n} +{bonus:g} +hard unless conf > {g}"].append(
                            hits(lk, truth) if use_lookup else h_soft
                        )
            for arm, lengths in per.items():
                arms[arm].append(walk(lengths))
        table[suite] = {arm: statistics.mean(v) for arm, v in arms.items()}
        print(suite, json.dumps({arm: round(v, 3) for arm, v in table[suite].items()}), flush=True)

title = f"{per_suite} dev answers per suite, {dtype}, {K} drafts, walk tau (greedy decoding's rounds)"
print_table(table, title)
