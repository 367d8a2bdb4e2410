"""Issue 8, session 30: verify-step time by token count inside real decode loops (plain and the
shipped DSpark on 4 gsm + 4 humaneval dev prompts, 128 tokens), next to the cached calibration.
Usage: python docs/results/session30/verify_by_rows.py DEV_DIR
"""

import collections
import json
import statistics
import sys
import time

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import speculative_generate

dev = sys.argv[1]
target = load_target(dtype="float32")
runner = target.runner
times: dict[tuple[str, int], list[float]] = collections.defaultdict(list)
forward = runner.forward
method = ""


def timed(ids, n_logits=1, hidden=()):
    t0 = time.perf_counter()
    out = forward(ids, n_logits=n_logits, hidden=hidden)
    if n_logits:  # a decode step (the prefill asks for no logits)
        times[(method, int(ids.shape[-1]))].append(time.perf_counter() - t0)
    return out


runner.forward = timed
rows = []
for suite in ("gsm", "humaneval"):
    rows += [json.loads(line) for line in open(f"{dev}/{suite}-answers.jsonl")][:4]
drafters = {"plain": build_drafter("plain", target), "dspark": build_drafter("dspark", target)}
for row in rows:
    ids = target.encode(row["prompt"], chat=True)
    for method, drafter in drafters.items():  # noqa: B007 (timed() reads `method`)
        speculative_generate(runner, drafter, ids, target.stop_rule(128, ()))
print("calibrated", {k: round(v * 1e3, 1) for k, v in runner.step_cost.items() if k <= 8})
for key in sorted(times):
    v = times[key]
    print(key, len(v), f"median {statistics.median(v) * 1e3:.1f} mean {statistics.mean(v) * 1e3:.1f} ms")
