"""A/B arm (issue 8, session 39): fine-tune on the anchors greedy decoding visits (on-policy anchors).

Decoding's accepted length is the walk's (training/anchors.walk): it lands right after each failed
draft and jumps over what the drafter gets right. Training draws anchors uniformly. This arm first
walks every training sequence with the initial drafter (3 drafts a round, as the default mode
verifies) and then trains only on the anchors that walk visits; everything else is the control's
command line (session 38's `continue_sixth.sh`: the same cache, seed, recipe and steps).
Usage: python docs/results/session39/walk_anchors_ft.py INIT CACHE DEV_CACHE OUT [STEPS [SEED [uniform]]]
(SEED: the trainer's --seed, default its own; "uniform": the control, the same run without the walk)
"""

import sys

import torch

import draftsmith.drafters.dflash.recipe as rec
from draftsmith.api import load_target
from draftsmith.cli import main
from draftsmith.drafters.dflash.checkpoint import load_drafter
from draftsmith.drafters.dflash.training import anchor_runs, build_blocks
from draftsmith.training.anchors import CAPPED_DRAFT, sample_anchors
from draftsmith.training.cache import TargetCache

init, cache, dev, out = sys.argv[1:5]
steps = sys.argv[5] if len(sys.argv) > 5 else "100"
seed = ["--seed", sys.argv[6]] if len(sys.argv) > 6 else []
control = len(sys.argv) > 7 and sys.argv[7] == "uniform"
target = load_target(dtype="float32", fixed_rows=0)
model = load_drafter(init, target, torch.float32)
visited: dict[tuple, torch.Tensor] = {}
total = kept = 0
with torch.no_grad():
    for s in [] if control else TargetCache(cache, target):
        cand = sample_anchors(s.loss_mask, s.ids.shape[0])
        runs = {}
        for chunk in cand.split(128):
            b = build_blocks(
                s.ids[None],
                s.loss_mask[None],
                [chunk],
                model.cfg.block_size,
                model.cfg.mask_token_id,
                s.greedy[None],
                model.cfg.lookup_input,
            )
            found = anchor_runs(model, b, s.features[None].float())[0]
            runs.update((a, r) for a, r in zip(chunk.tolist(), found.tolist(), strict=True) if r >= 0)
        pos, j = [], min(runs) if runs else 0
        while j in runs:
            pos.append(j)
            j += min(runs[j], CAPPED_DRAFT) + 1
        visited[tuple(s.ids.tolist())] = torch.tensor(pos, dtype=torch.long)
        total, kept = total + len(cand), kept + len(pos)
print(f"walk anchors: {kept} of {total} candidate anchors ({kept / max(total, 1):.1%})", flush=True)
del model

uniform = rec.sample_anchors
training = [True]


def walk_collate(seqs, anchors, block, mask_id, g, lookup_input=0):
    """collate() with each training sequence's anchors drawn from its walk (held-out: unchanged)."""
    ids, mask = rec.pad_stack(seqs, "ids"), rec.pad_stack(seqs, "loss_mask", False)
    greedy = rec.pad_stack(seqs, "greedy") if all(s.greedy is not None for s in seqs) else None
    lists = []
    for s, m in zip(seqs, mask, strict=True):
        w = visited.get(tuple(s.ids.tolist())) if training[0] else None
        if w is None or not len(w):
            lists.append(uniform(m, anchors, g))
        else:
            pick = torch.randperm(len(w), generator=g)[:anchors]
            lists.append(w[pick].sort().values)
    batch = rec.build_blocks(ids, mask, lists, block, mask_id, greedy, lookup_input)
    feats, final, lse = (rec.pad_stack(seqs, n).float() for n in ("features", "final", "lse"))
    return batch, feats, final, lse


evaluate = rec.DFlashRecipe.evaluate


def held_out(self, *a, **k):
    training[0] = False
    try:
        return evaluate(self, *a, **k)
    finally:
        training[0] = True


rec.collate = walk_collate
rec.DFlashRecipe.evaluate = held_out
sys.exit(
    main(
        [
            "train",
            "--method",
            "dspark",
            "--init-from",
            init,
            "--lookup-input",
            "6",
            "--regrow",
            "lookup_in,lookup_len",
            "--grown-lr",
            "10",
            "--cache",
            cache,
            "--held-out-cache",
            dev,
            "--held-out",
            "120",
            "--out",
            out,
            "--steps",
            steps,
            "--batch",
            "8",
            "--anchors",
            "64",
            "--ce-weight",
            "0.5",
            "--lr",
            "3e-4",
            "--schedule",
            "wsd",
            "--decay",
            "0.25",
            "--eval-every",
            "200",
            "--save-every",
            "100",
            "--save-dtype",
            "float16",
            "--dtype",
            "float32",
            "--fixed-rows",
            "0",
            *seed,
        ]
    )
)
