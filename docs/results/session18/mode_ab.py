"""Issue 8's default mode: plain and speculative decoding in fp32 (packed) against bf16 (oneDNN-packed
since session 18) with fixed-shape steps, on the same prompts, interleaved, in one process. Checks
that every method's output equals plain decoding's in the same mode, and reports tok/s per mode and
method (median over prompts of per-prompt tok/s, per round) and plain bf16 / plain fp32.
Usage: [MODES=fp32,bf16,bf16:4,bf16:8] python docs/results/session18/mode_ab.py [PROMPTS_PER_SUITE]
[ROUNDS] [NEW_TOKENS] [METHODS]   (alone on the machine; a mode is DTYPE[:FIXED_ROWS], default auto rows;
the first mode is the reference of the "/ plain ref" column)"""

import os
import statistics
import sys
import time

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import speculative_generate
from draftsmith.evaluation.suites import load_suite

n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
new = int(sys.argv[3]) if len(sys.argv) > 3 else 64
methods = (sys.argv[4] if len(sys.argv) > 4 else "plain,ngram,dspark").split(",")
modes = {}
DTYPES = {"fp32": "float32", "bf16": "bfloat16"}
for label in os.environ.get("MODES", "fp32,bf16").split(","):
    dtype, _, rows = label.partition(":")
    target = load_target(dtype=DTYPES[dtype], fixed_rows=int(rows) if rows else None)
    drafters = {m: build_drafter(m, target) for m in methods}
    modes[label] = (target, drafters)
    print(f"{label}: fixed rows {target.runner.fixed_rows}, packed {target.runner.packed}, "
          f"1-token step {target.runner.step_cost.get(1, 0) * 1e3:.1f} ms", flush=True)
prompts = [p for s in ("humaneval", "mtbench", "gsm", "alpaca") for p in load_suite(s, n)]
rates = {(mode, m): [] for mode in modes for m in methods}
same = {(mode, m): 0 for mode in modes for m in methods}
for r in range(rounds):
    for i, p in enumerate(prompts):
        order = [(mode, m) for mode in modes for m in methods]
        order = order[i % len(order):] + order[: i % len(order)]  # rotate who goes first
        outs = {}
        for mode, m in order:
            target, drafters = modes[mode]
            ids = target.encode(p.text, chat=p.chat)
            t0 = time.perf_counter()
            res = speculative_generate(target.runner, drafters[m], ids, target.stop_rule(new))
            rates[(mode, m)].append(len(res.tokens) / (time.perf_counter() - t0))
            outs[(mode, m)] = res.tokens
        for mode, m in outs:
            same[(mode, m)] += outs[(mode, m)] == outs[(mode, "plain")]
    print(f"round {r + 1} done", flush=True)
ref = next(iter(modes))
print(f"| mode | method | tok/s (median) | / plain same mode | / plain {ref} | identical to plain |")
print("|---|---|---|---|---|---|")
med = {k: statistics.median(v) for k, v in rates.items()}
for mode, m in rates:
    print(f"| {mode} | {m} | {med[(mode, m)]:.1f} | {med[(mode, m)] / med[(mode, 'plain')]:.2f}x | "
          f"{med[(mode, m)] / med[(ref, 'plain')]:.2f}x | {same[(mode, m)]}/{len(prompts) * rounds} |")
