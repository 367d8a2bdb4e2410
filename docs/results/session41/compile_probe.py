"""Would torch.compile make DSpark's block pass cheaper? The packed oneDNN linears cannot be traced, so
this compiles the same drafter with its dense weights (inductor, freezing, dynamic context length) and
times `propose` (3 drafts, the context of one gsm answer, warm caches) against the packed eager one.
Usage: python docs/results/session41/compile_probe.py
"""

import time

import torch
import torch._inductor.config as inductor

from draftsmith.drafters.dflash.checkpoint import load_drafter
from draftsmith.drafters.dflash.drafter import shipped_drafter
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import speculative_generate
from draftsmith.engine.sampling import SamplingParams
from draftsmith.evaluation.suites import load_suite
from draftsmith.models.target import Target

inductor.freezing = True
target = Target.load(None)
drafter = build_drafter("dspark", target)
ids = target.encode(load_suite("gsm", 1)[0].text, chat=True)
res = speculative_generate(target.runner, drafter, ids, target.stop_rule(64))
with torch.inference_mode():
    type(drafter).flush([drafter])
toks = torch.tensor(list(ids) + res.tokens)[: drafter.n_ctx + 1]
params, m = SamplingParams(), drafter.model
dense = load_drafter(shipped_drafter("dspark", target), target, m.fc.weight.dtype).eval()
dense.embed, dense.head, dense.t2d = m.embed, m.head, m.t2d


def timed(label: str) -> None:
    with torch.inference_mode():
        for _ in range(10):
            drafter.propose(toks, 3, params, None)
        t = time.perf_counter()
        for _ in range(200):
            drafter.propose(toks, 3, params, None)
    print(f"{label}: {1000 * (time.perf_counter() - t) / 200:.2f} ms a propose", flush=True)


timed("eager, packed (today's default)")
m.backbone = dense.backbone
timed("eager, dense block pass")
t = time.perf_counter()
m.backbone = torch.compile(dense.backbone, dynamic=True)
with torch.inference_mode():
    drafter.propose(toks, 3, params, None)
print(f"compiling: {time.perf_counter() - t:.1f} s")
timed("compiled block pass")
