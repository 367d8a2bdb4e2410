"""Issue 9's one-user check, interleaved: the server at concurrency 1 and in-process `generate`
(what `draftsmith generate` runs) on the same prompts, method by method, round after round, so a
slow spell of the VM hits both alike. Prints per-round tok/s and the median ratio.

Usage: python server_vs_generate.py OUT.json plain=http://127.0.0.1:8101 dspark=http://127.0.0.1:8103
(servers started beforehand, see server_vs_generate.sh; the method name is what `generate` runs).
GEN_DTYPE=auto loads `generate`'s target in the default dtype (bf16 on CPUs with native bf16 since
session 18, as `serve --max-batch 1` does); the default float32 is what `serve --max-batch N` runs."""

import json
import os
import statistics
import sys
import time

from draftsmith.api import generate, load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.serving.loadtest import load_prompts, run_loadtest

ROUNDS, N, TOKENS = 3, 16, 64
out_path, servers = sys.argv[1], dict(arg.split("=", 1) for arg in sys.argv[2:])
target = load_target(dtype=os.environ.get("GEN_DTYPE", "float32"))
prompts = load_prompts("mtbench,humaneval,gsm", N)[:N]  # what loadtest's level 1 sends
# built once, as the server and `draftsmith generate` do; each prompt decodes with a fresh fork
# (session 8's version built the drafter per prompt, so DSpark's generate timing included loading it)
drafters = {method: build_drafter(method, target) for method in servers}
rows = []
for r in range(ROUNDS):
    for method, url in servers.items():
        report = run_loadtest(url, prompts, [1], N, TOKENS, 600, log=lambda m: None)
        server = report["levels"][0]["total_tok_s"]
        tokens, seconds = 0, 0.0
        for text, chat in prompts:
            t0 = time.perf_counter()
            done = generate(target, text, drafters[method].fork(), max_new_tokens=TOKENS, chat=chat)
            seconds += time.perf_counter() - t0
            tokens += len(done.tokens)
        row = {"round": r, "method": method, "server_tok_s": server, "generate_tok_s": tokens / seconds}
        rows.append(row)
        print(json.dumps(row), flush=True)
summary = {}
for method in servers:
    mine = [row for row in rows if row["method"] == method]
    s = statistics.median(row["server_tok_s"] for row in mine)
    g = statistics.median(row["generate_tok_s"] for row in mine)
    # each round pairs a server pass with a generate pass minutes apart: the median of the paired
    # ratios is robust to the VM drifting between rounds, the ratio of medians is not
    paired = statistics.median(row["server_tok_s"] / row["generate_tok_s"] for row in mine)
    summary[method] = {"server_tok_s": s, "generate_tok_s": g, "ratio": s / g, "paired_ratio": paired}
    print(
        f"{method}: server {s:.1f} tok/s, generate {g:.1f} tok/s, ratio {s / g:.2f} (medians of {ROUNDS}); "
        f"median of per-round ratios {paired:.2f}"
    )
json.dump({"rows": rows, "summary": summary}, open(out_path, "w"), indent=1)
