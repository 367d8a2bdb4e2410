"""Continuous-batching sampler over the lean Llama weights, for throughput work (regeneration).

Speculative decoding is a batch-1 latency tool; regenerating thousands of training answers is a
throughput job. On a CPU a step of B rows costs little more than a step of one (the weights are read
once per step either way), so B sequences decode ~B/2..B/1.5 times faster than one. Each of the B
slots owns one row of the KV cache and its own length; when a sequence ends, the next prompt is
prefilled into its slot while the others keep going (continuous batching, no padding waste).
Rows are independent samples from the target's distribution; results arrive in completion order.
The slots live in a `SlotRunner`, the same slot-addressed forward the batched speculative engine
and the server use.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from draftsmith.engine.lean_llama import LeanLlamaRunner
from draftsmith.engine.sampling import SamplingParams, sample_logits
from draftsmith.engine.slots import SlotRunner


@dataclass
class Finished:
    index: int  # position of the prompt in the input sequence
    tokens: list[int]
    finish_reason: str  # "eos" or "length"
    eos_id: int | None = None  # the end-of-sequence token chosen (finish "eos")


class BatchSampler:
    """B-slot sampler over a `SlotRunner` (the lean runner's fused weights: no second model copy)."""

    def __init__(self, runner: LeanLlamaRunner, slots: int, capacity: int) -> None:
        if not isinstance(runner, LeanLlamaRunner):
            raise TypeError("BatchSampler needs the lean Llama-family runner")
        self.slots, self.capacity = slots, capacity
        self.runner = SlotRunner(runner, slots, capacity)

    def _prefill(self, slot: int, ids: list[int]) -> torch.Tensor:
        self.runner.reset(slot)
        work = [(slot, torch.tensor(ids, device=self.runner.device))]
        return self.runner.forward(work, n_logits=1)[0].logits[0]

    def _step(self, tokens: torch.Tensor, active: list[int]) -> torch.Tensor:
        """One decode step for the active slots (token [B] each); logits [len(active), V]."""
        outs = self.runner.forward([(s, tokens[s : s + 1]) for s in active], n_logits=1)
        return torch.cat([o.logits for o in outs])

    @torch.inference_mode()
    def generate(
        self,
        prompts: Sequence[list[int]],
        max_new_tokens: int,
        params: SamplingParams,
        eos_ids: frozenset[int],
    ) -> Iterator[Finished]:
        """Sample an answer for every prompt; yield each as soon as it ends."""
        for i, p in enumerate(prompts):
            if not p or len(p) + max_new_tokens > self.capacity:
                raise ValueError(
                    f"prompt {i}: {len(p)} tokens + {max_new_tokens} exceed capacity {self.capacity}"
                )
        dev = self.runner.device
        gen = params.generator(dev)
        queue = list(range(len(prompts)))[::-1]
        tokens = torch.zeros(self.slots, dtype=torch.long, device=dev)
        owner: list[int | None] = [None] * self.slots
        out: list[list[int]] = [[] for _ in range(self.slots)]

        def pick(logits: torch.Tensor) -> torch.Tensor:
            return sample_logits(logits, params, gen)

        def admit(s: int) -> None:
            owner[s] = queue.pop() if queue else None
            out[s] = []
            if owner[s] is not None:
                tokens[s] = pick(self._prefill(s, list(prompts[owner[s]]))[None])[0]

        for s in range(self.slots):
            admit(s)
        while True:
            # a fresh slot holds a sampled token not yet recorded; a new admission is fresh too
            fresh = [s for s in range(self.slots) if owner[s] is not None]
            while fresh:
                s = fresh.pop()
                t = int(tokens[s])
                done = t in eos_ids
                if not done:
                    out[s].append(t)
                if done or len(out[s]) >= max_new_tokens:
                    yield Finished(owner[s], out[s], "eos" if done else "length", t if done else None)
                    admit(s)
                    if owner[s] is not None:
                        fresh.append(s)
            active = [s for s in range(self.slots) if owner[s] is not None]
            if not active:
                return
            tokens[active] = pick(self._step(tokens, active))
