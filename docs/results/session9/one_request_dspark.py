"""Issue 9: one DSpark request at a time in process: `generate`'s engine (cost-aware draft length
from the single-runner calibration) against BatchDecoder with one slot and each schedule, prompt
by prompt in turn after a warm-up; tok/s, drafts and accepted drafts per round.
Usage: python docs/results/session9/one_request_dspark.py"""

import time

import torch

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine import batch_cost
from draftsmith.engine.batch_decode import BatchDecoder, batch_generate
from draftsmith.engine.decode import speculative_generate
from draftsmith.serving.loadtest import load_prompts

target = load_target(dtype="float32")  # the CPU default until session 18
prompts = [target.encode(p, chat=c) for p, c in load_prompts("mtbench,humaneval,gsm", 16)][:12]
stop = target.stop_rule(64, ())
cost = batch_cost.cached(target.runner)
dspark = build_drafter("dspark", target)
arms = ["generate", "fixed", "history", "confidence"]


def run(arm: str, prompt: list[int]):
    if arm == "generate":
        return speculative_generate(target.runner, dspark.fork(), torch.tensor(prompt), stop).stats
    decoder = BatchDecoder(target.runner, 1, 640, arm, cost)
    return batch_generate(decoder, [prompt], [dspark.fork()], stop)[0][2]


for arm in arms:
    run(arm, prompts[0])  # warm-up
totals = {arm: [0, 0.0, 0, 0, 0] for arm in arms}  # tokens, seconds, rounds, drafted, accepted
for prompt in prompts:
    for arm in arms:
        t0 = time.perf_counter()
        stats = run(arm, prompt)
        seconds = time.perf_counter() - t0
        for i, v in enumerate((stats.new_tokens, seconds, stats.rounds, stats.drafted, stats.accepted)):
            totals[arm][i] += v
for arm, (tokens, seconds, rounds, drafted, accepted) in totals.items():
    name = "generate" if arm == "generate" else f"BatchDecoder(1 slot, {arm})"
    print(
        f"dspark, one request: {name} {tokens / seconds:.1f} tok/s, {drafted / rounds:.2f} drafts and "
        f"{accepted / rounds:.2f} accepted per round",
        flush=True,
    )
