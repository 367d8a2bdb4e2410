"""Decode throughput of the continuous-batching sampler against batch size and dtype.

Regeneration and the target cache are throughput jobs: the best batch size and dtype depend on the
CPU (AMX / AVX512-BF16 make bf16 GEMMs several times faster than fp32 at many rows). This measures
the steady state that dominates a long regeneration run: every slot holds a sequence at a realistic
context length and each step decodes one token per slot. tok/s = slots / step time. Prefill and
the tail of a run (slots going idle) are not included; `data regenerate` reports the end-to-end
rate of a real run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from draftsmith.engine.lean_llama import LeanLlamaRunner
from draftsmith.engine.slots import SlotRunner
from draftsmith.errors import DraftsmithError


@dataclass
class ThroughputPoint:
    dtype: str
    batch: int
    context: int
    step_ms: float
    tokens_per_s: float


@torch.inference_mode()
def decode_throughput(runner, batch: int, context: int, steps: int = 8, seed: int = 0) -> tuple[float, float]:
    """(median step ms, tok/s) of `batch` slots whose contexts are spread around `context` tokens."""
    g = torch.Generator().manual_seed(seed)
    slots = SlotRunner(runner, batch, context * 2 + steps + 2)
    # contexts spread over [context/2, 3*context/2]: slots in a real run are at different lengths
    # (the timing needs positions, not meaningful cache contents)
    slots.lengths = torch.randint(context // 2, context * 3 // 2, (batch,), generator=g).tolist()
    tokens = torch.randint(0, runner.vocab_size, (batch,), generator=g).to(slots.device)

    def step(tokens: torch.Tensor) -> torch.Tensor:
        outs = slots.forward([(s, tokens[s : s + 1]) for s in range(batch)], n_logits=1)
        return torch.cat([o.logits for o in outs])

    step(tokens)  # warm-up (kernel selection, allocations)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        tokens = step(tokens).argmax(-1)
        times.append(time.perf_counter() - t0)
    ms = sorted(times)[len(times) // 2] * 1e3
    return ms, batch / (ms / 1e3)


def sweep(
    load, dtypes: list[str], batches: list[int], context: int, steps: int = 8
) -> Iterator[ThroughputPoint]:
    """load(dtype) -> target; one point per (dtype, batch), as each is measured."""
    for dtype in dtypes:
        target = load(dtype)
        if not isinstance(target.runner, LeanLlamaRunner):
            raise DraftsmithError(
                "the throughput sweep times the continuous-batching sampler (Llama-family models)"
            )
        for b in batches:
            ms, tps = decode_throughput(target.runner, b, context, steps)
            yield ThroughputPoint(dtype, b, context, round(ms, 2), round(tps, 1))
        del target
