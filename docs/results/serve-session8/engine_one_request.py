"""One request at a time, plain, in process: speculative_generate (what `generate` runs) against
BatchDecoder with 1 and 32 slots, prompt by prompt in turn (so a VM slowdown hits all three), after
one untimed warm-up request each, on the first 16 loadtest prompts, 64 tokens.
Usage: python docs/results/serve-session8/engine_one_request.py"""

import time

import torch

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine import batch_cost
from draftsmith.engine.batch_decode import BatchDecoder, batch_generate
from draftsmith.engine.decode import speculative_generate
from draftsmith.serving.loadtest import load_prompts

target = load_target(dtype="float32")  # the CPU default until session 18
prompts = [target.encode(p, chat=c) for p, c in load_prompts("mtbench,humaneval,gsm", 16)][:16]
stop = target.stop_rule(64, ())
cost = batch_cost.cached(target.runner)
plain = build_drafter("plain", target)
decoders = {slots: BatchDecoder(target.runner, slots, 640, "fixed", cost) for slots in (1, 32)}


def run(arm: str, prompt: list[int]) -> int:
    if arm == "generate":
        return len(speculative_generate(target.runner, plain.fork(), torch.tensor(prompt), stop).tokens)
    return len(batch_generate(decoders[int(arm)], [prompt], [plain.fork()], stop)[0][0])


arms = ["generate", "1", "32"]
for arm in arms:
    run(arm, prompts[0])  # warm-up
tokens, seconds = dict.fromkeys(arms, 0), dict.fromkeys(arms, 0.0)
for prompt in prompts:
    for arm in arms:
        t0 = time.perf_counter()
        tokens[arm] += run(arm, prompt)
        seconds[arm] += time.perf_counter() - t0
for arm in arms:
    name = "generate" if arm == "generate" else f"BatchDecoder({arm} slots)"
    print(f"plain, one request: {name} {tokens[arm] / seconds[arm]:.1f} tok/s", flush=True)
