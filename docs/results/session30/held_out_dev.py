"""The trainer's held-out tau (fixed anchors, seed 12345: what `train --held-out-cache` logs) for any
DSpark/DFlash drafter directories, so a fine-tune's curve has its step-0 point (the drafter it started
from) measured by the same evaluator.
Usage: python docs/results/session30/held_out_dev.py CACHE [ANCHORS] DIR...
"""

import json
import sys

import torch

from draftsmith.api import load_target
from draftsmith.drafters.dflash.checkpoint import load_drafter
from draftsmith.drafters.dflash.config import DFlashConfig
from draftsmith.training.cache import TargetCache
from draftsmith.training.recipe import make_options, recipe_for

cache, anchors, dirs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
target = load_target(dtype="float32", fixed_rows=0)
data = TargetCache(cache, target)
seqs = [data[i] for i in range(len(data))]
for d in dirs:
    method = DFlashConfig.load(d).method
    recipe = recipe_for(method)
    model = load_drafter(d, target, torch.float32)
    with torch.no_grad():
        m = recipe.evaluate(model, seqs, make_options(recipe, {"anchors": anchors}))
    print(d, json.dumps({k: round(v, 4) for k, v in m.items()}))
