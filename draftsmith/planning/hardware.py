"""Hardware the planner knows: GPU presets, CPU memory systems, PCIe links, and explicit overrides.

Numbers are the vendors' peak figures (the vendors' data sheets; dense
BF16 with FP16 accumulate; "~" values are estimates). They are ceilings: what an engine reaches of
them is planning.backends' business (achievable bandwidth, verify-cost curves). Inputs outside
physical sense (a 1e12 GB/s card) are refused here, each with the range that makes sense.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from draftsmith.errors import DraftsmithError

GIB = 2**30
GB = 1e9


@dataclass(frozen=True)
class Hardware:
    """One device the model decodes on: memory bandwidth (GB/s), dense TFLOPS, memory for weights."""

    name: str
    kind: str  # "gpu", "apple" (unified memory), "cpu" or "custom"
    bandwidth_gbs: float
    tflops: float | None  # None: compute not known, the roofline checks memory only
    vram_gb: float | None  # GiB of device memory; None: not planned (CPU RAM)
    source: str

    @property
    def bandwidth(self) -> float:
        """Bytes per second."""
        return self.bandwidth_gbs * GB

    @property
    def flops(self) -> float | None:
        """FLOP per second, or None when unknown."""
        return None if self.tflops is None else self.tflops * 1e12

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "bandwidth_gbs": self.bandwidth_gbs,
            "tflops": self.tflops,
            "vram_gib": self.vram_gb,
            "source": self.source,
        }


_GPU_SOURCE = "vendor data sheet peak (~ marks an estimate)"
_SPEC_SHEET = "the vendor's data sheet (peak bandwidth, dense BF16 TFLOPS without sparsity)"

# name -> (display name, bandwidth GB/s, dense BF16 TFLOPS, VRAM GiB, source)
GPUS: dict[str, tuple[str, float, float | None, float, str]] = {
    "2080": ("RTX 2080 8 GB", 448, None, 8, _SPEC_SHEET),
    "3080": ("RTX 3080 10 GB", 760, 59, 10, _GPU_SOURCE),
    "3090": ("RTX 3090 24 GB", 936, 71, 24, _GPU_SOURCE),
    "4060ti-16g": ("RTX 4060 Ti 16 GB", 288, 44, 16, _GPU_SOURCE),
    "4090": ("RTX 4090 24 GB", 1008, 165, 24, _GPU_SOURCE),
    "5060ti-16g": ("RTX 5060 Ti 16 GB", 448, 47, 16, _GPU_SOURCE),
    "5080": ("RTX 5080 16 GB", 960, 113, 16, _GPU_SOURCE),
    "5090": ("RTX 5090 32 GB", 1792, 210, 32, _GPU_SOURCE),
    "rtx-pro-6000": ("RTX PRO 6000 96 GB", 1792, 250, 96, _GPU_SOURCE),
    "l4": ("L4 24 GB", 300, 121, 24, _SPEC_SHEET),
    "l40s": ("L40S 48 GB", 864, 362, 48, _SPEC_SHEET),
    "a100-40g": ("A100 40 GB", 1555, 312, 40, _SPEC_SHEET),
    "a100-80g": ("A100 80 GB", 2039, 312, 80, _GPU_SOURCE),
    "h100-pcie": ("H100 PCIe 80 GB", 2000, 756, 80, _SPEC_SHEET),
    "h100-sxm": ("H100 SXM 80 GB", 3350, 989, 80, _GPU_SOURCE),
    "h200": ("H200 141 GB", 4800, 989, 141, _GPU_SOURCE),
    "b200": ("B200 ~180 GB", 8000, 2250, 180, _GPU_SOURCE),
}

# Apple M-series: unified memory, of which the GPU may wire about 3/4 by default (macOS's
# recommendedMaxWorkingSetSize; `sysctl iogpu.wired_limit_mb` raises it): the VRAM below is that
# share of the largest memory each chip ships with (--vram to change). GPU TFLOPS are not planned.
APPLE_GPU_SHARE = 0.75
_APPLE_SOURCE = "Apple's specifications (unified memory bandwidth, largest memory option)"
APPLE: dict[str, tuple[str, float, float]] = {  # name -> (display, GB/s, unified memory GB)
    "m1-max": ("Apple M1 Max", 400, 64),
    "m2-ultra": ("Apple M2 Ultra", 800, 192),
    "m3-max": ("Apple M3 Max (40-core GPU)", 400, 128),
    "m3-ultra": ("Apple M3 Ultra", 819, 512),
    "m4": ("Apple M4", 120, 32),
    "m4-pro": ("Apple M4 Pro", 273, 64),
    "m4-max": ("Apple M4 Max (40-core GPU)", 546, 128),
}

# names that would silently pick one of two very different cards: refused with both named
AMBIGUOUS = {
    "h100": ("h100-sxm", "h100-pcie"),
    "a100": ("a100-80g", "a100-40g"),
}

# extra spellings (after normalisation) for the presets above
GPU_ALIASES = {
    "5060ti16gb": "5060ti-16g",
    "4060ti16gb": "4060ti-16g",
    "pro6000": "rtx-pro-6000",
    "rtxpro6000blackwell": "rtx-pro-6000",
    "a10080gb": "a100-80g",
    "a100sxm": "a100-80g",
    "a10040gb": "a100-40g",
    "h100sxm5": "h100-sxm",
    "h100nvl": "h100-pcie",
    "h200sxm": "h200",
    "3080-10g": "3080",
}

# what a plan may be asked about: beyond these an input is a typo, not a machine
MAX_BANDWIDTH_GBS = 20_000  # the fastest single device listed (B200) reads ~8,000 GB/s
MIN_BANDWIDTH_GBS = 1.0
MAX_TFLOPS = 20_000  # B200 dense BF16 is ~2,250
MIN_TFLOPS = 0.001
MAX_VRAM_GIB = 2048  # the largest single-device memory listed is 512 GB (unified)
MIN_VRAM_GIB = 0.25

# DDR generation -> GB/s per 64-bit channel (MT/s x 8 bytes)
DDR_PER_CHANNEL_GBS = {
    "ddr4-2400": 19.2,
    "ddr4-2666": 21.3,
    "ddr4-3200": 25.6,
    "ddr5-4800": 38.4,
    "ddr5-5600": 44.8,
    "ddr5-6400": 51.2,
}

# named CPU memory systems -> (DDR generation, channels, dense TFLOPS if known, where it comes from)
CPU_SYSTEMS: dict[str, tuple[str, int, float | None, str]] = {
    "desktop-ddr4": ("ddr4-3200", 2, None, "a typical desktop: 2 channels"),
    "desktop-ddr5": ("ddr5-5600", 2, None, "a typical desktop: 2 channels"),
    "epyc-7642-2s": ("ddr4-3200", 16, None, "the article's dual EPYC 7642 box: 16 channels of DDR4"),
    "w3-3345": ("ddr5-4800", 8, None, "the article's Xeon w3-3345 box: 8 channels of DDR5"),
    "epyc-9004": ("ddr5-4800", 12, None, "one AMD EPYC 9004 (Genoa) socket: 12 channels of DDR5-4800"),
    "xeon-4th-gen": ("ddr5-4800", 8, None, "one Xeon Scalable 4th gen (Sapphire Rapids) socket: 8 x DDR5"),
    "threadripper-3970x": ("ddr4-3200", 4, None, "Threadripper 3970X: 4 channels of DDR4-3200"),
}

# this development machine, measured: a copy bandwidth, not a DDR spec
DEV_MACHINE = Hardware("dev VM, 2 cores", "cpu", 25.0, 0.09, None, "measured on a 2-core VM (copy bandwidth)")

# share of the DDR spec real systems reach (60-85% in published STREAM-style measurements)
CPU_EFFICIENCY = (0.60, 0.85)

# PCIe generation -> GB/s per direction for x16
PCIE_X16_GBS = {3: 15.75, 4: 31.5, 5: 63.0}
PCIE_PLANNING_FACTOR = 0.85  # plan with 85% of the link's rate (protocol overhead)


def _norm(name: str) -> str:
    """Case, space, dash and vendor-prefix tolerant key: 'NVIDIA RTX 5060 Ti 16G' -> '5060ti16g'."""
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    for prefix in ("nvidia", "geforce", "rtx"):
        if key.startswith(prefix) and key != prefix:
            key = key[len(prefix) :]
    return key


def _positive(
    value: float | None, flag: str, unit: str, lo: float | None = None, hi: float | None = None
) -> float | None:
    """Reject impossible numbers (zero, negative, NaN, infinite) and, given bounds, numbers outside
    physical sense, with the flag's name and the range."""
    if value is None:
        return None
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise DraftsmithError(f"{flag} must be a positive number of {unit}, got {value!r}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise DraftsmithError(
            f"{flag} {value:g} {unit} is outside physical sense: give {lo:g} to {hi:g} {unit}"
        )
    return float(value)


