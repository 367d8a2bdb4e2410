"""The VRAM budget: the drafter and the extra verification KV compete with the target for one card.

Verdict tiers follow the source article's advice per card class: everything fits -> switch it on;
the model and drafter fit but not at this context -> cut context or precision first; the model
(with its drafter) does not fit -> don't, offload weights to the CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from draftsmith.planning.hardware import GIB
from draftsmith.planning.methods import DrafterCost
from draftsmith.planning.model_spec import ModelSpec

USABLE_SHARE = 0.90  # the rest: CUDA context, activations, allocator fragmentation
MIN_USEFUL_CONTEXT = 2048  # below this a context cut is no longer a real option
MIN_BITS = 4.0  # below ~4 bits per weight a precision cut costs quality the speedup won't buy back

SWITCH_ON = "switch it on"
CUT_FIRST = "cut context or precision first"
DONT = "don't: offload weights to the CPU"


@dataclass(frozen=True)
class VramBudget:
    """Bytes of each claim on the card, the verdict, and what would make it fit."""

    vram: float
    usable: float
    weights: float
    kv: float
    drafter_weights: float
    drafter_kv: float
    verify_kv: float
    method: str
    fits_context: int  # longest context (per sequence) at which target + drafter fit
    fits_bits: float | None  # weight bits at which everything fits at the asked context
    verdict: str

    @property
    def total(self) -> float:
        return self.weights + self.kv + self.drafter_weights + self.drafter_kv + self.verify_kv

    def to_json(self) -> dict:
        gib = {
            k: round(getattr(self, k) / GIB, 3)
            for k in (
                "vram",
                "usable",
                "weights",
                "kv",
                "drafter_weights",
                "drafter_kv",
                "verify_kv",
                "total",
            )
        }
        return {
            **{f"{k}_gib": v for k, v in gib.items()},
            "method": self.method,
            "fits_context": self.fits_context,
            "fits_bits": self.fits_bits,
            "verdict": self.verdict,
        }


def budget(
    spec: ModelSpec,
    vram_gib: float,
    context: int,
    concurrency: int,
    drafter: DrafterCost,
    k: int,
    kv_bits: float = 16,
) -> VramBudget:
    """Weights (params x bits / 8) + target KV at context x concurrency + drafter weights + drafter KV
    at context x concurrency + verification KV (concurrency x k extra positions), against 90% of VRAM."""
    vram = vram_gib * GIB
    usable = USABLE_SHARE * vram
    kv_tok = spec.kv_bytes_per_token(kv_bits)
    kv = kv_tok * context * concurrency
    d_kv = drafter.kv_per_token * context * concurrency
    verify = kv_tok * k * concurrency
    fixed = spec.weight_bytes + drafter.weight_bytes + verify
    per_ctx = concurrency * (kv_tok + drafter.kv_per_token)
    fits_context = max(0, math.floor((usable - fixed) / per_ctx)) if per_ctx else 0
    total = fixed + kv + d_kv
    rest = usable - kv - d_kv - verify - drafter.weight_bytes
    fits_bits = round(8 * rest / spec.params, 2) if total > usable and rest > 0 else None
    if total <= usable:
        verdict = SWITCH_ON
    elif fits_context >= min(context, MIN_USEFUL_CONTEXT) or (fits_bits or 0) >= MIN_BITS:
        verdict = CUT_FIRST
    else:
        verdict = DONT
    return VramBudget(
        vram,
        usable,
        spec.weight_bytes,
        kv,
        drafter.weight_bytes,
        d_kv,
        verify,
        drafter.method,
        fits_context,
        fits_bits,
        verdict,
    )
