"""Issue 8, session 29: would DSpark's confidence head pay as a per-round draft length on this CPU?

At every position of the dev answers (the target's greedy 128-token answers, teacher-forced) the
shipped DSpark drafts 3 tokens as in decoding and records each slot's STS-calibrated confidence; the
target's answer says how many it would accept. A walk of greedy decoding (start at the first answer
token, jump accepted + 1) then replays draft-length policies, each round paying the measured
drafting time and the runner's calibrated cost of a step of k + 1 rows (fp32, free shapes):
  full     verify all 3 drafts (the drafter's own length)
  history  the engine's rule until now (draft_length.best_length: the running acceptance of this
           request per position, every 8th round full; a round it sets to 0 drafts nothing)
  gain     verify the k that maximises 1 + S_1 + ... + S_k - R * cost(k + 1): S_j the product of the
           first j confidences (the estimated chance that j drafts are accepted), R the walk's own
           running tokens/s (the price of a second in tokens)
  history+gain  the history rule's length, shortened further by the gain rule
  oracle   the k = accepted count (the best any length rule could do with these drafts)
It prints simulated tokens/s against plain decoding (1 token per cost(1)).
Usage: python docs/results/session29/conf_length_sim.py DEV_DIR [per_suite] [skip] [draft_ms]
"""

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session28"))
from walk_lib import SUITES, K, dev_rows, hits, positions  # noqa: E402

from draftsmith.api import load_target  # noqa: E402
from draftsmith.drafters.registry import build_drafter  # noqa: E402
from draftsmith.engine.draft_length import AcceptanceHistory, best_length  # noqa: E402
from draftsmith.engine.sampling import SamplingParams  # noqa: E402

dev = sys.argv[1]
per_suite = int(sys.argv[2]) if len(sys.argv) > 2 else 10
skip = int(sys.argv[3]) if len(sys.argv) > 3 else 15
draft_s = float(sys.argv[4]) / 1000 if len(sys.argv) > 4 else 6.56e-3  # session 28's bench, dspark
target = load_target(dtype="float32", fixed_rows=0)
cost = target.runner.step_cost  # rows -> seconds, this machine's calibration
dspark = build_drafter("dspark", target)
greedy = SamplingParams()
print(f"step cost (ms) by rows: {', '.join(f'{r}: {1000 * cost[r]:.1f}' for r in range(1, K + 2))}; "
      f"drafting {1000 * draft_s:.2f} ms a round")


def survival(conf: list[float]) -> list[float]:
    out, s = [], 1.0
    for c in conf:
        s *= c
        out.append(s)
    return out


def pick_gain(conf: list[float], rate: float) -> int:
    surv, best_k, best, gain = survival(conf), 0, 1.0 - rate * cost[1], 1.0
    for k, s in enumerate(surv, 1):
        gain += s
        if gain - rate * cost[k + 1] > best:
            best_k, best = k, gain - rate * cost[k + 1]
    return best_k


def replay(rows: list[tuple[int, list[float]]], policy: str) -> tuple[int, float, int]:
    """(tokens, seconds, rounds) of the greedy walk over one answer (one request) under `policy`."""
    j = rounds = 0
    seconds, tokens = 0.0, 0
    history = AcceptanceHistory()  # per request, as in speculative_generate
    while j < len(rows):
        h, conf = rows[j]
        rate = tokens / seconds if seconds else 1 / (cost[1] + draft_s)
        k_round = K
        if policy.startswith("history") and rounds % 8 != 7:  # decided before drafting
            k_round = best_length(K, cost, history)
        if policy == "oracle":
            k = h
        elif policy in ("gain", "history+gain") and k_round:
            k = min(k_round, pick_gain(conf, rate))
        else:
            k = k_round
        n = min(h, k) + 1
        seconds += (draft_s if k_round else 0.0) + cost[k + 1]
        tokens += n
        rounds += 1
        history.update(k, n - 1)
        j += n
    return tokens, seconds, rounds


t0 = time.time()
POLICIES = ("full", "history", "gain", "history+gain", "oracle")
print("\n| suite | plain tok/s | " + " | ".join(POLICIES) + " | gain: drafts verified a round |")
print("|---|---|" + "---|" * len(POLICIES) + "---|")
ratios = {p: [] for p in POLICIES}
with torch.inference_mode():
    for suite in SUITES:
        per = {p: [0, 0.0, 0] for p in ratios}
        verified = []
        for r in dev_rows(dev, suite, skip, per_suite):
            rows = []
            for _, ctx, truth, d in positions(target, dspark, r):
                tok = d.propose(ctx, K, greedy, None).tokens.tolist()
                rows.append((hits(tok, truth), list(d.confidences)))
            for p in per:
                t, s, n = replay(rows, p)
                per[p][0] += t
                per[p][1] += s
                per[p][2] += n
            # how many drafts the gain rule verifies, at the walk's own rate
            t, s, n = replay(rows, "full")
            verified += [pick_gain(c, t / s) for _, c in rows]
        plain = 1 / cost[1]
        cells = []
        for p in ratios:
            x = per[p][0] / per[p][1] / plain
            ratios[p].append(x)
            cells.append(f"{x:.3f}x (tau {per[p][0] / per[p][2]:.2f})")
        print(f"| {suite} | {plain:.1f} | " + " | ".join(cells) + f" | {statistics.mean(verified):.2f} |")
print("| mean | | " + " | ".join(f"{statistics.mean(v):.3f}x" for v in ratios.values()) + " | |")
print(f"\n({time.time() - t0:.0f} s; answers {skip}-{skip + per_suite - 1} of each suite)")