def gpu(name: str) -> Hardware:
    """The preset for a GPU (or Apple M-series) name; an ambiguous name names both cards, an unknown one
    lists every preset."""
    norm = _norm(name)
    for short, both in AMBIGUOUS.items():
        if norm == short:
            a, b = (GPUS[k] for k in both)
            raise DraftsmithError(
                f"{name!r} is ambiguous: {both[0]} ({a[0]}, {a[1]:g} GB/s) "
                f"or {both[1]} ({b[0]}, {b[1]:g} GB/s)"
            )
    table = {_norm(k): k for k in GPUS} | {_norm(k): v for k, v in GPU_ALIASES.items()}
    apple = {_norm(k): k for k in APPLE} | {_norm("apple" + k): k for k in APPLE}
    if norm in apple:
        display, bw, memory = APPLE[apple[norm]]
        return Hardware(
            f"{display} {memory:g} GB", "apple", bw, None, round(APPLE_GPU_SHARE * memory, 1), _APPLE_SOURCE
        )
    key = table.get(norm)
    if key is None:
        raise DraftsmithError(
            f"unknown GPU {name!r}; known presets: {', '.join([*GPUS, *APPLE])} "
            "(or give --bandwidth GB/s --tflops TFLOPS --vram GiB)"
        )
    display, bw, tf, vram, source = GPUS[key]
    return Hardware(display, "gpu", bw, tf, vram, source)


