"""Generic backend: the model's own Hugging Face forward over a preallocated, rollback-by-length cache.

Works for any causal LM whose attention uses transformers' standard Cache API (Gemma, Phi, ...).
Slower per step than the lean path on small models, but exact by construction.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer

from draftsmith.engine.runner import FINAL, HiddenKey, ModelRunner, RunnerOutput


class _PreallocatedLayer(DynamicLayer):
    """A cache layer writing into a fixed buffer; its valid length is owned by the runner."""

    def __init__(self, runner: HFRunner, capacity: int) -> None:
        super().__init__()
        self.runner = runner
        self.capacity = capacity

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        b, h, _, d = key_states.shape
        self.k_buf = key_states.new_empty(b, h, self.capacity, d)
        self.v_buf = value_states.new_empty(b, h, self.capacity, value_states.shape[-1])
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start = self.runner.length
        end = start + key_states.shape[-2]
        self.k_buf[:, :, start:end] = key_states
        self.v_buf[:, :, start:end] = value_states
        self.keys, self.values = self.k_buf[:, :, :end], self.v_buf[:, :, :end]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.runner.length

    def crop(self, tokens_to_remove: int) -> None:  # rollback is done by the runner
        raise NotImplementedError("use ModelRunner.rollback")


class HFRunner(ModelRunner):
    def _allocate(self, capacity: int) -> None:
        n_layers = self.num_layers
        self.cache = Cache(layers=[_PreallocatedLayer(self, capacity) for _ in range(n_layers)])

    def _forward(self, ids: torch.Tensor, n_logits: int, hidden: tuple[HiddenKey, ...]) -> RunnerOutput:
        want_hidden = bool(hidden)
        out = self.model(
            input_ids=ids,
            past_key_values=self.cache,
            use_cache=True,
            logits_to_keep=max(n_logits, 1),
            output_hidden_states=want_hidden,
        )
        result: dict[HiddenKey, torch.Tensor] = {}
        if want_hidden:
            states = out.hidden_states
            for key in hidden:
                # transformers returns the final-normed state as the last entry
                result[key] = states[-1 if key == FINAL else key][0]
        return RunnerOutput(out.logits[0] if n_logits else None, result)
