"""Issue 8, session 31: how many slots should the prob rule draft before its cut?

The engine drafts the history rule's length + 1 (session 30), then cuts by the drafted tokens'
probabilities. This replays the saved 6-slot drafts of the shipped DSpark (session 30's
`length_cap_sim.py` writes DEV_DIR/drafts6-*.pt) with the history rule alone and with the prob rule
drafting the history length + 0 / 1 / 2 first, under the runner's calibrated step costs with their
row premiums scaled by 0.5 / 1 / 1.5 (this VM's tables varied that much between calibrations).
Drafting is charged DRAFT_A + DRAFT_B * slots (DRAFT_B from the environment, default 0.8e-3 s).
Usage: [DRAFT_B=S] python docs/results/session31/cap_offset_sim.py DEV_DIR
"""

import os
import statistics
import sys
from pathlib import Path

import torch

from draftsmith.api import load_target
from draftsmith.engine.draft_length import AcceptanceHistory, best_length, length_by_probs, modelled_rate

K = 6
DRAFT_A, DRAFT_B = 3.6e-3, float(os.environ.get("DRAFT_B", "0.8e-3"))
dev = Path(sys.argv[1])
calibrated = load_target(dtype="float32", fixed_rows=0).runner.step_cost


def replay(rows, extra: int | None, cost: dict[int, float]) -> tuple[int, float]:
    """extra None: the history rule alone; else draft history + extra slots, then cut by probability."""
    j = rounds = tokens = 0
    seconds = 0.0
    history = AcceptanceHistory()
    while j < len(rows):
        h, probs = rows[j]
        explore = rounds % 8 == 7
        hist = K if explore else best_length(K, cost, history)
        if extra is None:
            drafted = k = hist
        else:
            drafted = K if explore else min(K, hist + extra)
            k = length_by_probs(probs[:drafted], drafted, cost, modelled_rate(K, cost, history))
        n = min(h, k) + 1
        seconds += (DRAFT_A + DRAFT_B * drafted if drafted else 0.0) + cost[k + 1]
        tokens, rounds, j = tokens + n, rounds + 1, j + n
        history.update(k, n - 1)
    return tokens, seconds


policies = (None, 0, 1, 2)
names = ["history" if e is None else f"prob, +{e}" for e in policies]
print("| drafts | row premium x | " + " | ".join(names) + " |")
print("|---|---|" + "---|" * len(policies))
for saved in sorted(dev.glob("drafts6-*.pt")):
    data = torch.load(saved)
    for scale in (0.5, 1.0, 1.5):
        cost = {n: calibrated[1] * (1 + scale * (c / calibrated[1] - 1)) for n, c in calibrated.items()}
        cells = []
        for extra in policies:
            speeds = []
            for answers in data.values():
                t = s = 0.0
                for rows in answers:
                    a, b = replay(rows, extra, cost)
                    t, s = t + a, s + b
                speeds.append(t / s * cost[1])
            cells.append(f"{statistics.mean(speeds):.3f}x")
        print(f"| {saved.name} | {scale} | " + " | ".join(cells) + " |")
print(f"\n(calibrated step costs {[round(calibrated[n] * 1e3, 1) for n in range(1, 8)]} ms for 1-7 tokens)")
