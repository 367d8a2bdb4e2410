"""oneDNN-packed weights for CPU inference.

A matmul of a few rows against a weight stored densely is read- and repack-bound on a CPU: MKL
repacks the weight on every call and walks it once per row, so a step of 8 rows costs about twice
a step of one. oneDNN's blocked copy (the reorder torch's own CPU compiler applies to frozen
weights) is read once for all rows: all of the default target's matmuls for one token fell from
24.2 to 10.7 ms and for 8 rows from 48.7 to 13.7 ms on a 2-core Xeon (docs/experiments.md), which
is what lets a speculative step cost little more than a plain one. Inference only: the packed op has no
gradient, so training keeps its dense modules.
"""

from __future__ import annotations

import os

import torch
from torch import nn


def packing_enabled() -> bool:
    """DRAFTSMITH_PACKED=0 keeps plain dense weights (to compare, or where oneDNN misbehaves)."""
    return os.environ.get("DRAFTSMITH_PACKED", "1") != "0"


def packable_dtypes() -> tuple[torch.dtype, ...]:
    """fp32 everywhere oneDNN runs; bf16 where the CPU computes it natively (AVX512-BF16 or AMX),
    where oneDNN's bf16 kernels read the weight once for all rows as its fp32 ones do."""
    if not torch.backends.mkldnn.is_available():
        return ()
    try:
        bf16 = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        bf16 = False
    return (torch.float32, torch.bfloat16) if bf16 else (torch.float32,)


def pack_weight(w: torch.Tensor) -> torch.Tensor | None:
    """oneDNN's blocked copy of w [out, in] for `packed_linear` (the reorder torch's own CPU
    compiler applies to frozen weights), or None where oneDNN cannot take it (no oneDNN in this
    torch build, a device or dtype it does not pack) or its product disagrees with the dense one."""
    if w.device.type != "cpu" or w.dtype not in packable_dtypes():
        return None
    try:
        packed = torch.ops.mkldnn._reorder_linear_weight(w)
        probe = torch.randn(3, w.shape[1], generator=torch.Generator().manual_seed(0)).to(w.dtype)
        exact = probe.double() @ w.double().t()
        # each product within rounding of the dtype (bf16 keeps 8 mantissa bits) of the exact one
        tol = (1e-4 if w.dtype == torch.float32 else 2e-2) * (probe.double().abs() @ w.double().abs().t())
        ok = bool(((packed_linear(probe, packed).double() - exact).abs() <= tol + 1e-6).all())
    except (AttributeError, RuntimeError, TypeError, NotImplementedError):
        return None
    return packed if ok else None


def packed_linear(x: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
    """x [..., in] @ w.T with w held by oneDNN (`pack_weight`): the weight is read in its blocked
    order, once for all rows, instead of being repacked by every call; a step of 8 rows then
    costs about what one row does (docs/experiments.md)."""
    flat = x.reshape(-1, x.shape[-1])
    y = torch.ops.mkldnn._linear_pointwise(flat, packed, None, "none", [], "")
    return y.view(*x.shape[:-1], y.shape[-1])


class PackedLinear(nn.Module):
    """An inference-only stand-in for an nn.Linear, computing with its packed weight. It keeps the
    original weight and bias as attributes, so code that reads `.weight` (dtype, device, shape)
    works unchanged."""

    def __init__(self, linear: nn.Linear, packed: torch.Tensor) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias
        self.packed = packed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = packed_linear(x, self.packed)
        return y if self.bias is None else y + self.bias


def pack_linears(module: nn.Module) -> int:
    """Swap every nn.Linear under `module` whose weight oneDNN packs for a `PackedLinear`, for
    decoding only (never on a module that will train); returns how many were swapped."""
    if not packing_enabled():
        return 0
    swapped = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                packed = pack_weight(child.weight.detach())
                if packed is not None:
                    setattr(parent, name, PackedLinear(child, packed))
                    swapped += 1
    return swapped


def pack_for_decoding(model: nn.Module) -> None:
    """Pack a drafter loaded to draft: its Linear layers, and its `head` tensor (the target's
    lm_head rows many drafters read out through) as `head_packed` for `read_head`. Never on a
    model that will train (the packed op has no gradient)."""
    if not packing_enabled():
        return
    pack_linears(model)
    head = getattr(model, "head", None)
    if isinstance(head, torch.Tensor):
        model.head_packed = pack_weight(head.detach())


def read_head(x: torch.Tensor, model: nn.Module) -> torch.Tensor:
    """x @ model.head.T, through the packed copy when `pack_for_decoding` made one."""
    packed = getattr(model, "head_packed", None)
    return packed_linear(x, packed) if packed is not None else x @ model.head.t().to(x.dtype)


def for_decoding(model: nn.Module, given: object) -> nn.Module:
    """`model` packed for decoding (`pack_for_decoding`) unless it is `given`, the very object a
    caller handed in (it may still train); a drafter's `build` passes what it loaded."""
    if model is not given:
        pack_for_decoding(model)
    return model

