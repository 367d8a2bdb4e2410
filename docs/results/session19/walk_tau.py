"""Teacher-forced held-out tau (every answer position weighted alike) against what decoding accepts
(issue 8). For each held-out prompt the target's greedy answer is decoded once (plain); then, from
one target pass over prompt + answer, the shipped drafter drafts 3 tokens at EVERY answer position
(context = the target states before it, as in decoding). Two averages of the same accept lengths:
the uniform mean over positions (what the trainer's held-out tau estimates, from 64 sampled
anchors) and the walk (start at the answer's first token, jump by accepted + 1: what greedy
decoding with 3 drafts a round does). The walk is then checked against real speculative decoding.
Usage: python docs/results/session19/walk_tau.py [prompts] [max_new_tokens] [method] [dtype]"""

import statistics
import sys

import torch
from held_out import held_out_rows

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.engine.sampling import SamplingParams

n = int(sys.argv[1]) if len(sys.argv) > 1 else 16
new = int(sys.argv[2]) if len(sys.argv) > 2 else 128
method = sys.argv[3] if len(sys.argv) > 3 else "dspark"
dtype = sys.argv[4] if len(sys.argv) > 4 else "float32"
K = 3
held = held_out_rows(n, new)
target = load_target(dtype=dtype, fixed_rows=0)  # one target pass over the whole sequence
drafter = build_drafter(method, target)
plain = build_drafter("plain", target)
stop = StopRule(new, frozenset(target.eos_ids))
greedy = SamplingParams()
uniform, walk, real = [], [], []
with torch.inference_mode():
    for r in held:
        ids = torch.tensor(target.encode(r["prompt"], chat=True))
        answer = speculative_generate(target.runner, plain.fork(), ids, stop).tokens
        full = torch.cat([ids, torch.tensor(answer)])
        target.runner.reset(len(full) + 8)
        states = target.runner.forward(full, n_logits=0, hidden=drafter.hidden_layers).hidden
        p = len(ids)
        lengths = []  # accept length (capped at K) with the anchor at answer position p - 1 + j
        for j in range(len(answer)):
            a = p - 1 + j  # the anchor: the last committed token; drafts predict a + 1 ..
            d = drafter.fork()
            d.start(full[: a + 1], {key: h[:a] for key, h in states.items()}, len(full) + 8)
            draft = d.propose(full[: a + 1], K, greedy, None).tokens.tolist()
            truth = full[a + 1 : a + 1 + K].tolist()
            hit = 0
            while hit < min(len(draft), len(truth)) and draft[hit] == truth[hit]:
                hit += 1
            lengths.append(hit)
        uniform.append(1 + statistics.mean(lengths))
        j = rounds = 0
        while j < len(lengths):
            rounds += 1
            j += lengths[j] + 1
        walk.append(len(lengths) / rounds)
        res = speculative_generate(target.runner, drafter.fork(), ids, stop, k=K, adaptive=False)
        assert res.tokens == answer, "speculative output differs from plain"
        real.append(res.stats.tau)
        line = f"{r['category']:12s} uniform {uniform[-1]:.3f} walk {walk[-1]:.3f} real {real[-1]:.3f}"
        print(line, flush=True)
print(
    f"{method} {dtype}, {len(held)} held-out prompts x {new} tokens, {K} drafts: mean over prompts: "
    f"uniform {statistics.mean(uniform):.3f}, walk {statistics.mean(walk):.3f}, "
    f"real decoding {statistics.mean(real):.3f}"
)