@dataclass(frozen=True)
class CpuMemory:
    """A CPU's memory system: DDR generation and channel count set the bandwidth experts stream at."""

    name: str
    ddr: str
    channels: int
    per_channel_gbs: float
    tflops: float | None
    source: str

    @property
    def peak_gbs(self) -> float:
        return self.channels * self.per_channel_gbs

    def as_hardware(self) -> Hardware:
        """For a CPU-only plan: the DDR peak (the backend applies the share real systems reach)."""
        return Hardware(self.name, "cpu", self.peak_gbs, self.tflops, None, self.source)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "ddr": self.ddr,
            "channels": self.channels,
            "per_channel_gbs": self.per_channel_gbs,
            "peak_gbs": self.peak_gbs,
        }


def cpu_memory(preset: str) -> CpuMemory:
    """A named system ('w3-3345') or DDR generation x channels ('ddr4-3200x8', 'DDR5-4800 x 2')."""
    key = re.sub(r"\s+", "", preset.lower())
    if key in ("dev", "dev-vm", "this"):
        d = DEV_MACHINE
        return CpuMemory(d.name, "measured copy", 1, d.bandwidth_gbs, d.tflops, d.source)
    if key in CPU_SYSTEMS:
        ddr, channels, tf, source = CPU_SYSTEMS[key]
        return CpuMemory(key, ddr, channels, DDR_PER_CHANNEL_GBS[ddr], tf, source)
    m = re.fullmatch(r"(ddr[45])-?(\d{4})(?:x(\d+))?", key)
    ddr = f"{m.group(1)}-{m.group(2)}" if m else None
    if ddr not in DDR_PER_CHANNEL_GBS:
        raise DraftsmithError(
            f"unknown CPU memory preset {preset!r}; give a system ({', '.join(CPU_SYSTEMS)}, dev) or DDR "
            f"generation x channels, e.g. ddr4-3200x8 (known generations: {', '.join(DDR_PER_CHANNEL_GBS)})"
        )
    channels = int(m.group(3) or 2)
    if not 1 <= channels <= 24:
        raise DraftsmithError(f"{preset!r}: memory channels must be 1..24, got {channels}")
    return CpuMemory(f"{ddr} x{channels}", ddr, channels, DDR_PER_CHANNEL_GBS[ddr], None, "DDR spec")


