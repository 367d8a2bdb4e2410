"""Why the shipped DSpark's bench tau (1.54) sits below its held-out teacher-forced tau (1.87 capped at
3 drafts) (issue 8): real greedy decoding, 3 drafts every round (no adaptive shortening), on held-out
training prompts and on bench prompts, in fp32 and in the bf16 default: tau and acceptance by
position for each. Same prompts, same drafter; only the prompt source and the target dtype change.
Usage: python docs/results/session19/tau_gap.py [prompts per source] [max_new_tokens] [method]"""

import sys

from held_out import held_out_rows

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.engine.stats import GenerationStats
from draftsmith.evaluation.suites import load_suite

n = int(sys.argv[1]) if len(sys.argv) > 1 else 16
new = int(sys.argv[2]) if len(sys.argv) > 2 else 128
method = sys.argv[3] if len(sys.argv) > 3 else "dspark"
held = held_out_rows(n, new)
bench = [p for suite in ("humaneval", "gsm", "mtbench", "alpaca") for p in load_suite(suite, max(n // 4, 1))]
print(f"{method}, 3 drafts a round, {new} tokens; held-out categories: {[r['category'] for r in held]}")
print("| target dtype | prompts | tau | acc@1 | acc@2 | acc@3 | tokens |")
print("|---|---|---|---|---|---|---|")
for dtype in ("float32", "auto"):
    target = load_target(dtype=dtype)
    drafter = build_drafter(method, target)
    stop = StopRule(new, frozenset(target.eos_ids))
    sources = {
        "held-out (training mix)": [target.encode(r["prompt"], chat=True) for r in held],
        "bench (4 suites)": [target.encode(p.text, chat=p.chat) for p in bench],
    }
    for name, prompts in sources.items():
        total = GenerationStats()
        for ids in prompts:
            r = speculative_generate(target.runner, drafter.fork(), ids[:400], stop, k=3, adaptive=False)
            total.merge(r.stats)
        acc = [f"{a / d:.2f}" if d else "-" for a, d in zip(total.accepted_at, total.drafted_at, strict=True)]
        cells = " | ".join(acc[:3])
        print(f"| {dtype} | {name} | {total.tau:.3f} | {cells} | {total.new_tokens} |", flush=True)
