"""Held-out greedy tau against training data size at equal budget (issue 8's >= 3-point curve):
one column per run, a row per evaluation, then the train-batch tau minus held-out tau at the end
(positive: the run memorises its data).
Usage: python docs/results/session18/data_curve_table.py LABEL=LOG ...   (same recipe and steps)"""

import json
import statistics
import sys

runs = [arg.split("=", 1) for arg in sys.argv[1:]]
curves = {}
for label, path in runs:
    rows = [json.loads(line) for line in open(path)]
    window, held, gap = [], {}, None
    for r in rows:
        if "tau_greedy" in r:
            window.append(r["tau_greedy"])
        if "held_out_tau_greedy" in r:
            held[r["step"]] = (r["held_out_tau_greedy"], r["held_out_tau_greedy_k3"])
            gap = statistics.mean(window[-300:]) - r["held_out_tau_greedy"]
    curves[label] = (held, gap)
steps = sorted(set.intersection(*(set(h) for h, _ in curves.values())))
print("| step | " + " | ".join(curves) + " |")
print("|---" * (len(curves) + 1) + "|")
for s in steps:
    print(f"| {s} | " + " | ".join(f"{h[s][0]:.3f}" for h, _ in curves.values()) + " |")
last = steps[-1]
print("| capped at 3 drafts, last | " + " | ".join(f"{h[last][1]:.3f}" for h, _ in curves.values()) + " |")
print("| train-batch - held-out, last | " + " | ".join(f"{g:+.3f}" for _, g in curves.values()) + " |")
