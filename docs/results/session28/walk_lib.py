"""Shared by headroom.py and soft_lookup.py: the teacher-forced walk over dev answers (session 19's
walk_tau.py, per answer position), and its accept lengths and table."""

import json
import statistics
from collections.abc import Iterator

import torch

K = 3  # drafts a round, as the default 4-row step verifies
SUITES = ("humaneval", "mtbench", "gsm", "alpaca")


def dev_rows(dev: str, suite: str, skip: int, n: int) -> list[dict]:
    return [json.loads(x) for x in open(f"{dev}/{suite}-answers.jsonl")][skip : skip + n]


def positions(target, dspark, row: dict) -> Iterator[tuple[int, torch.Tensor, list[int], object]]:
    """For each position of one answer (first 128 tokens): (index, context up to the anchor, the next
    K answer tokens, a DSpark fork started on the target's states before the anchor). One target pass
    over prompt + answer gives every position's states."""
    ids = torch.tensor(target.encode(row["prompt"], chat=True))
    answer = row["answer_ids"][:128]
    full = torch.cat([ids, torch.tensor(answer, dtype=ids.dtype)])
    target.runner.reset(len(full) + 8)
    states = target.runner.forward(full, n_logits=0, hidden=dspark.hidden_layers).hidden
    for j in range(len(answer)):
        a = len(ids) - 1 + j  # the anchor: the last committed token
        ctx = full[: a + 1]
        d = dspark.fork()
        d.start(ctx, {key: h[:a] for key, h in states.items()}, len(full) + 8)
        yield j, ctx, full[a + 1 : a + 1 + K].tolist(), d


def hits(draft: list[int], truth: list[int]) -> int:
    """Accepted drafts: the length of the common prefix."""
    n = 0
    while n < min(len(draft), len(truth)) and draft[n] == truth[n]:
        n += 1
    return n


def walk(lengths: list[int]) -> float:
    """Tau of greedy decoding over per-position accept lengths: start at the first answer token,
    jump accepted + 1."""
    j = rounds = 0
    while j < len(lengths):
        rounds += 1
        j += lengths[j] + 1
    return len(lengths) / rounds


def print_table(table: dict[str, dict[str, float]], title: str) -> None:
    """table[suite][arm] = mean walk tau, as a markdown table with the mean over suites."""
    print(f"\n{title}\n")
    print("| drafter | humaneval | mtbench | gsm | alpaca | mean |\n|---|---|---|---|---|---|")
    for arm in table[SUITES[0]]:
        vals = [table[s][arm] for s in table]
        print(f"| {arm} | " + " | ".join(f"{v:.3f}" for v in vals) + f" | {statistics.mean(vals):.3f} |")
