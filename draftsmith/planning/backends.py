"""What an engine really gets out of a device: achievable bandwidth and the measured verify-cost curve.

A spec sheet gives a ceiling. Two things bring a plan down to what people measure:

- **Achievable bandwidth.** Single-stream decode reads the weights once per token, but kernels reach a
  share of the peak: an efficiency per engine and device class, fitted to one published single-stream
  number (marked as the fit case in `planning.published`) and checked against the others; the spread
  is the range the published cases span.
- **The verify-cost curve.** A step over m token rows costs T(m) = T(1) x r(m). Roofline says r ~ 1
  until the ridge point, but quantised kernels (llama.cpp's MMVQ, a few CPU cores) pay per row long
  before that: on an RTX 3090 with Q4_0 weights r(2) = 1.12, r(4) = 1.32, r(8) = 2.17. Where a curve
  was published it is used; where none was, the roofline with a compute efficiency stands in, and
  the plan says which. `plan --measure --engine llamacpp` replaces either with this machine's own.

The same curve prices concurrency: B sequences verifying n tokens each make a step of B x n rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from draftsmith.errors import DraftsmithError


@dataclass(frozen=True)
class CostCurve:
    """r(m) = T(m rows) / T(1 row) at a few m, linearly interpolated; past the last point its last
    slope continues (more rows never get cheaper per row than the curve's end)."""

    rows: tuple[int, ...]
    relative: tuple[float, ...]
    source: str

    def __post_init__(self) -> None:
        if not self.rows or self.rows[0] != 1 or abs(self.relative[0] - 1) > 1e-9:
            raise ValueError("a cost curve starts at r(1) = 1")
        if list(self.rows) != sorted(set(self.rows)) or len(self.rows) != len(self.relative):
            raise ValueError("cost curve rows must be increasing, one value each")

    def at(self, m: float) -> float:
        ks, rs = self.rows, self.relative
        if m <= ks[0]:
            return rs[0]
        for i in range(1, len(ks)):
            if m <= ks[i]:
                return rs[i - 1] + (rs[i] - rs[i - 1]) * (m - ks[i - 1]) / (ks[i] - ks[i - 1])
        if len(ks) == 1:
            return rs[0]
        slope = (rs[-1] - rs[-2]) / (ks[-1] - ks[-2])
        return rs[-1] + slope * (m - ks[-1])

    @classmethod
    def from_rates(cls, rates: dict[int, float], source: str) -> CostCurve:
        """From tokens per second of m-row steps (llama-bench pp at micro-batch m): r(m) = m x rate(1) /
        rate(m)."""
        ks = sorted(rates)
        return cls(tuple(ks), tuple(round(k * rates[ks[0]] / rates[k], 4) for k in ks), source)

    @classmethod
    def from_seconds(cls, seconds: dict[int, float], source: str) -> CostCurve:
        """From seconds per m-row step (a measured verify curve)."""
        ks = sorted(seconds)
        return cls(tuple(ks), tuple(round(seconds[k] / seconds[ks[0]], 4) for k in ks), source)

    def to_json(self) -> dict:
        return {"rows": list(self.rows), "relative": list(self.relative), "source": self.source}


PR15802 = "llama.cpp PR 15802 (RTX 3090, llama 8B Q4_0, llama-bench pp512 at micro-batch 1-8)"
PR7716 = "llama.cpp PR 7716 (RTX 3090, llama 8B Q4_0, pp2048 at micro-batch 16, 32)"
CURVES: dict[str, CostCurve] = {
    # llama-bench t/s at micro-batch m: PR 15802 (m = 1..8, after the PR), PR 7716 (m = 16, 32, after)
    "llamacpp-cuda-quant": CostCurve.from_rates(
        {
            1: 155.02,
            2: 277.36,
            3: 390.23,
            4: 468.95,
            5: 514.50,
            6: 529.37,
            7: 559.17,
            8: 570.67,
            16: 914.10,
            32: 1197.13,
        },
        f"{PR15802}; {PR7716}",
    ),
    # 16-bit weights: llama.cpp PR 14262 (RTX 3090, llama 8B BF16, micro-batch 1 and 2, after the PR)
    "llamacpp-cuda-16bit": CostCurve.from_rates(
        {1: 58.06, 2: 109.70}, "llama.cpp PR 14262 (RTX 3090, llama 8B BF16, pp512 at micro-batch 1, 2)"
    ),
    # this project's 2-core AMD EPYC VM (AVX-512 BF16), SmolLM2-135M Q4_1, 2 threads: docs/BENCHMARKS.md
    "llamacpp-cpu": CostCurve(
        (1, 2, 3, 4, 5, 6, 8, 12, 16),
        (1.00, 1.45, 1.76, 2.07, 2.36, 2.95, 3.37, 4.69, 6.06),
        "this project's llama-bench -p 1..16 on a 2-core AMD EPYC VM, SmolLM2-135M Q4_1 "
        "(docs/BENCHMARKS.md); a 2-core Xeon with AMX measured r(2) 1.29, r(4) 1.83, r(8) 3.03",
    ),
}


@dataclass(frozen=True)
class Backend:
    """One engine on one device class: the share of peak bandwidth its decode reaches, the spread
    published cases show, its verify-cost curve (None: roofline with a compute efficiency)."""

    key: str
    engine: str
    device: str
    efficiency: float
    spread: tuple[float, float]
    efficiency_source: str
    curve: CostCurve | None
    compute_efficiency: float
    compute_source: str
    expert_efficiency: float = 1.0  # MoE: routed-expert bytes read at this share of the dense rate
    expert_source: str = "not fitted: experts read like dense weights"
    # speculative rounds: a drafter pass never takes less than pass_floor_s (kernel launches and the
    # engine's per-step work at batch 1), and a round pays round_s beyond its forward passes
    # (proposal bookkeeping, rejection sampling)
    pass_floor_s: float = 0.0
    round_s: float = 0.0
    spec_source: str = "not fitted: a round costs its forward passes"

    @property
    def name(self) -> str:
        return self.key

    def describe(self) -> str:
        curve = (
            f"verify curve r(2) {self.curve.at(2):.2f}, r(4) {self.curve.at(4):.2f}, "
            f"r(8) {self.curve.at(8):.2f} "
            f"({self.curve.source})"
            if self.curve
            else f"no published verify curve: roofline at {self.compute_efficiency:.0%} of peak FLOP/s "
            f"({self.compute_source})"
        )
        lo, hi = self.spread
        return (
            f"{self.key}: {self.efficiency:.0%} of peak bandwidth (published cases {lo:.0%}-{hi:.0%}; "
            f"{self.efficiency_source}); {curve}"
        )

    def to_json(self) -> dict:
        return {
            "key": self.key,
            "engine": self.engine,
            "device": self.device,
            "efficiency": self.efficiency,
            "spread": list(self.spread),
            "efficiency_source": self.efficiency_source,
            "curve": self.curve.to_json() if self.curve else None,
            "compute_efficiency": self.compute_efficiency,
            "compute_source": self.compute_source,
            "expert_efficiency": self.expert_efficiency,
            "expert_source": self.expert_source,
            "pass_floor_s": self.pass_floor_s,
            "round_s": self.round_s,
            "spec_source": self.spec_source,
        }


# Fitted parameters. Each names its fit case in planning.published (marked there, not counted); the
# test suite refits them from those cases and checks these constants.
LLAMACPP_CUDA_EFFICIENCY = 0.705  # fit: RTX 3090, Llama-3-8B Q4_0, 155.02 tok/s (PR 15802)
LLAMACPP_METAL_EFFICIENCY = 0.526  # fit: M1 Max, Llama-3.1-8B Q4_K_M, 46.2 tok/s
SGLANG_EFFICIENCY = 0.714  # fit: H100 SXM, Llama-3.1-8B BF16, 158.34 tok/s (EAGLE-3 paper Table 4)
VLLM_EFFICIENCY = 0.734  # fit: A100 40GB, Llama-3.1-8B BF16, ~75 tok/s
SERVING_COMPUTE_EFFICIENCY = 0.900  # fit: EAGLE-3 in SGLang at batch 64, 1.38x (EAGLE-3 paper Table 3)
LLAMACPP_EXPERT_EFFICIENCY = 0.276  # fit: RTX 4090, Qwen3-30B-A3B Q4_0, 161.55 tok/s (PR 16834)
VLLM_PASS_FLOOR_S = 0.00085  # fit: vLLM EAGLE-3 chain of 7, Llama-3.1-8B, H100, batch 1 (vLLM issue 20780)
VLLM_ROUND_S = 0.00096  # fit: the same at a chain of 2
# Not fitted: real CPU systems reach 60-85% of the DDR spec; the midpoint.
CPU_EFFICIENCY_MID = 0.725

_CPU_SPREAD = (0.51, 0.85)  # published: 0.51 (a 135M model on a 2-core VM) to 0.75; STREAM-style: 60-85%
_CPU_SOURCE = "not fitted: the midpoint of the 60-85% of the DDR spec real systems reach"
_EXPERTS = "fitted to llama.cpp on an RTX 4090 (Qwen3-30B-A3B Q4_0, PR 16834)"
_ROOF = "fitted to EAGLE-3's SGLang throughput at batch 64 (planning.published)"

BACKENDS: dict[str, Backend] = {
    "llamacpp-gpu": Backend(
        "llamacpp-gpu",
        "llamacpp",
        "gpu",
        LLAMACPP_CUDA_EFFICIENCY,
        (0.58, 0.93),
        "fitted to llama.cpp on an RTX 3090 (Llama-3-8B Q4_0, PR 15802)",
        CURVES["llamacpp-cuda-quant"],
        SERVING_COMPUTE_EFFICIENCY,
        _ROOF,
        LLAMACPP_EXPERT_EFFICIENCY,
        _EXPERTS,
    ),
    "llamacpp-apple": Backend(
        "llamacpp-apple",
        "llamacpp",
        "apple",
        LLAMACPP_METAL_EFFICIENCY,
        (0.41, 0.79),
        "fitted to llama.cpp Metal on an M1 Max (Llama-3.1-8B Q4_K_M)",
        replace(
            CURVES["llamacpp-cuda-quant"],
            source="a stand-in: llama.cpp's CUDA curve (PR 15802, PR 7716); no Metal verify curve is "
            "published, measure yours with plan --measure --engine llamacpp",
        ),
        SERVING_COMPUTE_EFFICIENCY,
        "not used: the stand-in curve prices verify steps",
        LLAMACPP_EXPERT_EFFICIENCY,
        _EXPERTS + " (CUDA's, not fitted on Metal)",
    ),
    "llamacpp-cpu": Backend(
        "llamacpp-cpu",
        "llamacpp",
        "cpu",
        CPU_EFFICIENCY_MID,
        _CPU_SPREAD,
        _CPU_SOURCE,
        CURVES["llamacpp-cpu"],
        SERVING_COMPUTE_EFFICIENCY,
        _ROOF,
        LLAMACPP_EXPERT_EFFICIENCY,
        _EXPERTS + " (CUDA's, not fitted on CPUs)",
    ),
    "vllm-gpu": Backend(
        "vllm-gpu",
        "vllm",
        "gpu",
        VLLM_EFFICIENCY,
        (0.69, 0.74),
        "fitted to vLLM on an A100 40GB (Llama-3.1-8B BF16, batch 1)",
        None,
        SERVING_COMPUTE_EFFICIENCY,
        _ROOF,
        pass_floor_s=VLLM_PASS_FLOOR_S,
        round_s=VLLM_ROUND_S,
        spec_source="fitted to vLLM's EAGLE-3 at chains of 2 and 7 on an H100 (Llama-3.1-8B, batch 1)",
    ),
    "sglang-gpu": Backend(
        "sglang-gpu",
        "sglang",
        "gpu",
        SGLANG_EFFICIENCY,
        (0.69, 0.74),
        "fitted to SGLang on an H100 SXM (Llama-3.1-8B BF16, batch 1, EAGLE-3 paper Table 4)",
        None,
        SERVING_COMPUTE_EFFICIENCY,
        _ROOF,
    ),
    "draftsmith": Backend(
        "draftsmith",
        "draftsmith",
        "any",
        CPU_EFFICIENCY_MID,
        _CPU_SPREAD,
        "not fitted (draftsmith's engine is measured, not preset: use plan --measure)",
        None,
        SERVING_COMPUTE_EFFICIENCY,
        _ROOF,
    ),
}

QUANTISED_BITS = (
    9.0  # below this, weights are a quantised format (GGUF Q4..Q8), read by llama.cpp-style kernels
)


def default_engine(kind: str, bits: float) -> str:
    """The engine a plan assumes when none is named: llama.cpp for CPUs, Apple and quantised weights
    (GGUF), vLLM for 16-bit weights on a GPU."""
    if kind in ("cpu", "apple") or bits < QUANTISED_BITS:
        return "llamacpp"
    return "vllm"


def backend(engine: str, kind: str, bits: float) -> Backend:
    """The backend for an engine on a device kind ("gpu", "apple", "cpu"; "custom" counts as a GPU)."""
    device = "gpu" if kind in ("gpu", "custom") else kind
    if engine == "draftsmith":
        return BACKENDS["draftsmith"]
    key = f"{engine}-{device}"
    if key not in BACKENDS:
        runs_on = sorted({b.device for b in BACKENDS.values() if b.engine == engine})
        raise DraftsmithError(
            f"engine {engine} does not run on {device} here (it runs on: {', '.join(runs_on)})"
        )
    b = BACKENDS[key]
    if key == "llamacpp-gpu" and bits >= QUANTISED_BITS:
        b = replace(b, curve=CURVES["llamacpp-cuda-16bit"])
    return b
