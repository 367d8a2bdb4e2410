"""The speculative decode loop. Plain decoding is the same loop with a drafter that proposes nothing.

Invariant: the target's KV cache holds every committed token except the last one. A round feeds
[last committed token, draft_1..draft_k] in one forward, verifies, and rolls the cache back by
length to the accepted prefix; the target's own next token (the bonus) becomes the new last token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from draftsmith.drafters.base import Draft, Drafter
from draftsmith.engine.draft_length import (
    AcceptanceHistory,
    best_length,
    length_by_probs,
    modelled_rate,
)
from draftsmith.engine.runner import ModelRunner, now
from draftsmith.engine.sampling import SamplingParams
from draftsmith.engine.stats import GenerationStats
from draftsmith.engine.verify import Verifier, verify
from draftsmith.errors import DraftsmithError


@dataclass
class StopRule:
    """When to end: EOS ids, a token budget, and optional stop strings (needs a decode function)."""

    max_new_tokens: int
    eos_ids: frozenset[int] = frozenset()
    stop_strings: tuple[str, ...] = ()
    decode: Callable[[list[int]], str] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int):
            raise DraftsmithError(f"max_new_tokens must be an integer, got {self.max_new_tokens!r}")
        if self.max_new_tokens < 1:
            raise DraftsmithError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if any(not s for s in self.stop_strings):
            raise DraftsmithError("stop strings must be non-empty")
        if self.stop_strings and self.decode is None:
            raise ValueError("stop strings need a decode function")

    def stop_string_cut(self, tokens: list[int], checked: int) -> int | None:
        """Smallest t > checked such that tokens[:t] decodes to text containing a stop string.

        Plain and speculative runs apply the same rule to the same tokens, so they stop alike
        even when a stop string completes in the middle of an accepted block.
        """
        if not self.stop_strings:
            return None
        if not any(s in self.decode(tokens) for s in self.stop_strings):
            return None
        for t in range(checked + 1, len(tokens) + 1):
            if any(s in self.decode(tokens[:t]) for s in self.stop_strings):
                return t
        return None


@dataclass
class Progress:
    """A request's committed output and why it ended. Every round's tokens go through `commit`,
    in single-request and batched decoding alike, so both stop at the same token."""

    stop: StopRule
    new: list[int] = field(default_factory=list)
    checked: int = 0
    finish: str | None = None  # None while running; "eos" | "stop" (set here), "length" | "context"

    def commit(self, round_tokens: list[int]) -> tuple[list[int], int]:
        """Append one round's verified tokens; return (the tokens to emit, tokens the round
        produced: up to and including an EOS, which is what tau counts)."""
        eos_at = next((i for i, t in enumerate(round_tokens) if t in self.stop.eos_ids), None)
        produced = len(round_tokens) if eos_at is None else eos_at + 1
        if eos_at is not None:
            round_tokens = round_tokens[:eos_at]
            self.finish = "eos"
        self.new.extend(round_tokens)
        cut = self.stop.stop_string_cut(self.new, self.checked)
        self.checked = len(self.new)
        if cut is not None:
            round_tokens = round_tokens[: len(round_tokens) - (len(self.new) - cut)]
            del self.new[cut:]
            self.finish = "stop"
        return round_tokens, produced

    def room(self, n_ctx: int, max_context: int) -> int:
        """Tokens this request may still add; at 0 it ends ("length" or "context")."""
        room = min(self.stop.max_new_tokens - len(self.new), max_context - n_ctx)
        if room <= 0 and self.finish is None:
            self.finish = "context" if len(self.new) < self.stop.max_new_tokens else "length"
        return room


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
            length = best_length(k_round, cost, history)  # decided before drafting: no wasted guesses
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
            k_use = best_length(k_use, cost, history)  # a short draft, or one a slot long, may not pay
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
