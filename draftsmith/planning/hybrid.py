"""The hybrid CPU/GPU bound: when weights spill out of VRAM, memory channels and PCIe set the speed.

The source article's conclusion: in hybrid decoding "the ceiling is not speculation's to decide;
memory channels and PCIe are the referees". This computes both referees for a model that does not
fit: MoE experts are offloaded first (a token reads only its routed experts' share of them), a dense
model's overflow layers are read in full every token.
"""

from __future__ import annotations

from dataclasses import dataclass

from draftsmith.planning import cost
from draftsmith.planning.hardware import CPU_EFFICIENCY, PCIE_PLANNING_FACTOR, CpuMemory, Hardware, Pcie
from draftsmith.planning.model_spec import ModelSpec
from draftsmith.planning.vram import USABLE_SHARE

ARTICLE_PCIE_BYTES_PER_TOKEN = 0.5e9  # the article's rule of thumb: ~0.5 GB of PCIe traffic per token


@dataclass(frozen=True)
class HybridBound:
    offloaded_bytes: float  # weights that live in CPU memory
    cpu_bytes_per_token: float  # of those, read per generated token
    gpu_bytes_per_token: float
    cpu_tok_s: tuple[float, float] | None  # at 60% and 85% of the DDR peak; None without --cpu
    pcie_rule_tok_s: float  # the article's rule: link GB/s / 0.5 GB per token (no planning factor)
    pcie_rule_planned_tok_s: float  # the same with the 0.85 planning factor
    streamed_tok_s: float  # if the offloaded bytes crossed PCIe every token instead (0.85 factor)
    combined_tok_s: float | None  # CPU part then GPU part each token, capped by the PCIe rule
    link: str
    cpu: str | None
    pcie_bytes_per_token: float

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def bound(
    spec: ModelSpec,
    hw: Hardware,
    cpu: CpuMemory | None,
    link: Pcie,
    kv_bytes: float,
    pcie_bytes_per_token: float = ARTICLE_PCIE_BYTES_PER_TOKEN,
) -> HybridBound:
    """Offloaded bytes = weights - (90% of VRAM - KV); CPU bytes per token = offloaded experts x
    routed share (+ offloaded dense weights in full); tok/s <= efficiency x channels x GB/s per
    channel / CPU bytes per token, and <= PCIe GB/s (x 0.85 to plan) / bytes crossing per token."""
    room = max(0.0, USABLE_SHARE * (hw.vram_gb or 0) * 2**30 - kv_bytes)
    offloaded = max(0.0, spec.weight_bytes - room)
    expert_bytes = spec.expert_params * spec.bits / 8
    if spec.is_moe:
        in_experts = min(offloaded, expert_bytes)
        cpu_read = in_experts * spec.experts_per_token / spec.experts + (offloaded - in_experts)
    else:
        cpu_read = offloaded * spec.read_bytes / spec.weight_bytes
    gpu_read = max(0.0, spec.read_bytes - cpu_read)
    cpu_tok = None
    combined = None
    rule = cost.pcie_tok_s(pcie_bytes_per_token, link.gbs)
    if cpu is not None:
        lo, hi = (
            cost.cpu_memory_tok_s(cpu_read, cpu.channels, cpu.per_channel_gbs, e) for e in CPU_EFFICIENCY
        )
        cpu_tok = (lo, hi)
        mid = sum(CPU_EFFICIENCY) / 2
        t = cpu_read / (mid * cpu.peak_gbs * 1e9) + gpu_read / hw.bandwidth
        combined = min(1 / t, rule) if offloaded else 1 / t
    return HybridBound(
        offloaded,
        cpu_read,
        gpu_read,
        cpu_tok,
        rule,
        cost.pcie_tok_s(pcie_bytes_per_token, link.gbs, PCIE_PLANNING_FACTOR),
        cost.pcie_tok_s(cpu_read, link.gbs, PCIE_PLANNING_FACTOR),
        combined,
        link.name,
        cpu.name if cpu else None,
        pcie_bytes_per_token,
    )
