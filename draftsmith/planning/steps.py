"""Step-time models the planner can run on: a hardware preset seen through an engine's achievable
bandwidth and verify-cost curve, this machine's calibrated step-cost table (`plan --measure`), or
llama.cpp's verify curve measured here (`plan --measure --engine llamacpp`). All answer the same
questions: how long a target step of n tokens per sequence takes, and how long a drafter takes to
propose k tokens."""

from __future__ import annotations

from dataclasses import dataclass, field

from draftsmith.planning.backends import Backend, CostCurve
from draftsmith.planning.hardware import Hardware
from draftsmith.planning.methods import DrafterCost
from draftsmith.planning.model_spec import ModelSpec
from draftsmith.planning.predict import step_seconds


@dataclass(frozen=True)
class RooflineSteps:
    """Steps on a hardware preset at a context length and concurrency, as an engine runs them.

    With a backend that has a measured verify-cost curve r (llama.cpp):
        T(B, n) = W(B n) / (eff x BW) x r(B n) + B x KV / (eff x BW)
    and without one (vLLM, SGLang on GPUs: no per-row curve published), load and compute add up:
        T(B, n) = (W(B n) + B x KV) / (eff x BW) + 2 x active params x B x n / (ceff x FLOP/s)
    W(m) is the weight bytes m token rows read (a MoE step reads the experts its rows route to, at the
    backend's expert efficiency: `weight_time`), eff and ceff the backend's achievable shares of
    bandwidth and FLOP/s.
    The sum, not the max of the two, is what reproduces the published EAGLE-3 throughput-against-batch
    curves (planning.published). Without a backend: the bare roofline at the spec sheet (the max)."""

    hw: Hardware
    spec: ModelSpec
    context: float  # mean tokens in the KV cache while the answer is written
    batch: int
    kv_bits: float = 16
    backend: Backend | None = None

    @property
    def how(self) -> str:
        if self.backend is None:
            return "roofline: max((weights + B x KV) / bandwidth, 2 x active params x B x n / FLOP/s)"
        b = self.backend
        eff = f"{b.efficiency:.0%} of bandwidth"
        if b.curve:
            return (
                f"{b.key}: weights / ({eff}) x its verify-cost curve r(B x n) + B x KV / ({eff}) "
                f"[{b.curve.source}]"
            )
        return (
            f"{b.key}: (weights + B x KV) / ({eff}) + 2 x active params x B x n / "
            f"({b.compute_efficiency:.0%} of FLOP/s)"
        )

    @property
    def efficiency(self) -> float:
        return self.backend.efficiency if self.backend else 1.0

    @property
    def bandwidth(self) -> float:
        """Achievable bytes per second."""
        return self.hw.bandwidth * self.efficiency

    @property
    def flops(self) -> float | None:
        if self.hw.flops is None:
            return None
        return self.hw.flops * (self.backend.compute_efficiency if self.backend else 1.0)

    @property
    def kv_per_seq(self) -> float:
        return self.spec.kv_bytes_per_token(self.kv_bits) * self.context

    def weight_time(self, rows: float) -> float:
        """Seconds reading the weights a step over `rows` token rows needs, per-row cost included.

        Dense weights: their bytes at the achievable bandwidth, times the verify-cost curve r(rows).
        A MoE's routed experts: the distinct experts the rows route to (E x (1 - (1 - top-k/E)^rows) of
        them), each read at the backend's expert efficiency (small matrices read slower), times r at the
        rows each touched expert serves (about one while experts outnumber rows)."""
        s = self.spec
        r = self.backend.curve.at if self.backend and self.backend.curve else (lambda m: 1.0)
        if not s.is_moe:
            return s.read_bytes / self.bandwidth * r(rows)
        share = s.experts_per_token / s.experts
        routed = s.expert_params * share * s.bits / 8
        covered = 1 - (1 - share) ** max(rows, 1)
        touched = s.expert_params * covered * s.bits / 8
        slow = self.backend.expert_efficiency if self.backend else 1.0
        per_expert = max(rows, 1) * share / covered
        return (s.read_bytes - routed) / self.bandwidth * r(rows) + touched / (self.bandwidth * slow) * r(
            per_expert
        )

    def target(self, n: int, batch: int | None = None) -> float:
        b = self.batch if batch is None else batch
        rows = b * n
        weights = self.weight_time(rows)
        kv = b * self.kv_per_seq / self.bandwidth
        if self.backend is None:
            if self.flops is None:
                return weights + kv
            return max(weights + kv, 2 * self.spec.active_params * rows / self.flops)
        if self.backend.curve is not None:
            return weights + kv
        compute = 2 * self.spec.active_params * rows / self.flops if self.flops else 0.0
        return weights + kv + compute

    def _pass(self, d: DrafterCost, rows_per_seq: int, b: int) -> float:
        """One drafter forward pass over rows_per_seq rows for each of b sequences."""
        memory = (d.read_bytes + b * d.kv_per_token * self.context) / self.bandwidth
        if self.flops is None:
            return memory
        compute = 2 * d.read_params * b * rows_per_seq / self.flops
        return max(memory, compute) if self.backend is None else memory + compute

    def draft(self, d: DrafterCost, k: int, batch: int | None = None) -> float:
        """Drafting time per round: parallel drafters one pass over k+1 rows (+ k serial Markov steps),
        serial drafters k passes of one row."""
        b = self.batch if batch is None else batch
        if k <= 0 or d.read_bytes == 0:
            return 0.0
        floor = self.backend.pass_floor_s if self.backend else 0.0
        extra = self.backend.round_s if self.backend else 0.0  # the engine's own work a round
        if d.parallel:
            return max(self._pass(d, k + 1, b), floor) + k * d.serial_bytes_per_token / self.bandwidth + extra
        return k * max(self._pass(d, 1, b), floor) + extra

    def at_batch(self, batch: int) -> RooflineSteps:
        """The same machine and model at another concurrency."""
        from dataclasses import replace

        return replace(self, batch=batch)


