"""How many drafted tokens a batched step verifies: fixed, by acceptance history, or by DSpark's confidence.

A batched step runs every slot as [b, rows] (slots.py), so it costs cost(b, rows) whoever fills
the rows. The step's depth d (drafts verified per slot; rows = d + 1) is the scheduling choice:
each slot b expects 1 + sum_{j<d} S_b[j] tokens, where S_b[j] is the probability that its first
j + 1 draft tokens all survive. Deepening while the whole step's expected tokens per second,
sum_b (1 + sum_{j<d} S_b[j]) / cost(b, d + 1), improves is DSpark's Algorithm 1 (REFERENCE.md
section 4) specialised to a padded step, early stop included. S comes from the confidence head's
prefix survival (`confidence`; STS-scaled when the drafter has fitted temperatures) or from the
running per-position acceptance of the method (`history`). A slot verifies min(d, its draft)
tokens. Greedy output never depends on the draft; sampled output stays exact because the early
stop decides on each draft token from the tokens before it only (see `best_depth`).

Drafting time grows with the batch (per request for most drafters; one batched forward for
DFlash/DSpark, which still grows with the rows it drafts) while a CPU's verify step is nearly
free up to a few rows; the batched decoder (batch_decode.py) therefore first asks whether drafting pays at
all this step (expected tokens per second with the measured drafting time, against a plain step)
and runs plain steps when it does not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import accumulate
from operator import mul

from draftsmith.engine.draft_length import AcceptanceHistory
from draftsmith.errors import DraftsmithError

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
