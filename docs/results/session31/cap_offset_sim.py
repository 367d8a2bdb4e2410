"""Issue 8, session 31: how many slots should the prob rule draft before its cut?

The engine drafts the history rule's length + 1 (session 30), then cuts by the drafted tokens'
probabilities. This replays the saved 6-slot drafts of the shipped DSpark (session 30's
`length_cap_sim.py` writes DEV_DIR/drafts6-*.pt) with the history rule alone and with the prob rule
drafting the history length + 0 / 1 / 2 first, under the runner's calibrated step costs with their
row premiums scaled by 0.5 / 1 / 1.5 (this VM's tables varied that much between calibrations).
Drafting is charged DRAFT_A + DRAFT_B * slots (DRAFT_B from the environment, default 0.8e-3 s).
Usage: [DRAFT_B=S] python docs/results/session31/cap_offset_sim.py DEV_DIR
"""

import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prob_power_sim import replay  # noqa: E402  (the engine's rule over saved drafts)

from draftsmith.api import load_target  # noqa: E402

dev = Path(sys.argv[1])
calibrated = load_target(dtype="float32", fixed_rows=0).runner.step_cost

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
                    a, b, _ = replay(rows, cost, extra)
                    t, s = t + a, s + b
                speeds.append(t / s * cost[1])
            cells.append(f"{statistics.mean(speeds):.3f}x")
        print(f"| {saved.name} | {scale} | " + " | ".join(cells) + " |")
print(f"\n(calibrated step costs {[round(calibrated[n] * 1e3, 1) for n in range(1, 8)]} ms for 1-7 tokens)")
