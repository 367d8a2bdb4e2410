"""Issue 8, session 30: when does DSpark's `prob` length rule pay once drafting slots cost time?

Session 29's bench: the `prob` rule (cut a drafted block by the drafted tokens' own probabilities)
raised tau (1.59 against 1.55) but drafted all 6 slots every round (+1.95 ms a round) and lost
speed. This replays greedy decoding over dev answers with the shipped DSpark's real 6-slot drafts,
each round paying a drafting cost linear in the slots drafted (DRAFT_A + DRAFT_B * slots, fitted to
session 29's bench: 6.43 ms at the history rule's lengths, 8.38 ms at 6 slots) and the runner's
calibrated step cost for the rows verified, and compares how many slots to draft before the cut:
  history   the engine's default: best_length before drafting, no cut after
  prob-6    draft 6, cut by the gain rule (session 29's `prob`)
  prob-cap  draft history's length + 1 (6 every 8th round), cut by the gain rule
  prob-stop draft until the running product of probabilities falls below the floor at which no
            further row pays (rate x the cheapest marginal row + one slot's drafting), then cut
  oracle    draft and verify exactly what the target accepts
and where the oracle's lead comes from:
  cut-oracle   draft as history does, then verify exactly the drafts the target accepts
  skip-oracle  as history, but rounds whose first draft the target rejects draft nothing
The drafts are saved to DEV_DIR/drafts6-FIRST-N.pt (rerun: policies only, no drafting).
SCALE=1.7 charges each step the calibrated premium x 1.7 (what verify_by_rows.py measured in the
loop: 1.22x at 4 tokens); DECIDE=true lets the rules decide by those costs too.
Session 31 added prob-cap-model(-d): prob-cap pricing a row at the history model's rate (from the step
costs, no clock; -d: divided by 1.13 for drafting), which the engine now uses.
Usage: [SCALE=1.7] [DECIDE=true] python docs/results/session30/length_cap_sim.py DEV_DIR [first] [n]
"""

import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session28"))
import walk_lib  # noqa: E402

walk_lib.K = 6  # positions() returns the next K answer tokens
from walk_lib import SUITES, dev_rows, hits, positions  # noqa: E402

from draftsmith.api import load_target  # noqa: E402
from draftsmith.drafters.registry import build_drafter  # noqa: E402
from draftsmith.engine.draft_length import AcceptanceHistory, best_length, length_by_probs  # noqa: E402
from draftsmith.engine.sampling import SamplingParams  # noqa: E402

K = 6
DRAFT_A, DRAFT_B = 3.6e-3, 0.8e-3
dev = sys.argv[1]
first = int(sys.argv[2]) if len(sys.argv) > 2 else 15
count = int(sys.argv[3]) if len(sys.argv) > 3 else 10
target = load_target(dtype="float32", fixed_rows=0)
cost = target.runner.step_cost  # what the rules decide by
SCALE = float(os.environ.get("SCALE", "1"))  # charge the calibrated premiums x SCALE (1.7: the loop's)
DECIDE = os.environ.get("DECIDE", "calibrated")  # or "true": the rules decide by the charged costs
charged = {n: cost[1] * (1 + SCALE * (c / cost[1] - 1)) for n, c in cost.items()}
if DECIDE == "true":
    cost = charged
dspark = build_drafter("dspark", target, length_rule="prob")


def draft_s(slots: int) -> float:
    return DRAFT_A + DRAFT_B * slots if slots else 0.0


def collect() -> dict[str, list[list[tuple[int, list[float]]]]]:
    """suite -> answers -> positions: (accepted drafts of 6, the drafted tokens' probabilities)."""
    out = {}
    with torch.inference_mode():
        for suite in SUITES:
            out[suite] = []
            for r in dev_rows(dev, suite, first, count):
                rows = []
                for _, ctx, truth, d in positions(target, dspark, r):
                    tok = d.propose(ctx, K, SamplingParams(), None).tokens.tolist()
                    rows.append((hits(tok, truth), list(d.token_probs)))
                out[suite].append(rows)
    return out


def floor_stop(probs: list[float], rate: float, limit: int) -> int:
    """Slots drafted before the product of probabilities drops below what one more row could earn."""
    rows = sorted(cost)
    cheapest = min(cost[b] - cost[a] for a, b in zip(rows, rows[1:], strict=False) if b <= K + 1)
    floor = rate * (max(cheapest, 0.0) + DRAFT_B)
    survive, n = 1.0, 0
    for p in probs[:limit]:
        n += 1
        survive *= p
        if survive < floor:
            break
    return n


def modelled_rate(history: AcceptanceHistory, overhead: float) -> float:
    """Tokens/s the history model expects at its best length (step costs x overhead for drafting)."""
    best, expected, survive = 1.0 / cost[1], 1.0, 1.0
    for k in range(1, K + 1):
        survive *= history.conditional(k - 1)
        expected += survive
        best = max(best, expected / cost[k + 1])
    return best / overhead


def replay(rows, policy: str) -> tuple[int, float, int]:
    j = rounds = tokens = 0
    seconds = 0.0
    history = AcceptanceHistory()
    while j < len(rows):
        h, probs = rows[j]
        rate = tokens / seconds if seconds else 1 / (cost[1] + draft_s(3))
        explore = rounds % 8 == 7
        if policy.startswith("prob-cap-model"):  # deterministic: the history model's rate, no clock
            rate = modelled_rate(history, 1.0 if policy == "prob-cap-model" else 1.13)
        hist = K if explore else best_length(K, cost, history)
        if policy == "oracle":
            drafted = k = h
        elif policy == "history":
            drafted = k = hist
        elif policy == "cut-oracle":
            drafted, k = hist, min(h, hist)
        elif policy == "skip-oracle":
            drafted = k = hist if h else 0
        else:
            drafted = {
                "prob-6": K,
                "prob-cap": min(K, hist + 1) if not explore else K,
                "prob-cap-model": min(K, hist + 1) if not explore else K,
                "prob-cap-model-d": min(K, hist + 1) if not explore else K,
                "prob-stop": floor_stop(probs, rate, K),
            }[policy]
            k = length_by_probs(probs[:drafted], drafted, cost, rate)
        n = min(h, k) + 1
        seconds += draft_s(drafted) + charged[k + 1]
        tokens, rounds, j = tokens + n, rounds + 1, j + n
        history.update(k, n - 1)
    return tokens, seconds, rounds


saved = Path(dev) / f"drafts6-{first}-{count}.pt"
data = torch.load(saved) if saved.exists() else collect()
torch.save(data, saved)
policies = ("history", "prob-6", "prob-cap", "prob-cap-model", "prob-cap-model-d", "prob-stop")
policies += ("cut-oracle", "skip-oracle", "oracle")
print("| suite | " + " | ".join(policies) + " |\n|---|" + "---|" * len(policies))
means = {p: [] for p in policies}
for suite in SUITES:
    cells = []
    for p in policies:
        t = s = n = 0
        for rows in data[suite]:
            a, b, c = replay(rows, p)
            t, s, n = t + a, s + b, n + c
        x = t / s * charged[1]
        means[p].append(x)
        cells.append(f"{x:.3f}x (tau {t / n:.2f})")
    print(f"| {suite} | " + " | ".join(cells) + " |")
print("| mean | " + " | ".join(f"{statistics.mean(v):.3f}x" for v in means.values()) + " |")
print(f"\n(dev answers {first}-{first + count - 1} of each suite; step costs {cost})")
