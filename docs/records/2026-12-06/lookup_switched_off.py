"""Scratch: dev held-out tau of the old shipped DSpark with and without its lookup input, and step 0."""
import dataclasses, sys, torch
from draftsmith.api import load_target
from draftsmith.training.cache import TargetCache
from draftsmith.training.recipe import recipe_for
target = load_target(None)
dev = TargetCache("/tmp/rb/dev-cache", target)
seqs = [dev[i] for i in range(len(dev))]
recipe = recipe_for("dspark")
opts = recipe.options()
for name, path, drop in [("old", "/tmp/rb/base-dspark", False), ("old-no-lookup", "/tmp/rb/base-dspark", True), ("step0", "scratch/step0-dspark", False)]:
    m = recipe.load(target, path, dtype=torch.float32)
    if drop:
        m.cfg.lookup_input = 0
    r = recipe.evaluate(m, seqs, opts)
    print(name, {k: round(v, 3) for k, v in r.items() if "greedy" not in k}, flush=True)
