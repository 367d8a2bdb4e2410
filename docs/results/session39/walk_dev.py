"""Walk tau (`DFlashRecipe.walk`, uncapped / 3 drafts) per suite and pooled, one pass per drafter:
each sequence is walked alone and its tokens / rounds are pooled (what walk_by_suite.py computes,
without scoring every sequence twice).
Usage: python docs/results/session39/walk_dev.py CACHE ANSWERS_JSONL DIR...
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
names = sorted(set(suites)) + ["all"]
print("| drafter | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
for d in dirs:
    recipe = recipe_for(DFlashConfig.load(d).method)
    model = load_drafter(d, target, torch.float32)
    opts = make_options(recipe, {"anchors": 64})
    sums = {n: [0.0, 0.0, 0.0] for n in names}  # tokens, rounds uncapped, rounds capped
    with torch.no_grad():
        for i in range(len(data)):
            s = data[i]
            w = recipe.walk(model, [s], opts)
            tokens = int(s.loss_mask.sum()) - 1  # the walk's tokens: every answer token after the first
            if tokens < 1:
                continue
            for n in (suites[i], "all"):
                sums[n][0] += tokens
                sums[n][1] += tokens / w["tau_walk"]
                sums[n][2] += tokens / w["tau_walk_k3"]
    cells = [f"{t / r:.3f} / {t / r3:.3f}" for t, r, r3 in (sums[n] for n in names)]
    print(f"| {d} | " + " | ".join(cells) + " |", flush=True)
