"""The trainer's held-out tau (fixed anchors, seed 12345: what `train --held-out-cache` logs) per suite
of the bench-shaped dev set, for any DFlash/DSpark drafter directories.
Usage: python docs/results/session33/held_out_by_suite.py CACHE ANSWERS_JSONL DIR...
(ANSWERS_JSONL: the answers the cache was built from, in cache order; their "category" names the suite)
"""

import json
import sys

import torch

from draftsmith.api import load_target
from draftsmith.drafters.dflash.checkpoint import load_drafter
from draftsmith.drafters.dflash.config import DFlashConfig
from draftsmith.training.cache import TargetCache
from draftsmith.training.recipe import make_options, recipe_for

cache, answers, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
target = load_target(dtype="float32", fixed_rows=0)
data = TargetCache(cache, target)
suites = [json.loads(line)["category"] for line in open(answers)]
if len(suites) != len(data):
    raise SystemExit(f"{answers} has {len(suites)} rows, the cache {len(data)}")
by_suite: dict[str, list] = {}
for i, s in enumerate(suites):
    by_suite.setdefault(s, []).append(data[i])
names = sorted(by_suite)
print("| drafter | " + " | ".join(names) + " | mean | all (greedy, uncapped / 3 drafts) |")
print("|---|" + "---|" * (len(names) + 2))
for d in dirs:
    recipe = recipe_for(DFlashConfig.load(d).method)
    model = load_drafter(d, target, torch.float32)
    opts = make_options(recipe, {"anchors": 64})
    cells, means = [], []
    with torch.no_grad():
        for name in names:
            m = recipe.evaluate(model, by_suite[name], opts)
            cells.append(f"{m['tau_greedy']:.3f} / {m['tau_greedy_k3']:.3f}")
            means.append((m["tau_greedy"], m["tau_greedy_k3"]))
        a = recipe.evaluate(model, [data[i] for i in range(len(data))], opts)
    mean = tuple(sum(x[j] for x in means) / len(means) for j in (0, 1))
    print(f"| {d} | " + " | ".join(cells) + f" | {mean[0]:.3f} / {mean[1]:.3f} | "
          f"{a['tau_greedy']:.3f} / {a['tau_greedy_k3']:.3f} |", flush=True)
