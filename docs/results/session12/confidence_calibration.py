"""Issue 9: is DSpark's (STS-scaled) confidence calibrated on the load-test prompts the scheduler
sees? Confidence-scheduled DSpark decodes n prompts in process at n slots (batched, as the
server runs them); every judged draft slot gives (position, confidence, accepted), as
`record_confidences` logs them. Prints per position: slots judged, mean confidence, acceptance.
Timing does not enter (only which steps draft), so this may run beside other work.
Usage: python docs/results/session12/confidence_calibration.py [SLOTS] [TOKENS]"""

import sys
from collections import defaultdict

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine import batch_cost
from draftsmith.engine.batch_decode import BatchDecoder, batch_generate
from draftsmith.serving.loadtest import load_prompts

n = int(sys.argv[1]) if len(sys.argv) > 1 else 16
tokens = int(sys.argv[2]) if len(sys.argv) > 2 else 128
target = load_target()
dspark = build_drafter("dspark", target)
prompts = [target.encode(p, chat=c) for p, c in load_prompts("mtbench,humaneval,gsm,alpaca", n)][:n]
dec = BatchDecoder(target.runner, n, 640, "fixed", batch_cost.cached(target.runner))  # every slot drafts
out = batch_generate(dec, prompts, [dspark.fork() for _ in prompts], target.stop_rule(tokens, ()), k=7)
by_pos: dict[int, list[tuple[float, bool]]] = defaultdict(list)
for _, _, stats in out:
    for pos, conf, ok in stats.confidence:
        by_pos[pos].append((conf, ok))
print(f"## {n} prompts x {tokens} tokens, DSpark k=7 every step (shipped drafter, STS as shipped)")
print("| draft position | judged | mean confidence | accepted | confidence / accepted |")
print("|---|---|---|---|---|")
for pos in sorted(by_pos):
    rows = by_pos[pos]
    c = sum(x for x, _ in rows) / len(rows)
    a = sum(ok for _, ok in rows) / len(rows)
    print(f"| {pos} | {len(rows)} | {c:.3f} | {a:.3f} | {c / a if a else float('inf'):.2f} |")
