"""The interface every target (and draft-model) backend implements.

A runner owns a preallocated KV cache and feeds tokens at the current cache length. Rolling back
after a partial acceptance is just moving `length` back: nothing is copied or freed. Only the
logits that verification needs are computed, and the hidden states of chosen layers come back
when a drafter asks for them (trained drafters condition on them).
"""

from __future__ import annotations

import copy
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import torch

from draftsmith.errors import DraftsmithError

FINAL = "final"
"""Key of the final-norm hidden state in `RunnerOutput.hidden`."""

HiddenKey = int | str


@dataclass
class RunnerOutput:
    logits: torch.Tensor | None  # [n_logits, V], fp32 or model dtype
    hidden: dict[HiddenKey, torch.Tensor] = field(default_factory=dict)  # key -> [n, H]


def now(device: torch.device) -> float:
    """Wall clock that waits for queued GPU work, so step timings are real."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


class ModelRunner(ABC):
    """Batch-1 forward over a preallocated, length-addressed KV cache.

    Hidden-state keys follow Hugging Face's `hidden_states` convention: 0 is the embedding
    output and i (1..L-1) the output of decoder layer i; `FINAL` is the final-norm state (which
    is what transformers returns at index L).
    """

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.config = model.config
        self.length = 0
        self.capacity = 0
        self.step_cost: dict[int, float] = {}  # seconds per n-token step, when measured
        self.fixed_rows = 0  # > 0: steps of up to this many tokens run as one fixed shape (lean runner)
        self.mixed_shapes = False  # with fixed_rows: each step size takes its own exact shape (lean runner)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def num_layers(self) -> int:
        return int(self.config.num_hidden_layers)

    @property
    def vocab_size(self) -> int:
        return int(self.model.get_output_embeddings().weight.shape[0])

    @property
    def max_context(self) -> int:
        return int(getattr(self.config, "max_position_embeddings", 0) or 1 << 20)

    def reset(self, capacity: int) -> None:
        """Start a new sequence; make sure the cache can hold `capacity` tokens."""
        if capacity > self.capacity:
            self._allocate(capacity)
            self.capacity = capacity
        self.length = 0

    def fork(self) -> ModelRunner:
        """A runner over the same weights with its own, empty cache (one per concurrent sequence)."""
        other = copy.copy(self)
        other.capacity = other.length = 0  # the next reset allocates a cache of its own
        return other

    def rollback(self, length: int) -> None:
        """Forget every cached position at or after `length`."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot roll back to {length}: cache holds {self.length}")
        self.length = length

    def forward(
        self, ids: torch.Tensor, n_logits: int = 1, hidden: tuple[HiddenKey, ...] = ()
    ) -> RunnerOutput:
        """Append ids [n] at the current length; return logits of the last n_logits positions."""
        n = int(ids.shape[-1])
        bad = [h for h in hidden if h != FINAL and not (isinstance(h, int) and 0 <= h < self.num_layers)]
        if bad:
            raise ValueError(f"hidden-state keys must be 0..{self.num_layers - 1} or {FINAL!r}, got {bad}")
        if not 0 <= n_logits <= n:
            raise ValueError(f"n_logits must be 0..{n}, got {n_logits}")
        if self.length + n > self.capacity:
            raise ValueError(
                f"KV cache overflow: {self.length} + {n} > {self.capacity} (call reset(capacity) first)"
            )
        out = self._forward(ids.reshape(1, n).to(self.device), n_logits, hidden)
        self.length += n
        return out

    def set_fixed_rows(self, rows: int) -> None:
        """Fixed-shape (batch-invariant) steps; only runners that own their forward have them."""
        if rows:
            raise DraftsmithError(
                f"fixed-shape steps need the lean runner (Llama-family models); "
                f"{self.config.model_type!r} runs on the Hugging Face forward"
            )

    def set_mixed_rows(self, rows: int, least: int = 2) -> bool:
        """Mixed exact step shapes; only the lean runner can probe and run them."""
        return False

    def calibrate_cached(self, force: bool = False) -> dict[int, float]:
        """Measured seconds per n-token step, when the backend can tune itself (else empty)."""
        return {}

    @abstractmethod
    def _allocate(self, capacity: int) -> None: ...

    @abstractmethod
    def _forward(self, ids: torch.Tensor, n_logits: int, hidden: tuple[HiddenKey, ...]) -> RunnerOutput: ...
