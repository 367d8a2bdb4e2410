"""Issue 8, session 26: what gpu_job.py checks itself against and builds its drafters from.

.dev1/reference.npz: draftsmith's own CPU pipeline (cache.target_sequence, fp32) on the first dev
answer: the GPU job's target must give the same states. .dev1/drafter-{dspark,dflash}.json: the
drafter configs the package's recipe builds for the default target (16,384-token draft vocabulary).
"""

import json
from dataclasses import asdict

import numpy as np

from draftsmith.drafters.dflash.config import default_target_layers
from draftsmith.drafters.dflash.recipe import DFlashOptions, drafter_config
from draftsmith.models.target import Target
from draftsmith.training.cache import target_sequence

t = Target.load(dtype="float32", calibrate=False)
layers = default_target_layers(t.runner.num_layers)
z = np.load(".dev1/heldout.npz")
ids = z["dev_ids"][z["dev_offsets"][0] : z["dev_offsets"][1]].astype(np.int64)[:160]
s = target_sequence(t, ids.tolist(), [True] * len(ids), layers)
np.savez(".dev1/reference.npz", ids=ids, layers=np.array(layers), features=s.features.numpy(),
         lse=s.lse.numpy(), greedy=s.greedy.numpy())
for m in ("dspark", "dflash"):
    cfg = drafter_config(t, m, DFlashOptions(draft_vocab=16384), layers)
    open(f".dev1/drafter-{m}.json", "w").write(json.dumps(asdict(cfg), indent=1))
print("layers", layers, "ref tokens", len(ids))
