"""How well a drafter's confidence predicts acceptance: ECE and AUROC per draft position.

DSpark's confidence c_k estimates P(slot k accepted | slots before it accepted). A slot is only
judged when every slot before it was accepted, so only those (confidence, outcome) pairs count.
"""

from __future__ import annotations

from collections import defaultdict


def ece(pairs: list[tuple[float, bool]], bins: int = 10) -> float:
    """Expected calibration error with equal-width bins."""
    if not pairs:
        return float("nan")
    sums: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for c, ok in pairs:
        b = sums[min(int(c * bins), bins - 1)]
        b[0] += c
        b[1] += float(ok)
        b[2] += 1
    return sum(abs(conf - acc) for conf, acc, _ in sums.values()) / len(pairs)


def auroc(pairs: list[tuple[float, bool]]) -> float:
    """Probability that an accepted slot got a higher confidence than a rejected one (ties half)."""
    pos = sorted(c for c, ok in pairs if ok)
    neg = sorted(c for c, ok in pairs if not ok)
    if not pos or not neg:
        return float("nan")
    ranked = sorted([(c, 1) for c in pos] + [(c, 0) for c in neg])
    rank_sum, i = 0.0, 0
    while i < len(ranked):  # average ranks over ties
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        avg = (i + j + 1) / 2
        rank_sum += avg * sum(label for _, label in ranked[i:j])
        i = j
    return (rank_sum - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg))


def by_position(records: list[tuple[int, float, bool]]) -> list[dict]:
    """[{position, n, accept_rate, mean_confidence, ece, auroc}] from (position, confidence, accepted)."""
    grouped: dict[int, list[tuple[float, bool]]] = defaultdict(list)
    for pos, c, ok in records:
        grouped[pos].append((c, ok))
    out = []
    for pos in sorted(grouped):
        pairs = grouped[pos]
        out.append(
            {
                "position": pos + 1,
                "n": len(pairs),
                "accept_rate": round(sum(ok for _, ok in pairs) / len(pairs), 4),
                "mean_confidence": round(sum(c for c, _ in pairs) / len(pairs), 4),
                "ece": round(ece(pairs), 4),
                "auroc": round(auroc(pairs), 4),
            }
        )
    return out
