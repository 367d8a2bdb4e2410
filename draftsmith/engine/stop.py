"""When a request ends: EOS ids, a token budget and stop strings, applied to every round's tokens
alike in single-request and batched decoding, so both stop at the same token."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

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
