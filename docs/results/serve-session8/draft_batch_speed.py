"""Drafting time of the shipped DFlash/DSpark for n concurrent requests: n single `propose` calls
against one `propose_batch` call (7 drafts each, contexts = the first 32 loadtest prompts, up to
400 tokens). Medians of 5. Usage: python draft_batch_speed.py"""

import statistics
import time

import torch

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.sampling import SamplingParams
from draftsmith.engine.slots import SlotRunner
from draftsmith.serving.loadtest import load_prompts

target = load_target(dtype="float32")  # the CPU default until session 18
texts = [text for text, _ in load_prompts("mtbench,humaneval,gsm", 32)][:32]
greedy = SamplingParams()
for method in ["dspark", "dflash"]:
    base = build_drafter(method, target)
    runner = SlotRunner(target.runner, 32, 640)
    forks, seqs = [], []
    with torch.inference_mode():
        for slot, text in enumerate(texts):
            ids = torch.tensor(target.tokenizer(text)["input_ids"][:400])
            fork = base.fork()
            fork.start(ids, runner.forward([(slot, ids[:-1])], fork.hidden_layers, n_logits=0)[0].hidden, 640)
            forks.append(fork)
            seqs.append(ids)
    for n in (1, 2, 4, 8, 16, 32):
        one, many = [], []
        for _ in range(5):
            t0 = time.perf_counter()
            for fork, ids in zip(forks[:n], seqs[:n], strict=True):
                fork.propose(ids, 7, greedy, None)
            one.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            type(base).propose_batch(forks[:n], seqs[:n], [7] * n, [greedy] * n, [None] * n)
            many.append(time.perf_counter() - t0)
        a, b = statistics.median(one) * 1e3, statistics.median(many) * 1e3
        print(f"| {method} | {n} | {a:.1f} | {b:.1f} | {a / b:.1f}x |", flush=True)
