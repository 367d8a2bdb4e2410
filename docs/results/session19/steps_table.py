"""Held-out greedy tau against training steps (issue 8): runs of the same recipe on the same cache
with different budgets, one column each (LABEL=LOG, a train_log.jsonl), every evaluation step of
any run as a row ("-" where a run has none), the learning rate of the first run, and the capped
(3 drafts) tau at each run's end.
Usage: python docs/results/session19/steps_table.py LABEL=LOG ..."""

import json
import sys

runs = {}
for arg in sys.argv[1:]:
    label, path = arg.split("=", 1)
    rows = [json.loads(line) for line in open(path)]
    runs[label] = {r["step"]: r for r in rows if "held_out_tau_greedy" in r}
steps = sorted(set().union(*runs.values()))
print("| step | " + " | ".join(runs) + " | lr (" + next(iter(runs)) + ") |")
print("|---" * (len(runs) + 2) + "|")
first = next(iter(runs.values()))
for s in steps:
    cells = [f"{r[s]['held_out_tau_greedy']:.3f}" if s in r else "-" for r in runs.values()]
    lr = f"{first[s]['lr']:.2g}" if s in first and "lr" in first[s] else "-"
    print(f"| {s} | " + " | ".join(cells) + f" | {lr} |")
ends = [r[max(r)]["held_out_tau_greedy_k3"] for r in runs.values()]
print("| capped at 3 drafts, end | " + " | ".join(f"{v:.3f}" for v in ends) + " | |")
