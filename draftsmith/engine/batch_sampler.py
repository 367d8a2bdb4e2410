"""Continuous-batching sampler over the lean Llama weights, for throughput work (regeneration).

Speculative decoding is a batch-1 latency tool; regenerating thousands of training answers is a
throughput job. On a CPU a step of B rows costs little more than a step of one (the weights are read
once per step either way), so B sequences decode ~B/2..B/1.5 times faster than one. Each of the B
slots owns one row of the KV cache and its own length; when a sequence ends, the next prompt is
prefilled into its slot while the others keep going (continuous batching, no padding waste).
Rows are independent samples from the target's distribution; results arrive in completion order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from draftsmith.engine.lean_llama import LeanLlamaRunner
from draftsmith.engine.sampling import SamplingParams, sample_logits


@dataclass
class Finished:
    index: int  # position of the prompt in the input sequence
    tokens: list[int]
    finish_reason: str  # "eos" or "length"
    eos_id: int | None = None  # the end-of-sequence token chosen (finish "eos")


class BatchSampler:
    """B-slot sampler sharing a `LeanLlamaRunner`'s fused weights (no second copy of the model)."""

    def __init__(self, runner: LeanLlamaRunner, slots: int, capacity: int) -> None:
        if not isinstance(runner, LeanLlamaRunner):
            raise TypeError("BatchSampler needs the lean Llama-family runner")
        self.r, self.slots, self.capacity = runner, slots, capacity
        p = runner.lm_head.w_t
        shape = (len(runner.layers), slots, runner.n_kv, capacity, runner.head_dim)
        self.k = torch.zeros(shape, dtype=p.dtype, device=p.device)
        self.v = torch.zeros(shape, dtype=p.dtype, device=p.device)
        pos = torch.arange(capacity, device=p.device)[None]
        cos, sin = runner.rotary(torch.empty(1, dtype=torch.float32, device=p.device), pos)
        self.cos, self.sin = cos[0].to(p.dtype), sin[0].to(p.dtype)

    def _layers(
        self, x: torch.Tensor, slot: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor, span: int
    ) -> torch.Tensor:
        """x [b, n, H] for cache rows `slot` [b] (all slots, or one) at positions pos [b, n]."""
        r = self.r
        b, n, _ = x.shape
        cos, sin = self.cos[pos][:, None], self.sin[pos][:, None]  # [b, 1, n, hd]
        row_major = r.row_major(b * n)
        rows = slot[:, None].expand(b, n)
        # all slots: a view of the cache; one slot (prefill): a narrow view; never a gathered copy
        rows_kv = slice(None) if b == self.slots else slice(int(slot[0]), int(slot[0]) + 1)

        def store(i: int, k: torch.Tensor, v: torch.Tensor) -> None:
            self.k[i, rows, :, pos], self.v[i, rows, :, pos] = k.transpose(1, 2), v.transpose(1, 2)

        def window(i: int) -> tuple[torch.Tensor, torch.Tensor]:
            return self.k[i, rows_kv, :, :span], self.v[i, rows_kv, :, :span]

        x, _ = r.decoder(x, cos, sin, mask, row_major, store, window)
        return r.lm_head(r._rms(x[:, -1], r.norm_w), row_major)  # [b, V]

    def _prefill(self, slot: int, ids: list[int]) -> torch.Tensor:
        n = len(ids)
        dev = self.k.device
        pos = torch.arange(n, device=dev)[None]
        mask = torch.ones(n, n, dtype=torch.bool, device=dev).tril()[None, None]
        x = self.r.embed(torch.tensor([ids], device=dev))
        return self._layers(x, torch.tensor([slot], device=dev), pos, mask, n)[0]

    def _step(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """One decode step for every slot: token [B] written at lengths [B]; logits [B, V]."""
        span = int(lengths.max()) + 1
        keys = torch.arange(span, device=lengths.device)
        mask = (keys[None] <= lengths[:, None])[:, None, None]  # [B, 1, 1, span]
        slot = torch.arange(self.slots, device=lengths.device)
        return self._layers(self.r.embed(tokens[:, None]), slot, lengths[:, None], mask, span)

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
        gen = params.generator(self.k.device)
        queue = list(range(len(prompts)))[::-1]
        dev = self.k.device
        lengths = torch.zeros(self.slots, dtype=torch.long, device=dev)
        tokens = torch.zeros(self.slots, dtype=torch.long, device=dev)
        owner: list[int | None] = [None] * self.slots
        out: list[list[int]] = [[] for _ in range(self.slots)]

        def pick(logits: torch.Tensor) -> torch.Tensor:
            return sample_logits(logits, params, gen)

        def admit(s: int) -> None:
            owner[s] = queue.pop() if queue else None
            out[s] = []
            if owner[s] is None:
                lengths[s] = 0  # an idle slot still runs (cheap) but its output is ignored
                return
            ids = list(prompts[owner[s]])
            tokens[s] = pick(self._prefill(s, ids)[None])[0]
            lengths[s] = len(ids)

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
            if all(o is None for o in owner):
                return
            logits = self._step(tokens, lengths)
            lengths += 1
            tokens = pick(logits)
