"""Issue 8, session 30: does a DSpark draft pass just before a verify step slow it (cache eviction)?
1- and 4-token target steps, with and without a draft pass before each, interleaved, 25 repeats.
Usage: python docs/results/session30/evict.py DEV_DIR
"""

import json
import statistics
import sys
import time

import torch

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.sampling import SamplingParams

target = load_target(dtype="float32")
runner = target.runner
dspark = build_drafter("dspark", target)
row = json.loads(open(f"{sys.argv[1]}/gsm-answers.jsonl").readline())
ids = torch.tensor(target.encode(row["prompt"], chat=True) + row["answer_ids"][:60])
runner.reset(600)
pre = runner.forward(ids[:-1], n_logits=0, hidden=dspark.hidden_layers)
dspark.start(ids, pre.hidden, 600)
n = len(ids) - 1
res: dict[tuple[int, bool], list[float]] = {}
with torch.inference_mode():
    for _ in range(25):
        for rows in (1, 4):
            for draft in (False, True):
                if draft:
                    dspark.propose(ids, 3, SamplingParams(), None)
                t0 = time.perf_counter()
                runner.forward(ids[-rows:], n_logits=rows, hidden=dspark.hidden_layers if draft else ())
                res.setdefault((rows, draft), []).append(time.perf_counter() - t0)
                runner.rollback(n)
for key, v in sorted(res.items()):
    print(key, f"median {statistics.median(v) * 1e3:.1f} ms")
