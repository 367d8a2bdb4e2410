"""Issue 8, session 30: what a wrong step-cost table costs the history rule.

In the decode loop on this VM (session 30, `verify_by_rows.py`) a 4-token verify step took 1.22x a
1-token step (59.3 / 48.4 ms medians, 196 and 461 steps) and an 8-token one 1.45x, where the cached
calibration (context 128, fastest of 5) says 1.13x and 1.38x. This replays greedy decoding over the
shipped DSpark's saved drafts (length_cap_sim.py) with the step costs of the loop ("true": the
calibrated premiums scaled by SCALE) and compares the history rule deciding by the calibrated table
against deciding by the true one.
Usage: python docs/results/session30/cost_sim.py DEV_DIR [SCALE]
"""

import statistics
import sys
from pathlib import Path

import torch

from draftsmith.api import load_target
from draftsmith.engine.draft_length import AcceptanceHistory, best_length

SUITES = ("humaneval", "mtbench", "gsm", "alpaca")
K, DRAFT_A, DRAFT_B = 6, 3.6e-3, 0.8e-3
dev = Path(sys.argv[1])
scale = float(sys.argv[2]) if len(sys.argv) > 2 else 1.7
calib = load_target(dtype="float32", fixed_rows=0).runner.step_cost
true = {n: calib[1] * (1 + scale * (c / calib[1] - 1)) for n, c in calib.items()}


def replay(rows, decide: dict) -> tuple[float, float]:
    j = rounds = tokens = 0
    seconds = 0.0
    history = AcceptanceHistory()
    while j < len(rows):
        h, _ = rows[j]
        k = K if rounds % 8 == 7 else best_length(K, decide, history)
        n = min(h, k) + 1
        seconds += (DRAFT_A + DRAFT_B * k if k else 0.0) + true[k + 1]
        history.update(k, n - 1)
        tokens, rounds, j = tokens + n, rounds + 1, j + n
    return tokens, seconds


data = torch.load(dev / "drafts6-15-10.pt")
print(f"true premium at 4 / 8 tokens: {true[4] / true[1]:.2f}x / {true[8] / true[1]:.2f}x (scale {scale})")
print("| history rule decides by | " + " | ".join(SUITES) + " | mean |\n|---|---|---|---|---|---|")
for name, table in (("the calibrated table", calib), ("the true table", true)):
    v = []
    for s in SUITES:
        t = sec = 0.0
        for rows in data[s]:
            a, b = replay(rows, table)
            t, sec = t + a, sec + b
        v.append(t / sec * true[1])
    print(f"| {name} | " + " | ".join(f"{x:.3f}x" for x in v) + f" | {statistics.mean(v):.3f}x |")
