"""Teacher-forced tau per suite two ways, for DFlash/DSpark drafter directories: the trainer's uniform
held-out tau (64 fixed anchors a sequence) and the walk greedy decoding takes over every answer
position (`DFlashRecipe.walk`), each uncapped / with 3 drafts.
Usage: python docs/results/session39/walk_by_suite.py CACHE ANSWERS_JSONL DIR...
(ANSWERS_JSONL: the answers the cache was built from, in cache order; "category" names the suite)
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
names = sorted(by_suite) + ["all"]
by_suite["all"] = [data[i] for i in range(len(data))]
print("| drafter | metric | " + " | ".join(names) + " |")
print("|---|---|" + "---|" * len(names))
for d in dirs:
    recipe = recipe_for(DFlashConfig.load(d).method)
    model = load_drafter(d, target, torch.float32)
    opts = make_options(recipe, {"anchors": 64})
    uniform, walked = [], []
    with torch.no_grad():
        for name in names:
            m = recipe.evaluate(model, by_suite[name], opts)
            w = recipe.walk(model, by_suite[name], opts)
            uniform.append(f"{m['tau_greedy']:.3f} / {m['tau_greedy_k3']:.3f}")
            walked.append(f"{w['tau_walk']:.3f} / {w['tau_walk_k3']:.3f}")
    print(f"| {d} | uniform | " + " | ".join(uniform) + " |")
    print(f"| {d} | walk | " + " | ".join(walked) + " |", flush=True)
