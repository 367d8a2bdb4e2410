"""The session-21 recipe A/B (depth_ab.sh): per arm, held-out greedy tau at each evaluation, capped at
3 drafts at the end, the mean train-batch greedy tau of the last 50 steps (memorisation check) and
the wall time. Usage: python docs/results/session21/ab_table.py LABEL=DIR ..."""

import json
import sys
from pathlib import Path

runs = {}
for arg in sys.argv[1:]:
    label, path = arg.split("=", 1)
    runs[label] = [json.loads(line) for line in open(Path(path) / "train_log.jsonl")]
evals = sorted({r["step"] for rows in runs.values() for r in rows if "held_out_tau_greedy" in r})
head = " | ".join(f"step {s}" for s in evals)
print(f"| arm | {head} | capped at 3, end | train-batch (last 50) | wall |")
print("|---" * (len(evals) + 4) + "|")
for label, rows in runs.items():
    by = {r["step"]: r for r in rows if "held_out_tau_greedy" in r}
    cells = [f"{by[s]['held_out_tau_greedy']:.3f}" if s in by else "-" for s in evals]
    tail = [r["tau_greedy"] for r in rows[-50:] if "tau_greedy" in r]
    train = f"{sum(tail) / len(tail):.3f}" if tail else "-"
    end = by[max(by)]
    print(
        f"| {label} | " + " | ".join(cells) + f" | {end['held_out_tau_greedy_k3']:.3f} | {train} | "
        f"{rows[-1]['seconds'] / 60:.1f} min |"
    )
