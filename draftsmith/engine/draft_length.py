"""Hardware-aware draft length: verify only as many draft tokens as pay for themselves.

Verifying n tokens does not cost the same as verifying one on every machine (on a 2-core CPU an
8-token step costs ~2x a 1-token step). Given the runner's measured step-cost table and the
drafter's running acceptance per position, pick the draft length k that maximises expected tokens
per second: (1 + sum_i prod_{j<=i} a_j) / cost(k + 1). Truncating a draft never changes the output
(the verifier only ever sees a shorter guess), so this is pure speed.
"""

from __future__ import annotations

from collections import deque
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


def best_length(
    proposed: int, cost: dict[int, float], history: AcceptanceHistory, draft_s: DraftTime | None = None
) -> int:
    """Draft length in [0, proposed] that maximises expected tokens per second of a round: the
    verify step from the cost table plus, when `draft_s` is given, the drafting it takes (a block
    drafter pays about the same for any k, a chain drafter per token), so a drafter whose guesses
    do not repay their own time drafts nothing."""
    if not cost or proposed <= 0:
        return proposed
    best_k, best_rate = 0, 1.0 / cost[1]
    expected, survive = 1.0, 1.0
    for k in range(1, proposed + 1):
        if k + 1 not in cost:
            break
        survive *= history.conditional(k - 1)
        expected += survive
        rate = expected / (cost[k + 1] + (draft_s(k + 1) if draft_s else 0.0))
        if rate > best_rate:
            best_k, best_rate = k, rate
    return best_k


class DraftTime:
    """Seconds one drafting call takes for n units of work of one method, from recent calls.

    A unit is one request's draft position plus one (sum of k + 1 over the call's requests):
    drafters that draft a group in one forward (DFlash, DSpark) cost far less than n single
    calls, and their serial walk grows with k, so this fits a line a + c * n (least squares,
    both terms >= 0) over recent calls; while only one size was seen, time scales with n."""

    def __init__(self, window: int = 32) -> None:
        self.calls: deque[tuple[int, float]] = deque(maxlen=window)

    def observe(self, n: int, seconds: float) -> None:
        self.calls.append((n, seconds))

    def __call__(self, n: int) -> float:
        if not self.calls:
            return 0.0
        sizes = [size for size, _ in self.calls]
        times = [t for _, t in self.calls]
        mean_n, mean_t = sum(sizes) / len(sizes), sum(times) / len(times)
        spread = sum((size - mean_n) ** 2 for size in sizes)
        if spread == 0:
            return mean_t * n / mean_n
        slope = max(sum((size - mean_n) * (t - mean_t) for size, t in self.calls) / spread, 0.0)
        base = mean_t - slope * mean_n
        if base < 0:  # through the origin instead
            return n * sum(size * t for size, t in self.calls) / sum(size * size for size in sizes)
        return base + slope * n
