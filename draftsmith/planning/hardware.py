"""Hardware the planner knows: GPU presets, CPU memory systems, PCIe links, and explicit overrides.

Numbers are the vendors' peak figures gathered in REFERENCE.md section 6 (dense BF16 with FP16
accumulate; "~" values there are estimates). A plan built on them is a ceiling: real kernels reach
a fraction of peak bandwidth, which is why every speed the planner prints is labelled a bound.
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
    kind: str  # "gpu", "cpu" or "custom"
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


_GPU_SOURCE = "REFERENCE.md section 6 (vendor peak; ~ marks an estimate)"

# name -> (display name, bandwidth GB/s, dense BF16 TFLOPS, VRAM GiB)
GPUS: dict[str, tuple[str, float, float, float]] = {
    "3080": ("RTX 3080 10 GB", 760, 59, 10),
    "3090": ("RTX 3090 24 GB", 936, 71, 24),
    "4060ti-16g": ("RTX 4060 Ti 16 GB", 288, 44, 16),
    "4090": ("RTX 4090 24 GB", 1008, 165, 24),
    "5060ti-16g": ("RTX 5060 Ti 16 GB", 448, 47, 16),
    "5080": ("RTX 5080 16 GB", 960, 113, 16),
    "5090": ("RTX 5090 32 GB", 1792, 210, 32),
    "rtx-pro-6000": ("RTX PRO 6000 96 GB", 1792, 250, 96),
    "a100-80g": ("A100 80 GB", 2039, 312, 80),
    "h100-sxm": ("H100 SXM 80 GB", 3350, 989, 80),
    "h200": ("H200 141 GB", 4800, 989, 141),
    "b200": ("B200 ~180 GB", 8000, 2250, 180),
}

# extra spellings (after normalisation) for the presets above
GPU_ALIASES = {
    "5060ti16gb": "5060ti-16g",
    "4060ti16gb": "4060ti-16g",
    "pro6000": "rtx-pro-6000",
    "rtxpro6000blackwell": "rtx-pro-6000",
    "a100": "a100-80g",
    "a10080gb": "a100-80g",
    "a100sxm": "a100-80g",
    "h100": "h100-sxm",
    "h100sxm5": "h100-sxm",
    "h200sxm": "h200",
    "3080-10g": "3080",
}

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
}

# this development machine, measured (REFERENCE.md section 6): a copy bandwidth, not a DDR spec
DEV_MACHINE = Hardware("dev VM, 2 cores", "cpu", 25.0, 0.09, None, "REFERENCE.md section 6 (measured)")

# share of the DDR spec real systems reach (REFERENCE.md: 60-85%)
CPU_EFFICIENCY = (0.60, 0.85)

# PCIe generation -> GB/s per direction for x16
PCIE_X16_GBS = {3: 15.75, 4: 31.5, 5: 63.0}
PCIE_PLANNING_FACTOR = 0.85  # plan with 85% of the link's rate (REFERENCE.md section 6)


def _norm(name: str) -> str:
    """Case, space, dash and vendor-prefix tolerant key: 'NVIDIA RTX 5060 Ti 16G' -> '5060ti16g'."""
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    for prefix in ("nvidia", "geforce", "rtx"):
        if key.startswith(prefix) and key != prefix:
            key = key[len(prefix) :]
    return key


def _positive(value: float | None, flag: str, unit: str) -> float | None:
    """Reject impossible numbers (zero, negative, NaN, infinite) with the flag's name."""
    if value is None:
        return None
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise DraftsmithError(f"{flag} must be a positive number of {unit}, got {value!r}")
    return float(value)


def gpu(name: str) -> Hardware:
    """The preset for a GPU name; unknown names list every known preset."""
    table = {_norm(k): k for k in GPUS} | {_norm(k): v for k, v in GPU_ALIASES.items()}
    key = table.get(_norm(name))
    if key is None:
        raise DraftsmithError(
            f"unknown GPU {name!r}; known presets: {', '.join(GPUS)} "
            "(or give --bandwidth GB/s --tflops TFLOPS --vram GiB)"
        )
    display, bw, tf, vram = GPUS[key]
    return Hardware(display, "gpu", bw, tf, vram, _GPU_SOURCE)


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
        """For a CPU-only plan: decode reads weights at the DDR peak (a ceiling; real: 60-85%)."""
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
    bandwidth = _positive(bandwidth, "--bandwidth", "GB/s")
    tflops = _positive(tflops, "--tflops", "TFLOPS")
    vram = _positive(vram, "--vram", "GiB")
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
