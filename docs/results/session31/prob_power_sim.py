"""Issue 8, session 31: are DSpark's token probabilities, as the prob rule reads them, calibrated?

On held-out dev answers the shipped DSpark's probability of its drafted token runs ~0.05-0.12 above
the rate at which the target accepts it (printed per slot below). This replays greedy decoding over
the saved 6-slot drafts of session 30 (`length_cap_sim.py` writes DEV_DIR/drafts6-FIRST-N.pt) with
the engine's rule (draft the history length + 1, cut by the probabilities, a row priced at the
history model's rate) reading p ** alpha instead of p, for several alpha, on both saved slices.
Drafting is charged DRAFT_A + DRAFT_B * slots (DRAFT_B from the environment, default 0.8e-3 s),
verification the runner's calibrated step cost. `cap_offset_sim.py` and session 32's
`skip_probe.py` reuse `replay`.
Usage: python docs/results/session31/prob_power_sim.py DEV_DIR
"""

import os
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

from draftsmith.api import load_target
from draftsmith.engine.draft_length import AcceptanceHistory, best_length, length_by_probs, modelled_rate

K = 6
DRAFT_A, DRAFT_B = 3.6e-3, float(os.environ.get("DRAFT_B", "0.8e-3"))  # seconds: a draft pass, a slot


def replay(
    rows,
    cost: dict[int, float],
    extra: int | None = 1,
    alpha: float = 1.0,
    charged: dict[int, float] | None = None,
    skip: list[bool] | None = None,
) -> tuple[int, float, int]:
    """Greedy decoding over one answer's saved drafts: (tokens, seconds, rounds). extra None: the
    history rule alone; else draft the history length + extra slots (the full block every 8th round),
    then cut by the drafted tokens' probabilities ** alpha, a row priced at the history model's rate.
    charged: the step costs to charge, where they differ from those the rules decide by (`cost`);
    skip[j]: a non-exploring round at answer position j drafts nothing (session 32's skip probe)."""
    charged = charged or cost
    j = rounds = tokens = 0
    seconds = 0.0
    history = AcceptanceHistory()
    while j < len(rows):
        h, probs = rows[j]
        explore = rounds % 8 == 7
        if skip is not None and skip[j] and not explore:
            seconds += charged[1]
            tokens, rounds, j = tokens + 1, rounds + 1, j + 1
            continue
        hist = K if explore else best_length(K, cost, history)
        if extra is None:
            drafted = k = hist
        else:
            drafted = K if explore else min(K, hist + extra)
            p = [q**alpha for q in probs[:drafted]]
            k = length_by_probs(p, drafted, cost, modelled_rate(K, cost, history))
        n = min(h, k) + 1
        seconds += (DRAFT_A + DRAFT_B * drafted if drafted else 0.0) + charged[k + 1]
        tokens, rounds, j = tokens + n, rounds + 1, j + n
        history.update(k, n - 1)
    return tokens, seconds, rounds


def main() -> None:
    dev = Path(sys.argv[1])
    cost = load_target(dtype="float32", fixed_rows=0).runner.step_cost
    alphas = (None, 1.0, 1.2, 1.4, 1.7, 2.0)
    for saved in sorted(dev.glob("drafts6-*.pt")):
        data = torch.load(saved)
        print(f"\n{saved.name}: the drafted token's probability against its acceptance, slots 1-3")
        for slot in range(3):
            ps = np.array([p[slot] for a in data.values() for r in a for h, p in r if h >= slot])
            acc = np.array([h > slot for a in data.values() for r in a for h, p in r if h >= slot])
            print(f"  slot {slot + 1}: mean p {ps.mean():.3f}, accepted {acc.mean():.3f} (n={len(ps)})")
        print("| suite | " + " | ".join("history" if a is None else f"p^{a}" for a in alphas) + " |")
        print("|---|" + "---|" * len(alphas))
        means = {a: [] for a in alphas}
        for suite, answers in data.items():
            cells = []
            for a in alphas:
                t = s = n = 0
                for rows in answers:
                    x, y, z = replay(rows, cost, None) if a is None else replay(rows, cost, 1, a)
                    t, s, n = t + x, s + y, n + z
                means[a].append(t / s * cost[1])
                cells.append(f"{means[a][-1]:.3f}x")
            print(f"| {suite} | " + " | ".join(cells) + " |")
        print("| mean | " + " | ".join(f"{statistics.mean(v):.3f}x" for v in means.values()) + " |")
    print(f"\n(step costs {[round(cost[n] * 1e3, 1) for n in range(1, 8)]} ms for 1-7 tokens)")


if __name__ == "__main__":
    main()
