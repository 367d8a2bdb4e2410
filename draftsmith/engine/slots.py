"""A slot-addressed, batched forward over the lean Llama weights: N sequences, one KV cache.

Each slot owns one row of a preallocated cache and its own length; rolling a slot back is moving
its length. One `forward` takes a ragged batch, each slot with its own new tokens (a prompt
chunk, the last token + a draft, or one token), and returns every new position's logits and the
requested hidden states per slot. The weights are the lean runner's fused tensors (no copy).

Execution is padded, not packed: the step runs slots lo..hi (the contiguous range that holds
every slot with work, so the cache is a view, never a gathered copy) as [b, n_max] rows. On a
CPU a step of a few rows costs about one, so padding short drafts to the longest costs little,
and it keeps one attention call per layer; the batched cost table measures exactly this shape.
Padded rows write keys/values beyond their slot's length, where nothing reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

import torch

from draftsmith.engine.lean_llama import PAD_SLACK, LeanLlamaRunner
from draftsmith.engine.runner import FINAL, HiddenKey, RunnerOutput
from draftsmith.errors import DraftsmithError


class SlotRunner:
    """`slots` sequences of up to `capacity` tokens each over a `LeanLlamaRunner`'s weights."""

    def __init__(self, runner: LeanLlamaRunner, slots: int, capacity: int) -> None:
        if not isinstance(runner, LeanLlamaRunner):
            raise DraftsmithError(
                f"batched decoding needs a Llama-family target (lean runner); "
                f"{runner.config.model_type!r} runs on the Hugging Face forward, one request at a time"
            )
        if slots < 1 or capacity < 2:
            raise DraftsmithError(f"need slots >= 1 and capacity >= 2, got {slots} and {capacity}")
        self.r, self.slots, self.capacity = runner, slots, capacity
        p = runner.lm_head.w_t
        rows = capacity + PAD_SLACK  # padded rows of a step may run past a slot's capacity
        shape = (len(runner.layers), slots, runner.n_kv, rows, runner.head_dim)
        self.k = torch.zeros(shape, dtype=p.dtype, device=p.device)
        self.v = torch.zeros(shape, dtype=p.dtype, device=p.device)
        cos, sin = runner.rotary(
            torch.empty(1, dtype=torch.float32, device=p.device), torch.arange(rows)[None]
        )
        self.cos, self.sin = cos[0].to(p.dtype), sin[0].to(p.dtype)
        self.lengths = [0] * slots

    @property
    def device(self) -> torch.device:
        return self.k.device

    @property
    def num_layers(self) -> int:
        return len(self.r.layers)

    def reset(self, slot: int) -> None:
        self.lengths[slot] = 0

    def rollback(self, slot: int, length: int) -> None:
        """Forget slot's cached positions at or after `length`."""
        if not 0 <= length <= self.lengths[slot]:
            raise ValueError(f"slot {slot}: cannot roll back to {length}: it holds {self.lengths[slot]}")
        self.lengths[slot] = length

    @torch.inference_mode()
    def forward(
        self,
        work: Sequence[tuple[int, torch.Tensor]],
        hidden: tuple[HiddenKey, ...] = (),
        n_logits: int | None = None,
    ) -> list[RunnerOutput]:
        """work: (slot, new token ids [n]) pairs, slots distinct. Appends each slot's tokens at its
        length; returns, per pair, logits for its last n_logits new positions (None: all of them;
        0: none, e.g. a prefill whose next token is decided later) and hidden[key] [n, H]."""
        r = self.r
        slots = [s for s, _ in work]
        if len(set(slots)) != len(slots):
            raise ValueError(f"a slot may appear once per step, got {slots}")
        for s, ids in work:
            n = int(ids.shape[-1])
            if n < 1 or self.lengths[s] + n > self.capacity:
                raise ValueError(
                    f"slot {s}: {self.lengths[s]} + {n} tokens do not fit capacity {self.capacity}"
                )
        lo, hi = min(slots), max(slots)
        b, n_max = hi - lo + 1, max(int(ids.shape[-1]) for _, ids in work)
        dev = self.device
        if b == 1:
            return [self._forward_one(lo, work[0][1], hidden, n_logits)]
        ids_pad = torch.zeros(b, n_max, dtype=torch.long, device=dev)
        start = torch.tensor(self.lengths[lo : hi + 1], device=dev)  # idle slots in range: length as is
        for s, ids in work:
            n = int(ids.shape[-1])
            ids_pad[s - lo, :n] = ids.to(dev)
            ids_pad[s - lo, n:] = ids_pad[s - lo, n - 1]
        # padded rows past a slot's end are garbage: clamp them into the buffer's slack
        pos = (start[:, None] + torch.arange(n_max, device=dev)[None]).clamp_max(self.k.shape[3] - 1)
        span = int(pos.max()) + 1
        keys = torch.arange(span, device=dev)
        mask = (keys[None, None] <= pos[:, :, None])[:, None]  # [b, 1, n_max, span]: causal per slot
        cos, sin = self.cos[pos][:, None], self.sin[pos][:, None]  # [b, 1, n_max, hd]
        rows = slice(lo, hi + 1)

        def store(i: int, k: torch.Tensor, v: torch.Tensor) -> None:
            bi = torch.arange(b, device=dev)[:, None].expand(b, n_max)
            self.k[i, rows][bi, :, pos] = k.transpose(1, 2)
            self.v[i, rows][bi, :, pos] = v.transpose(1, 2)

        def window(i: int) -> tuple[torch.Tensor, torch.Tensor]:
            return self.k[i, rows, :, :span], self.v[i, rows, :, :span]

        keep = tuple(h for h in hidden if h != FINAL)
        valid = [(s - lo, int(ids.shape[-1])) for s, ids in work]
        # a ragged step (slots with fewer rows than the longest, idle slots in range) runs its
        # matmuls on the real rows only: a request that verifies nothing costs one row, not n_max
        n_real = sum(n for _, n in valid)
        packed = None
        if n_real < b * n_max:
            packed = torch.cat([torch.arange(i * n_max, i * n_max + n, device=dev) for i, n in sorted(valid)])
        row_major = r.row_major(n_real)
        x, kept = r.decoder(r.embed(ids_pad), cos, sin, mask, row_major, store, window, keep, packed)
        wanted = [n if n_logits is None else min(n, n_logits) for _, n in valid]
        starts = list(accumulate(n for _, n in valid))
        starts = [end - n for end, (_, n) in zip(starts, valid, strict=True)]
        normed = None
        if FINAL in hidden:  # the final-norm state of every new row
            normed = r._rms(torch.cat([x[i, :n] for i, n in valid]), r.norm_w)
            tails = [normed[a + n - m : a + n] for a, (_, n), m in zip(starts, valid, wanted, strict=True)]
        else:  # only the rows that need logits reach the final norm and the head
            tails = [r._rms(x[i, n - m : n], r.norm_w) for (i, n), m in zip(valid, wanted, strict=True)]
        rows = sum(wanted)
        logits = r.logits(torch.cat(tails)) if rows else None
        outs, at = [], 0
        for (s, _), (i, n), m, a in zip(work, valid, wanted, starts, strict=True):
            h = {key: kept[key][i, :n] for key in keep}
            if normed is not None:
                h[FINAL] = normed[a : a + n]
            outs.append(RunnerOutput(None if logits is None else logits[at : at + m], h))
            self.lengths[s] += n
            at += m
        return outs

    def _forward_one(
        self, slot: int, ids: torch.Tensor, hidden: tuple[HiddenKey, ...], n_logits: int | None
    ) -> RunnerOutput:
        """One slot's step the way the single-request runner takes it: cache slices instead of an
        indexed scatter, and no mask for a one-token step (a masked SDPA call is slower). A lone
        request, the common case at low load, then steps as fast as `generate`'s runner."""
        r, n = self.r, int(ids.shape[-1])
        start = self.lengths[slot]
        end = start + n
        row = slice(slot, slot + 1)
        keep = tuple(h for h in hidden if h != FINAL)
        x, kept = r.span_step(
            ids.to(self.device)[None], start, end, lambda i: (self.k[i, row], self.v[i, row]),
            self.cos, self.sin, r.row_major(n), keep,
        )
        out = {key: kept[key][0] for key in keep}
        m = n if n_logits is None else min(n, n_logits)
        logits = None
        if FINAL in hidden:
            normed = r._rms(x[0], r.norm_w)
            out[FINAL] = normed
            tail = normed[n - m :]
        else:
            tail = r._rms(x[0, n - m :], r.norm_w)
        if m:
            logits = r.logits(tail)
        self.lengths[slot] = end
        return RunnerOutput(logits, out)
