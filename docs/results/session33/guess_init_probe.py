"""Step-0 probe for a lookup-input drafter: the shipped DSpark given each slot's prompt-lookup guess
through lookup_in = beta * I (lookup_len = 0), no training. Which beta helps before any step says how
a fine-tune should start the new weights (zero: a no-op that Adam grows slowly).
Usage: python docs/results/session33/guess_init_probe.py CACHE N_SEQS BETA...
"""

import dataclasses
import json
import sys

import torch

from draftsmith.api import load_target
from draftsmith.drafters.dflash.checkpoint import load_drafter
from draftsmith.drafters.dflash.model import DFlashModel
from draftsmith.training.cache import TargetCache
from draftsmith.training.recipe import make_options, recipe_for

cache, n, betas = sys.argv[1], int(sys.argv[2]), [float(b) for b in sys.argv[3:]]
target = load_target(dtype="float32", fixed_rows=0)
data = TargetCache(cache, target)
step = max(1, len(data) // n)
seqs = [data[i] for i in range(0, len(data), step)][:n]
shipped = load_drafter("draftsmith/drafters/pretrained/smollm2-dspark", target, torch.float32)
recipe = recipe_for("dspark")
opts = make_options(recipe, {"anchors": 64})
for beta in betas:
    model = DFlashModel(dataclasses.replace(shipped.cfg, lookup_input=6))
    model.load_state_dict(shipped.state_dict(), strict=False)
    embed = target.model.get_input_embeddings().weight
    model.attach_target(embed, target.model.get_output_embeddings().weight)
    with torch.no_grad():
        model.lookup_in.weight.copy_(beta * torch.eye(model.cfg.hidden_size))
        m = recipe.evaluate(model.eval(), seqs, opts)
    print(f"beta {beta}", json.dumps({k: round(v, 4) for k, v in m.items()}), flush=True)
