"""The contract between the engine and every drafter.

The engine calls `start` once after prefilling the prompt, then per round `propose` (guess up to k
tokens) and `accept` (learn which were kept). A drafter that conditions on the target (DFlash,
DSpark, EAGLE-3, MTP) names the target layers it wants in `hidden_layers`; the engine then hands
it those hidden states for every position the target has committed, at no extra forward pass.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from draftsmith.engine.runner import HiddenKey
from draftsmith.engine.sampling import SamplingParams

if TYPE_CHECKING:
    from pathlib import Path

    from draftsmith.export.common import Verifier
    from draftsmith.models.target import Target
    from draftsmith.training.recipe import Recipe


# A drafter that feeds on target states may queue the states of rounds in which it did not draft and
# feed them all at its next draft (or once this many rounds pile up): in a batch most rounds of a
# request may not draft, and one pass over many rows costs less than many passes over one or two.
MAX_QUEUED = 16
QUEUE_BYTES = 64 * 2**20
"""A drafter that can catch up on any backlog in one pass (DFlash, DSpark) queues by size instead:
a request that does not draft, often every request at high load, then feeds nothing until it
drafts again or its queue holds this many bytes (the default target: ~11 KB a position, so a whole
640-token slot never reaches it). Fed every 16 rounds, such a request cost the server ~5%."""


def state_bytes(hidden: dict[HiddenKey, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in hidden.values())


def merge_states(chunks: Sequence[dict[HiddenKey, torch.Tensor]]) -> dict[HiddenKey, torch.Tensor]:
    """Several rounds' target states (in order) as one round's."""
    if len(chunks) == 1:
        return chunks[0]
    return {key: torch.cat([c[key] for c in chunks]) for key in chunks[0]}


@dataclass
class Draft:
    """Proposed tokens [k] and the distribution each was drawn from ([k, V], None = deterministic)."""

    tokens: torch.Tensor
    probs: torch.Tensor | None = None

    @staticmethod
    def empty(device: torch.device | str = "cpu") -> Draft:
        return Draft(torch.empty(0, dtype=torch.long, device=device))


class Drafter:
    """Base class; subclasses override `propose` and, if stateful, `start`/`accept`."""

    name: ClassVar[str] = "base"
    description: ClassVar[str] = ""
    hidden_layers: tuple[HiddenKey, ...] = ()
    default_k: int = 0
    recipe: ClassVar[Recipe | None] = None  # how `draftsmith train` trains it; None: not trained
    # its decoding options: a frozen dataclass (defaults, validation, help) that `build` gets an instance
    # of and the CLI derives its drafter flags from; None: it takes none
    options: ClassVar[type | None] = None
    export_formats: ClassVar[tuple[str, ...]] = ()  # what `draftsmith export` writes its drafters as

    @classmethod
    def owns(cls, path: Path, config: dict | None) -> bool:
        """Whether a drafter directory (its parsed config.json, None if unreadable) holds this
        method's drafter, in draftsmith's format or an exported one: `export` reads the method
        from the directory, so each method recognises its own."""
        return False

    @classmethod
    def export(cls, directory: Path, fmt: str, out: Path, target: Target, verifier: Verifier) -> Path:
        """Write the drafter in `directory` in format `fmt` (one of `export_formats`)."""
        raise NotImplementedError(f"{cls.name} has no export")

    @classmethod
    def build(cls, target: Target, options: Any = None, k: int | None = None) -> Drafter:
        """Construct for `target` from an instance of `cls.options` (None: its defaults) and a draft
        length (None: the method's own)."""
        return cls()

    def fork(self) -> Drafter:
        """A drafter for one more concurrent request: same weights, its own per-request state.

        Per-request state is (re)built by `start`, so a shallow copy is enough for most drafters;
        one that owns a cache outside `start` (a draft model's runner) overrides this.
        """
        return copy.copy(self)

    def batch_key(self) -> object | None:
        """Drafters whose keys are equal (not None) draft together in one `propose_batch` call.

        In a batch every request has its own fork; forks of one drafter share its weights, so one
        forward over all of them reads the weights once instead of once per request."""
        return None

    @classmethod
    def propose_batch(
        cls,
        drafters: Sequence[Drafter],
        tokens: Sequence[torch.Tensor],
        ks: Sequence[int],
        params: Sequence[SamplingParams],
        generators: Sequence[torch.Generator | None],
    ) -> list[Draft]:
        """`propose` for several requests (drafters with one `batch_key`); one by one by default."""
        each = zip(drafters, tokens, ks, params, generators, strict=True)
        return [d.propose(t, k, p, g) for d, t, k, p, g in each]

    @classmethod
    def accept_batch(
        cls,
        drafters: Sequence[Drafter],
        tokens: Sequence[torch.Tensor],
        n_new: Sequence[int],
        hidden: Sequence[dict[HiddenKey, torch.Tensor]],
    ) -> None:
        """`accept` for several requests (drafters with one `batch_key`); one by one by default."""
        for d, t, n, h in zip(drafters, tokens, n_new, hidden, strict=True):
            d.accept(t, n, h)

    def start(self, prompt: torch.Tensor, hidden: dict[HiddenKey, torch.Tensor], max_len: int) -> None:
        """A new sequence of at most max_len tokens. hidden: target states for prompt[:-1]."""

    def propose(
        self, tokens: torch.Tensor, k: int, params: SamplingParams, generator: torch.Generator | None
    ) -> Draft:
        """Guess up to k tokens that follow `tokens` (the whole committed sequence, 1-D)."""
        raise NotImplementedError

    def accept(self, tokens: torch.Tensor, n_new: int, hidden: dict[HiddenKey, torch.Tensor]) -> None:
        """The target committed n_new tokens at the end of `tokens`.

        hidden holds the target states of the n_new positions that entered its cache this round,
        which are `tokens[-n_new-1:-1]` (the last committed token is not cached yet).
        """


class QueuedStates:
    """For a serial drafter that feeds target states one request at a time through its own
    `_append(tokens, hidden)`: `accept` queues them, `flush` (call it before drafting) feeds them
    all in one pass. Keeps `self.pending`, which the drafter resets in `start`."""

    pending: list[dict[HiddenKey, torch.Tensor]]

    def _append(self, tokens: torch.Tensor, hidden: dict[HiddenKey, torch.Tensor]) -> None:
        raise NotImplementedError

    def accept(self, tokens: torch.Tensor, n_new: int, hidden: dict[HiddenKey, torch.Tensor]) -> None:
        """Queue the new states; they are fed when the request next drafts (`flush`)."""
        if hidden:
            self.pending.append(hidden)
        if len(self.pending) >= MAX_QUEUED:
            self.flush(tokens)

    def flush(self, tokens: torch.Tensor) -> None:
        """Feed every queued state in one pass (`tokens`: the committed sequence)."""
        if self.pending:
            hidden, self.pending = merge_states(self.pending), []
            self._append(tokens, hidden)
