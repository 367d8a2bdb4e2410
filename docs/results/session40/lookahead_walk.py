"""Does DSpark's serial head let the drafter pick a better chain than the argmax one? (issue 8, session 40)

DFlash's slots do not depend on the drafted tokens, so its best 3-token draft is each slot's argmax.
DSpark's Markov head makes slot k+1 depend on the token chosen at slot k, so the chain that maximises
the drafter's own expected accepted length, p1 (1 + p2 (1 + p3)), need not start with slot 1's argmax.
This scores, on every answer position of the dev set (teacher-forced target features, the target's
greedy tokens as labels, 3 drafts as the default mode verifies), the argmax chain against the best of
the top-M slot-1 candidates (each continued by its own Markov argmax chain) and, with BEAM, the top-M at
slot 2 as well, then walks each like greedy decoding (training/anchors.walk). The argmax chain must
reproduce walk_dev.py's tau_walk_k3.
Usage: [LIMIT=N] python docs/results/session40/lookahead_walk.py CACHE ANSWERS DRAFTER [M ...]
"""

import json
import os
import sys

import torch

from draftsmith.api import load_target
from draftsmith.drafters.dflash.checkpoint import load_drafter
from draftsmith.drafters.dflash.training import block_forward, build_blocks
from draftsmith.training.anchors import IGNORE, sample_anchors, walk
from draftsmith.training.cache import TargetCache

DEPTH = 3
cache, answers, drafter = sys.argv[1:4]
ms = [int(x) for x in sys.argv[4:]] or [2, 4, 8]
target = load_target(dtype="float32", fixed_rows=0)
data = TargetCache(cache, target)
suites = [json.loads(line)["category"] for line in open(answers)]
model = load_drafter(drafter, target, torch.float32)
cfg = model.cfg
assert cfg.markov_rank, "a DSpark drafter (DFlash's slots do not depend on the drafted tokens)"


def chain_from(base: torch.Tensor, first: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Argmax continuation of slot-1 tokens `first` [A, C] through slots 2..DEPTH: tokens [A, C, DEPTH]
    and the drafter's probability of each [A, C, DEPTH] (slot 1's filled by the caller)."""
    toks, probs, prev = [first], [torch.ones_like(first, dtype=torch.float32)], first
    for s in range(1, DEPTH):
        logp = torch.log_softmax(
            base[:, s, None] + model.markov_bias(model.draft_row(prev)), -1
        )  # [A, C, Vd]
        lp, prev = logp.max(-1)
        toks.append(prev)
        probs.append(lp.exp())
    return torch.stack(toks, -1), torch.stack(probs, -1)


def expected(p: torch.Tensor) -> torch.Tensor:
    """The drafter's own expected accepted drafts of chains with slot probabilities p [..., DEPTH]."""
    return p.cumprod(-1).sum(-1)


names = ["argmax"] + [f"top{m}" for m in ms] + [f"beam{m}" for m in ms]
totals = {n: {} for n in names}  # name -> suite -> [tokens, rounds]
switched = dict.fromkeys(names, 0)
anchors_seen = 0
with torch.no_grad():
    for i in range(int(os.environ.get("LIMIT", len(data)))):
        s = data[i]
        runs = {n: {} for n in names}
        for chunk in sample_anchors(s.loss_mask, s.ids.shape[0]).split(128):
            b = build_blocks(
                s.ids[None],
                s.loss_mask[None],
                [chunk],
                cfg.block_size,
                cfg.mask_token_id,
                s.greedy[None],
                cfg.lookup_input,
            )
            states = model.step_states(block_forward(model, b, s.features[None].float()), b.prev_ids)
            base = model.base_logits(states).float()[0].view(len(chunk), cfg.block_size, -1)[:, :DEPTH]
            labels = b.greedy_labels[0].view(len(chunk), cfg.block_size)[:, :DEPTH]
            live = labels[:, 0] != IGNORE
            gold = torch.where(labels == IGNORE, -2, model.t2d[labels.clamp(min=0)])
            gold = torch.where(gold >= base.shape[-1], -1, gold)  # outside the draft vocabulary: a miss
            anchor_rows = model.prev_index(b.prev_ids[0, :: cfg.block_size])  # slot 1 follows the anchor
            p1 = torch.softmax(base[:, 0] + model.markov_bias(anchor_rows), -1)
            top_p, top_t = p1.topk(max(ms), -1)
            anchors_seen += int(live.sum())
            for name in names:
                m = 1 if name == "argmax" else int(name.removeprefix("top").removeprefix("beam"))
                toks, probs = chain_from(base, top_t[:, :m])
                probs[..., 0] = top_p[:, :m]
                if name.startswith("beam"):  # also the top-m at slot 2 for each slot-1 candidate
                    logp2 = torch.log_softmax(
                        base[:, 1, None] + model.markov_bias(model.draft_row(top_t[:, :m])), -1
                    )
                    p2, t2 = logp2.exp().topk(m, -1)  # [A, m, m]
                    prev, p3 = t2, None
                    lp3, t3 = torch.log_softmax(
                        base[:, 2, None, None] + model.markov_bias(model.draft_row(prev)), -1
                    ).max(-1)
                    p3 = lp3.exp()
                    cand = torch.stack([top_t[:, :m, None].expand_as(t2), t2, t3], -1).flatten(
                        1, 2
                    )  # [A, m*m, 3]
                    cp = torch.stack([top_p[:, :m, None].expand_as(p2), p2, p3], -1).flatten(1, 2)
                    toks, probs = cand, cp
                best = expected(probs).argmax(-1)
                chain = toks[torch.arange(len(chunk)), best]  # [A, DEPTH]
                switched[name] += int(((chain[:, 0] != top_t[:, 0]) & live).sum())
                hits = (chain == gold).int().cumprod(-1).sum(-1)
                found = zip(chunk.tolist(), hits.tolist(), live.tolist(), strict=True)
                runs[name].update((a, int(r)) for a, r, ok in found if ok)
        for name in names:
            t, r = walk(runs[name], DEPTH)
            for suite in (suites[i], "all"):
                acc = totals[name].setdefault(suite, [0, 0])
                acc[0] += t
                acc[1] += r
cols = sorted(totals["argmax"])
print(f"# {drafter}: walk tau with 3 drafts on {cache} ({anchors_seen} anchors)")
print("| chain choice | " + " | ".join(cols) + " | slot-1 token not the argmax |")
print("|---|" + "---|" * (len(cols) + 1))
for name in names:
    cells = [f"{totals[name][c][0] / max(totals[name][c][1], 1):.3f}" for c in cols]
    print(f"| {name} | " + " | ".join(cells) + f" | {switched[name] / anchors_seen:.3f} |", flush=True)
