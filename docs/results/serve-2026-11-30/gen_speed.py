"""Single-request `draftsmith generate` tok/s on the prompts of the load test's concurrency-1 level
(the first 16 of mtbench,humaneval,gsm; 64 tokens), for the server-vs-generate comparison."""

import time

from draftsmith.api import generate, load_target
from draftsmith.serving.loadtest import load_prompts

target = load_target(dtype="float32")  # the CPU default until session 18
prompts = load_prompts("mtbench,humaneval,gsm", 16)[:16]
for method in ["plain", "dspark"]:
    tokens, seconds = 0, 0.0
    for text, chat in prompts:
        t0 = time.perf_counter()
        out = generate(target, text, method, max_new_tokens=64, chat=chat)
        seconds += time.perf_counter() - t0
        tokens += len(out.tokens)
    print(f"{method}: {tokens} tokens in {seconds:.1f} s = {tokens / seconds:.2f} tok/s", flush=True)
