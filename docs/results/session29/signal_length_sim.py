"""Issue 8, session 29: which per-round signal would let DSpark's draft length pay on this CPU?

conf_length_sim.py found DSpark's confidence head worth +0.013x over the engine's history rule, where
an oracle length is worth +0.17x. This asks whether the drafter's own probability of each drafted
token (max softmax of a slot's logits, Markov bias included) tells accepted rounds from rejected ones
better. Both signals are calibrated the same way: per slot, P(slot accepted | the slots before it
accepted) in 8 quantile bins fitted on dev answers FIT_FROM..FIT_FROM+N-1 of each suite; the policies
then replay greedy decoding on answers 15..24 (as conf_length_sim.py: real drafts, 6.56 ms drafting a
round, the runner's calibrated step costs); "pmax raw" takes the probability itself, uncalibrated.
Also printed: the AUC of each signal for the first slot.
Usage: python docs/results/session29/signal_length_sim.py DEV_DIR [fit_n] [fit_from]
"""

import bisect
import itertools
import operator
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session28"))
from walk_lib import SUITES, K, dev_rows, hits, positions  # noqa: E402

from draftsmith.api import load_target  # noqa: E402
from draftsmith.drafters.registry import build_drafter  # noqa: E402
from draftsmith.engine.draft_length import AcceptanceHistory, best_length  # noqa: E402
from draftsmith.engine.sampling import SamplingParams  # noqa: E402

dev = sys.argv[1]
fit_n = int(sys.argv[2]) if len(sys.argv) > 2 else 10
fit_from = int(sys.argv[3]) if len(sys.argv) > 3 else 0
DRAFT_S, BINS, SIGNALS = 6.56e-3, 8, ("conf", "pmax")
target = load_target(dtype="float32", fixed_rows=0)
cost = target.runner.step_cost
dspark = build_drafter("dspark", target)
m = dspark.model
PMAX: list[float] = []
_conf_logit = m.confidence_logit


def _recording(states, prev, rows=None):  # the slot's logits as the drafter forms them, then its max p
    logits = m.base_logits(states).float() + m.markov_bias(prev, rows).float()
    PMAX.append(float(logits.softmax(-1).max()))
    return _conf_logit(states, prev, rows)


m.confidence_logit = _recording


def collect(skip: int, n: int) -> dict[str, list[list[tuple[int, dict[str, list[float]]]]]]:
    """suite -> answers -> positions: (accepted drafts, {signal: per-slot values})."""
    out = {}
    with torch.inference_mode():
        for suite in SUITES:
            out[suite] = []
            for r in dev_rows(dev, suite, skip, n):
                rows = []
                for _, ctx, truth, d in positions(target, dspark, r):
                    PMAX.clear()
                    tok = d.propose(ctx, K, SamplingParams(), None).tokens.tolist()
                    rows.append((hits(tok, truth), {"conf": list(d.confidences), "pmax": PMAX[: len(tok)]}))
                out[suite].append(rows)
    return out


def fit(data, signal: str) -> list[tuple[list[float], list[float]]]:
    """Per slot: bin edges and P(accepted | reached) per bin."""
    maps = []
    for j in range(K):
        pts = sorted((sig[signal][j], h > j) for rows in sum(data.values(), []) for h, sig in rows
                     if h >= j and len(sig[signal]) > j)
        edges = [pts[len(pts) * b // BINS][0] for b in range(1, BINS)]
        probs = []
        for b in range(BINS):
            lo = edges[b - 1] if b else -1e9
            hi = edges[b] if b < BINS - 1 else 1e9
            sel = [a for v, a in pts if lo <= v < hi] or [False]
            probs.append((sum(sel) + 1) / (len(sel) + 2))
        maps.append((edges, probs))
    return maps


def auc(data, signal: str) -> float:
    pos = [s[signal][0] for rows in sum(data.values(), []) for h, s in rows if h > 0]
    neg = sorted(s[signal][0] for rows in sum(data.values(), []) for h, s in rows if h == 0)
    return sum(bisect.bisect_left(neg, p) + 0.5 * (bisect.bisect_right(neg, p) - bisect.bisect_left(neg, p))
               for p in pos) / (len(pos) * len(neg))


def survival(values: list[float], maps) -> list[float]:
    out, s = [], 1.0
    for j, v in enumerate(values[:K]):
        edges, probs = maps[j]
        s *= probs[bisect.bisect_right(edges, v)]
        out.append(s)
    return out


def pick(surv: list[float], rate: float) -> int:
    best_k, best, gain = 0, 1.0 - rate * cost[1], 1.0
    for k, s in enumerate(surv, 1):
        gain += s
        if gain - rate * cost[k + 1] > best:
            best_k, best = k, gain - rate * cost[k + 1]
    return best_k


def replay(rows, policy: str, maps: dict) -> tuple[int, float, int]:
    j = rounds = tokens = 0
    seconds = 0.0
    history = AcceptanceHistory()
    while j < len(rows):
        h, sig = rows[j]
        rate = tokens / seconds if seconds else 1 / (cost[1] + DRAFT_S)
        k_round = best_length(K, cost, history) if policy == "history" and rounds % 8 != 7 else K
        if policy == "oracle":
            k = h
        elif policy in maps:
            k = pick(survival(sig[policy], maps[policy]), rate)
        elif policy == "pmax raw":  # uncalibrated: the drafted token's probability as its chance
            k = pick(list(itertools.accumulate(sig["pmax"][:K], operator.mul)), rate)
        else:
            k = k_round
        n = min(h, k) + 1
        seconds += (DRAFT_S if k_round else 0.0) + cost[k + 1]
        tokens, rounds, j = tokens + n, rounds + 1, j + n
        history.update(k, n - 1)
    return tokens, seconds, rounds


train = collect(fit_from, fit_n)
test = collect(15, 10)
maps = {s: fit(train, s) for s in SIGNALS}
print(f"first-slot AUC on the test answers: conf {auc(test, 'conf'):.3f}, pmax {auc(test, 'pmax'):.3f}")
policies = ("history", "conf", "pmax", "pmax raw", "oracle")
print("\n| suite | " + " | ".join(policies) + " |\n|---|" + "---|" * len(policies))
means = {p: [] for p in policies}
for suite in SUITES:
    cells = []
    for p in policies:
        t = s = n = 0
        for rows in test[suite]:
            a, b, c = replay(rows, p, maps)
            t, s, n = t + a, s + b, n + c
        x = t / s * cost[1]
        means[p].append(x)
        cells.append(f"{x:.3f}x (tau {t / n:.2f})")
    print(f"| {suite} | " + " | ".join(cells) + " |")
print("| mean | " + " | ".join(f"{statistics.mean(v):.3f}x" for v in means.values()) + " |")
print(f"\n(calibrated on answers {fit_from}-{fit_from + fit_n - 1}, replayed on 15-24 of each suite)")
