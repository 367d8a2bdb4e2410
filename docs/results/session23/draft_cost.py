"""Split one DSpark drafting round (the shipped drafter, the default mode of this CPU) into its parts.

Decodes one humaneval prompt for 96 tokens so the drafter holds a real context, then times each
part of `propose` alone, repeated at that one anchor (medians of 200 calls): the whole proposal of
3 drafts, the one-layer block pass, the draft-vocabulary head, the serial Markov/confidence pieces
(run once per slot), and the per-round projection of new target states into the context cache.
Usage: .venv/bin/python docs/results/session23/draft_cost.py   (alone on the machine)
"""

import statistics
import time

import torch

from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.engine.sampling import SamplingParams
from draftsmith.evaluation.suites import load_humaneval
from draftsmith.models.target import Target


def median_ms(fn, n: int = 200) -> float:
    for _ in range(10):
        fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def main() -> None:
    target = Target.load(None)
    d = build_drafter("dspark", target)
    prompt = target.encode(load_humaneval(1)[0].text)
    out = speculative_generate(target.runner, d, prompt, StopRule(96))
    with torch.inference_mode():
        type(d).flush([d])
        tokens = torch.tensor(prompt + out.tokens)[: d.n_ctx + 1]
        m, cfg = d.model, d.cfg
        threads = torch.get_num_threads()
        print(f"drafter dtype {m.fc.weight.dtype}, context {d.n_ctx} tokens, {threads} threads")
        params = SamplingParams()
        ids = torch.full((1, cfg.block_size), cfg.mask_token_id)
        ids[0, 0] = tokens[-1]
        pos = (d.n_ctx + torch.arange(cfg.block_size))[None]
        ctx = type(d)._context([d], d.n_ctx)
        states = m.backbone(ids, pos, ctx, None, None)[:, 1:4]
        prev = m.prev_index(tokens[-1:])
        rows = m.markov_in(prev)
        logits = m.base_logits(states).float()
        feats = torch.randn(1, 2, cfg.hidden_size * len(cfg.target_layers), dtype=m.fc.weight.dtype)
        fused, p2 = m.fuse_context(feats), torch.arange(2)[None]
        parts = {
            "propose, 3 drafts (all below)": lambda: d.propose(tokens, 3, params, None),
            "block pass (1 layer, 7 slots)": lambda: m.backbone(ids, pos, ctx, None, None),
            "draft-vocab head, 3 slots": lambda: m.base_logits(states),
            "per slot: Markov rows": lambda: m.markov_in(prev),
            "per slot: Markov bias": lambda: m.markov_bias(prev, rows),
            "per slot: confidence": lambda: m.confidence_logit(states[:, 0], prev, rows),
            "per slot: argmax": lambda: logits[:, 0].argmax(-1),
            "per round: fuse 2 new states": lambda: m.fuse_context(feats),
            "per round: their keys/values": lambda: m.layers[0].project_context(fused, p2),
        }
        print("| part | ms (median of 200) |\n|---|---|")
        for name, fn in parts.items():
            print(f"| {name} | {median_ms(fn):.3f} |")


if __name__ == "__main__":
    main()
