"""Issue 8's data-scaling A/B at equal budget: the same recipe and steps on 455k answer tokens
(the shipped run's log) and on 1.72M (session 17's run on $D/cache-all), held-out greedy tau at each
evaluation, and the train-batch tau over the 300 steps before it (the gap says whether the smaller
data set was being memorised).

Usage: python docs/results/session17/data_scaling.py METHOD SMALL_LOG LARGE_LOG [SMALL_TOKENS LARGE_TOKENS]
e.g. python docs/results/session17/data_scaling.py dspark docs/results/train-log-smollm2-dspark.jsonl \
    docs/results/session17/train-log-dspark-1.72M.jsonl
"""

import json
import statistics
import sys

method, small_path, large_path = sys.argv[1:4]
small_tokens, large_tokens = (float(x) for x in (sys.argv[4:6] or ("454988", "1719673")))
BATCH, ANCHORS = 8, 64  # train-long.sh


def curve(path: str) -> dict[int, tuple[float, float, float]]:
    """step -> (held-out greedy tau, capped at 3 drafts, mean train-batch greedy tau since the last eval)."""
    rows = [json.loads(line) for line in open(path)]
    out, window = {}, []
    for r in rows:
        if "tau_greedy" in r:
            window.append(r["tau_greedy"])
        if "held_out_tau_greedy" in r:
            train_tau = statistics.mean(window[-300:])
            out[r["step"]] = (r["held_out_tau_greedy"], r["held_out_tau_greedy_k3"], train_tau)
    return out


small, large = curve(small_path), curve(large_path)
sizes = f"{small_tokens / 1e6:.2f}M against {large_tokens / 1e6:.2f}M answer tokens"
print(f"## {method}: held-out greedy tau, {sizes}\n")
print("| step | anchors seen per answer token, small / large | held-out tau, small | large | large - small "
      "| capped at 3, small / large | train-batch tau - held-out, small / large |")
print("|---|---|---|---|---|---|---|")
for step in sorted(set(small) & set(large)):
    (hs, ks, ts), (hl, kl, tl) = small[step], large[step]
    seen = step * BATCH * ANCHORS
    print(
        f"| {step} | {seen / small_tokens:.2f} / {seen / large_tokens:.2f} "
        f"| {hs:.3f} | {hl:.3f} | {hl - hs:+.3f} "
        f"| {ks:.3f} / {kl:.3f} | {ts - hs:+.3f} / {tl - hl:+.3f} |"
    )
