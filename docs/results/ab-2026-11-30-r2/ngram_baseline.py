"""What a drafter must beat: next-token acc@1 of bigram / trigram tables counted on the training
cache, scored like slot 1 of held_out_tau_greedy (the target's argmax after anchor a, over the
first 64 held-out sequences).

    python docs/results/ab-2026-11-30-r2/ngram_baseline.py data/cache data/cache-ho
"""

import collections
import glob
import sys

import numpy as np


def load(d: str):
    for sh in sorted(glob.glob(d + "/shard-*")):
        ids, off = np.load(sh + "/ids.npy"), np.load(sh + "/offsets.npy")
        lm, gr = np.load(sh + "/loss_mask.npy"), np.load(sh + "/greedy.npy")
        for i in range(len(off) - 1):
            yield ids[off[i] : off[i + 1]], lm[off[i] : off[i + 1]], gr[off[i] : off[i + 1]]


big = collections.defaultdict(collections.Counter)
tri = collections.defaultdict(collections.Counter)
for ids, lm, _ in load(sys.argv[1]):
    for a in range(1, len(ids) - 1):
        if lm[a] and lm[a + 1]:
            big[ids[a]][ids[a + 1]] += 1
            tri[(ids[a - 1], ids[a])][ids[a + 1]] += 1
n = hit2 = hit3 = 0
for ids, lm, gr in list(load(sys.argv[2]))[:64]:
    for a in range(1, len(ids) - 1):
        if lm[a] and lm[a + 1]:
            n += 1
            b, t = big.get(ids[a]), tri.get((ids[a - 1], ids[a]))
            p2 = b.most_common(1)[0][0] if b else -1
            p3 = t.most_common(1)[0][0] if t else p2
            hit2 += p2 == gr[a]
            hit3 += p3 == gr[a]
print(f"slots {n}  bigram acc@1 {hit2 / n:.3f}  trigram (bigram backoff) acc@1 {hit3 / n:.3f}")
