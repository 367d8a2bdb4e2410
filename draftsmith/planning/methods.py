"""What each drafting method costs in memory and time, sized from the target's shapes.

Drafters are modelled the way their papers build them (EAGLE-3, DeepSeek-V3's MTP, DFlash, DSpark):
EAGLE-3 and MTP are one decoder layer run once per draft token; DFlash and DSpark are DeepSpec's 5
layers run once per round for the whole block (DSpark adds k rank-256 Markov steps); a draft model is a
whole small LM run once per draft token; n-gram lookup costs nothing on the accelerator. Trained
drafters are stored in 16 bits; a draft model at the target's bits.
"""

from __future__ import annotations

from dataclasses import dataclass

from draftsmith.planning import cost
from draftsmith.planning.model_spec import ModelSpec

METHODS = ("ngram", "draft-model", "eagle3", "mtp", "dflash", "dspark")
DRAFTER_BITS = 16
BLOCK_LAYERS = 5  # DeepSpec's DFlash/DSpark drafter depth
MARKOV_RANK = 256  # DSpark's low-rank previous-token bias (DeepSpec)
EAGLE_DRAFT_VOCAB = 32000  # EAGLE-3's reduced draft vocabulary
DRAFT_MODEL_SHARE = 0.1  # default draft model: a same-family LM with ~1/10 of the target's parameters


@dataclass(frozen=True)
class DrafterCost:
    """A drafter's footprint: weights held, weights read per pass, KV per context token, passes."""

    method: str
    weight_bytes: float  # held in device memory beyond the target (shared embeddings/heads excluded)
    read_bytes: float  # read per drafting pass
    read_params: float  # parameters multiplied per drafted row (for the FLOP side)
    kv_per_token: float  # drafter KV bytes per context token (0: none)
    parallel: bool  # one pass drafts the whole block (DFlash/DSpark) vs one pass per token
    serial_bytes_per_token: float = 0.0  # extra bytes read per drafted token after the pass (DSpark)
    note: str = ""

    def round_time(self, k: int, bandwidth: float, flops: float | None, batch: int, context: float) -> float:
        """Drafting time per round at an (achievable) bandwidth and FLOP/s: parallel drafters one
        roofline pass over k+1 rows (+ k small serial Markov steps); serial drafters k roofline passes
        of one row."""
        if k <= 0 or self.read_bytes == 0:
            return 0.0
        kv = self.kv_per_token * context
        if self.parallel:
            t = cost.step_time(self.read_bytes, kv, batch, k + 1, self.read_params, bandwidth, flops)
            return t + k * self.serial_bytes_per_token / bandwidth
        return k * cost.step_time(self.read_bytes, kv, batch, 1, self.read_params, bandwidth, flops)


def drafter_cost(
    method: str, spec: ModelSpec, draft_model: ModelSpec | None = None, kv_bits: float = 16
) -> DrafterCost:
    """Size a method's drafter for this target (its KV cache stored at kv_bits, like the target's)."""
    h, v, b = spec.hidden, spec.vocab, DRAFTER_BITS / 8
    layer = spec.layer_params
    head = v * h  # the target's output head, shared with (not copied into) the drafter
    kv_layer = spec.kv_bytes_per_token(kv_bits) / spec.layers  # one layer's KV per context token
    if method == "ngram":
        return DrafterCost(method, 0, 0, 0, 0, False, note="suffix lookup on the CPU: no device cost")
    if method == "draft-model":
        d = draft_model or _scaled_draft(spec)
        return DrafterCost(
            method,
            d.weight_bytes,
            d.read_bytes,
            d.read_params,
            d.kv_bytes_per_token(kv_bits),
            False,
            note=f"{d.name}: {d.params / 1e9:.2f}B params at {d.bits:g} bits, one pass per draft token",
        )
    if method == "eagle3":
        own = layer + 3 * h * h + EAGLE_DRAFT_VOCAB * h  # layer, fc over 3 fused states, draft head
        return DrafterCost(
            method,
            own * b,
            own * b,
            own,
            kv_layer,
            False,
            note="1 layer + 32k-token head, one pass per token",
        )
    if method == "mtp":
        own = layer + 2 * h * h  # one block and the 2H -> H projection; the head is the target's
        return DrafterCost(
            method,
            own * b,
            own * b + head * spec.bits / 8,
            own + head,
            kv_layer,
            False,
            note="1 block + the shared head, one pass per token",
        )
    if method in ("dflash", "dspark"):
        own = BLOCK_LAYERS * layer + BLOCK_LAYERS * h * h  # layers and the fc fusing 5 target states
        markov = 2 * MARKOV_RANK * v if method == "dspark" else 0
        return DrafterCost(
            method,
            (own + markov) * b,
            own * b + head * spec.bits / 8,
            own + head,
            BLOCK_LAYERS * kv_layer,  # K/V of the injected context features, per draft layer
            True,
            serial_bytes_per_token=MARKOV_RANK * v * b if markov else 0.0,
            note=f"{BLOCK_LAYERS} layers, one pass per block"
            + (", + a rank-256 Markov step per token" if markov else ""),
        )
    raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}")


def _scaled_draft(spec: ModelSpec) -> ModelSpec:
    """An assumed dense draft model of the target's family: ~1/10 of the target's active parameters
    and half its layers."""
    share = DRAFT_MODEL_SHARE
    n = spec.active_params * share
    return ModelSpec(
        name=f"assumed draft model (~{share:.0%} of the target's active params)",
        params=n,
        active_params=n,
        layers=max(1, spec.layers // 2),
        hidden=spec.hidden,
        heads=spec.heads,
        kv_heads=spec.kv_heads,
        head_dim=spec.head_dim,
        vocab=spec.vocab,
        bits=spec.bits,
        tied_embeddings=True,
    )
