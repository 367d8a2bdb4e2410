"""CPU/GPU offload: when weights spill out of VRAM, memory channels (and sometimes PCIe) set the speed.

The source article's conclusion: with offloaded weights "the ceiling is not speculation's to decide;
memory channels and PCIe are the referees". Two ways to offload, two referees:

- **Compute where the weights live** (llama.cpp `-ngl N` / `--n-cpu-moe N`, ktransformers): the CPU
  multiplies its share of the weights out of its own memory, the GPU the rest; only activations (a
  few KB per layer) cross PCIe. Time per token = CPU-resident bytes read / (CPU efficiency x DDR
  peak) + (GPU-resident bytes + the KV cache the GPU attends to) / (GPU efficiency x bandwidth).
  MoE experts are offloaded first: a token reads only its routed experts' share of them.
- **Stream the weights to the GPU** (vLLM `--cpu-offload-gb`, accelerate offload): the offloaded
  bytes a token reads cross PCIe every token, so the link caps the speed.

The article's rule of thumb, ~0.5 GB of PCIe traffic per token (PCIe 3.0 x16 caps near 32 tok/s), is
printed for reference; it is not a cap on the first kind, where no weights cross the bus.
"""

from __future__ import annotations

from dataclasses import dataclass

from draftsmith.planning import cost
from draftsmith.planning.hardware import CPU_EFFICIENCY, PCIE_PLANNING_FACTOR, CpuMemory, Hardware, Pcie
from draftsmith.planning.model_spec import ModelSpec
from draftsmith.planning.vram import USABLE_SHARE

ARTICLE_PCIE_BYTES_PER_TOKEN = 0.5e9  # the article's rule of thumb: ~0.5 GB of PCIe traffic per token
ACTIVATION_BYTES = 2  # activations cross the link in 16 bits


@dataclass(frozen=True)
class OffloadBound:
    offloaded_bytes: float  # weights that live in CPU memory
    cpu_bytes_per_token: float  # of those, read per generated token
    gpu_bytes_per_token: float  # GPU-resident weights read per token
    kv_bytes_per_token: float  # the KV cache the GPU reads per token (all sequences)
    activation_bytes_per_token: float  # crossing PCIe when the CPU computes its layers
    gpu_tok_s: float  # the GPU part alone (an upper bound: as if nothing were offloaded)
    cpu_tok_s: tuple[float, float] | None  # the CPU part alone at 60% and 85% of the DDR peak
    combined_tok_s: float | None  # CPU computes its part, then the GPU its part (no PCIe cap)
    streamed_tok_s: float  # if the offloaded bytes crossed PCIe every token instead (0.85 factor)
    pcie_rule_tok_s: float  # the article's rule: link GB/s / 0.5 GB per token (reference, not a cap)
    pcie_rule_planned_tok_s: float  # the same with the 0.85 planning factor
    link: str
    cpu: str | None
    pcie_bytes_per_token: float
    gpu_efficiency: float
    cpu_efficiency: float

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def bound(
    spec: ModelSpec,
    hw: Hardware,
    cpu: CpuMemory | None,
    link: Pcie,
    kv_bytes: float,
    pcie_bytes_per_token: float = ARTICLE_PCIE_BYTES_PER_TOKEN,
    gpu_efficiency: float = 1.0,
    cpu_efficiency: float = sum(CPU_EFFICIENCY) / 2,
    expert_efficiency: float = 1.0,
) -> OffloadBound:
    """Offloaded bytes = weights - (90% of VRAM - KV); CPU bytes per token = offloaded experts x routed
    share (+ offloaded dense weights in full); time per token = CPU bytes / (CPU efficiency x DDR peak)
    + (GPU bytes + KV) / (GPU efficiency x bandwidth); streamed instead: the offloaded bytes over PCIe."""
    room = max(0.0, USABLE_SHARE * (hw.vram_gb or 0) * 2**30 - kv_bytes)
    offloaded = max(0.0, spec.weight_bytes - room)
    expert_bytes = spec.expert_params * spec.bits / 8
    share = spec.experts_per_token / spec.experts if spec.is_moe else 0.0
    cpu_experts = gpu_experts = 0.0  # routed-expert bytes read per token on each side
    if spec.is_moe:
        in_experts = min(offloaded, expert_bytes)
        cpu_experts = in_experts * share
        gpu_experts = (expert_bytes - in_experts) * share
        cpu_read = cpu_experts + (offloaded - in_experts)
        moved_layers = spec.layers * in_experts / expert_bytes if expert_bytes else 0.0
    else:
        cpu_read = offloaded * spec.read_bytes / spec.weight_bytes
        moved_layers = spec.layers * offloaded / spec.weight_bytes
    gpu_read = max(0.0, spec.read_bytes - cpu_read)
    gpu_bw = gpu_efficiency * hw.bandwidth
    link_bw = link.gbs * PCIE_PLANNING_FACTOR * 1e9
    # routed experts (many small matrices) read at the backend's expert efficiency, on either side
    gpu_time = (gpu_read - gpu_experts + kv_bytes) / gpu_bw + gpu_experts / (gpu_bw * expert_efficiency)
    # each offloaded layer sends its input to the CPU and its output back
    activations = 2 * ACTIVATION_BYTES * spec.hidden * moved_layers if offloaded else 0.0
    cpu_tok = combined = None
    if cpu is not None:
        lo, hi = (
            cost.cpu_memory_tok_s(cpu_read, cpu.channels, cpu.per_channel_gbs, e) for e in CPU_EFFICIENCY
        )
        cpu_tok = (lo, hi)
        cpu_bw = cpu_efficiency * cpu.peak_gbs * 1e9
        cpu_time = (cpu_read - cpu_experts) / cpu_bw + cpu_experts / (cpu_bw * expert_efficiency)
        link_time = activations / link_bw
        combined = 1 / (cpu_time + gpu_time + link_time)
    # streamed: the offloaded bytes cross the link, then the GPU multiplies them as it does its own
    streamed_gpu = (cpu_read - cpu_experts) / gpu_bw + cpu_experts / (gpu_bw * expert_efficiency)
    streamed = 1 / (cpu_read / link_bw + gpu_time + streamed_gpu)
    return OffloadBound(
        offloaded,
        cpu_read,
        gpu_read,
        kv_bytes,
        activations,
        1 / gpu_time,
        cpu_tok,
        combined,
        streamed,
        cost.pcie_tok_s(pcie_bytes_per_token, link.gbs),
        cost.pcie_tok_s(pcie_bytes_per_token, link.gbs, PCIE_PLANNING_FACTOR),
        link.name,
        cpu.name if cpu else None,
        pcie_bytes_per_token,
        gpu_efficiency,
        cpu_efficiency,
    )
