"""Where a DFlash/DSpark training step's time goes on this CPU (issue 8: tau per CPU-hour).

Times the stages of train-long.sh's step (8 sequences x ANCHORS anchors, block 7, bf16 autocast)
on a real cache: batch building, forward (split into context projection, block attention layers,
head + losses), backward, optimizer; then torch.profiler's top ops over 3 steps.
Usage: python docs/results/session17/train_step_profile.py CACHE [METHOD=dspark] [ANCHORS=64] [STEPS=6]
    [compile] [--no-profile]
"""

import sys
import time

import torch

from draftsmith.api import load_target
from draftsmith.engine.allocator import bound_freed_memory, keep_freed_memory
from draftsmith.training.cache import TargetCache
from draftsmith.training.recipe import make_options, recipe_for

cache = sys.argv[1]
method = sys.argv[2] if len(sys.argv) > 2 else "dspark"
anchors = int(sys.argv[3]) if len(sys.argv) > 3 else 64
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 6
compiled = len(sys.argv) > 5 and sys.argv[5] == "compile"
target = load_target(dtype="bfloat16", fixed_rows=0)
data = TargetCache(cache, target)
recipe = recipe_for(method)
opts = make_options(recipe, {"anchors": anchors, **({"ce_weight": 0.5} if method == "dspark" else {})})
torch.manual_seed(0)
keep_freed_memory() if recipe.heap_only else bound_freed_memory()  # as train() does
model = recipe.build(target, opts, list(data.layers), data)
loss_fn = torch.compile(recipe.loss, dynamic=True) if compiled else recipe.loss  # train --compile
params = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.95))
parts: dict[str, float] = {}


def timed(name, fn):
    t = time.perf_counter()
    out = fn()
    parts[name] = parts.get(name, 0.0) + time.perf_counter() - t
    return out


def one_step(i: int) -> None:
    g = torch.Generator().manual_seed(i)
    pick = torch.randint(len(data), (8,), generator=g).tolist()
    seqs = [data[j] for j in pick]
    batch = timed("batch (read + build_blocks)", lambda: recipe.batch(seqs, opts, model, g))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, _ = timed("forward + losses", lambda: loss_fn(model, batch, opts))
    opt.zero_grad(set_to_none=True)
    timed("backward", loss.backward)
    timed("clip + AdamW", lambda: (torch.nn.utils.clip_grad_norm_(params, 1.0), opt.step()))


one_step(-1)
parts.clear()
t0 = time.perf_counter()
for i in range(steps):
    one_step(i)
total = time.perf_counter() - t0
print(f"{method}, {anchors} anchors, {steps} steps: {total / steps:.3f} s/step")
for k, v in parts.items():
    print(f"  {k:28s} {v / steps:.3f} s ({v / total:.0%})")
if "--no-profile" in sys.argv:
    sys.exit()
with torch.profiler.profile() as prof:
    for i in range(3):
        one_step(100 + i)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18, max_name_column_width=40))