@dataclass(frozen=True)
class CurveSteps:
    """llama.cpp measured on this machine: its 1-token step and verify curve (`llama-bench -p 1,2,...`);
    a drafter's pass costs the 1-token step scaled by its bytes over the target's."""

    spec: ModelSpec
    curve: CostCurve
    one_s: float  # seconds of a 1-token step
    how: str = "measured: llama.cpp's verify curve on this machine (llama-bench -p 1,2,...)"

    def target(self, n: int, batch: int | None = None) -> float:
        return self.one_s * self.curve.at(n)

    def draft(self, d: DrafterCost, k: int, batch: int | None = None) -> float:
        if k <= 0 or d.read_bytes == 0:
            return 0.0
        one = self.one_s * d.read_bytes / self.spec.read_bytes
        return one if d.parallel else k * one


@dataclass(frozen=True)
class MeasuredSteps:
    """This machine's calibrated step costs (seconds per n-token step), the fixed step shape the
    engine runs, and its per-round work beyond the forward pass (timed on a short plain decode).
    Drafting time: measured per round when a bench gives it, else the 1-token step scaled by the
    bytes the drafter reads over the bytes the target reads."""

    spec: ModelSpec
    table: dict[int, float]
    fixed_rows: int = 0
    overhead_s: float = 0.0
    draft_s: dict[str, float] = field(default_factory=dict)  # method -> seconds per round (bench)
    draft_tokens: dict[str, float] = field(default_factory=dict)  # method -> drafts per round (bench)
    how: str = "measured: calibrated step table of this machine + engine overhead per round"

    def target(self, n: int, batch: int | None = None) -> float:
        return step_seconds(self.table, n, self.fixed_rows) + self.overhead_s

    def draft(self, d: DrafterCost, k: int, batch: int | None = None) -> float:
        if k <= 0:
            return 0.0
        if d.method in self.draft_s:
            measured = self.draft_s[d.method]
            per_token = measured / max(self.draft_tokens.get(d.method, 1.0), 1e-9)
            return measured if d.parallel or d.read_bytes == 0 else per_token * k
        one = step_seconds(self.table, 1, self.fixed_rows) * d.read_bytes / self.spec.read_bytes
        return one if d.parallel else k * one
