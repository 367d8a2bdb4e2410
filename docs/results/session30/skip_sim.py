"""Issue 8, session 30: can a signal known before drafting tell DSpark's hopeless rounds apart?

length_cap_sim.py: of the oracle's +0.28x over the engine's history rule on this CPU, +0.20x comes
from rounds whose first draft the target rejects drafting nothing (no drafting time, a 1-row step).
Two signals are free before a round drafts: the target's probability of the token it just chose
(the bonus; every verify step computes it) and whether the last round that drafted had its first
draft rejected (then one round is skipped). This measures each signal's first-slot AUC and replays greedy
decoding (as
length_cap_sim.py: the shipped DSpark's saved 6-slot drafts, drafting DRAFT_A + DRAFT_B x slots,
calibrated step costs, the history rule's length) with rounds skipped when the signal is below a
threshold chosen on dev answers 0-14 and tested on 15-24.
Needs length_cap_sim.py's saved drafts (DEV/drafts6-0-15.pt and DEV/drafts6-15-10.pt).
Usage: python docs/results/session30/skip_sim.py DEV_DIR
"""

import bisect
import json
import statistics
import sys
from pathlib import Path

import torch

from draftsmith.api import load_target
from draftsmith.engine.draft_length import AcceptanceHistory, best_length

SUITES = ("humaneval", "mtbench", "gsm", "alpaca")
K, DRAFT_A, DRAFT_B = 6, 3.6e-3, 0.8e-3
dev = Path(sys.argv[1])
target = load_target(dtype="float32", fixed_rows=0)
cost = target.runner.step_cost


def bonus_probs(first: int, n: int) -> dict[str, list[list[float]]]:
    """suite -> answers -> per answer position: the target's probability of the anchor token."""
    out = {}
    with torch.inference_mode():
        for suite in SUITES:
            out[suite] = []
            rows = [json.loads(x) for x in open(dev / f"{suite}-answers.jsonl")][first : first + n]
            for r in rows:
                ids = torch.tensor(target.encode(r["prompt"], chat=True))
                full = torch.cat([ids, torch.tensor(r["answer_ids"][:128], dtype=ids.dtype)])
                target.runner.reset(len(full) + 8)
                logits = target.runner.forward(full, n_logits=len(full)).logits.float()
                p = logits.softmax(-1)
                a0 = len(ids) - 1
                out[suite].append(
                    [float(p[a - 1, full[a]]) for a in range(a0, a0 + len(r["answer_ids"][:128]))]
                )
    return out


def draft_s(slots: int) -> float:
    return DRAFT_A + DRAFT_B * slots if slots else 0.0


def replay(rows, pb, policy: str, theta: float) -> tuple[int, float, int]:
    j = rounds = tokens = 0
    seconds, last_first_hit = 0.0, True
    history = AcceptanceHistory()
    while j < len(rows):
        h, _ = rows[j]
        k = K if rounds % 8 == 7 else best_length(K, cost, history)
        skip = {
            "history": False,
            "skip-oracle": h == 0,
            "bonus-p": pb[j] < theta,
            "last-miss": not last_first_hit,
            "both": pb[j] < theta and not last_first_hit,
        }[policy]
        if skip:
            k, last_first_hit = 0, True  # one round skipped per miss
        n = min(h, k) + 1
        seconds += draft_s(k) + cost[k + 1]
        if k:
            history.update(k, n - 1)
            last_first_hit = h > 0
        tokens, rounds, j = tokens + n, rounds + 1, j + n
    return tokens, seconds, rounds


def speed(data, pbs, policy: str, theta: float = 0.0) -> dict[str, float]:
    out = {}
    for suite in SUITES:
        t = s = 0.0
        for rows, pb in zip(data[suite], pbs[suite], strict=True):
            a, b, _ = replay(rows, pb, policy, theta)
            t, s = t + a, s + b
        out[suite] = t / s * cost[1]
    return out


def auc(data, pbs) -> float:
    pos = [
        p
        for s in SUITES
        for rows, pb in zip(data[s], pbs[s], strict=True)
        for (h, _), p in zip(rows, pb, strict=True)
        if h
    ]
    neg = sorted(
        p
        for s in SUITES
        for rows, pb in zip(data[s], pbs[s], strict=True)
        for (h, _), p in zip(rows, pb, strict=True)
        if not h
    )
    return sum(
        bisect.bisect_left(neg, p) + 0.5 * (bisect.bisect_right(neg, p) - bisect.bisect_left(neg, p))
        for p in pos
    ) / (len(pos) * len(neg))


fit, test = torch.load(dev / "drafts6-0-15.pt"), torch.load(dev / "drafts6-15-10.pt")
pb_fit, pb_test = bonus_probs(0, 15), bonus_probs(15, 10)
print(
    "first-slot AUC of the bonus token's target probability:",
    f"fit {auc(fit, pb_fit):.3f}, test {auc(test, pb_test):.3f}",
)
grid = [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]
for policy in ("bonus-p", "both"):
    fits = {th: statistics.mean(speed(fit, pb_fit, policy, th).values()) for th in grid}
    print(policy, "fit mean speed by threshold:", {th: round(v, 3) for th, v in fits.items()})
best = {
    p: max(grid, key=lambda th, p=p: statistics.mean(speed(fit, pb_fit, p, th).values()))
    for p in ("bonus-p", "both")
}
print("\n| policy (tested on answers 15-24) | " + " | ".join(SUITES) + " | mean |\n|---|---|---|---|---|---|")
for policy, th in (
    ("history", 0.0),
    ("last-miss", 0.0),
    ("bonus-p", best["bonus-p"]),
    ("both", best["both"]),
    ("skip-oracle", 0.0),
):
    v = speed(test, pb_test, policy, th)
    name = f"{policy} (threshold {th})" if policy in best else policy
    print(
        f"| {name} | "
        + " | ".join(f"{v[s]:.3f}x" for s in SUITES)
        + f" | {statistics.mean(v.values()):.3f}x |"
    )
