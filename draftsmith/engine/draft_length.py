"""Hardware-aware draft length: verify only as many draft tokens as pay for themselves.

Verifying n tokens does not cost the same as verifying one on every machine (on a 2-core CPU an
8-token step costs ~1.4x a 1-token step with packed weights, ~1.9x with dense ones). Given the
runner's measured step-cost table and the drafter's running acceptance per position, pick the
draft length k that maximises expected tokens per second: (1 + sum_i prod_{j<=i} a_j) /
cost(k + 1). Truncating a draft never changes the output (the verifier only ever sees a shorter
guess), so this is pure speed.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AcceptanceHistory:
    """Running counts: how often position i was verified, and accepted, across requests."""

    reached: list[int] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)

    def update(self, k: int, n_accepted: int) -> None:
        while len(self.reached) < k:
            self.reached.append(0)
            self.accepted.append(0)
        for i in range(min(k, n_accepted + 1)):  # position i is judged only if all before it passed
            self.reached[i] += 1
            self.accepted[i] += int(i < n_accepted)

    def conditional(self, i: int, prior: tuple[float, float] = (1.0, 1.0)) -> float:
        """P(position i accepted | positions < i accepted), with a Beta prior for unseen positions."""
        a, b = prior
        if i >= len(self.reached):
            return a / (a + b)
        return (self.accepted[i] + a) / (self.reached[i] + a + b)


def best_length(proposed: int, cost: dict[int, float], history: AcceptanceHistory) -> int:
    """Draft length in [0, proposed] that maximises expected tokens per verify-step second."""
    if not cost or proposed <= 0:
        return proposed
    best_k, best_rate = 0, 1.0 / cost[1]
    expected, survive = 1.0, 1.0
    for k in range(1, proposed + 1):
        if k + 1 not in cost:
            break
        survive *= history.conditional(k - 1)
        expected += survive
        rate = expected / cost[k + 1]
        if rate > best_rate:
            best_k, best_rate = k, rate
    return best_k
