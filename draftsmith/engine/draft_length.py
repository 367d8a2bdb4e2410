"""How many drafted tokens to verify: the one draft-length policy of the single-request and the
batched decoders.

Verifying n tokens does not cost the same as verifying one on every machine (on a 2-core CPU an
8-token step costs ~1.4x a 1-token step with packed weights, ~1.9x with dense ones). Given a step
cost table and a survival estimate S[j] (the probability that the first j + 1 drafts all survive:
from the running per-position acceptance, the drafter's own token probabilities, or DSpark's
confidence head), deepen while expected tokens per second improves and stop at the first depth
that does not (`best_depth`, DSpark's Algorithm 1 with its early stop). A single request is a batch
of one (`history_length`). Truncating a draft never changes the output (the verifier only ever sees
a shorter guess), so this is pure speed.

A batched step runs every slot as [b, rows] (slots.py), so it costs cost(b, rows) whoever fills the
rows. The step's depth d (drafts verified per slot; rows = d + 1) is the scheduling choice: each slot b
expects 1 + sum_{j<d} S_b[j] tokens, where S_b[j] is the probability that its first j + 1 draft tokens
all survive. Deepening while the whole step's expected tokens per second, sum_b (1 + sum_{j<d} S_b[j]) /
cost(b, d + 1), improves is the DSpark paper's Algorithm 1 specialised to a padded step, early stop
included. S comes from the confidence head's prefix survival (`confidence`; STS-scaled when the drafter
has fitted temperatures) or from the running per-position acceptance of the method (`history`). A slot
verifies min(d, its draft) tokens. Greedy output never depends on the draft; sampled output stays exact
because the early stop decides on each draft token from the tokens before it only (see `best_depth`).

Drafting time grows with the batch (per request for most drafters; one batched forward for
DFlash/DSpark, which still grows with the rows it drafts) while a CPU's verify step is nearly
free up to a few rows; the batched decoder (batch_decode.py) therefore first asks whether drafting pays at
all this step (expected tokens per second with the measured drafting time, against a plain step)
and runs plain steps when it does not.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from operator import mul

from draftsmith.errors import DraftsmithError


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


def history_length(history: AcceptanceHistory, k: int, cost: StepCost | None) -> int:
    """How many of k drafts one request's running acceptance makes worth verifying (a batch of one)."""
    return best_depth([survival_from_history(history, k)], cost, k)


def table_cost(table: dict[int, float]) -> StepCost | None:
    """A single request's step-cost table {rows: seconds} as a StepCost (None: rows are free); rows
    the table has not measured are never chosen."""
    return (lambda b, rows: table.get(rows, math.inf)) if table else None


def modelled_rate(k: int, table: dict[int, float], history: AcceptanceHistory) -> float:
    """Tokens/s the running acceptance expects at its chosen length: the price of an extra step row
    for length_by_probs. Read from the step-cost table, not the clock, so drafts repeat run to run
    (an earlier replay: 1.236x against 1.234x for the request's measured rate)."""
    k = max(k, 0)
    depth = history_length(history, k, table_cost(table))
    return (1.0 + sum(survival_from_history(history, depth))) / table[depth + 1]


LENGTH_RULES = ("prob", "history")
"""How a single request's draft is shortened where step rows cost: "prob" by the drafter's own
probabilities of the tokens it drafted this round (drafters that record them), "history" by the
request's running acceptance per position (history_length)."""


def length_by_probs(probs: Sequence[float], proposed: int, cost: dict[int, float], rate: float) -> int:
    """Draft length in [0, proposed] that maximises the round's expected tokens minus the tokens its
    extra step time could have made at `rate` (tokens/s): draft j survives with the product of the
    drafter's probabilities of the first j. A replay of dev answers on a 2-core CPU (fp32):
    these probabilities tell accepted drafts from rejected ones better than DSpark's confidence head
    (first-slot AUC 0.82 against 0.77) and this rule beat `best_length` (1.187x against 1.157x). In
    the interleaved bench it raised tau (1.59 against 1.55) but not speed (1.134x against 1.151x):
    drafting every round's full block cost +1.9 ms a round. The engine drafts only
    history_length's length + 1 before this cut, and it is DFlash/DSpark's default: 1.20x against 1.16x
    for the history rule alone in an interleaved bench (docs/experiments.md)."""
    if not cost or proposed <= 0:
        return proposed
    best_k, best = 0, 1.0 - rate * cost[1]
    expected, survive = 1.0, 1.0
    for k in range(1, min(proposed, len(probs)) + 1):
        if k + 1 not in cost:
            break
        survive *= probs[k - 1]
        expected += survive
        if expected - rate * cost[k + 1] > best:
            best_k, best = k, expected - rate * cost[k + 1]
    return best_k

SCHEDULES = ("fixed", "history", "confidence")

StepCost = Callable[[int, int], float]
"""(slots in the step, rows per slot) -> seconds."""


def check_schedule(schedule: str) -> str:
    if schedule not in SCHEDULES:
        raise DraftsmithError(f"unknown schedule {schedule!r}; choose one of: {', '.join(SCHEDULES)}")
    return schedule


def survival_from_history(history: AcceptanceHistory, k: int) -> list[float]:
    """S[j] = P(drafts 0..j all accepted), from the request's running per-position acceptance."""
    return list(accumulate((history.conditional(i) for i in range(k)), mul))


def survival_from_confidence(confidences: Sequence[float]) -> list[float]:
    """S[j] = prod_{i<=j} c_i: the confidence head's estimate that slot j is reached and kept."""
    return list(accumulate(confidences, mul))


def best_depth(survivals: Sequence[Sequence[float]], cost: StepCost | None, max_depth: int) -> int:
    """The step depth in [0, max_depth]: deepen while expected tokens per second of the whole step
    improves, and stop at the first depth that does not (Algorithm 1's early stop).

    survivals: per slot, S[0..] for its drafted tokens (a slot with a shorter draft stops adding).
    Stopping at the first non-improvement makes the choice of depth d depend only on S[<d], i.e.
    on draft tokens before d, so keeping a token never depends on that token itself: with
    sampling the output stays exactly the target's distribution (the paper's counterexample
    shows that a global argmax can bias it). Without a cost table rows are free: max_depth.
    """
    if cost is None or max_depth <= 0:
        return max(max_depth, 0)
    b = len(survivals)
    expected = float(b)
    rate = expected / cost(b, 1)
    for d in range(1, max_depth + 1):
        expected += sum(s[d - 1] for s in survivals if len(s) >= d)
        deeper = expected / cost(b, d + 1)
        if deeper <= rate:
            return d - 1
        rate = deeper
    return max_depth
