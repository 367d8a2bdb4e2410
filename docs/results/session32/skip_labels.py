"""Issue 8, session 32: first-slot labels for the skip probe (`skip_probe.py`) on committed greedy
training answers the shipped DSpark never saw (it was trained on T 0.7 answers only).

For every position of each answer's first 128 tokens (the anchor as in session 28's walk), the
features skip_probe.py reads and whether the shipped DSpark's first draft equals the next answer
token (the target's greedy choice). One target pass and one drafter start per answer; each position
then drafts one slot over the context cache truncated to it (the cache is position-addressed).
Usage: python docs/results/session32/skip_labels.py OUT.pt [every_t0] [every_complete]
"""

import gzip
import json
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from skip_probe import dspark, features_and_states  # noqa: E402

from draftsmith.engine.sampling import SamplingParams  # noqa: E402

out = sys.argv[1]
every_t0 = int(sys.argv[2]) if len(sys.argv) > 2 else 8
every_complete = int(sys.argv[3]) if len(sys.argv) > 3 else 12
rows = [json.loads(x) for x in gzip.open("data/smollm2/answers-train-t0.jsonl.gz", "rt")][::every_t0]
complete = gzip.open("data/smollm2/answers-complete-train-t0.jsonl.gz", "rt")
rows += [json.loads(x) for x in complete][::every_complete]
feats: dict[str, list[torch.Tensor]] = {}
labels, cats = [], []
t0 = time.time()
with torch.inference_mode():
    for n, row in enumerate(rows):
        if len(row["answer_ids"]) < 8:
            continue
        f, full, prompt_len, states = features_and_states(row)
        d = dspark.fork()
        d.start(full[:-1], {k: h[: len(full) - 1] for k, h in states.items()}, len(full) + 8)
        d.flush([d])
        hit = []
        for j in range(len(full) - prompt_len):
            a = prompt_len - 1 + j
            if a + 1 >= len(full):
                hit.append(False)  # no next token to compare with (the last position)
                continue
            d.n_ctx = a
            tok = d.propose(full[: a + 1], 1, SamplingParams(), None).tokens
            hit.append(bool(len(tok)) and int(tok[0]) == int(full[a + 1]))
        for k, v in f.items():
            feats.setdefault(k, []).append(v)
        labels.append(torch.tensor(hit))
        cats.append(row["category"])
        if n % 25 == 0:
            done = sum(len(x) for x in labels)
            print(f"{n}/{len(rows)} answers, {done} positions, {time.time() - t0:.0f} s", flush=True)
torch.save({"feats": feats, "labels": labels, "categories": cats}, out)
print(f"done: {len(labels)} answers, {sum(len(x) for x in labels)} positions, {time.time() - t0:.0f} s")
