"""What a rank-256 Markov head costs a DSpark drafting round (issue 8, session 22): the session-21
A/B found rank 256 +0.025 held-out tau capped at 3 drafts (+1.5%) at the same training step time,
but its decode-time cost was not timed. Here the shipped rank-64 DSpark and a rank-256 copy of it
(the extra 192 Markov dimensions and their confidence-head inputs zero, so it drafts exactly the
same tokens through 4x the Markov weights) decode the same prompts in the default mode, alternating,
and the drafting time per round is compared. Same drafts, same rounds: the difference is the cost.
Usage: python docs/results/session22/markov_rank_cost.py [prompts per suite] [max_new_tokens] [repeats]"""

import dataclasses
import statistics
import sys

import torch

from draftsmith.api import load_target
from draftsmith.drafters.dflash.drafter import DSparkDrafter, read_sts, shipped_drafter
from draftsmith.drafters.dflash.model import DFlashModel
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.engine.packing import for_decoding
from draftsmith.evaluation.suites import load_suite

per_suite = int(sys.argv[1]) if len(sys.argv) > 1 else 3
new = int(sys.argv[2]) if len(sys.argv) > 2 else 128
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
target = load_target()
path = shipped_drafter("dspark", target)
base = DSparkDrafter.load_model(target, path)
rank = 256
wide = DFlashModel(dataclasses.replace(base.cfg, markov_rank=rank))
state = base.state_dict()
r0 = base.cfg.markov_rank
with torch.no_grad():
    for name, t in wide.state_dict().items():
        src = state[name].float()
        t.zero_()
        if name == "markov_in.weight":
            t[:, :r0] = src
        elif name == "markov_out.weight":
            t[:, :r0] = src
        elif name == "conf.weight":  # [1, H + rank]: the hidden part, then the Markov part
            h = base.cfg.hidden_size
            t[:, : h + r0] = src
        else:
            t.copy_(src)
wide.to(dtype=next(base.parameters()).dtype)
wide.d2t = base.d2t
wide.attach_target(target.model.get_input_embeddings().weight, target.model.get_output_embeddings().weight)
wide.eval().requires_grad_(False)
sts = read_sts(path)
arms = {
    f"rank {r0}": DSparkDrafter(for_decoding(base, None), target.runner.vocab_size, 0.0, *sts),
    f"rank {rank}": DSparkDrafter(for_decoding(wide, None), target.runner.vocab_size, 0.0, *sts),
}
prompts = [
    target.encode(p.text, chat=p.chat)[:400]
    for suite in ("humaneval", "gsm", "mtbench", "alpaca")
    for p in load_suite(suite, per_suite)
]
stop = StopRule(new, frozenset(target.eos_ids))


def decode_all(drafter) -> tuple[int, int, float, list[list[int]]]:
    rounds = tokens = 0
    draft_s = 0.0
    outs = []
    for ids in prompts:
        r = speculative_generate(target.runner, drafter.fork(), ids, stop)
        rounds += r.stats.rounds
        tokens += r.stats.new_tokens
        draft_s += r.stats.draft_s
        outs.append(list(r.tokens))
    return rounds, tokens, draft_s, outs


for d in arms.values():
    decode_all(d)  # warm
ms: dict[str, list[float]] = {k: [] for k in arms}
seen = {}
for rep in range(repeats):
    for name, d in arms.items():
        rounds, tokens, draft_s, outs = decode_all(d)
        ms[name].append(1e3 * draft_s / rounds)
        seen.setdefault(name, (rounds, tokens, outs))
        print(f"repeat {rep + 1} {name}: {rounds} rounds, tau {tokens / rounds:.3f}, "
              f"drafting {1e3 * draft_s / rounds:.3f} ms a round", flush=True)
(a, b) = seen.values()
print(f"same drafts: {a[2] == b[2]} (rounds {a[0]} / {b[0]})")
for name, v in ms.items():
    runs = ', '.join(f'{x:.3f}' for x in v)
    print(f"{name}: drafting median {statistics.median(v):.3f} ms a round ({runs})")
