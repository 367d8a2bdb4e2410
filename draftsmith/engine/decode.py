"""The speculative decode loop. Plain decoding is the same loop with a drafter that proposes nothing.

Invariant: the target's KV cache holds every committed token except the last one. A round feeds
[last committed token, draft_1..draft_k] in one forward, verifies, and rolls the cache back by
length to the accepted prefix; the target's own next token (the bonus) becomes the new last token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from draftsmith.engine.draft_length import (
    AcceptanceHistory,
    history_length,
    length_by_probs,
    modelled_rate,
    table_cost,
)
from draftsmith.engine.drafter import Draft, Drafter
from draftsmith.engine.runner import ModelRunner, now
from draftsmith.engine.sampling import SamplingParams
from draftsmith.engine.stats import GenerationStats
from draftsmith.engine.stop import Progress, StopRule
from draftsmith.engine.verify import Verifier, verify
from draftsmith.errors import DraftsmithError


def record_confidences(stats: GenerationStats, drafter: Drafter, n_drafted: int, n_acc: int) -> None:
    """Log (position, confidence, accepted) for drafters with a confidence head; slot i is judged
    only if every slot before it passed."""
    confidences = getattr(drafter, "confidences", None)
    if confidences and n_drafted:
        for i in range(min(n_acc + 1, n_drafted, len(confidences))):
            stats.confidence.append((i, confidences[i], i < n_acc))


@dataclass
class GenerationResult:
    tokens: list[int]
    finish_reason: str  # "eos" | "length" | "stop" | "context"
    stats: GenerationStats = field(default_factory=GenerationStats)


@torch.inference_mode()
def speculative_generate(
    runner: ModelRunner,
    drafter: Drafter,
    prompt: list[int] | torch.Tensor,
    stop: StopRule,
    params: SamplingParams | None = None,
    k: int | None = None,
    on_tokens: Callable[[list[int]], None] | None = None,
    verifier: Callable[..., tuple[int, int]] = verify,
    adaptive: bool = True,
) -> GenerationResult:
    """Decode with `drafter` proposing up to k tokens a round; output equals the target's own.

    adaptive: shorten each draft to the length that pays on this machine (needs the runner's
    measured step costs; see draft_length.py). With fixed-shape steps (runner.fixed_rows = N)
    drafts are capped at N - 1 tokens whatever k says. `verifier` is injectable so tests can prove that
    a wrong rule is caught.
    """
    params = params or SamplingParams()
    k = drafter.default_k if k is None else k
    if k < 0:
        raise DraftsmithError(f"draft length must be >= 0, got {k}")
    if runner.fixed_rows:  # batch-invariant steps verify at most fixed_rows tokens
        k = min(k, runner.fixed_rows - 1)
    device = runner.device
    ids = torch.as_tensor(prompt, dtype=torch.long, device=device).reshape(-1)
    n_prompt = int(ids.shape[0])
    if n_prompt == 0:
        raise DraftsmithError("the prompt is empty")
    if n_prompt >= runner.max_context:
        raise DraftsmithError(
            f"the prompt has {n_prompt} tokens but the model's context holds {runner.max_context}"
        )
    rng = None if params.greedy else params.generator(device)
    stats = GenerationStats()
    verify_fn: Verifier = verifier
    history = AcceptanceHistory()
    cost = runner.step_cost if adaptive else {}
    rows_cost = table_cost(cost)
    # a drafter with length_rule "prob" records each round's `token_probs` (one per drafted token; a
    # hybrid's lookup round reports 1.0) and is cut by them after drafting (length_by_probs)
    by_prob = bool(cost) and getattr(drafter, "length_rule", "history") == "prob"

    t_start = now(device)
    max_len = min(runner.max_context, n_prompt + stop.max_new_tokens + k)
    runner.reset(max_len)
    hidden_keys = drafter.hidden_layers
    pre = runner.forward(ids[:-1], n_logits=0, hidden=hidden_keys) if n_prompt > 1 else None
    drafter.start(ids, pre.hidden if pre else {}, max_len)
    stats.prefill_s = now(device) - t_start

    tokens = ids
    progress = Progress(stop)
    while True:
        n_ctx = int(tokens.shape[0])
        room = progress.room(n_ctx, runner.max_context)
        if room <= 0:
            break
        k_round = min(k, room - 1)
        if cost and k_round and stats.rounds % 8 != 7:  # every 8th round: full draft
            length = history_length(history, k_round, rows_cost)  # decided before drafting: no wasted guesses
            # the prob rule drafts one slot more and cuts after drafting: drafting the whole block every
            # round cost more than its cuts saved (an earlier bench; an earlier replay: +0.036x)
            k_round = min(k_round, length + 1) if by_prob else length
        t0 = now(device)
        draft = drafter.propose(tokens, k_round, params, rng) if k_round > 0 else Draft.empty(device)
        k_use = min(k_round, len(draft.tokens))
        if by_prob and k_use:
            rate = modelled_rate(k, cost, history)  # prices an extra step row; no clock: drafts repeat
            k_use = length_by_probs(drafter.token_probs, k_use, cost, rate)
        elif cost and 0 < k_use < k_round and stats.rounds % 8 != 7:
            k_use = history_length(history, k_use, rows_cost)  # a short draft, or one slot long, may not pay
        draft_tokens = draft.tokens[:k_use].to(device)
        draft_probs = draft.probs[:k_use] if draft.probs is not None else None
        t1 = now(device)
        out = runner.forward(
            torch.cat([tokens[-1:], draft_tokens]), n_logits=len(draft_tokens) + 1, hidden=hidden_keys
        )
        n_acc, bonus = verify_fn(out.logits, draft_tokens, draft_probs, params, rng)
        runner.rollback(n_ctx + n_acc)
        t2 = now(device)
        stats.draft_s += t1 - t0
        stats.verify_s += t2 - t1

        emitted, produced = progress.commit(draft_tokens[:n_acc].tolist() + [bonus])
        stats.record_round(len(draft_tokens), n_acc, produced)
        record_confidences(stats, drafter, len(draft_tokens), n_acc)
        history.update(len(draft_tokens), n_acc)
        if on_tokens and emitted:
            on_tokens(emitted)
        if progress.finish:
            break
        tokens = torch.cat([tokens, torch.tensor(emitted, dtype=torch.long, device=device)])
        drafter.accept(tokens, n_acc + 1, {key: h[: n_acc + 1] for key, h in out.hidden.items()})
    new = progress.new
    stats.new_tokens = len(new)
    stats.total_s = now(device) - t_start
    return GenerationResult(new, progress.finish or "length", stats)
