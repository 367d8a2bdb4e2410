"""Single-request decoding speed of a few methods in this process (what `draftsmith generate`
runs): the server check's 16 prompts x 64 new tokens, greedy; prints one JSON line.
Usage: [TOKENS_OUT=FILE.json] python docs/results/session13/speed.py LABEL METHOD [METHOD ...]
(TOKENS_OUT keeps every method's output tokens, to compare processes, e.g. packed vs dense)."""

import json
import os
import sys
import time

from draftsmith.api import generate, load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.serving.loadtest import load_prompts

N, TOKENS = 16, 64
label, methods = sys.argv[1], sys.argv[2:]
target = load_target(dtype="float32")  # the CPU default until session 18
prompts = load_prompts("mtbench,humaneval,gsm", N)[:N]
row = {"label": label, "packed": target.runner.packed}
outputs = {}
for method in methods:
    drafter = build_drafter(method, target)
    generate(target, prompts[0][0], drafter.fork(), max_new_tokens=8, chat=prompts[0][1])  # warm
    tokens, seconds, outs = 0, 0.0, []
    for text, chat in prompts:
        t0 = time.perf_counter()
        done = generate(target, text, drafter.fork(), max_new_tokens=TOKENS, chat=chat)
        seconds += time.perf_counter() - t0
        tokens += len(done.tokens)
        outs.append(done.tokens)
    row[method] = round(tokens / seconds, 2)
    outputs[method] = outs
row["identical_to_plain"] = {m: outputs[m] == outputs["plain"] for m in methods if "plain" in outputs}
print(json.dumps(row), flush=True)
if os.environ.get("TOKENS_OUT"):
    with open(os.environ["TOKENS_OUT"], "w") as f:
        json.dump(outputs, f)