@dataclass(frozen=True)
class Pcie:
    """A PCIe link: generation and lanes give GB/s per direction."""

    gen: int
    lanes: int

    @property
    def gbs(self) -> float:
        return PCIE_X16_GBS[self.gen] * self.lanes / 16

    @property
    def name(self) -> str:
        return f"PCIe {self.gen}.0 x{self.lanes}"


def pcie(spec: str) -> Pcie:
    """'gen3x16', 'pcie4 x8', '3.0x16', '5' (x16 implied)."""
    key = re.sub(r"\s+", "", spec.lower())
    m = re.fullmatch(r"(?:pcie)?(?:gen)?([345])(?:\.0)?(?:x(1|2|4|8|16))?", key)
    if not m:
        raise DraftsmithError(
            f"unknown PCIe link {spec!r}; give gen3x16, gen4x16, gen5x8, ... "
            f"(generations {', '.join(map(str, PCIE_X16_GBS))}; lanes 1, 2, 4, 8, 16)"
        )
    return Pcie(int(m.group(1)), int(m.group(2) or 16))


def resolve(
    gpu_name: str | None = None,
    cpu: str | None = None,
    bandwidth: float | None = None,
    tflops: float | None = None,
    vram: float | None = None,
) -> Hardware:
    """The decode device: a GPU preset, else a CPU-only system, else explicit numbers; explicit
    numbers override single fields of a preset (a 48 GB modded 4090: --gpu 4090 --vram 48)."""
    bandwidth = _positive(bandwidth, "--bandwidth", "GB/s", MIN_BANDWIDTH_GBS, MAX_BANDWIDTH_GBS)
    tflops = _positive(tflops, "--tflops", "TFLOPS", MIN_TFLOPS, MAX_TFLOPS)
    vram = _positive(vram, "--vram", "GiB", MIN_VRAM_GIB, MAX_VRAM_GIB)
    if gpu_name:
        hw = gpu(gpu_name)
    elif cpu:
        hw = cpu_memory(cpu).as_hardware()
    elif bandwidth is None:
        raise DraftsmithError(
            "no hardware given: pass --gpu NAME (known: "
            f"{', '.join(GPUS)}), --cpu PRESET (e.g. ddr5-4800x8), --bandwidth GB/s [--tflops --vram], "
            "or --measure (this machine)"
        )
    else:
        return Hardware("custom", "custom", bandwidth, tflops, vram, "--bandwidth/--tflops/--vram")
    overrides = {
        k: v
        for k, v in (("bandwidth_gbs", bandwidth), ("tflops", tflops), ("vram_gb", vram))
        if v is not None
    }
    if overrides:
        hw = replace(hw, name=hw.name + " (overridden: " + ", ".join(overrides) + ")", **overrides)
    return hw
